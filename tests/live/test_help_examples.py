"""Every example a command's help text shows runs as shown (issue 26: ``hist``'s said ``malloc --key
size`` where glibc's parameter is ``bytes``, and without its debug information there is no name at
all), as the README's examples do: each ``probectl COMMAND ...`` line of each ``--help`` is taken from
the help text itself and run in a scratch directory that has what the examples name (a Makefile for
``make``; ``probectl.dat``, ``a.dat`` and ``b.dat`` recordings of ``probe_libc:malloc`` made by the
``record`` example itself). An example that runs until Ctrl-C (no command, no ``--duration``) gets a
SIGINT after a few seconds, as a user would press it, while writes reach the disk (what a block I/O
example measures). Each must end without an error line, a traceback or an internal error; one that
ends by itself must print something.
"""
from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import sys

import pytest

from tests.helpers import probectl, tracefs_snapshot

pytestmark = pytest.mark.root

INTERRUPT_AFTER = 3.0  # seconds an example that waits for Ctrl-C runs before it gets one


def commands() -> list[str]:
    text = probectl("--help").stdout
    listed = text.split("Commands:", 1)[1]
    return [line.split()[0] for line in listed.splitlines() if line.strip()]


def help_examples(command: str) -> list[list[str]]:
    """The example command lines of ``command --help``: indented lines ``probectl COMMAND ...``."""
    text = probectl(command, "--help").stdout
    return [shlex.split(m)[1:] for m in re.findall(rf"^\s+(probectl {re.escape(command)} .*)$", text, re.M)]


def ends_by_itself(args: list[str]) -> bool:
    return "--" in args or "--duration" in args or args[0] in ("query", "report") or \
        (args[0] == "stat" and "-I" not in args and "-a" not in args)


# What a machine does while an example that waits for Ctrl-C runs, so that it has something to show:
# writes that reach the disk (block:block_rq_issue/complete), context switches.
ACTIVITY = "while :; do dd if=/dev/zero of=activity bs=64k count=16 oflag=direct 2>/dev/null; sleep 0.1; done"


def run_example(args: list[str], cwd) -> subprocess.CompletedProcess:
    activity = None if ends_by_itself(args) else subprocess.Popen(["/bin/sh", "-c", ACTIVITY], cwd=cwd)
    proc = subprocess.Popen([sys.executable, "-m", "probectl", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    interrupted = False
    try:
        out, err = proc.communicate(timeout=None if activity is None else INTERRUPT_AFTER)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        interrupted = True
        out, err = proc.communicate(timeout=60)
    finally:
        if activity is not None:
            activity.kill()
            activity.wait()
    return subprocess.CompletedProcess(args, proc.returncode if not interrupted or proc.returncode else 0, out, err)


@pytest.fixture(scope="module")
def examples():
    found = [(c, args) for c in commands() for args in help_examples(c)]
    assert len(found) >= 10, found
    return found


def test_every_example_of_every_help_runs(live_tracefs, examples, tmp_path):
    if shutil.which("make") is None:
        pytest.fail("make is needed by record's example (apt make)")
    (tmp_path / "Makefile").write_text("all:\n\t@ls / >/dev/null\n")
    before = tracefs_snapshot()
    uses_malloc = [(c, a) for c, a in examples if "probe_libc:malloc" in " ".join(a) or c in ("query", "report")]
    first = [(c, a) for c, a in examples if (c, a) not in uses_malloc]
    # the recording examples' inputs: probe_libc:malloc (as the README adds it), then record's example
    # writes probectl.dat, copied to the a.dat and b.dat query's example reads
    then = sorted(uses_malloc, key=lambda e: e[0] != "record")
    ran = []

    def run(command: str, args: list[str]) -> None:
        if command in ("query", "report") and not (tmp_path / "a.dat").exists():
            shutil.copy(tmp_path / "probectl.dat", tmp_path / "a.dat")
            shutil.copy(tmp_path / "probectl.dat", tmp_path / "b.dat")
        out = run_example(args, tmp_path)
        shown = f"probectl {shlex.join(args)}"
        assert "Traceback" not in out.stderr and "internal error" not in out.stderr, (shown, out.stderr)
        assert out.returncode == 0 and not re.search(r"^Error:", out.stderr, re.M), (shown, out.stderr)
        if ends_by_itself(args):
            assert out.stdout.strip() or out.stderr.strip(), shown
        ran.append(shown)

    for command, args in first:
        run(command, args)
    probectl("add", "-x", "libc", "malloc size=%di:u64", cwd=tmp_path)
    try:
        for command, args in then:
            run(command, args)
    finally:
        probectl("del", "probe_libc:malloc", check=False)
    assert tracefs_snapshot() == before
    assert {c for c, _a in examples} <= {s.split()[1] for s in ran}
