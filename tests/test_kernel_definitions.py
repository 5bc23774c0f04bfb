"""Kernel probe definitions from Debian's cloud vmlinux (DWARF), against `perf probe -k VMLINUX -D`:
networking, filesystems, scheduler and memory code — entry, lines, %return, locals, member chains,
strings, inline functions. Where perf fails, the test says why and checks probectl's own answer.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from probectl.debuginfo.elf import ElfFile
from probectl.errors import ProbectlError
from probectl.events import EventDefinition
from probectl.probes.naming import assign_events
from probectl.resolve import Resolver
from probectl.target import Target
from probectl.spec import parse_probe

from tests.helpers import kernel_testdata, missing

pytestmark = pytest.mark.vmlinux

# Definitions perf resolves; probectl must give the same place and fetch arguments.
AGREED = [
    "tcp_sendmsg size sk->__sk_common.skc_state",
    "tcp_sendmsg%return $retval",
    "tcp_recvmsg len flags sk->sk_rcvbuf",
    "tcp_v4_connect addr_len uaddr->sa_family",
    "tcp_set_state sk state",
    "tcp_rcv_established skb->len sk->sk_sndbuf",
    "inet_csk_accept flags",
    "ip_queue_xmit skb->len fl",
    "__dev_queue_xmit skb->len skb->dev->name:string",
    "netif_receive_skb skb->len skb->protocol",
    "sock_sendmsg msg->msg_flags sock->type",
    "vfs_read count file->f_flags",
    "vfs_write count file->f_mode",
    "vfs_open path->dentry->d_name.name:string",  # also inlined into dentry_open and dentry_create
    "do_sys_openat2 dfd filename:string how->flags",
    "vfs_unlink dentry->d_name.name:string",
    "vfs_rename rd->old_dentry->d_name.name:string",
    "filemap_read iocb->ki_pos already_read",
    "ext4_file_write_iter iocb->ki_pos from->count",
    "generic_perform_write iocb->ki_pos",
    "do_filp_open dfd pathname->name:string",
    "getname_flags%return +0($retval):string",
    "security_file_open file->f_flags",
    "schedule_timeout timeout",
    "try_to_wake_up p->pid p->comm:string state wake_flags",
    "wake_up_new_task p->pid",
    "do_exit code",
    "sched_fork p->pid clone_flags",
    "set_user_nice p->pid nice",
    "finish_task_switch prev->pid",  # a .isra.0 symbol
    "do_nanosleep mode",
    "__alloc_pages gfp order",
    "kmem_cache_alloc s->name:string gfpflags",
    "handle_mm_fault address flags vma->vm_start",
    "do_mmap len prot flags",
    "vm_mmap_pgoff len prot",
    "kernel_clone args->flags",
    "do_execveat_common fd filename->name:string flags",  # .isra.0, an argument on the stack
    "tcp_sendmsg_locked:12 size",
    "tcp_sendmsg_locked:17",  # one line, two addresses
    "__x64_sys_getpid",  # perf names the LOCAL alias __do_sys_getpid at the same address
]


@pytest.fixture(scope="module")
def kernel():
    return kernel_testdata("vmlinux")


@pytest.fixture(scope="module")
def resolver(kernel):
    return Resolver(Target(kind="kprobe", path=kernel))


def ours(resolver, n: int, definition: str) -> list[EventDefinition]:
    spec = parse_probe(f"d{n}={definition}")
    return assign_events(spec, resolver.resolve(spec), group="probe", taken=set(), force=False,
                         multiprobe=True, is_uprobe=False)


def by_event(lines: list[str]) -> dict[str, list[EventDefinition]]:
    """Definition lines by their event's name (a return probe's without ``__return``)."""
    found: dict[str, list[EventDefinition]] = {}
    for line in lines:
        d = EventDefinition.parse(line)
        found.setdefault(d.event.removesuffix("__return"), []).append(d)
    return found


def perf_kernel_definitions(kernel: Path, definitions: list[str], home: Path) -> dict[str, list[EventDefinition]]:
    """perf's definitions of ``definitions``, named d0, d1..., in one run (perf stops at its first
    failure, so all must work), by event (its build-id cache in ``home``)."""
    if subprocess.run(["which", "perf"], capture_output=True).returncode != 0:
        missing("perf (apt linux-perf) is not installed")
    args = ["perf", "probe", "-k", str(kernel)]
    for n, definition in enumerate(definitions):
        args += ["-D", f"d{n}={definition}"]
    out = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, HOME=str(home)))
    assert out.returncode == 0, out.stderr
    return by_event(out.stdout.splitlines())


@pytest.fixture(scope="module")
def perf_results(kernel, tmp_path_factory):
    """perf's definitions for AGREED."""
    return perf_kernel_definitions(kernel, AGREED, tmp_path_factory.mktemp("perfhome"))


def _address(elf: ElfFile, place: str) -> int:
    sym, _, off = place.rpartition("+")
    return [s for s in elf.symbols() if s.name == sym][0].value + int(off)


@pytest.mark.perf
@pytest.mark.parametrize("n,definition", list(enumerate(AGREED)), ids=[d.split()[0] for d in AGREED])
def test_same_definitions_as_perf(resolver, perf_results, n, definition):
    mine = ours(resolver, n, definition)
    theirs = perf_results[f"d{n}"]
    assert len(mine) == len(theirs)
    for m, p in zip(sorted(mine, key=lambda d: _address(resolver.elf, d.place)),
                    sorted(theirs, key=lambda d: _address(resolver.elf, d.place))):
        assert (m.kind, m.group, m.event) == (p.kind, p.group, p.event)
        if m.place != p.place:  # the same address named by another symbol (an alias)
            assert _address(resolver.elf, m.place) == _address(resolver.elf, p.place)
        perf_args = [(a.name, a.fetch, a.type) for a in p.args]
        my_args = [(a.name, a.fetch, a.type) for a in m.args]
        if p.kind == "r" and perf_args == [("", "$retval", "")]:
            # perf leaves $retval untyped; probectl types it from DWARF (tcp_sendmsg returns int).
            assert my_args == [("", "$retval", "s32")]
        else:
            assert my_args == perf_args


@pytest.mark.parametrize("definition,where", [
    ("tcp_sendmsg_locked:96 copied", "tcp_sendmsg_locked:96@net/ipv4/tcp.c"),
    ("tcp_sendmsg_locked:12 size", "tcp_sendmsg_locked:12@net/ipv4/tcp.c"),
    ("tcp_sendmsg size", "tcp_sendmsg@net/ipv4/tcp.c"),
    ("tcp_sendmsg%return $retval", "tcp_sendmsg%return@net/ipv4/tcp.c"),
])
def test_list_describes_kernel_probes_by_source_place(resolver, kernel, definition, where):
    """`list` maps a kprobe's SYMBOL+OFFSET back to FUNC:LINE@FILE through the vmlinux, as it was
    written (line 96 shares its address with a row of skbuff.h that no inline instance covers)."""
    from probectl.probes.listing import describe

    (defn,) = ours(resolver, 0, definition)
    listing = describe(defn, {}, {}, str(kernel))
    assert listing.where == where
    assert describe(defn, {}, {}, None).where == defn.place.removesuffix("+0") + ("%return" if defn.kind == "r" else "")


def test_lines_with_sources_that_do_not_match(kernel, tmp_path):
    """Debian's DWARF names files under a relative comp_dir (debian/build/build_amd64_none_cloud-amd64):
    the path tried is not doubled; a source shorter than the DWARF's lines is said to be (perf: "Source
    file is shorter than expected."), not listed as a header alone."""
    def lines(*args):
        return subprocess.run([sys.executable, "-m", "probectl", "lines", "-k", str(kernel), *args, "tcp_sendmsg"],
                              capture_output=True, text=True)

    build = "debian/build/build_amd64_none_cloud-amd64"
    out = lines()
    assert out.returncode == 1 and f"tried:\n  {build}/net/ipv4/tcp.c\n" in out.stderr
    source = tmp_path / "net" / "ipv4" / "tcp.c"
    source.parent.mkdir(parents=True)
    source.write_text("".join(f"/* {n} */\n" for n in range(1495)))  # tcp_sendmsg has code up to 1497
    out = lines("-s", str(tmp_path))
    assert out.returncode == 1 and out.stdout == ""
    assert f"Error: source file {source} is shorter than expected: it has 1495 lines" in out.stderr


def test_constant_arguments_where_perf_gives_up(resolver):
    """perf: "Sorry, we don't support this variable location yet." — the compiler turned clone_it into a
    constant in tcp_transmit_skb's inlined copies; probectl fetches it as an immediate (\\0 or \\1)."""
    defs = ours(resolver, 100, "tcp_transmit_skb skb->len clone_it")
    assert len(defs) > 1
    for d in defs:
        assert d.args[0].name == "len" and d.args[0].fetch.startswith("+112(")
        assert d.args[1].fetch in ("\\0", "\\1") or d.args[1].fetch.startswith("%")


def test_bitfield_where_perf_fails(resolver):
    """perf: "Failed to get the offset of sk_userlocks." — a 4-bit field at bit 4 of the byte at +512
    (struct sock, this kernel: sk_userlocks follows the 4-bit sk_padding... read from DWARF)."""
    (d,) = ours(resolver, 101, "tcp_sendmsg sk->sk_userlocks")
    (arg,) = d.args
    assert arg.name == "sk_userlocks" and arg.fetch.startswith("+") and arg.fetch.endswith("(%di)")
    width, rest = arg.type[1:].split("@")
    offset, container = rest.split("/")
    assert int(width) == 4 and int(offset) + int(width) <= int(container)


def test_lazy_pattern_needs_the_sources(resolver):
    """Lazy patterns match source text; Debian ships no kernel sources with the -dbg package."""
    with pytest.raises(ProbectlError, match="source"):
        ours(resolver, 103, "vfs_read;*rw_verify_area*")


@pytest.mark.parametrize("definition,message", [
    ("tcp_close timeout sk->sk_state", "has no member .sk_state."),
    ("copy_process clone_flags", "optimized out"),
    ("tcp_sendmsg:10", "Probe point 'tcp_sendmsg:10' not found."),
    ("no_such_kernel_function", "Probe point 'no_such_kernel_function' not found."),
    ("do_int3", "blacklisted"),
    ("native_write_cr0", "notrace"),
])
def test_clear_errors(resolver, definition, message):
    with pytest.raises(ProbectlError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ours(resolver, 102, definition)


# Entry and return definitions that BTF can describe (no lines, locals, globals or inline instances).
BTF_CASES = [d for d in AGREED if ":" not in d.split()[0] and ";" not in d
             and d.split()[0].split("%")[0] not in ("vfs_open", "finish_task_switch", "do_execveat_common")]


@pytest.fixture(scope="module")
def btf_resolver(kernel):
    return Resolver(Target(kind="kprobe", path=kernel), use_btf=True)


@pytest.mark.parametrize("definition", BTF_CASES, ids=[d.split()[0] for d in BTF_CASES])
def test_btf_gives_the_dwarf_definitions(resolver, btf_resolver, definition):
    """The same entry/return definitions from the vmlinux's .BTF section and from its DWARF."""
    from_btf = ours(btf_resolver, 0, definition)
    from_dwarf = ours(resolver, 0, definition)
    assert [d.render() for d in from_btf] == [d.render() for d in from_dwarf]
    assert any("BTF" in note for note in btf_resolver.notes)


def test_btf_bitfield_matches_dwarf(resolver, btf_resolver):
    assert ours(btf_resolver, 0, "tcp_sendmsg sk->sk_userlocks")[0].render() == \
        ours(resolver, 0, "tcp_sendmsg sk->sk_userlocks")[0].render()


def test_btf_of_the_running_kernel(tmp_path):
    """No DWARF for the machine's own kernel: arguments come from /sys/kernel/btf/vmlinux and places
    from /proc/kallsyms (struct layouts differ between kernels, so only the shape is checked)."""
    if not Path("/sys/kernel/btf/vmlinux").exists() or os.geteuid() != 0:
        missing("the running kernel's BTF and /proc/kallsyms addresses need root and CONFIG_DEBUG_INFO_BTF")
    running = Resolver(Target(kind="kprobe"))
    (entry,) = ours(running, 0, "vfs_read count file->f_flags")
    assert entry.place == "vfs_read+0"
    assert [(a.name, a.fetch, a.type) for a in entry.args][0] == ("count", "%dx", "x64")
    assert entry.args[1].name == "f_flags" and entry.args[1].fetch.endswith("(%di)")
    (ret,) = ours(running, 0, "vfs_read%return $retval")
    assert ret.kind == "r" and ret.args[0].type == "s64"
    assert any("/sys/kernel/btf/vmlinux" in note for note in running.notes)
    with pytest.raises(ProbectlError, match="BTF describes"):
        ours(running, 0, "vfs_read+4 count")


def test_vars_from_btf_equal_dwarf(kernel):
    import subprocess as sp
    import sys

    def run(*extra):
        out = sp.run([sys.executable, "-m", "probectl", "vars", "-k", str(kernel), *extra, "vfs_read"],
                     capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out

    with_btf = run("--btf")
    assert with_btf.stdout == run().stdout
    assert "C arguments from BTF" in with_btf.stderr


@pytest.mark.vmlinux
def test_extern_without_the_name_index_is_at_its_definition(kernel, tmp_path, monkeypatch):
    """Without the kernel's name index at hand, an extern declaration's place is its global symbol
    (no search of the units that mention it): the very place its definition's location gives."""
    from probectl.debuginfo.dwarf import DebugInfo
    from probectl.debuginfo.dwarf import variables as V
    from probectl.debuginfo.dwarf.die import die_attr, die_name
    from probectl.debuginfo.place import Memory

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # (no index, no answers kept)
    di = DebugInfo.open(kernel)
    (fn,) = di.find_functions("tcp_sendmsg")
    externs = [v for v in di.cu_variables(fn.cu)
               if die_attr(v, "DW_AT_declaration") and die_attr(v, "DW_AT_external", False)]
    compared = 0
    for var in externs:
        name = die_name(var)
        assert di.variable_refs_at_hand(name) is None
        by_symbol = V._global_definition(di, var)
        if not isinstance(by_symbol, Memory):
            continue
        found = di._search_name(name)  # the definition, found by searching (None: too common a name)
        if not found or not found[1]:
            continue
        definitions = [d for d in (di.dwarf.get_DIE_from_refaddr(off) for _, off in found[1])
                       if "DW_AT_location" in d.attributes]
        assert definitions, name
        place = V.variable_place(di, definitions[0], fn.entry, lambda place: True)
        assert place == by_symbol, name
        compared += 1
        if compared == 4:
            break
    assert compared == 4
