"""Command-line behaviour on the live tracefs: perf-style words that add nothing or add as perf does, and the
tracepoint listing (offline: tests/test_cli.py)."""
from __future__ import annotations

import pytest

from tests.helpers import build_fixture
from tests.test_cli import run


@pytest.mark.root
def test_list_tracepoints_is_the_tracepoints_listing(live_tracefs):
    listed = run("list", "--tracepoints", "sched:sched_switch")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == run("tracepoints", "sched:sched_switch").stdout
    assert listed.stdout.split() == ["sched:sched_switch", "[Tracepoint", "event]"]


@pytest.mark.root
@pytest.mark.parametrize("word", ["help", "show", "lst", "xyzzy_no_command"])
def test_an_unknown_command_word_adds_nothing(live_tracefs, word):
    """(live_tracefs checks that uprobe_events, kprobe_events and dynamic_events are unchanged)"""
    out = run(word)
    assert "Added new event" not in out.stdout and "Traceback" not in out.stderr
    assert out.returncode == (0 if word == "help" else 2)


@pytest.mark.root
def test_perf_style_bare_definitions_still_work(live_tracefs):
    binary = str(build_fixture("uprobe_target", "-O0"))
    out = run("-x", binary, "-D", "add_ints a=%di:s32")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("p:") and out.stdout.rstrip().endswith("a=%di:s32")
    out = run("-x", binary, "-n", "add_ints")
    assert out.returncode == 0, out.stderr
    assert "Would add new event (dry run, nothing was written):" in out.stdout and ":add_ints" in out.stdout
