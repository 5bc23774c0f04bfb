"""The fuzz pass: probectl run on hostile input of five kinds, looking for what must never happen.

Kinds of input, each from its own generator (all seeded: input N of kind K under seed S is always
the same, and a failure is printed with the command that reproduces it):

- ``definitions``: probe definitions, grammar-aware random ones built from the fixtures' real
  names (functions, variables, members, types, registers) and mutations of real definitions, on
  the fixture programs, libc and (with ``-k``, offline) the vmlinux: ``add -D``, ``vars``, ``lines``;
- ``targets``: damaged copies of the fixture programs (truncated, bits flipped, another machine or
  class, section headers and debug sections broken) and files that are no ELF at all (a FIFO,
  a directory, ``/dev/zero``, text), given to ``-x``, ``-k`` and ``-m``;
- ``caches``: every kind of file probectl keeps in its cache directory (analysed grammars, DWARF
  name indexes and lookups, symbol order, kprobe rules, BTF offsets, lock files) truncated,
  flipped, swapped with another, made a FIFO, a link to ``/dev/zero``, a huge sparse file, a
  directory, or writable by others; each run in a fresh interpreter, and its output must equal
  the output with the intact cache (a damaged cache is a miss, never another answer);
- ``tracedat``: mutations of real recordings (the committed samples, trace-cmd's own files and,
  with tracefs, one recorded at the start of the pass) read by ``script`` in every format and
  by ``probectl.read_trace``;
- ``cmdlines``: random combinations of every command's options and arguments (click's own table
  of them), with odd values (empty, huge, control characters, FIFOs, /dev/full, numbers out of
  range), perf-style flags, and record/trace runs ended by their command or by Ctrl-C.

What fails the pass: a Python traceback, ``Error: internal error``, a hang (no exit before the
timeout), a death by a signal other than SIGPIPE (and SIGINT when the pass sent it), a tracefs
event or instance of the pass's own left behind by a run that must leave none, and an error line
longer than a bounded excerpt or holding a raw control character.

Most inputs run in a child forked from this process (probectl imported once: milliseconds per
input instead of a fresh interpreter's fraction of a second), every ``SUBPROCESS_EVERY``-th of each
kind and all cache inputs in a fresh ``python -m probectl``. Mutating commands only ever touch the
pass's own copies of the fixtures (``del`` is given the pass's own group, or ``-n``), and the pass
never runs ``cleanup`` (it would remove other runs' leftovers on a shared machine).

Run by tests/fuzz/test_fuzz.py within ``PROBECTL_FUZZ_SECONDS`` (default 75); by hand, longer::

    python tests/fuzz/fuzzing.py --seconds 600 [--seed N] [--kind K] [--index I]
"""
from __future__ import annotations

import argparse
import atexit
import io
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

TESTS = Path(__file__).resolve().parents[1]  # tests/, whose data/ the tracedat kind mutates
ROOT = TESTS.parent
TRACEFS = Path("/sys/kernel/tracing")
KINDS = ("definitions", "targets", "caches", "tracedat", "cmdlines")
SHARE = {"definitions": 0.25, "targets": 0.2, "caches": 0.15, "tracedat": 0.2, "cmdlines": 0.2}
SUBPROCESS_EVERY = 10
TIMEOUT = 40.0  # seconds for one input (a cold vmlinux index takes ~20 s on a busy machine)
MAX_LINE = 1100  # termtext.LINE and its excerpt note
HUGE = "A" * 5000
ODD_TEXT = ["", " ", "-", "--", "'", '"', "\\", "\x00", "\x1b[2J", "\x1b]0;title\x07", "\u202e", "é", "∞",
            "\udcff", "%s%n", "${HOME}", "$(id)", "*", "?", "[", "..", "/", "0", "-1", "1e309", "nan",
            "18446744073709551616", "-9223372036854775809", "0x", "0xffffffffffffffff", "99999999999", HUGE,
            "a" * 64, "a b", "\t", "\n"]


# ---- running one input ----------------------------------------------------------------------------

@dataclass
class Outcome:
    status: Optional[int]  # exit status; None: killed by the timeout
    signal: Optional[int]
    stdout: bytes
    stderr: str
    interrupted: bool = False
    pid: int = 0


def _child_streams(out: int, err: int) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True,
                                  errors="backslashreplace")


def run_forked(body: Callable[[], int], env: dict[str, str], timeout: float = TIMEOUT,
               interrupt_after: Optional[float] = None) -> Outcome:
    """``body()`` (its value: the exit status) in a forked child with fresh standard streams,
    ``env`` added to its environment, killed with its process group after ``timeout``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            status = 70
            try:
                os.setpgid(0, 0)
                _child_streams(out.fileno(), err.fileno())
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                atexit._clear()  # (the parent's handlers are not the child's)
                os.environ.update(env)
                try:
                    status = body()
                except SystemExit as exc:
                    status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                atexit._run_exitfuncs()
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:  # noqa: B036 - what escapes is the defect the pass looks for
                try:
                    traceback.print_exc()
                    sys.stderr.flush()
                except BaseException:  # noqa: B036
                    pass
                status = 70
            os._exit(status)
        return _wait(pid, out, err, timeout, interrupt_after, group=True)


def run_subprocess(argv: list[str], env: dict[str, str], timeout: float = TIMEOUT,
                   interrupt_after: Optional[float] = None) -> Outcome:
    """``python -m probectl ARGV`` in a fresh interpreter."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "probectl", *argv], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, env={**os.environ, **env}, cwd=env.get("FUZZ_CWD"),
                                start_new_session=True)
        return _wait(proc.pid, out, err, timeout, interrupt_after, group=True, popen=proc)


def _wait(pid: int, out, err, timeout: float, interrupt_after: Optional[float], group: bool,
          popen: Optional[subprocess.Popen] = None) -> Outcome:
    start = time.monotonic()
    interrupted = False
    status: Optional[int] = None
    sig: Optional[int] = None
    while True:
        if popen is not None:
            code = popen.poll()
            done = code is not None
        else:
            got, raw = os.waitpid(pid, os.WNOHANG)
            done = got == pid
            code = os.waitstatus_to_exitcode(raw) if done else None
        if done:
            if code < 0:
                sig = -code
            else:
                status = code
            break
        elapsed = time.monotonic() - start
        if interrupt_after is not None and not interrupted and elapsed > interrupt_after:
            _kill(pid, signal.SIGINT, group=False)
            interrupted = True
        if elapsed > timeout:
            _kill(pid, signal.SIGKILL, group)
            if popen is not None:
                popen.wait()
            else:
                os.waitpid(pid, 0)
            break
        time.sleep(0.005 if elapsed < 1 else 0.05)
    _kill(pid, signal.SIGKILL, group)  # (what the command left running: a workload)
    out.seek(0)
    err.seek(0)
    stdout = out.read()
    return Outcome(status, sig, stdout[-4096:], err.read().decode("utf-8", "backslashreplace"), interrupted, pid)


def _kill(pid: int, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def cli_body(argv: list[str], cwd: Optional[str] = None) -> Callable[[], int]:
    def body() -> int:
        if cwd:
            os.chdir(cwd)
        from probectl.cli import main

        main(list(argv))
        return 0
    return body


def problems(outcome: Outcome) -> list[str]:
    """What is wrong with how a run ended (see the module)."""
    found = []
    if outcome.status is None and outcome.signal is None:
        found.append("hang (killed after the timeout)")
    if outcome.signal is not None and outcome.signal != signal.SIGPIPE \
            and not (outcome.interrupted and outcome.signal == signal.SIGINT):
        found.append(f"killed by signal {signal.Signals(outcome.signal).name}")
    if "Traceback (most recent call last)" in outcome.stderr:
        found.append("Python traceback")
    if "Error: internal error" in outcome.stderr:
        found.append("internal error")
    for line in outcome.stderr.splitlines():
        if line.startswith(("Error:", "  Hint:", "Warning:", "probectl:")) or len(line) > MAX_LINE:
            if len(line) > MAX_LINE:
                found.append(f"unbounded message line ({len(line)} characters)")
                break
            if any(ord(c) < 32 and c != "\t" or 0x7F <= ord(c) <= 0x9F for c in line):
                found.append("raw control character in a message")
                break
    return found


# ---- tracefs: the pass's own events and instances ----------------------------------------------

class Tracefs:
    """What the pass may leave in tracefs: nothing of its own (events on its fixture copies, in its
    group; instances of its runs)."""

    def __init__(self, marker: str, group: str):
        self.marker = marker
        self.group = group
        self.keep: set[str] = set()  # GROUP/EVENT of the pass's own events that stay for a while
        self.live = os.geteuid() == 0 and (TRACEFS / "uprobe_events").exists()

    def ours(self) -> list[str]:
        if not self.live:
            return []
        try:
            lines = (TRACEFS / "uprobe_events").read_text(errors="surrogateescape").splitlines()
        except OSError:
            return []
        return [ln for ln in lines if (self.marker in ln or f":{self.group}" in ln)
                and ln.split()[0].split(":", 1)[-1] not in self.keep]

    def instances_of(self, pid: int) -> list[str]:
        if not self.live:
            return []
        try:
            return [p.name for p in (TRACEFS / "instances").iterdir()
                    if p.name == f"probectl-{pid}" or p.name.startswith(f"probectl-{pid}-")]
        except OSError:
            return []

    def remove_ours(self, patience: float = 0.0) -> None:
        """Remove the pass's own events; with ``patience``, try again for that many seconds while some
        remain (an event is busy while a process a killed run started still has it open: perf's
        events of a ``record -g`` whose child outlived it)."""
        deadline = time.monotonic() + patience
        self._remove_once()
        while self.ours() and time.monotonic() < deadline:
            time.sleep(0.1)
            self._remove_once()

    def _remove_once(self) -> None:
        for line in self.ours():
            name = line.split()[0].split(":", 1)[1]
            for path in (TRACEFS / "events" / name / "enable",):
                try:
                    path.write_text("0")
                except OSError:
                    pass
            try:
                with open(TRACEFS / "uprobe_events", "a") as f:
                    f.write(f"-:{name}\n")
            except OSError:
                pass


# ---- the pass ------------------------------------------------------------------------------------

@dataclass
class Failure:
    kind: str
    index: int
    what: list[str]
    description: str
    stderr: str

    def __str__(self) -> str:
        tail = "\n".join(self.stderr.strip().splitlines()[-12:])
        return (f"[{self.kind} #{self.index}] {', '.join(self.what)}\n  input: {self.description}\n"
                f"  stderr (end):\n    " + tail.replace("\n", "\n    "))


def _warm_up() -> None:
    """Import what the commands import and build the parsers, once, so that each forked child
    starts with them (an input then takes milliseconds more than its own work)."""
    import importlib

    for module in ("probectl.cli", "probectl.cli.probes", "probectl.cli.recording", "probectl.cli.scripting",
                   "probectl.resolve", "probectl.probes", "probectl.script", "probectl.tracedat", "probectl.api",
                   "probectl.debuginfo.dwarf", "probectl.filters"):
        importlib.import_module(module)
    from probectl.errors import ProbectlError
    from probectl.filters.syntax import parse_filter
    from probectl.spec import parse_probe

    for parse, text in ((parse_probe, "f a=%di:u32"), (parse_filter, "a > 1")):
        try:
            parse(text)
        except ProbectlError:
            pass


@dataclass
class Pass:
    seed: int
    work: Path
    log: Callable[[str], None] = print
    counts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    subprocess_counts: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    failures: list[Failure] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        from tests.fuzz.fuzzgen import Corpus

        self.tracefs = Tracefs(str(self.work), f"pfuzz{os.getpid()}")
        self.corpus = Corpus(self.work, self.tracefs, self.log)
        self.env = {"DEBUGINFOD_URLS": "", "PROBECTL_FUZZ": "1", "COLUMNS": "100"}
        _warm_up()


    def rng(self, kind: str, index: int) -> random.Random:
        return random.Random(f"{self.seed}:{kind}:{index}")

    def run(self, seconds: float, kinds: tuple[str, ...] = KINDS) -> None:
        end = time.monotonic() + seconds
        for n, kind in enumerate(kinds):
            left = end - time.monotonic()
            share = left * SHARE[kind] / sum(SHARE[k] for k in kinds[n:]) if left > 0 else 0
            kind_end = time.monotonic() + max(share, 0)
            try:
                self.corpus.prepare(kind)
            except Unavailable as why:
                self.skipped[kind] = str(why)
                self.log(f"fuzz: {kind}: skipped ({why})")
                continue
            index = 0
            while time.monotonic() < kind_end or index == 0:
                self.one(kind, index)
                index += 1

    def one(self, kind: str, index: int) -> None:
        rng = self.rng(kind, index)
        try:
            case = self.corpus.make(kind, rng)
        except Exception as exc:  # noqa: BLE001 - a fault of the pass itself, reported as one
            self.counts[kind] += 1
            self.failures.append(Failure(kind, index, [f"fuzz harness error: {type(exc).__name__}: {exc}"],
                                         "(making the input)", traceback.format_exc()))
            self.log(f"FUZZ FAILURE (harness, seed {self.seed} kind {kind} index {index})\n{self.failures[-1]}")
            return
        fresh = kind == "caches" or index % SUBPROCESS_EVERY == SUBPROCESS_EVERY - 1 or case.fresh
        if case.argv is not None:  # (an argument of a real command line never holds a NUL: it ends there)
            case.argv = [a.split("\0", 1)[0] for a in case.argv]
        env = {**self.env, **case.env}
        outcome = Outcome(0, None, b"", "")
        before = set(self.tracefs.ours())  # (what an earlier run left and could not be removed is not this one's)
        try:
            if fresh and case.argv is not None:
                outcome = run_subprocess(case.argv, env, case.timeout, case.interrupt_after)
                self.subprocess_counts[kind] += 1
            else:
                body = case.body if case.body is not None else cli_body(case.argv, case.env.get("FUZZ_CWD"))
                outcome = run_forked(body, env, case.timeout, case.interrupt_after)
            what = problems(outcome) + case.check(outcome)
        except Exception as exc:  # noqa: BLE001 - a fault of the pass itself fails it too, with its input
            what = [f"fuzz harness error: {type(exc).__name__}: {exc}"]
        try:
            left = [ln for ln in self.tracefs.ours() if ln not in before] if case.must_leave_nothing(outcome) else []
            left += self.tracefs.instances_of(outcome.pid) if outcome.pid else []
            if left:
                what.append(f"left in tracefs: {left[:3]}")
            self.tracefs.remove_ours()
        finally:
            case.cleanup()
        self.counts[kind] += 1
        if what:
            failure = Failure(kind, index, what, case.description, outcome.stderr)
            self.failures.append(failure)
            self.log(f"FUZZ FAILURE (reproduce: python tests/fuzz/fuzzing.py --seed {self.seed} --kind {kind} "
                     f"--index {index})\n{failure}")

    def summary(self) -> str:
        parts = [f"{k}: {self.counts[k]} ({self.subprocess_counts[k]} in a fresh interpreter)" for k in KINDS
                 if k not in self.skipped]
        parts += [f"{k}: skipped ({why})" for k, why in self.skipped.items()]
        return (f"fuzz pass, seed {self.seed}: {sum(self.counts.values())} inputs; " + "; ".join(parts)
                + f"; {len(self.failures)} failures")


class Unavailable(Exception):
    """A kind of input that cannot be made on this machine (a tool or file missing)."""


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("PROBECTL_FUZZ_SECONDS", 75)))
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--kind", choices=KINDS, action="append")
    parser.add_argument("--index", type=int, help="run this one input of --kind (reproduce a failure)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    sys.path.insert(0, str(ROOT))  # the tests package (the generators build fixtures with its builders)
    with tempfile.TemporaryDirectory(prefix="probectl-fuzz-") as tmp:
        fuzz = Pass(seed, Path(tmp))
        try:
            if args.index is not None:
                for kind in args.kind or KINDS:
                    fuzz.corpus.prepare(kind)
                    fuzz.one(kind, args.index)
            else:
                fuzz.run(args.seconds, tuple(args.kind or KINDS))
        finally:  # (the pass's own events go, whatever happened)
            fuzz.corpus.close()
        print(fuzz.summary())
        return 1 if fuzz.failures else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    from tests.fuzz import fuzzing  # (one copy of this module: the generators import it by that name)

    sys.exit(fuzzing.main())
