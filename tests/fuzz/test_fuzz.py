"""The fuzz pass (tests/fuzz/fuzzing.py) within a time budget: probe definitions, damaged targets, damaged
cache files, damaged trace files and random command lines end with no traceback, no internal error,
no hang, no signal and nothing left in tracefs. ``PROBECTL_FUZZ_SECONDS`` sets the budget (default
75 s, for CI); ``PROBECTL_FUZZ_SEED`` a seed (default: a new one each run, printed with the counts
and with every failure, whose input is printed with the command that reproduces it).

Also here: the fuzz harness itself is checked (it must see a traceback, a hang and a signal), so
that a pass with no failure means something."""
from __future__ import annotations

import faulthandler
import os
import signal
import time
from pathlib import Path

import pytest

from tests.fuzz import fuzzing


def test_the_harness_sees_what_it_looks_for():
    def raises() -> int:
        raise ValueError("a bug")

    def hangs() -> int:
        time.sleep(60)
        return 0

    def crashes() -> int:
        faulthandler.disable()  # pytest's handler would print a "Fatal Python error" into the run's output
        os.kill(os.getpid(), signal.SIGSEGV)
        return 0

    def internal() -> int:
        print("Error: internal error: KeyError: 'x'", file=__import__("sys").stderr)
        return 1

    def closed_pipe() -> int:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
        return 0

    def shouts() -> int:
        print("Error: " + "x " * 1000 + "\x1b[2J", file=__import__("sys").stderr)
        return 1

    seen = {fn.__name__: fuzzing.problems(fuzzing.run_forked(fn, {}, timeout=2))
            for fn in (raises, hangs, crashes, internal, closed_pipe, shouts)}
    assert seen == {"raises": ["Python traceback"], "hangs": ["hang (killed after the timeout)"],
                    "crashes": ["killed by signal SIGSEGV"], "internal": ["internal error"], "closed_pipe": [],
                    "shouts": ["unbounded message line (2011 characters)"]}
    ok = fuzzing.run_forked(fuzzing.cli_body(["script", "--help"]), {})
    assert ok.status == 0 and b"Usage: probectl script" in ok.stdout and not fuzzing.problems(ok)


def test_inputs_are_reproducible(tmp_path):
    one = fuzzing.Pass(7, tmp_path)
    for kind in ("definitions", "cmdlines"):
        one.corpus.prepare(kind)
        first = [one.corpus.make(kind, one.rng(kind, i)).description for i in range(20)]
        again = [one.corpus.make(kind, one.rng(kind, i)).description for i in range(20)]
        assert first == again and len(set(first)) > 10
    one.corpus.close()


def test_fuzz_pass(tmp_path, capsys, fuzz_seconds, fuzz_seed):
    lines: list[str] = []
    run = fuzzing.Pass(fuzz_seed, Path(tmp_path), log=lines.append)
    try:
        run.run(fuzz_seconds)
    finally:
        run.corpus.close()
    with capsys.disabled():
        print(f"\n{run.summary()}")
    if os.environ.get("PROBECTL_REQUIRE_ALL") == "1" and run.skipped:
        pytest.fail(f"required in CI but skipped: {run.skipped}")
    assert not run.failures, "\n\n".join(lines)
    assert all(run.counts[k] > 0 for k in fuzzing.KINDS if k not in run.skipped)
