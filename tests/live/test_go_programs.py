"""A Go program under return probes runs to its end, and the recorded values are what it printed.

fixtures/go_target.go's ``work`` recurses 2,000 deep in a goroutine with large frames, so Go grows
(copies) the goroutine's stack while 2,000 calls of it have yet to return: under a kernel return
probe (perf's, and probectl's before it knew Go) the program dies with "unexpected return pc".
The offline tests are tests/test_go_programs.py. Events are read from a private instance's text ``trace`` file, as tests/live/test_live_uprobes.py does.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import build_go_fixture, probectl
from tests.live.test_live_uprobes import expect_lines, trace_events

GROUP = f"pgo{os.getpid()}"
DEPTH = 2000


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


def run_traced(tracefs: Path, binary: Path) -> tuple[subprocess.CompletedProcess, list]:
    inst = tracefs / "instances" / f"probectl-go-{os.getpid()}"
    inst.mkdir()
    try:
        (inst / "buffer_size_kb").write_text("4096")
        (inst / "events" / GROUP / "enable").write_text("1")
        run = subprocess.run([str(binary), str(DEPTH)], capture_output=True, text=True, timeout=120)
        (inst / "tracing_on").write_text("0")
        text = (inst / "trace").read_text()
        (inst / "events" / GROUP / "enable").write_text("0")
    finally:
        inst.rmdir()
    return run, trace_events(text)


@pytest.mark.root
@pytest.mark.parametrize("gcflags", ["", "all=-N -l"], ids=["optimised", "unoptimised"])
def test_a_go_program_runs_to_its_end_under_return_probes(cleanup_group, gcflags):
    binary = build_go_fixture("go_target", gcflags)
    added = probectl("add", "-x", str(binary), f"{GROUP}:w=main.work%return $retval",
                     f"{GROUP}:dm=main.divmod%return q r", f"{GROUP}:neg=main.negate%return $retval",
                     f"{GROUP}:poll=main.(*Server).poll%return $retval",
                     f"{GROUP}:greet=main.greet s.len xs.len xs.cap")
    assert "not a kernel return probe" in added.stderr
    ours = [line for line in (cleanup_group / "uprobe_events").read_text().splitlines() if f":{GROUP}/" in line]
    assert len(ours) >= 3 and all(line.startswith("p:") for line in ours), ours

    run, events = run_traced(cleanup_group, binary)
    assert run.returncode == 0 and "unexpected return pc" not in run.stderr, run.stderr[-2000:]
    want = expect_lines(run.stdout)
    got: dict[str, list[dict[str, str]]] = {}
    for name, fields in events:
        got.setdefault(name, []).append(fields)

    # Every one of the 2,001 calls of work returned through a probed instruction; the last to
    # return is the outermost, whose value the program printed.
    assert len(got["w__return"]) == DEPTH + 1
    assert got["w__return"][-1]["arg1"] == want["work"][0]["ret"]
    assert [(e["q"], e["r"]) for e in got["dm__return"]] == [(c["q"], c["r"]) for c in want["divmod"]]
    assert [e["arg1"] for e in got["neg__return"]] == [c["ret"] for c in want["negate"]]
    assert [e["arg1"] for e in got["poll__return"]] == [c["ret"] for c in want["poll"]]
    for event, call in zip(got["greet"], want["greet"], strict=True):
        assert [int(event[k]) for k in ("len", "len_1", "cap")] == \
               [int(call[k]) for k in ("s.len", "xs.len", "xs.cap")]
    assert re.search(r"PAIR 2000 -2000", run.stdout)


@pytest.mark.root
def test_latency_of_a_recursive_function_says_its_nested_returns_were_not_measured(live_tracefs):
    """work's 2,001 nested calls on one thread: each start replaces the one before (as bpftrace's
    @start[tid]), so the innermost call is the one pair, and the notice counts the 2,000 replaced starts
    and the returns that had no start left, rather than a histogram that looks complete. The starts are
    the program's 2,001 calls exactly: the entry probe is past the stack-bound check, which the
    function runs again after each growth of its stack (on its first byte: 2,012 starts, 2,011 replaced)."""
    binary = build_go_fixture("go_target", "")
    run = probectl("latency", "-x", str(binary), "main.work", "--json", "--", str(binary), str(DEPTH))
    result = json.loads(run.stdout[run.stdout.index("\n{") + 1:])  # (after the program's own lines)
    assert result["count"] == 1 and result["unmatched"] == result["replaced"] == DEPTH
    assert f"{DEPTH:,} starts came before the end of an earlier start of their key (common_pid)" in run.stderr
    assert f"{DEPTH:,} ends had no start left" in run.stderr


@pytest.mark.root
def test_generic_functions_record_what_the_program_printed(live_tracefs):
    """fixtures/go_generics.go: main.Sum named without its type arguments is both instantiations (an
    event each: their slices' elements differ in type), the int one's result read at its return, and a
    generic type's method with an argument of the string shape, read as its text."""
    binary = build_go_fixture("go_generics", "")
    run = probectl("trace", "-x", str(binary), f"{GROUP}:sum=main.Sum xs",
                   f"{GROUP}:sumret=main.Sum[go.shape.int_0]%return $retval", f"{GROUP}:push=main.(*Stack).Push v",
                   f"{GROUP}:pushret=main.(*Stack).Push%return $retval", "--format", "json", "--", str(binary))
    want = expect_lines(run.stdout)
    got: dict[str, list[dict]] = {}
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            got.setdefault(event["event"].split(":")[1], []).append(event["fields"])
    assert [e["xs"] for e in got["sum_1"]] == [[int(x) for x in c["xs"].split(",")] for c in want["Sum"]]
    assert [str(e["arg1"]) for e in got["sumret__return"]] == [c["ret"] for c in want["Sum"]]
    assert len(got["sum"]) == len(want["SumFloat"]) == 1  # (the float64 instantiation: its own event)
    assert [json.dumps(e["v"]) for e in got["push"]] == [c["v"] for c in want["Push"]]
    assert [str(e["arg1"]) for e in got["pushret__return"]] == [c["ret"] for c in want["Push"]]
