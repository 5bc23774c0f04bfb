"""What each command imports: a command pays at start-up for every module it loads (a small
definition resolves in ~40 ms, Python imports take several times that), so the heavy libraries are
loaded only by the commands and definitions that use them. Each case runs in a fresh interpreter."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT, build_cxx_fixture, build_fixture, kernel_testdata, missing

# Runs probectl's command line in this interpreter, then prints the top-level packages loaded and
# the regular expressions compiled (the keys of re's cache, CPython's: (type, pattern, flags)).
_RUN = """
import json, re, runpy, sys
sys.argv = ["probectl"] + json.loads(sys.argv[1])
try:
    runpy.run_module("probectl", run_name="__main__")
except SystemExit as exit:
    if exit.code not in (0, None):
        raise
cached = list(re._cache) + list(getattr(re, "_cache2", ()))
print(json.dumps({
    "modules": sorted({name.split(".")[0] for name in sys.modules}
                      | {n for n in sys.modules if n.startswith(("probectl.", "elftools."))}),
    "patterns": sorted({key[1] for key in cached if isinstance(key[1], str)}),
}))
"""


def started(*args: str) -> dict[str, set[str]]:
    """What ``probectl ARGS`` loaded (``modules``) and compiled (``patterns``), in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", _RUN, json.dumps(list(args))], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return {key: set(value) for key, value in json.loads(out.stdout.splitlines()[-1]).items()}


def loaded(*args: str) -> set[str]:
    return started(*args)["modules"]


def test_probes_by_symbol_do_not_load_dwarf():
    binary = build_fixture("uprobe_target")
    modules = loaded("add", "-D", "-x", str(binary), "add_ints%return ret=$retval:s32", "add_ints a=%di:s32")
    assert "elftools" not in modules and "probectl.resolve.dwarf" not in modules
    assert "lark" not in modules, "definitions are parsed with the generated probectl.spec.probe_tables"
    assert not modules & {"logging", "pickle"}, "the probe parser's run-time (probectl.spec.lalr) needs neither"
    assert "dataclasses" not in modules, "probectl's classes are made by probectl.dataclass"
    assert not modules & {"probectl.resolve.fetch", "probectl.debuginfo.place", "probectl.debuginfo.typemodel"}, \
        "registers and symbols need no member-chain walker"


def test_definitions_with_c_expressions_load_dwarf_but_not_pyelftools():
    """probectl reads the DWARF of a user binary itself (debuginfo/dwarf/units.py): pyelftools, whose
    import alone (construct, and pdb through it) cost ~15 ms, is not loaded."""
    binary = build_fixture("uprobe_target")
    modules = loaded("add", "-D", "-x", str(binary), "add_ints a b")
    assert {"probectl.resolve.dwarf", "probectl.debuginfo.dwarf.cfi"} <= modules, "-O0: stack variables at the CFA"
    assert "elftools" not in modules
    assert "lark" not in modules


def test_member_chains_at_o2_and_lines_do_not_load_pyelftools():
    """The largest fixture definition (25 member chains, location lists at -O2) and a line probe (line
    tables) of a user binary: no pyelftools."""
    binary = build_fixture("dwarf_structs", "-O2")
    modules = loaded("add", "-D", "-x", str(binary), "paint w->next->label:string w->pts[2].x scale")
    assert "elftools" not in modules and "probectl.debuginfo.dwarf.lists" in modules
    modules = loaded("add", "-D", "-x", str(binary), "dwarf_structs.c:166 n")
    assert "elftools" not in modules and "probectl.debuginfo.dwarf.lines" in modules


def test_member_chains_of_a_local_binary_load_only_what_they_use():
    """The largest fixture definition (issue 16's ``paint``, <= 60 ms warm): its debug information is
    on this machine, and its entry needs no source file: debuginfod's client is not imported; a user
    binary needs neither the kernel's files nor its kprobe rules; a definition that parses needs no
    syntax-error reporting."""
    from probectl import tracefs

    binary = build_fixture("dwarf_structs", "-O2")
    run = started("add", "-D", "-x", str(binary), "paint scale w->id w->next->label:string w->pts[2].x")
    modules = run["modules"]
    assert "probectl.resolve.dwarf" in modules
    assert not run["patterns"] & {tracefs._EVENT_NAME, tracefs._UPROBE_PLACE}, "-D reads no definitions of tracefs"
    assert not modules & {"probectl.target.debuginfod", "probectl.target.kernel", "probectl.resolve.kprobe_rules",
                          "probectl.spec.syntax_errors"}
    assert "ctypes" not in modules, "a C program's names are demangled by nobody: libstdc++ is loaded for C++ names"


def test_cxx_methods_load_only_what_they_use():
    """A C++ method by its mangled name (bench/bench_cxx.py's ``add -D mangled``) is a symbol of the
    program: no demangler (its module's patterns, ctypes and libstdc++'s __cxa_demangle); by its
    qualified name, the demangler (the native one, which calls __cxa_demangle without ctypes). Neither loads the event formats' module (only a counted
    string's parts are named from it) nor location lists (-O0: one expression a variable)."""
    binary = build_cxx_fixture("cxx_shop", "-O0")
    mangled = loaded("add", "-D", "-x", str(binary), "_ZN4shop4Cart3addEPKNS_4ItemEi it qty")
    assert "probectl.resolve.dwarf" in mangled
    assert not mangled & {"probectl.debuginfo.demangle", "ctypes", "probectl.formats",
                          "probectl.debuginfo.dwarf.lists"}
    qualified = loaded("add", "-D", "-x", str(binary), "shop::Cart::add it qty")
    assert "probectl.debuginfo.demangle" in qualified and "ctypes" not in qualified
    assert not qualified & {"probectl.formats", "probectl.debuginfo.dwarf.lists"}


@pytest.mark.vmlinux
def test_kernel_entry_probe_loads_only_what_it_uses():
    """A C-expression probe at a kernel function's entry (the README's first example) reads DWARF,
    but needs no line tables, lazy patterns, call frames, kallsyms, instruction decoder,
    subprocess (-x lookups) or pyelftools' ELFFile: those are imported by the definitions that use them."""
    modules = loaded("add", "-D", "-k", str(kernel_testdata("vmlinux")), "tcp_sendmsg size sk->__sk_common.skc_state")
    assert "probectl.resolve.dwarf" in modules
    assert "elftools" not in modules, "the DWARF of a vmlinux is read by probectl alone"
    assert not modules & {"subprocess", "probectl.debuginfo.dwarf.lines", "probectl.debuginfo.dwarf.sources",
                          "probectl.debuginfo.dwarf.cfi", "probectl.debuginfo.kallsyms", "probectl.arch.x86_insn"}


@pytest.mark.vmlinux
def test_kernel_stack_local_reads_call_frames_without_pyelftools():
    """A stack variable at a kernel line needs the CFA from .debug_frame: read through probectl's ELF
    reader and the FDE index, and decoded by probectl (no pyelftools)."""
    modules = loaded("add", "-D", "-k", str(kernel_testdata("vmlinux")), "tcp_sendmsg_locked:207 mss_now")
    assert {"probectl.debuginfo.dwarf.cfi", "probectl.debuginfo.dwarf.lines"} <= modules
    assert "elftools" not in modules


def test_btf_arguments_do_not_load_dwarf():
    from probectl.debuginfo.btf.format import KERNEL_BTF

    if not KERNEL_BTF.exists():
        missing(f"this kernel has no {KERNEL_BTF} (--btf has nothing to read)")
    modules = loaded("add", "-D", "--btf", "vfs_read count file->f_pos")
    assert "elftools" not in modules and "probectl.debuginfo.dwarf" not in modules
    assert "probectl.resolve.btf" in modules


def test_script_loads_neither_grammars_nor_dwarf():
    modules = loaded("script", "-i", str(ROOT / "tests" / "data" / "tracedat" / "sample-v7.dat"))
    assert not modules & {"lark", "elftools", "probectl.filters", "probectl.record", "probectl.resolve",
                          "probectl.tracefs", "probectl.events"}, "printing a file needs no tracefs"
    assert not modules & {"duckdb", "pyarrow", "probectl.analysis"}, "printing text needs no SQL nor Arrow"


def test_printable_output_compiles_no_pattern_of_termtext():
    """Every command imports probectl.termtext; what it prints is nearly always printable already
    (``str.isprintable``), and then none of termtext's patterns is compiled (its character class of
    controls and surrogates alone took ~0.5 ms at each start)."""
    from probectl import termtext

    own = {getattr(p, "pattern", p) for p in (termtext._UNSAFE, termtext._LONG_RUN)}
    binary = build_fixture("dwarf_structs", "-O2")
    patterns = started("add", "-D", "-x", str(binary), "paint scale w->id")["patterns"]
    assert patterns, "re's cache is where this test looks (CPython's re._cache)"
    assert not patterns & own
    assert not started("--version")["patterns"] & own
