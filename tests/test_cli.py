"""Command-line behaviour that needs no tracefs: perf-flag rewriting, funcs, -D output, errors."""
from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys

import pytest

from probectl.cli import rewrite_perf_flags
from probectl.debuginfo.elf import ElfFile
from probectl.events import EventDefinition

from tests.helpers import build_fixture, kernel_testdata, probectl


run = functools.partial(probectl, check=False)


@pytest.mark.parametrize("argv,expected", [
    (["-x", "bin", "-a", "malloc"], ["add", "-x", "bin", "malloc"]),
    (["--add=malloc size=%di", "-x", "libc"], ["add", "malloc size=%di", "-x", "libc"]),
    (["-D", "malloc", "-x", "libc"], ["add", "-D", "malloc", "-x", "libc"]),
    (["-x", "libc", "-a", "malloc", "-a", "free", "-f"], ["add", "-x", "libc", "malloc", "free", "-f"]),
    (["-l"], ["list"]),
    (["-d", "probe:*"], ["del", "probe:*"]),
    (["-F", "-x", "libc"], ["funcs", "-x", "libc"]),
    (["-F", "mem*", "-x", "libc"], ["funcs", "mem*", "-x", "libc"]),
    (["-x", "libc", "malloc"], ["add", "-x", "libc", "malloc"]),
    (["list", "--json"], ["list", "--json"]),
    (["lsit"], ["lsit"]),
    # a first word that is no command, with no perf option: left to click ("No such command")
    (["show"], ["show"]),
    (["help"], ["help"]),
    (["malloc", "size=%di"], ["malloc", "size=%di"]),
    (["--foo", "malloc"], ["--foo", "malloc"]),
    # perf-style bare definitions need an option of add
    (["-n", "-x", "bin", "malloc"], ["add", "-n", "-x", "bin", "malloc"]),
    (["-xbin", "malloc"], ["add", "-xbin", "malloc"]),
    (["malloc", "--exec=bin"], ["add", "malloc", "--exec=bin"]),
    (["-f", "-k", "vmlinux", "schedule"], ["add", "-f", "-k", "vmlinux", "schedule"]),
    (["lsit", "-x", "libc"], ["lsit", "-x", "libc"]),
])
def test_perf_flags_are_rewritten(argv, expected):
    assert rewrite_perf_flags(argv) == expected


def test_funcs_lists_fixture_functions():
    binary = build_fixture("uprobe_target", "-O2")
    names = run("funcs", "-x", str(binary)).stdout.split()
    assert {"add_ints", "sum_record", "pick_label", "main"} <= set(names)
    assert names == sorted(names)
    assert not any(n.startswith("_") for n in names)
    as_json = json.loads(run("funcs", "-x", str(binary), "--json", "add_*").stdout)
    assert [f["name"] for f in as_json] == ["add_ints"] and as_json[0]["size"] > 0


def test_funcs_shows_non_default_versions():
    names = run("funcs", "-x", "libc", "memcpy*").stdout.split()
    assert "memcpy" in names and "memcpy@GLIBC_2.2.5" in names


def test_definition_output_is_only_definitions():
    binary = build_fixture("uprobe_target", "-O0")
    out = run("add", "-D", "-x", str(binary), "add_ints %di", "add_ints%return $retval")
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("p:") and lines[1].startswith("r:")


@pytest.mark.parametrize("args,message", [
    (["add", "-D", "-x", "/nonexistent/binary", "main"], "/nonexistent/binary"),
    (["add", "-D", "-x", "libc", "no_such_function_xyz"], "Probe point 'no_such_function_xyz' not found."),
    (["add", "-D", "-x", "libc", "mallocc"], "did you mean"),
    (["add", "-D", "-x", "libc", "malloc+100000"], "is bigger than the size of malloc"),
    (["add", "-D", "-x", "libc", "malloc )"], "^"),
    (["add", "-D", "-x", "libc", "malloc size"], "no variable 'size' in __libc_malloc"),
    (["funcs", "-x", "/etc/passwd"], "ELF"),
    # perf writes this uprobe, and the traced program then crashes on the corrupted instruction.
    (["add", "-D", "-x", str(build_fixture("uprobe_target", "-O0")), "add_ints+8"],
     "add_ints+8 is inside the instruction at add_ints+7"),
])
def test_errors_are_clear_and_without_traceback(args, message):
    out = run(*args)
    assert out.returncode == 1
    assert message in out.stderr
    assert out.stderr.startswith("Error: ")
    assert "Traceback" not in out.stderr


def test_retval_string_reads_through_the_pointer():
    """perf passes '$retval:string' through and the kernel refuses it ("String accepts only memory
    argument"); probectl reads the string the return value points at."""
    binary = build_fixture("uprobe_target", "-O2")
    (line,) = run("add", "-D", "-x", str(binary), "pick_label%return s=$retval:string").stdout.splitlines()
    assert line.endswith(" s=+0($retval):string")


UNKNOWN_WORDS = [("show", ""), ("lst", "Did you mean 'list'?"), ("xyzzy_no_command", ""),
                 ("scirpt", "Did you mean 'script'?")]


@pytest.mark.parametrize("word,suggestion", UNKNOWN_WORDS)
def test_an_unknown_command_word_is_an_error(word, suggestion):
    """A first word that is no command is not a kernel probe definition (`show` is a kernel
    function: it used to be added as probe:show)."""
    out = run(word)
    assert out.returncode == 2
    assert f"Error: No such command '{word}'." in out.stderr
    assert suggestion in out.stderr
    assert "Traceback" not in out.stderr and not out.stdout


def test_help_shows_the_help():
    out = run("help")
    assert out.returncode == 0 and out.stdout == run("--help").stdout
    out = run("help", "funcs")
    assert out.returncode == 0 and out.stdout == run("funcs", "--help").stdout
    out = run("help", "lst")
    assert out.returncode == 2 and "No such command 'lst'. Did you mean 'list'?" in out.stderr


_FIXTURE = str(build_fixture("uprobe_target", "-O0"))
EMPTY_TARGETS = [
    *[(cmd, flag) for cmd in (["add", "-n", "schedule"], ["add", "-D", "schedule"], ["funcs"],
                              ["lines", "schedule"], ["vars", "schedule"]) for flag in ("-x", "-k", "-m")],
    (["funcs", "schedule"], "--exec"), (["funcs"], "--vmlinux"), (["funcs"], "--module"),
    (["add", "-n", "-x", _FIXTURE, "main"], "-k"),  # (not "-x cannot be used with -k or -m")
    (["del", "no_such_group_xyz:*"], "-x"),
    (["trace", "no_such_function_xyz"], "-x"),
    (["trace", "no_such_function_xyz"], "-k"),
    (["trace", "no_such_function_xyz"], "--module"),  # (trace's -m is the buffer size, as record's)
    (["list"], "-k"),
    (["schedule", "-n"], "-x"),  # perf style
]


@pytest.mark.parametrize("value", ["", "  "])
@pytest.mark.parametrize("cmd,flag", EMPTY_TARGETS)
def test_an_empty_target_is_a_usage_error(cmd, flag, value):
    """An empty -x/-k/-m is not "no option" (it used to probe, list or describe the running kernel)."""
    args = [*cmd, f"{flag}={value}"] if flag.startswith("--") else [*cmd, flag, value]
    out = run(*args)
    short = {"--exec": "-x", "--vmlinux": "-k", "--module": "-m" if cmd[0] != "trace" else "--module"}.get(flag, flag)
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"Error: {short} was given an empty {'name' if short in ('-m', '--module') else 'path'}; " in out.stderr
    assert not out.stdout and "Traceback" not in out.stderr


# --- 0xADDR with C variables: the DWARF function containing the address gives their scope --------


def _resolved_address(binary: str, definition: str) -> int:
    """Where probectl puts a probe by name (after the prologue at -O0): a real instruction start."""
    from probectl.resolve import Resolver
    from probectl.spec import parse_probe
    from probectl.target import find_target

    (point,) = Resolver(find_target(binary)).resolve(parse_probe(definition))
    return point.address


def _variable_lines(stdout: str) -> list[str]:
    return [line.split("\t")[-1] for line in stdout.splitlines() if line.startswith("\t\t")]


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_an_address_takes_the_variables_of_its_function(opt):
    binary = str(build_fixture("dwarf_structs", opt))
    address = _resolved_address(binary, "paint w->id")
    args = "id=w->id scale name=w->name:string"
    named = run("add", "-D", "-x", binary, f"paint {args}")
    at = run("add", "-D", "-x", binary, f"0x{address:x} {args}")
    assert named.returncode == 0 and at.returncode == 0, named.stderr + at.stderr
    named_def, at_def = (EventDefinition.parse(o.stdout.strip()) for o in (named, at))
    assert at_def.event == f"abs_{address:x}"
    assert (at_def.place, at_def.args) == (named_def.place, named_def.args)
    everything = run("add", "-D", "-x", binary, f"0x{address:x} $vars")
    assert everything.returncode == 0 and "w=" in everything.stdout and "Traceback" not in everything.stderr

    listed = run("vars", "-x", binary, f"0x{address:x}")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"Available variables at 0x{address:x}\n")
    assert set(_variable_lines(listed.stdout)) >= {"w", "scale"}
    assert _variable_lines(listed.stdout) == _variable_lines(run("vars", "-x", binary, "paint").stdout)


@pytest.mark.parametrize("args,message", [
    # _start has no DWARF: its variables are unknown (registers can still be fetched)
    (lambda b: ["add", "-D", "-x", b, f"0x{ElfFile(b).find_functions('_start')[0].value:x} w"],
     "no function with debug information contains 0x"),
    (lambda b: ["vars", "-x", b, f"0x{ElfFile(b).find_functions('_start')[0].value:x}"],
     "no function with debug information contains 0x"),
    (lambda b: ["add", "-D", "-x", b, f"0x{_resolved_address(b, 'paint w->id'):x} no_such_var"],
     "no variable 'no_such_var'"),
    # an address inside an instruction is refused as FUNC+OFFS inside one is
    (lambda b: ["add", "-D", "-x", b, f"0x{ElfFile(b).find_functions('paint')[0].value + 2:x} w"],
     "is inside the instruction at paint+"),
    (lambda b: ["add", "-D", "-x", b, f"0x{ElfFile(b).find_functions('paint')[0].value + 2:x} %di"],
     "is inside the instruction at paint+"),
], ids=["no-dwarf-add", "no-dwarf-vars", "no-variable", "inside-an-instruction", "inside-an-instruction-raw"])
def test_address_errors_are_clear(args, message):
    out = run(*args(str(build_fixture("dwarf_structs", "-O0"))))
    assert out.returncode == 1 and message in out.stderr, out.stderr
    assert out.stderr.startswith("Error: ") and "Traceback" not in out.stderr


@pytest.mark.vmlinux
def test_a_kernel_address_takes_the_variables_of_its_function():
    vmlinux = str(kernel_testdata("vmlinux"))
    (entry,) = [s.value for s in ElfFile(vmlinux).find_functions("vfs_read")]
    at = run("add", "-D", "-k", vmlinux, f"0x{entry:x} count file->f_pos")
    named = run("add", "-D", "-k", vmlinux, "vfs_read count file->f_pos")
    assert at.returncode == 0 and named.returncode == 0, at.stderr + named.stderr
    at_def, named_def = (EventDefinition.parse(o.stdout.strip()) for o in (at, named))
    assert at_def.place == f"0x{entry:x}" and at_def.args == named_def.args
    listed = run("vars", "-k", vmlinux, f"0x{entry:x}")
    assert listed.returncode == 0, listed.stderr
    assert _variable_lines(listed.stdout) == _variable_lines(run("vars", "-k", vmlinux, "vfs_read").stdout)


# --- output errors: a closed pipe ends quietly (SIGPIPE), others are one line -----------------------


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory):
    """A trace.dat whose text is megabytes long: more than a pipe holds."""
    from probectl.tracedat import TraceMetadata, write_tracedat
    from tests.test_native import SIMPLE_FORMAT, data_record, make_page, simple_payload
    from tests.test_tracedat import HEADER_EVENT, HEADER_PAGE

    tmp = tmp_path_factory.mktemp("big")
    per_page = 200
    pages = [make_page(b"".join(data_record(simple_payload(9, p * per_page + i), 100) for i in range(per_page)),
                       10**9 + p * 10**7) for p in range(100)]
    raw = tmp / "cpu0.raw"
    raw.write_bytes(b"".join(pages))
    meta = TraceMetadata(header_page=HEADER_PAGE, header_event=HEADER_EVENT, page_size=4096, cpus=1,
                         ftrace_formats=[], event_formats=[("test", [SIMPLE_FORMAT])], kallsyms=b"",
                         printk_formats=b"", cmdlines="9 simple\n", tgids="9 9\n",
                         trace_clock="[local] global counter", uname="Linux big 1.0 x86_64", trace_id=1,
                         cpustats={0: "entries: 0\noverrun: 0\n"})
    path = tmp / "big.dat"
    write_tracedat(path, meta, {0: raw}, version=7)
    return str(path)


def _big_outputs(trace: str) -> list[list[str]]:
    return [["funcs"], ["script", "-i", trace], ["script", "-i", trace, "--format", "json"],
            ["script", "-i", trace, "--format", "csv"], ["script", "-i", trace, "-F", "time,event,trace"]]


def test_a_closed_pipe_ends_quietly_as_coreutils_do(big_trace):
    """`probectl script | head -1`: killed by SIGPIPE (status 141 in a shell, as `seq 1000000 | head
    -1`), with nothing on stderr (no "Exception ignored ... BrokenPipeError")."""
    for args in _big_outputs(big_trace):
        proc = subprocess.Popen([sys.executable, "-m", "probectl", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout.readline()
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait() == -signal.SIGPIPE, (args, err)
        assert err == b"", (args, err)


@pytest.mark.parametrize("target", ["/dev/full", "closed"])
def test_an_output_error_is_one_line(big_trace, target):
    """stdout on a full disk or closed: one line and status 1, for every command that prints."""
    message = "No space left on device" if target == "/dev/full" else "Bad file descriptor"
    for args in [*_big_outputs(big_trace), ["funcs", "-x", "bash"], ["--help"], ["help"], ["--version"],
                 ["add", "-D", "-x", str(build_fixture("uprobe_target", "-O0")), "add_ints"]]:
        redirect = ">/dev/full" if target == "/dev/full" else ">&-"
        out = subprocess.run(["bash", "-c", f'"$@" {redirect}', "bash", sys.executable, "-m", "probectl", *args],
                             capture_output=True, text=True)
        assert (out.returncode, out.stderr) == (1, f"Error: cannot write to standard output: {message}\n"), args


def test_a_closed_stdout_is_not_reused(tmp_path):
    """With stdout closed, the files probectl opens must not take descriptor 1 (where a print would
    land in them): it is held by /dev/null, and writing to it fails as to a closed descriptor."""
    script = ("import os, sys\n"
              "from probectl.cli import main\n"
              "fd = None\n"
              "try:\n"
              "    main(['--version'])\n"
              "except SystemExit as exc:\n"
              "    fd = os.open(os.devnull, os.O_RDONLY)\n"
              "    sys.stderr.write(f'status={exc.code} fd={fd}\\n')\n")
    out = subprocess.run(["bash", "-c", '"$@" >&-', "bash", sys.executable, "-c", script], capture_output=True,
                         text=True)
    assert "status=1 fd=" in out.stderr and "fd=1\n" not in out.stderr, out.stderr
    assert "Error: cannot write to standard output: Bad file descriptor" in out.stderr


# --- a bug: one line and a hint, its traceback with --debug ------------------------------------------

_BUGGY = """
import sys
from probectl.debuginfo.elf import ElfFile
def broken(*args, **kwargs):
    raise RuntimeError("a bug in ElfFile.functions")
ElfFile.functions = broken
from probectl.cli import main
main(sys.argv[1:])
"""


@pytest.mark.parametrize("args,env,debug", [
    (["funcs", "-x", "/bin/true"], {}, False),
    (["--debug", "funcs", "-x", "/bin/true"], {}, True),
    (["funcs", "-x", "/bin/true"], {"PROBECTL_DEBUG": "1"}, True),
    (["funcs", "-x", "/bin/true"], {"PROBECTL_DEBUG": "0"}, False),
    (["--debug", "-x", "/bin/true", "-D", "no_such_function"], {}, True),  # perf style after --debug
])
def test_an_internal_error_is_one_line_with_a_hint(args, env, debug):
    out = subprocess.run([sys.executable, "-c", _BUGGY, *args], capture_output=True, text=True,
                         env={**os.environ, **env})
    assert out.returncode == 1 and not out.stdout
    assert "Error: internal error: RuntimeError: a bug in ElfFile.functions\n" in out.stderr
    if debug:
        assert out.stderr.startswith("Traceback (most recent call last):\n")
        assert "in broken\nRuntimeError: a bug in ElfFile.functions\n" in out.stderr  # (-c: no source lines)
    else:
        assert out.stderr.splitlines() == [
            "Error: internal error: RuntimeError: a bug in ElfFile.functions",
            "  Hint: this is a bug in probectl: re-run the command with --debug (or PROBECTL_DEBUG=1) for the "
            "traceback, and report it with that output and the command line"]


def test_debug_changes_nothing_else():
    binary = str(build_fixture("uprobe_target", "-O0"))
    plain = run("add", "-D", "-x", binary, "add_ints %di")
    assert run("--debug", "add", "-D", "-x", binary, "add_ints %di").stdout == plain.stdout != ""
    failed = run("--debug", "add", "-D", "-x", binary, "no_such_function_xyz")
    assert failed.returncode == 1 and failed.stderr.startswith("Error: Probe point") and "Traceback" not in failed.stderr
    assert "--debug" in run("--help").stdout


@pytest.mark.parametrize("args,message", [
    (["add", "--btff", "x"], "No such option '--btff'. Did you mean '--btf'?"),
    (["record", "--evnt", "x"], "No such option '--evnt'. Did you mean '--event'?"),
    (["add", "-q", "x"], "No such option '-q'."),
    (["add", "-Dq", "x"], "No such option '-q'."),
    (["add", "--definition=1", "x"], "Option '--definition' does not take a value."),
])
def test_unknown_options_are_reported_as_click_reports_them(args, message):
    """Options are parsed by click: an unknown long option gets its suggestion, an unknown short one none."""
    out = run(*args)
    assert out.returncode == 2 and f"Error: {message}" in out.stderr, out.stderr


def test_short_options_and_their_clusters_parse_as_click_parses_them():
    binary = build_fixture("uprobe_target")
    expected = run("add", "--definition", "--exec", str(binary), "add_ints a=%di:s32").stdout
    assert expected.startswith("p:")
    for args in (["add", "-D", "-x", str(binary)], ["add", "-Dx", str(binary)], ["add", f"-Dx{binary}"],
                 ["add", "-fnD", "-x", str(binary)], ["-x", str(binary), "-D"]):
        assert run(*args, "add_ints a=%di:s32").stdout == expected, args


def test_a_c_variable_inside_a_raw_dereference_is_refused_with_a_reason():
    """``+8(a)`` of a C variable was 'internal error: AttributeError' (the resolver took the dereference
    for the variable; found by mypy)."""
    binary = build_fixture("uprobe_target")
    out = run("add", "-D", "-x", str(binary), "add_ints +8(a)")
    assert out.returncode == 1 and "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr
    assert out.stderr.startswith("Error: '+8(a)': a C variable cannot be the base of a +OFFS(...) dereference"), out.stderr
