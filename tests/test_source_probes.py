"""End to end: source-level definitions through the CLI, against `perf probe -D` on the same binaries.

`probectl add -D` and `perf probe -D` read the DWARF fixtures (built at -O0 and -O2) and the system
libc (with libc6-dbg); every definition line must agree in kind, group, event, place and each fetch
argument (name, fetch text, type). Three deliberate differences are normalized before comparing:

* a bare ``$retval``: perf leaves it untyped, probectl types it from the function's DWARF return
  type (the values are checked live in tests/live/test_live_source.py);
* globals: perf writes ``@sym+0``, which uprobes refuse ("symbol-based uprobe fetch is not
  supported"); probectl writes ``@+0xOFFSET`` relative to the probed file, computed here from the
  ELF symbol table;
* aliases: ``malloc bytes`` fails in perf; probectl gives perf's definition of ``__libc_malloc
  bytes``, with the event named after what the user typed (as perf names ``malloc`` by symbol).

Where perf fails or is wrong (bitfields, structs in registers, multi-operation locations, its
lazy-pattern cache across files, its symbol lookup in -O2 dwarf_inline), the test says why and
checks probectl's own answer; tests/live/test_live_source.py records those values from the running program.

The ~150 definitions run through the CLI's entry point (``probectl.cli.main``, what
``python -m probectl`` runs) in this process, so interpreter start-up is paid once; the error
contract (exit status, stderr, no traceback, nothing added) is checked with real subprocesses.
"""
from __future__ import annotations

import functools
import contextlib
import io
import os
import re
import shutil
import subprocess
import time
from dataclasses import replace
from functools import lru_cache

from typing import Callable

import pytest

from probectl.cli import main as cli_main
from probectl.debuginfo.elf import ElfFile
from probectl.events import EventDefinition

from tests.helpers import (FIXTURES, build_alias_library, build_alias_pair, build_fixture, build_program,
                           build_static_pair, probectl)

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
GLOBAL_REF = re.compile(r"@([A-Za-z_][\w.]*)([+-]\d+)")


# --- running both tools ---------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """probectl's on-disk DWARF index cache goes to a private directory for these tests."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if old is None:
        del os.environ["XDG_CACHE_HOME"]
    else:
        os.environ["XDG_CACHE_HOME"] = old


def binary(name: str, opt: str) -> str:
    if name == "libc":
        if not os.path.exists(LIBC):
            pytest.skip(f"no libc at {LIBC}")
        return LIBC
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fixtures")
    if name == "dwarf_namespaces":
        return str(build_program(name, [FIXTURES / "dwarf_namespaces.cc"], opt))
    return str(build_static_pair(opt) if name == "dwarf_static" else build_fixture(name, opt))


def run_cli(*argv: str) -> tuple[int, str, str]:
    """Run the probectl CLI in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli_main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def ours(path: str, definition: str) -> tuple[list[EventDefinition], str]:
    # As root, `add -D` avoids the names of existing events (perf -D does not), and other test
    # sessions on this machine briefly own events in the default groups: wait for them.
    for _ in range(50):
        code, out, err = run_cli("add", "-x", path, "-D", definition)
        if not (code == 1 and "already exists" in err):
            break
        time.sleep(0.2)
    assert code == 0, f"probectl failed on {definition!r}:\n{err}"
    assert "Traceback" not in err
    return [EventDefinition.parse(line) for line in out.splitlines() if line.strip()], err


@lru_cache(maxsize=None)
def _perf_run(perf: str, path: str, definition: str) -> tuple[int, str, str]:
    out = subprocess.run([perf, "probe", "-x", path, "-D", definition], capture_output=True, text=True)
    return out.returncode, out.stdout, out.stderr


def perfs(perf: str, path: str, definition: str, ok: bool = True) -> tuple[list[EventDefinition], str]:
    code, out, err = _perf_run(perf, path, definition)
    if ok:
        assert code == 0, f"perf failed on {definition!r}:\n{err}"
    return [EventDefinition.parse(line) for line in out.splitlines() if line.startswith(("p:", "r:"))], err


def perf_fails(perf: str, path: str, definition: str) -> str:
    code, out, err = _perf_run(perf, path, definition)
    assert code != 0 and not out.strip(), f"perf now succeeds on {definition!r}: {out}"
    return err


# --- normalizing perf's deliberate differences ----------------------------------------------------


@lru_cache(maxsize=None)
def _elf(path: str) -> ElfFile:
    return ElfFile(path)


def globals_as_offsets(defn: EventDefinition) -> EventDefinition:
    """perf's ``@sym+N`` → ``@+0xOFFSET``: the kernel adds OFFSET to the probed file's load base
    (probe address - probe file offset), so OFFSET = symbol value + N - (vaddr - offset)."""
    elf = _elf(defn.uprobe_path)
    offset = defn.uprobe_offset
    delta = elf.offset_to_vaddr(offset) - offset

    def fix(m: re.Match) -> str:
        matches = [s for s in elf.symbols() if s.name == m.group(1) and s.shndx != 0]
        assert matches, f"perf names symbol {m.group(1)!r}, which {defn.uprobe_path} lacks"
        return f"@+0x{matches[0].value + int(m.group(2)) - delta:x}"

    args = tuple(replace(a, fetch=GLOBAL_REF.sub(fix, a.fetch)) for a in defn.args)
    return replace(defn, args=args)


def with_typed_retval(theirs: EventDefinition, mine: EventDefinition) -> EventDefinition:
    """perf's untyped ``$retval`` gets the type probectl chose (when probectl chose one)."""
    args = []
    for i, pa in enumerate(theirs.args):
        oa = mine.args[i] if i < len(mine.args) else None
        if pa.fetch == "$retval" and not pa.type and oa is not None and oa.fetch == "$retval" and oa.type:
            pa = replace(pa, type=oa.type)
        args.append(pa)
    return replace(theirs, args=tuple(args))


def with_unique_names(p: EventDefinition) -> EventDefinition:
    """perf writes a name made from two expressions twice (``x=+32(...) x=+64(...)``), which the kernel
    refuses ("This argument name is already used"); probectl makes them unique: ``x``, ``x_1``."""
    seen: set[str] = set()
    args = []
    for a in p.args:
        name, i = a.name, 0
        while name and name in seen:
            i += 1
            name = f"{a.name}_{i}"
        seen.add(name)
        args.append(replace(a, name=name))
    return replace(p, args=tuple(args))


def with_events_apart(defs: list[EventDefinition]) -> list[EventDefinition]:
    """perf writes the places of one definition as one event even when their arguments differ in name
    or type (``helper $vars`` of two static helpers: local_a, then local_b), which the kernel refuses
    for the second place ("Argument type or name is different from existing probe", EEXIST); probectl
    gives such a place an event of its own: ``helper_1``."""
    signatures: dict[tuple[str, str], list[tuple[tuple, str]]] = {}
    taken = {(d.group, d.event) for d in defs}
    out = []
    for d in defs:
        signature = tuple((a.name, a.type) for a in d.args)
        known = signatures.setdefault((d.group, d.event), [])
        event = next((e for s, e in known if s == signature), None)
        if event is None:
            event = d.event
            if known:
                i = 1
                while (d.group, f"{d.event}_{i}") in taken:
                    i += 1
                event = f"{d.event}_{i}"
                taken.add((d.group, event))
            known.append((signature, event))
        out.append(replace(d, event=event))
    return out


def normalized(theirs: list[EventDefinition], mine: list[EventDefinition]) -> list[str]:
    out = []
    for i, p in enumerate(with_events_apart([with_unique_names(globals_as_offsets(p)) for p in theirs])):
        if i < len(mine):
            p = with_typed_retval(p, mine[i])
        out.append(p.render())
    return out


def assert_same(perf_bin: str, path: str, definition: str) -> list[EventDefinition]:
    mine, my_err = ours(path, definition)
    theirs, their_err = perfs(perf_bin, path, definition)
    assert [d.render() for d in mine] == normalized(theirs, mine)
    # The prologue notice is perf's too (probectl prefixes it with "Warning: ").
    assert ("Skipping prologue" in my_err) == ("Skipping prologue" in their_err)
    return mine


# --- fixtures: the same as perf -------------------------------------------------------------------

STRUCTS = [
    # member chains: ->, ., [N], strings, nested pointers, unions, anonymous members, enums
    "paint w->id w->depth w->name w->label:string w->origin.x w->corner->y w->pts[2].x w->values[3]",
    "paint w->u.ival w->tag w->hi w->mode w->level w->size w->next->id w->serial w->sc w->uc w->ok",
    "paint scale w->name:string w->next->name w->next->label w->u.bytes[1] w->raw w->fl.tail",
    "paint w->cv w->ratio w->corner w->pts w->label w->name[2] w->next->next",
    "check_bits pb->head pb fl",
    "vla_sum n",
    # globals (external, static, char pointer as string, char array, struct member)
    "use_globals counter big_counter hidden greeting:string gbuf global_widget.id global_widget.name",
    "use_globals add counter:s64 gbuf:string greeting gptr",
    # lines, lazy patterns, SRC:ALN
    "paint:3 w->id",
    "paint;printf*area* area",
    "dwarf_structs.c:166 n",
    "vla_sum:9 n",
    # $params, $vars, %return $retval
    "paint $params",
    "paint $vars",
    "use_globals $vars",
    "vla_sum $params",
    "paint%return $retval",
    "check_bits%return $retval",
    "by_value%return $retval",
    "use_globals%return r=$retval",
    # names and casts
    "w=paint w",
    "grp:ev=paint w->id",
    "paint id=w->id:x32 n=w->name:string s=scale:u16",
    # globs
    "use_glo* add",
    "check_* pb",
    "*_sum n",
]
STRUCTS_O0 = [
    "by_value p.x p.y wv.id wv.origin.y m",  # at -O2 perf: "Structure on a register is not supported yet"
    "paint:25 area title",  # at -O2 both are optimized out there (error test below)
    "paint:31 doubled area",
    "paint;printf*doubled* doubled",
    "dwarf_structs.c:166 n total",
    "vla_sum:8 total n",
]
INLINE = [
    "process data n",
    "process $params",
    "process:4 item total",
    "process:4 total",
]
INLINE_O0 = [
    # At -O2 perf 6.1 cannot look up any symbol at or after rare_path in this program ("Failed to
    # find symbol at 0x...") and fails: those are checked live.
    "clamp v lo hi",
    "square v",  # always_inline: two inline instances even at -O0
    "square:2 sq",
    "square $params",
    "process:4 item i total",
    "process;sink* total i",
    "process;*square* c",
    "dwarf_inline.c:41 total i item",
    "rare_path code why:string",
    "rare_path:3 code",
    "rare_path%return $retval",
    "clamp%return $retval",
    "process $vars",
    "square",
    "clamp",
    "rare_path:5",
]
STATIC = [
    "helper x",  # static functions in two CUs: both
    "helper@dwarf_static_b.c x",
    "helper@dwarf_static_a.c x",
    "helper $params",
    "helper%return $retval",
    "helper@dwarf_static_a.c;printf* x",
    "helper@dwarf_static_b.c;printf* x",
]
STATIC_O0 = [
    "helper:2 x",
    "helper@dwarf_static_b.c:2 x counter_b",
    "dwarf_static_b.c:15 x",
    "helper $vars",
]

FIXTURE_CASES = (
    [("dwarf_structs", opt, d) for opt in ("-O0", "-O2") for d in STRUCTS]
    + [("dwarf_structs", "-O0", d) for d in STRUCTS_O0]
    + [("dwarf_inline", opt, d) for opt in ("-O0", "-O2") for d in INLINE]
    + [("dwarf_inline", "-O0", d) for d in INLINE_O0]
    + [("dwarf_static", opt, d) for opt in ("-O0", "-O2") for d in STATIC]
    + [("dwarf_static", "-O0", d) for d in STATIC_O0]
    # a glob means the functions DWARF defines (statics and inlined copies too), not the start files'
    # symbols (_init, _start, frame_dummy...)
    + [("uprobe_target", "-O0", "*"), ("dwarf_static", "-O2", "*"), ("dwarf_static", "-O0", "*")]
)


@pytest.mark.perf
@pytest.mark.parametrize("name,opt,definition", FIXTURE_CASES,
                         ids=[f"{n}{o}:{d}" for n, o, d in FIXTURE_CASES])
def test_fixture_definitions_match_perf(perf_bin, name, opt, definition):
    assert_same(perf_bin, binary(name, opt), definition)


# --- libc with libc6-dbg --------------------------------------------------------------------------

LIBC_CASES = [
    "mallo*",  # a glob: the static functions and inlined copies DWARF has, as perf finds them
    "*alloc",
    "__libc_malloc bytes",
    "__libc_malloc bytes:x64 b=bytes:u64",
    "__libc_free mem",
    "__libc_calloc $params",
    "__libc_calloc n elem_size",
    "__libc_realloc oldmem bytes",
    "__libc_free $vars",
    "__libc_malloc:12 bytes",  # a line the compiler split in two places
    "__libc_malloc%return $retval",
    "__wmemcpy s1 s2 n",  # a memcpy-family C function by its real name
    "__memcpy_avx_unaligned_erms",  # the assembly memcpy by its real name (no DWARF function)
    "__memmove_avx_unaligned_erms",
    "__malloc",  # a static alias only the debug file's .symtab names (libc.so.6 has no .symtab)
]
# perf fails on aliases ("Failed to add events": it resolves the symbol, then finds no DWARF
# function of that name); probectl gives perf's definition for the real function's name.
LIBC_ALIASES = [
    ("malloc bytes", "__libc_malloc bytes", "malloc"),
    ("free mem", "__libc_free mem", "free"),
    ("wmemcpy s1 n", "__wmemcpy s1 n", "wmemcpy"),
    ("malloc%return $retval", "__libc_malloc%return $retval", "malloc__return"),
    ("malloc:12 bytes", "__libc_malloc:12 bytes", "malloc_L12"),  # the scope: __libc_malloc's, not the innermost
    ("__malloc bytes", "__libc_malloc bytes", "__malloc"),  # the static alias, found in the debug file's .symtab
]


@pytest.fixture(scope="module")
def libc_dbg():
    from probectl.debuginfo.dwarf import DebugInfo
    from probectl.errors import DebugInfoError

    path = binary("libc", "")
    try:
        DebugInfo.open(path).close()
    except DebugInfoError as exc:
        if os.environ.get("PROBECTL_REQUIRE_ALL") == "1":
            raise
        pytest.skip(f"libc6-dbg is not installed: {exc}")
    return path


@pytest.mark.perf
@pytest.mark.libcdbg
@pytest.mark.parametrize("definition", LIBC_CASES)
def test_libc_definitions_match_perf(perf_bin, libc_dbg, definition):
    assert_same(perf_bin, libc_dbg, definition)


@pytest.mark.perf
@pytest.mark.libcdbg
@pytest.mark.parametrize("alias,real,event", LIBC_ALIASES, ids=[a for a, _, _ in LIBC_ALIASES])
def test_libc_alias_gets_the_real_functions_definition(perf_bin, libc_dbg, alias, real, event):
    if "%return" not in alias:
        assert "Failed to add events" in perf_fails(perf_bin, libc_dbg, alias)
    mine, _ = ours(libc_dbg, alias)
    theirs, _ = perfs(perf_bin, libc_dbg, real)
    assert [d.event for d in mine] == [event] * len(theirs)
    assert [replace(d, event=event).render() for d in mine] == normalized(
        [replace(p, event=event) for p in theirs], mine)


# A function of a global symbol is found at the symbol's address (one unit read), not by searching
# every unit for its name, unless another definition may have the name: these cases have one.
ALIAS_BINARIES = {
    "program -O0": lambda: (build_alias_pair("-O0"),) * 2,
    "program -O2": lambda: (build_alias_pair("-O2"),) * 2,
    # stripped: the static public_helper is only in the debug file's .symtab, the aliases in
    # .dynsym (perf reads the library before stripping: it does not follow .gnu_debuglink here)
    "stripped library -O2": lambda: build_alias_library("-O2"),
}


def _alias_case(which: str) -> tuple[str, Callable]:
    """(the binary probectl reads, the definitions perf gives for a definition, with that path)."""
    mine, perfs_binary = map(str, ALIAS_BINARIES[which]())

    def theirs(perf_bin: str, definition: str) -> list[EventDefinition]:
        found, _ = perfs(perf_bin, perfs_binary, definition)
        return [replace(d, place=d.place.replace(perfs_binary, mine)) for d in found]

    return mine, theirs


@pytest.mark.perf
@pytest.mark.parametrize("which", list(ALIAS_BINARIES))
@pytest.mark.parametrize("definition", ["public_helper x", "real_helper x", "other_entry x", "real_helper%return $retval",
                                        "public_helper:4 x", "real_helper:3 x"])
def test_functions_of_global_symbols_match_perf(perf_bin, which, definition):
    """public_helper is a global alias of real_helper and a static function of the other unit:
    perf finds the static one by its DWARF name, and so must probectl."""
    path, theirs = _alias_case(which)
    mine, _ = ours(path, definition)
    assert [d.render() for d in mine] == normalized(theirs(perf_bin, definition), mine)


@pytest.mark.perf
@pytest.mark.parametrize("which", list(ALIAS_BINARIES))
@pytest.mark.parametrize("alias,real,event", [("lone_alias x", "real_helper x", "lone_alias"),
                                              ("lone_alias:3 x", "real_helper:3 x", "lone_alias_L3")])
def test_alias_without_a_dwarf_name_gets_the_real_functions_definition(perf_bin, which, alias, real, event):
    path, theirs = _alias_case(which)
    assert "Failed to add events" in perf_fails(perf_bin, str(ALIAS_BINARIES[which]()[1]), alias)
    mine, _ = ours(path, alias)
    assert [d.event for d in mine] == [event]
    assert [replace(d, event=event).render() for d in mine] == normalized(
        [replace(p, event=event) for p in theirs(perf_bin, real)], mine)


# --- where perf fails or is wrong -----------------------------------------------------------------


@pytest.mark.perf
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_bitfields_where_perf_fails(perf_bin, opt):
    """perf: "Failed to get the offset of ready"; probectl reads b<width>@<bit>/<container bits> at the
    member's byte offset (DWARF 5 DW_AT_data_bit_offset); the live test checks the values."""
    path = binary("dwarf_structs", opt)
    definition = "paint w->fl.ready w->fl.mode w->fl.delta w->fl.big w->fl.wide"
    assert "Failed to get the offset" in perf_fails(perf_bin, path, definition)
    (defn,) = ours(path, definition)[0]
    base = "-40(%bp)" if opt == "-O0" else "%di"
    assert [a.render() for a in defn.args] == [
        f"ready=+128({base}):b1@0/32", f"mode=+128({base}):b3@1/32", f"delta=+128({base}):b5@4/32",
        f"big=+128({base}):b20@9/32", f"wide=+134({base}):b12@0/16"]
    # the packed struct's 30-bit field straddles byte 1..4, the 40-bit one bytes 4..9
    definition = "check_bits pb->straddle pb->high fl->delta"
    assert "Failed to get the offset" in perf_fails(perf_bin, path, definition)
    (defn,) = ours(path, definition)[0]
    assert [a.name for a in defn.args] == ["straddle", "high", "delta"]
    assert [a.type for a in defn.args] == ["b30@0/32", "b40@6/64", "b5@4/32"]
    assert defn.args[0].fetch.startswith("+1(") and defn.args[1].fetch.startswith("+4(")


@pytest.mark.perf
def test_struct_in_registers_where_perf_fails(perf_bin):
    """At -O2 gcc passes `struct point p` in %rdi (x in bits 0-31, y in 32-63); perf: "Structure on a
    register is not supported yet". probectl reads the members as bitfields of the register."""
    path = binary("dwarf_structs", "-O2")
    definition = "by_value p.x p.y wv.id wv.origin.y m"
    assert "Structure on a register" in perf_fails(perf_bin, path, definition)
    (defn,) = ours(path, definition)[0]
    assert [a.render() for a in defn.args][:2] == ["x=%di:s32", "y=%di:b32@32/64"]
    assert defn.args[4].render() == "m=%si:x32"


@pytest.mark.perf
def test_multi_operation_location_perf_misreads(perf_bin):
    """At -O2 `i` in process() is computed from %rdi and its entry value (DW_OP_breg5 0;
    DW_OP_entry_value ...; DW_OP_minus ...). perf reads the first operation only and fetches
    +0(%di) (the array element, not the index); probectl refuses, saying where `i` is available."""
    path = binary("dwarf_inline", "-O2")
    theirs, _ = perfs(perf_bin, path, "process:4 i")
    assert [a.fetch for a in theirs[0].args] == ["+0(%di)"]
    code, _, err = run_cli("add", "-x", path, "-D", "process:4 i")
    assert code == 1 and err.startswith("Error: 'i' cannot be fetched at 0x")
    assert "DW_OP_entry_value" in err and "it can be fetched at 0x" in err


@pytest.mark.perf
def test_vla_through_its_frame_slot_where_perf_misreads(perf_bin):
    """`int arr[n]` at -O0 is DW_OP_fbreg -48; DW_OP_deref (the frame slot holds the array's
    address). perf stops after the first operation (the slot itself); probectl dereferences it."""
    path = binary("dwarf_structs", "-O0")
    theirs, _ = perfs(perf_bin, path, "vla_sum:10 arr")
    (mine,), _ = ours(path, "vla_sum:10 arr arr[1]")
    assert theirs[0].args[0].fetch == "-48(%bp)"
    assert [a.render() for a in mine.args] == ["arr=+0(-48(%bp))", "arr_1=+4(-48(%bp)):s32"]


@pytest.mark.perf
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_lazy_pattern_in_static_duplicates(perf_bin, opt):
    """perf caches the lines matching a lazy pattern from the first function's file and reuses
    them for the same-named function of the other CU (find_probe_point_lazy's lcache), so
    `helper;printf*` only finds the printf of dwarf_static_a.c. probectl matches each function's
    own file: it gives what perf gives for each FUNC@SRC."""
    path = binary("dwarf_static", opt)
    mine, _ = ours(path, "helper;printf* x")
    per_file = [d for src in ("dwarf_static_a.c", "dwarf_static_b.c")
                for d in perfs(perf_bin, path, f"helper@{src};printf* x")[0]]
    assert [d.render() for d in mine] == [d.render() for d in per_file]
    assert len(perfs(perf_bin, path, "helper;printf* x")[0]) == 1


@pytest.mark.perf
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_return_probe_honours_the_source_file(perf_bin, opt):
    """perf resolves `helper@dwarf_static_b.c%return $retval` by symbol and drops the @SRC, probing
    both helpers; probectl keeps the one defined in dwarf_static_b.c."""
    path = binary("dwarf_static", opt)
    theirs, _ = perfs(perf_bin, path, "helper@dwarf_static_b.c%return $retval")
    mine, _ = ours(path, "helper@dwarf_static_b.c%return $retval")
    b_entry, _ = perfs(perf_bin, path, "helper@dwarf_static_b.c")
    assert len(theirs) == 2 and len(mine) == 1
    assert mine[0].place == b_entry[0].place and mine[0].args[0].render() == "$retval:s32"


@pytest.mark.perf
def test_cold_part_where_perf_fails(perf_bin):
    """gcc splits rare_path into rare_path and rare_path.cold at -O2. perf fails on every address
    of it ("Failed to find symbol at 0x..."); probectl probes the entry, and a line of the cold
    part lands in rare_path.cold's code."""
    path = binary("dwarf_inline", "-O2")
    assert "Failed to find symbol" in perf_fails(perf_bin, path, "rare_path code why:string")
    (entry,), _ = ours(path, "rare_path code why:string")
    elf = _elf(path)
    (sym,) = elf.find_functions("rare_path")
    assert entry.uprobe_offset == elf.vaddr_to_offset(sym.value)
    assert [a.render() for a in entry.args] == ["code=%di:s32", "why_string=+0(%si):string"]
    (cold,) = [s for s in elf.functions() if s.name == "rare_path.cold"]
    (line5,), _ = ours(path, "rare_path:5")  # report(why) inside `if (code < 0)`
    assert cold.value <= elf.offset_to_vaddr(line5.uprobe_offset) < cold.value + cold.size


@pytest.mark.perf
def test_vars_include_values_perf_cannot_express(perf_bin):
    """At process+0 (-O2) `total` is DW_OP_lit0; DW_OP_stack_value (it is 0 there). perf's $vars
    leaves out what it cannot fetch; probectl fetches the constant as an immediate."""
    path = binary("dwarf_inline", "-O2")
    theirs, _ = perfs(perf_bin, path, "process $vars")
    (mine,), _ = ours(path, "process $vars")
    assert [a.render() for a in mine.args] == [a.render() for a in theirs[0].args] + ["total=\\0:s32"]


@pytest.mark.perf
@pytest.mark.parametrize("name,opt,definition,places", [
    ("dwarf_inline", "-O0", "dwarf_inline.c;sink* total code", 5),
    ("libc", "", "__libc_mallo* bytes", 2),  # __libc_mallopt has no `bytes`
])
def test_variable_missing_at_some_places_gets_perfs_filler(perf_bin, request, name, opt, definition, places):
    """perf fills an argument that one place of a multi-place event lacks (here `total` in
    rare_path, `code` in process) with the immediate 0xdeade12d, keeping the type found elsewhere.
    perf writes it `\\deade12d`, which the kernel refuses (an immediate must start with a digit,
    sign or `0x`); probectl writes `\\0xdeade12d`."""
    path = request.getfixturevalue("libc_dbg") if name == "libc" else binary(name, opt)
    mine, _ = ours(path, definition)
    theirs = [d.render().replace("\\deade12d", "\\0xdeade12d") for d in perfs(perf_bin, path, definition)[0]]
    assert len(theirs) == places and [d.render() for d in mine] == theirs


def test_inline_instance_with_entry_outside_its_ranges():
    """At -O2 the square() inlined in process() has DW_AT_entry_pc 0x1233 but ranges
    [0x1237, 0x123a): perf looks variables up from the instance DIE itself (probe_point_inline_cb),
    so `square $params` is `v` at both instances, never process()'s `n`."""
    path = binary("dwarf_inline", "-O2")
    mine, _ = ours(path, "square $params")
    assert len(mine) == 2
    assert all([a.name for a in d.args] == ["v"] for d in mine)


# --- the listing commands: `lines` is perf -L, `vars` is perf -V ---------------------------------

LISTINGS = [
    ("lines", "dwarf_structs", "-O0", ["paint"]),
    ("lines", "dwarf_structs", "-O2", ["paint:25-30"]),
    ("lines", "dwarf_structs", "-O2", ["dwarf_structs.c:157-170"]),
    ("lines", "dwarf_inline", "-O2", ["process"]),
    ("lines", "dwarf_static", "-O0", ["helper@dwarf_static_b.c"]),
    ("vars", "dwarf_structs", "-O2", ["paint"]),
    ("vars", "dwarf_structs", "-O2", ["paint:27"]),
    ("vars", "dwarf_structs", "-O0", ["use_globals", "--externs"]),
    ("vars", "dwarf_inline", "-O0", ["square"]),
    ("vars", "dwarf_static", "-O0", ["helper@dwarf_static_b.c"]),
]
# Listings probectl once got wrong (fixed): each names what was wrong.
LISTING_BUGS = [
    # perf names a place after the DWARF function containing it (convert_to_trace_point): probes/show.py
    # names it after the preferred ELF alias (`@<malloc+0>`)
    ("vars", "libc", "", ["__libc_malloc"], "show._symbol_offset uses ELF aliases"),
    ("vars", "libc", "", ["malloc"], "show._symbol_offset uses ELF aliases"),
    # perf writes a SRC:LINE point as `@dwarf_inline.c:41` in the header
    ("vars", "dwarf_inline", "-O0", ["dwarf_inline.c:41"], "cli/probes.py: vars header without '@'"),
]


def _listing(perf_bin: str, command: str, path: str, args: list[str]) -> tuple[str, str]:
    flag = "-L" if command == "lines" else "-V"
    theirs = subprocess.run([perf_bin, "probe", "-x", path, flag, *args], capture_output=True, text=True)
    assert theirs.returncode == 0, theirs.stderr
    code, mine, err = run_cli(command, "-x", path, *args)
    assert code == 0, err
    return mine, theirs.stdout


@pytest.mark.perf
@pytest.mark.parametrize("command,name,opt,args", LISTINGS, ids=[f"{c}-{n}{o}:{' '.join(a)}" for c, n, o, a in LISTINGS])
def test_listings_match_perf(perf_bin, command, name, opt, args):
    mine, theirs = _listing(perf_bin, command, binary(name, opt), args)
    assert mine == theirs


@pytest.mark.perf
@pytest.mark.parametrize("command,name,opt,args,bug", LISTING_BUGS,
                         ids=[f"{c}-{n}{o}:{' '.join(a)}" for c, n, o, a, _ in LISTING_BUGS])
def test_listings_once_wrong(perf_bin, request, command, name, opt, args, bug):
    path = request.getfixturevalue("libc_dbg") if name == "libc" else binary(name, opt)
    mine, theirs = _listing(perf_bin, command, path, args)
    assert mine == theirs, bug


# --- errors: one clear message, exit 1, nothing added ---------------------------------------------


probectl_process = functools.partial(probectl, check=False)


@pytest.fixture(scope="module")
def stripped_copy(tmp_path_factory) -> str:
    """dwarf_structs -O0 without any debug information (and no debug file anywhere)."""
    path = tmp_path_factory.mktemp("stripped") / "dwarf_structs_stripped"
    shutil.copy(binary("dwarf_structs", "-O0"), path)
    subprocess.run(["strip", "--strip-debug", str(path)], check=True)
    return str(path)


ERROR_CASES = [
    # (fixture, opt, definition, what stderr must say)
    ("dwarf_structs", "-O0", "nosuchfunc x", ["Probe point 'nosuchfunc' not found."]),
    ("dwarf_structs", "-O0", "pain w", ["Probe point 'pain' not found.", "did you mean paint"]),
    ("dwarf_structs", "-O0", "paint nosuch", ["no variable 'nosuch' in paint", "probectl vars -x ", " paint\n"]),
    ("dwarf_structs", "-O2", "paint w->nmae", ["'w' (struct widget) has no member 'nmae'",
                                                "did you mean 'name'?"]),
    ("dwarf_structs", "-O0", "paint w->corner->z", ["(struct point) has no member 'z'", "x, y"]),
    ("dwarf_structs", "-O0", "paint w.id", ["'w' is a pointer", "w->id"]),
    ("dwarf_structs", "-O0", "dwarf_structs.c:137 w", ["Probe point 'dwarf_structs.c:137' not found.",
                                                        "probectl lines -x ", " dwarf_structs.c\n"]),
    ("dwarf_structs", "-O0", "paint:40", ["has no code of its own", "dwarf_structs.c:138"]),
    ("dwarf_structs", "-O2", "paint:25 area", ["'area' is optimized out at 0x",
                                                "it can be fetched at dwarf_structs.c:127"]),
    ("dwarf_structs", "-O2", "dwarf_structs.c:166 total", ["'total' is optimized out at 0x",
                                                           "dwarf_structs.c:160-164"]),
    ("dwarf_inline", "-O2", "clamp%return", ["clamp is an inlined function and has no return point"]),
    ("dwarf_structs", "-O0", "paint%return w", ["variables cannot be read at a return probe"]),
]


@pytest.mark.parametrize("name,opt,definition,messages", ERROR_CASES,
                         ids=[f"{n}{o}:{d}" for n, o, d, _ in ERROR_CASES])
def test_errors_are_one_clear_message(perf_bin, name, opt, definition, messages):
    path = binary(name, opt)
    out = probectl_process("add", "-x", path, "-D", definition)
    assert out.returncode == 1, out.stdout
    assert out.stderr.startswith("Error: "), out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
    for message in messages:
        assert message in out.stderr
    perf_fails(perf_bin, path, definition)  # perf refuses them too


def test_stripped_binary_lists_the_debug_files_tried(stripped_copy):
    out = probectl_process("add", "-x", stripped_copy, "-D", "paint w->id")
    assert out.returncode == 1 and out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.startswith(f"Error: {stripped_copy} has no debug information")
    build_id = _elf(stripped_copy).build_id
    assert f"/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug" in out.stderr
    assert f"/usr/lib/debug{stripped_copy}.debug" in out.stderr
    assert "Hint: install the debug symbols" in out.stderr


def test_in_process_runs_match_the_command(tmp_path):
    """The in-process runs above see what `python -m probectl` prints."""
    path = binary("dwarf_structs", "-O2")
    definition = "paint w->corner->y w->name:string"
    out = probectl_process("add", "-x", path, "-D", definition)
    code, stdout, _ = run_cli("add", "-x", path, "-D", definition)
    assert (out.returncode, out.stdout) == (code, stdout)


# --- the speed work keeps results -----------------------------------------------------------------


def _debuginfo(path: str):
    from probectl.debuginfo.dwarf import DebugInfo

    return DebugInfo.open(path)


def test_index_cache_cold_warm_and_damaged(tmp_path, monkeypatch):
    """The name index read back from the cache equals the one built; a damaged, foreign or
    unreadable cache file is rebuilt (or ignored) without changing results; caching can be off."""
    from probectl.debuginfo.dwarf import dieindex
    from probectl.debuginfo import indexcache

    path = binary("dwarf_structs", "-O2")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cold = _debuginfo(path)
    built = (cold.name_index(), cold.variable_index())
    (cached,) = (tmp_path / "probectl").glob("dwarf-names-*")
    assert cached.name == f"dwarf-names-{cold.index_key}.bin"

    real_build = dieindex.build_indexes
    calls = []
    monkeypatch.setattr(dieindex, "build_indexes", lambda d: calls.append(d) or real_build(d))
    warm = _debuginfo(path)
    assert (warm.name_index(), warm.variable_index()) == built and calls == []

    import hashlib
    import marshal
    import zlib

    good = cached.read_bytes()
    head = len(indexcache._MAGIC) + 4
    stored = marshal.loads(good[head:])

    def sealed(payload: bytes) -> bytes:  # a well-formed file around other contents
        return indexcache._MAGIC + zlib.crc32(payload).to_bytes(4, "little") + payload

    damage = [
        b"", b"{", good[:head], good[: len(good) // 2], good[:-1], good[:head] + b"\x00" + good[head + 1:],
        good.replace(indexcache._MAGIC, b"probectl something else\n"),
        sealed(b"not marshal data"),
        sealed(marshal.dumps(((99,) + stored[0][1:], stored[1], stored[2]))),  # another format
        sealed(marshal.dumps((stored[0], [], stored[2]))),
        sealed(marshal.dumps(stored[:2])),
        # the first format (its checksum a SHA-256)
        b"probectl index\n" + hashlib.sha256(good[head:]).digest() + good[head:],
    ]
    for data in damage:
        cached.write_bytes(data)
        again = _debuginfo(path)
        assert (again.name_index(), again.variable_index()) == built
        assert cached.read_bytes() == good  # rewritten
    assert len(calls) == len(damage)

    # a cache directory that cannot be made (its parent is a file; root ignores file modes)
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    assert _debuginfo(path).name_index() == built[0]
    monkeypatch.setenv("PROBECTL_NO_CACHE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "off"))
    assert _debuginfo(path).name_index() == built[0]
    assert not (tmp_path / "off").exists()


def test_index_cache_keeps_few_files(tmp_path, monkeypatch):
    from probectl.debuginfo import indexcache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    directory = tmp_path / "probectl"
    directory.mkdir()
    for i in range(indexcache.MAX_FILES + 5):
        old = directory / f"dwarf-names-{i:040x}.bin"
        old.write_text("{}")
        os.utime(old, (1000 + i, 1000 + i))
        (directory / f".lock-dwarf-names-{i:040x}").write_text("")
    path = binary("dwarf_inline", "-O0")
    _debuginfo(path).name_index()
    names = sorted(p.name for p in directory.iterdir() if not p.name.startswith(".lock-"))
    locks = sorted(p.name[len(".lock-"):] for p in directory.iterdir() if p.name.startswith(".lock-"))
    assert len(names) == indexcache.MAX_FILES
    assert [n + ".bin" for n in locks] == names  # the lock files of removed indexes went with them
    assert f"dwarf-names-{_debuginfo(path).index_key}.bin" in names
    assert f"dwarf-names-{0:040x}.bin" not in names  # the least recently used went first


def _cu_sample(di, limit: int = 60):
    import random

    cus = di.compile_units()
    return cus if len(cus) <= limit else random.Random(3).sample(cus, limit)


@pytest.mark.parametrize("name,opt", [("dwarf_structs", "-O2"), ("dwarf_inline", "-O2"),
                                      ("dwarf_static", "-O0"), ("dwarf_namespaces", "-O0"), ("libc", "")])
def test_byte_scanners_match_pyelftools(name, opt):
    """.debug_aranges, each CU's top-level functions/variables and the name index, read from the
    section bytes, against pyelftools' own parse of the same DWARF."""
    from probectl.debuginfo.dwarf.dieindex import scan_dies, top_level_dies

    path = binary(name, opt)
    try:
        di = _debuginfo(path)
    except Exception as exc:  # libc without libc6-dbg
        pytest.skip(str(exc))
    from tests.helpers import pyelftools_dwarfinfo

    aranges = pyelftools_dwarfinfo(di).get_aranges()
    for entry in aranges.entries:
        for address in (entry.begin_addr, entry.begin_addr + entry.length - 1):
            if entry.length:
                assert di._aranges_cu_offset(address) == aranges.cu_offset_at_addr(address)
    functions, variables = di.name_index(), di.variable_index()
    for cu in _cu_sample(di):
        f, v = [], []
        for die in di.children(cu.get_top_DIE()):
            if die.tag in ("DW_TAG_namespace", "DW_TAG_module"):
                f += [d.offset for d in di.children(die) if d.tag == "DW_TAG_subprogram"]
                v += [d.offset for d in di.children(die) if d.tag == "DW_TAG_variable"]
            elif die.tag == "DW_TAG_subprogram":
                f.append(die.offset)
            elif die.tag == "DW_TAG_variable":
                v.append(die.offset)
        assert top_level_dies(di, cu) == (f, v)
        py_funcs, py_vars = scan_dies(di, cu)
        for index, py in ((functions, py_funcs), (variables, py_vars)):
            mine = {(n, r) for n, refs in index.items() for r in refs if r[0] == cu.cu_offset}
            assert mine == {(n, r) for n, refs in py.items() for r in refs}


def test_abbreviation_entries_shared_only_when_equal():
    """Entries are remembered by their bytes up to the first "0 0"; an implicit constant of 0 or
    an empty attribute list ends an entry elsewhere, and must not be confused with another."""
    from probectl.debuginfo.dwarf.diescan import _parse_entry, compiled_table

    def uleb(n):
        out = bytearray()
        while True:
            b, n = n & 0x7F, n >> 7
            out.append(b | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def entry(code, tag, children, specs):
        body = uleb(code) + uleb(tag) + bytes([children])
        for attr, form, *value in specs:
            body += uleb(attr) + uleb(form) + (bytes(value) if value else b"")
        return body + b"\0\0"

    tables = [
        # DW_AT_decl_file as implicit_const 0, then another attribute
        entry(1, 0x2E, 1, [(0x03, 0x08), (0x3A, 0x21, 0x00), (0x3B, 0x0B)]) + entry(2, 0x24, 0, []) + b"\0",
        # the same leading bytes with a different ending; an empty list with children
        entry(7, 0x2E, 1, [(0x03, 0x08), (0x3A, 0x21, 0x00), (0x49, 0x13)]) + entry(3, 0x13, 1, []) + b"\0",
        # sleb 64 (0xc0 0x00) as implicit value, multi-byte attribute numbers
        entry(1, 0x34, 0, [(0x2137, 0x17), (0x3A, 0x21, 0xC0, 0x00), (0x02, 0x18)]) + b"\0",
    ]
    shared: dict = {}
    for raw in tables * 2:
        data = b"\x99" + raw
        got = compiled_table(data, 1, 4, 8, 5, shared)
        pos, want = 1, {}
        while data[pos]:
            code = data[pos]
            tag, children, specs, pos = _parse_entry(data, pos + 1)
            want[code] = (tag, children, specs)
        assert {c: e[:3] for c, e in got.items()} == want


def test_the_index_walks_into_namespaces_for_the_names(monkeypatch):
    """g++ declares namespace members inside their DW_TAG_namespace (outer::inner two deep) and defines
    them at the top level with DW_AT_specification: the byte scanner walks the namespaces all the way
    down, so each definition's name is in what it read, without pyelftools' parse of the DIE (only one
    level down, the names of outer::inner's members were parsed by pyelftools). (The Python byte
    scanner's walk, which the native scanner's is tested equal to in tests/test_native_dwscan.py.)"""
    from probectl.debuginfo.dwarf import die, dieindex

    monkeypatch.setattr(dieindex.UnitScanner, "definitions", dieindex.UnitScanner.python_definitions)
    di = _debuginfo(binary("dwarf_namespaces", "-O0"))
    fallbacks: list = []
    real_die_name = die.die_name
    monkeypatch.setattr(die, "die_name", lambda d: fallbacks.append(d.offset) or real_die_name(d))
    funcs, variables = dieindex.build_indexes(di)
    # (but Box::get's declaration, in the class's DW_TAG_structure_type, whose members it does not read)
    assert [di.dwarf.get_DIE_from_refaddr(o).get_parent().tag for o in fallbacks] == ["DW_TAG_structure_type"]
    assert {"twice", "_ZN5outer5inner5twiceEi", "get", "call", "main"} <= set(funcs), sorted(funcs)
    assert {"depth", "_ZN5outer5inner5depthE", "counter"} <= set(variables), sorted(variables)


@pytest.mark.parametrize("name,opt", [("uprobe_target", "-O2"), ("libc", "")])
def test_symbol_lookup_by_one_name_matches_the_full_table(name, opt):
    """ElfFile.find_functions decodes only the entries of the name asked for while the symbol
    table is not loaded: same symbols, versions and order as from the loaded table."""
    path = binary(name, opt) if name != "libc" else LIBC
    files = [path]
    try:
        files.append(str(_debuginfo(path).path))
    except Exception:
        pass
    for file in dict.fromkeys(files):
        full = ElfFile(file)
        syms = full.symbols()
        patterns = sorted({s.name for s in syms} | {s.versioned_name for s in syms} | {"nosuch"})
        if len(patterns) > 600:
            import random

            patterns = random.Random(7).sample(patterns, 600) + ["malloc", "memcpy", "memcpy@GLIBC_2.2.5"]
        for pattern in patterns:
            with ElfFile(file) as fresh:
                assert fresh.find_functions(pattern) == full.find_functions(pattern), pattern
                assert fresh.symbol_tables._symbols is None
