"""The README is a test: every example of its command tour runs here, and its output must have the
README's shape, so that the tour cannot drift from the program and no documented command crashes unseen.

How the README marks its examples (an HTML comment right before each ```console, ```sh or ```python
block; the rendered README does not show it)::

    <!-- tour: MODE; CLAUSE; CLAUSE ... -->

MODE is one of

- ``live``      run on this machine's kernel: needs root and a tracefs (uprobes and tracepoints);
- ``offline``   run against files only (the fixtures, libc, the cached vmlinux);
- ``output``    a ```console block of output only: the output of the ```sh block before it;
- ``skip=WHY``  not run, by design; the test lists it as skipped with WHY (a kprobe that needs a
                kernel with kprobes, the bootstrap that CI runs anyway).

and the clauses are

- ``vary KIND=VALUE[,VALUE...] ...``  the README's VALUE (a whole token) stands for something that
  changes from run to run; it matches KIND's pattern (below). A ``pid``, ``addr``, ``num`` or ``id``
  VALUE is one thing: where it appears twice in one command's output, both places must show the same
  actual value (one process, one address); a ``cpu``, ``time``, ``count`` or ``size`` may differ from
  place to place. Alignment spaces before VALUE may change width. KINDs: ``pid``, ``cpu`` (``000`` or
  ``0``: as many digits), ``time`` (seconds with as many decimals), ``usec`` (a JSON number with at most as many decimals:
  ``12.5`` is ``12.500`` written short), ``addr`` (hex; ``0x`` kept if
  written, and ``0xVALUE`` in the output is the same address), ``num`` and ``id`` (decimal), ``count``
  (decimal with thousands commas, which a VALUE keeps: ``count=15,686`` is one), ``size`` (``5.2``), ``hex`` (as many hex digits: a build-id),
  ``ksym`` (a kernel function as a stack shows it: ``name``, ``name+0xOFF`` or folded ``name_[k]``; which
  functions a probe's kernel stack passes through, and at what offsets, is the running kernel build's).
- ``file NAME=fixture:FIXTURE[:OPT]``  ./NAME in the working directory is fixtures/FIXTURE.c built
  at OPT (default -O0) by conftest's build_fixture; ``file NAME=usdt[:OPT]`` is the SDT program of
  conftest's build_usdt (its library stays where it was built: the program's rpath names it);
  ``file NAME=go:FIXTURE`` is fixtures/FIXTURE.go built by Debian's go (helpers.build_go_fixture),
  ``file NAME=cxx:FIXTURE[:OPT]`` fixtures/FIXTURE.cc built by g++ (helpers.build_cxx_fixture), and
  ``file NAME=arm64:FIXTURE[:OPT]`` fixtures/FIXTURE.c built for AArch64 by Debian's cross compiler
  (helpers.build_arm64_fixture).
- ``process PID=PROGRAM``  PROGRAM runs while the block runs (started by the tour with its standard
  input an open pipe, where an interpreter waits reading its program; ended after the block), and PID
  in the commands stands for its process id.
- ``debuginfod URL=DIR``  a local debuginfod (``debuginfod -F DIR``, on a free port) serves the ELF files
  of ./DIR while the block runs; URL (``http://127.0.0.1:8002``) in commands and output stands for its
  address. The block's commands get a debuginfod cache of their own in the working directory
  (``DEBUGINFOD_CACHE_PATH``; the user's is left alone), which ``/root/.cache/debuginfod_client`` in
  the output stands for.
- ``hostname=NAME``  the commands run in a UTS namespace of their own whose node name is NAME (the
  README's recordings were made on a machine named so; recordings and Parquet partitions keep it).
- ``path TEXT=WHERE ...``  TEXT in commands and output is a real path: ``./NAME`` (the absolute path of a
  file of the working directory), ``repo:REL`` (a file of this repository), ``kernel:REL`` (a file of
  the kernel test data, tools/kernel-testdata.sh).
- ``driver=NAME``  the command needs someone at the terminal: NAME is a function below (DRIVERS).
- ``other-events``  the command lists every probe event of the system: lines of events in groups the
  example does not show belong to other users of the (shared) tracefs and are not compared.
- ``optional=TOOL``  a pipe into TOOL (``| TOOL ...``) is left out when TOOL is not installed (a warning
  says so); the command before the pipe still runs and must succeed.
- ``then=EXPR``  (```python blocks) EXPR must be true after the block ran.
- ``kernel-frames``  a run of kernel frames of a stack key (``    bprm_execve+…``) stands for one or more
  frames of any functions: which functions a stack passes through is the running kernel build's.
- ``histogram-rows``  the output is one run's: a run of histogram rows (``(512, 1K]  201 |@@@ |``) stands
  for one or more rows of any buckets and counts (which buckets a timing fills changes from run to run).

In a ```console block, ``# COMMAND`` is a command run as root, the lines below it are its output (stdout
and stderr, as a terminal shows them); a line is a command when its first word is ``probectl``, a
program on PATH, a path (``./x``, ``.venv/bin/python``) or a ``VAR=VALUE`` before one, so that
output lines of perf's ``# comment`` shape (``report``'s headers) stay output. A line that is only
``…`` stands for any number of lines, a ``…`` inside a line for any text. A command exits 0 unless its
output shows an ``Error:`` line.
In a ```sh block each line is a command line; ``tools/bootstrap.sh ... &&`` before it (the set-up CI
runs) is not run and ``.venv/bin/probectl`` is the probectl under test; in any command
``.venv/bin/python`` is the interpreter running the tour.

Every command runs in a pseudo-terminal (``bash -c COMMAND``, 200 columns), in one working directory
shared by the whole tour and in the README's order, since examples build on each other (``add``, then
``list``, ``del``; ``record``, then ``script`` on its file). ``probectl`` on PATH is this tree's. The
vmlinux index cache is the user's own (~/.cache/probectl), shared with the other kernel tests.

On a shared machine: one tour runs at a time (a lock file; a second waits), the tour removes only the
probe events it made, and probectl's "waiting for another probectl run to finish" line (another
user's ``add`` holding the lock) is not part of any output.
"""
from __future__ import annotations

import fcntl
import os
import re
import select
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

from tests.helpers import (ROOT, TRACEFS, build_arm64_fixture, build_cxx_fixture, build_fixture, build_go_fixture,
                           build_usdt, kernel_testdata, missing, require_tracefs)

README = ROOT / "README.md"
WILD = "…"
COMMAND_TIMEOUT = 180  # a cold vmlinux index takes ~45 s on 2 busy cores


# ---- the README's blocks ---------------------------------------------------------------------------


@dataclass
class Command:
    text: str                       # the command line as the README writes it
    expected: list[str]             # the README's output lines


@dataclass
class Block:
    line: int                       # of the opening fence in README.md
    lang: str                       # console, sh, python
    markup: dict[str, str]
    body: list[str]
    commands: list[Command] = field(default_factory=list)

    @property
    def mode(self) -> str:
        for m in ("live", "offline", "output"):
            if m in self.markup:
                return m
        return "skip" if "skip" in self.markup else ""

    @property
    def ident(self) -> str:
        names = []
        for command in self.commands:
            words = command.text.split()
            names += [words[i + 1] for i, w in enumerate(words[:-1]) if w.endswith("probectl")]
        return f"L{self.line}-" + "-".join(dict.fromkeys(names or [self.lang]))


_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
_MARKUP = re.compile(r"<!--\s*tour:(.*?)-->", re.S)


def parse_markup(text: str) -> dict[str, str]:
    """``live; vary pid=1 cpu=0; file app=fixture:x`` → {'live': '', 'vary': 'pid=1 cpu=0', 'file': ...}."""
    out: dict[str, str] = {}
    for clause in (c.strip() for c in text.split(";")):
        if not clause:
            continue
        m = re.match(r"([\w-]+)\s*(=|\s)\s*(.*)$", clause, re.S)
        key, value = (m.group(1), " ".join(m.group(3).split())) if m else (clause, "")
        if key in out:
            out[key] += " " + value
        else:
            out[key] = value
    return out


def _is_command(line: str) -> bool:
    """``# probectl list`` is a command, ``# Available samples`` (report's header) output."""
    if not line.startswith("# "):
        return False
    words = line[2:].split()
    while words and re.fullmatch(r"[A-Za-z_]\w*=\S*", words[0]):
        words.pop(0)
    return bool(words) and (words[0] == "probectl" or "/" in words[0] or shutil.which(words[0]) is not None)


def parse_readme(text: str) -> list[Block]:
    """The ```console, ```sh and ```python blocks of the README with the tour comment before each
    (an empty markup when there is none: the inventory test reports it)."""
    lines = text.split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or not m.group(2):
            if m:  # a fence without a language (the Layout sketch): skip to its end
                i += 1
                while i < len(lines) and not _FENCE.match(lines[i]):
                    i += 1
            i += 1
            continue
        indent, lang = m.group(1), m.group(2)
        start = i
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        comment_end = j
        while j >= 0 and "<!--" not in lines[j] and comment_end - j < 5:
            j -= 1
        before = "\n".join(lines[j:comment_end + 1]) if j >= 0 else ""
        mk = _MARKUP.search(before) if before.rstrip().endswith("-->") else None
        body = []
        i += 1
        while i < len(lines) and not _FENCE.match(lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        if lang not in ("console", "sh", "python"):
            continue
        block = Block(start + 1, lang, parse_markup(mk.group(1)) if mk else {}, body)
        if lang == "console":
            for line in body:
                if _is_command(line):
                    block.commands.append(Command(line[2:], []))
                elif block.commands:
                    block.commands[-1].expected.append(line)
                else:  # output of the ```sh block before
                    block.commands.append(Command("", [line]))
            if block.commands and not block.commands[0].text:
                block.commands = [Command("", [line for c in block.commands for line in c.expected])]
        elif lang == "sh":
            block.commands = [Command(line, []) for line in body if line.strip()]
        blocks.append(block)
    return blocks


BLOCKS = parse_readme(README.read_text())


def _pairs(text: str) -> list[tuple[str, str]]:
    """``kind=a,b other=c`` → [(kind, a), (kind, b), (other, c)]; a ``count`` keeps its thousands
    commas (``count=15,686,7`` → 15,686 and 7)."""
    out = []
    for item in text.split():
        key, _, values = item.partition("=")
        split = re.findall(r"\d{1,3}(?:,\d{3})+(?=,|$)|[^,]+", values) if key == "count" else values.split(",")
        out += [(key, v) for v in split if v]
    return out


# ---- matching output against the README ------------------------------------------------------------


_BOUND = ("pid", "addr", "num", "id", "hex")  # kinds whose VALUE is one thing wherever it appears


def _vary_pattern(kind: str, value: str) -> str:
    if kind in ("pid", "num", "id"):
        return r"\d+"
    if kind == "cpu":
        return rf"\d{{{len(value)}}}"
    if kind == "time":
        decimals = len(value.partition(".")[2])
        return rf"\d+\.\d{{{decimals}}}"
    if kind == "usec":  # a JSON number: at most VALUE's decimals, as trailing zeros are dropped
        decimals = len(value.partition(".")[2])
        return rf"\d+(?:\.\d{{1,{decimals}}})?" if decimals else r"\d+"
    if kind == "addr":
        return r"0x[0-9a-f]+" if value.startswith("0x") else r"[0-9a-f]+"
    if kind == "count":
        return r"\d[\d,]*"
    if kind == "size":
        return r"\d+(?:\.\d+)?"
    if kind == "hex":
        return rf"[0-9a-f]{{{len(value)}}}"
    if kind == "ksym":  # a kernel frame: which functions and offsets are the kernel build's own
        return r"[A-Za-z_.][\w.$]*(?:\+0x[0-9a-f]+|\[k\])?"
    raise ValueError(f"unknown vary kind {kind!r} (README tour markup)")


class LinePattern:
    """One expected line: literal text with ``…`` wildcards, varying values and substituted paths."""

    def __init__(self, line: str, vary: list[tuple[str, str]], paths: dict[str, str]):
        self.line = line
        self.literals: list[Optional[str]] = []  # the README's value of each group (None: not bound)
        spots = []
        for kind, value in vary:
            before = r"(?:(?<=0x)|(?<![0-9A-Za-z_]))" if kind == "addr" else r"(?<![0-9A-Za-z_])"  # 0xADDR too
            for m in re.finditer(rf"( *){before}{re.escape(value)}(?![0-9A-Za-z_])", line):
                spots.append((m.start(), m.end(), m.group(1), kind, value))
        spots.sort(key=lambda spot: (spot[0], -spot[1]))  # the longest VALUE of those at one place
        regex, pos = "", 0
        for start, end, spaces, kind, value in spots:
            if start < pos:  # overlaps an earlier value
                continue
            regex += self._literal(line[pos:start], paths)
            regex += (" +" if spaces else "") + f"(?P<v{len(self.literals)}>{_vary_pattern(kind, value)})"
            self.literals.append(value if kind in _BOUND else None)
            pos = end
        regex += self._literal(line[pos:], paths)
        self.regex = re.compile(regex.rstrip() + r"\s*")

    @staticmethod
    def _literal(text: str, paths: dict[str, str]) -> str:
        parts = text.split(WILD)
        out = []
        for part in parts:
            for readme_path, real in paths.items():
                part = part.replace(readme_path, "\0" + real + "\0")
            out.append("".join(re.escape(p) for p in part.split("\0")))
        return ".*?".join(out)

    def match(self, actual: str, bound: dict[str, str]) -> Optional[dict[str, str]]:
        m = self.regex.fullmatch(actual.rstrip())
        if m is None:
            return None
        new = dict(bound)
        for i, literal in enumerate(self.literals):
            got = m.group(f"v{i}")
            if literal is not None and new.setdefault(literal, got) != got:
                return None
        return new


# The notice of hist and latency names the path the running kernel takes: the README's runs were made on
# a kernel without hist triggers; where the kernel has them (and synthetic events, for a latency), it counts.
USER_SPACE_NOTICE = re.compile(r"\[ probectl: user space aggregation of (.*) \(this kernel has no hist triggers\) \]")


def kernel_notice(line: str, hist: bool, synthetic: bool) -> str:
    """The README's user-space notice as this kernel prints it (``hist``: events have hist files;
    ``synthetic``: it has synthetic events); any other line as it is."""
    m = USER_SPACE_NOTICE.fullmatch(line)
    if m is None or not hist or (" -> " in m.group(1) and not synthetic):
        return line
    return f"[ probectl: hist trigger in the kernel of {m.group(1)} ]"


class Mismatch(AssertionError):
    pass


CARET = re.compile(r" *\^ *")


def _same_caret(readme_above: str, readme_caret: str, above: str, caret: str) -> bool:
    """A caret line points at the same text of the line above as the README's does: its column moves
    with the length of what precedes it there (a path substituted, an address of another width)."""
    if not CARET.fullmatch(caret):
        return False
    return above[caret.index("^"):].rstrip() == readme_above[readme_caret.index("^"):].rstrip()


# A histogram row as hist, latency and report --hist print it: ``(512, 1K]  201 |@@@   |``, ``[0]  5 |@ |``.
HISTOGRAM_ROW = re.compile(r"[(\[][^\])]*[\])] +\d[\d,]* \|[@ ]*\|")
# A kernel frame of a stack key as hist prints it: ``    bprm_execve+0x2d8`` (``+…`` in the README).
KERNEL_FRAME = re.compile(r"\s+[A-Za-z_.][\w.$]*\+(?:0x[0-9a-f]+|…)")


# ``trace ... -- COMMAND``: two writers share the terminal, trace printing events while the command
# prints its own lines, and which line comes first between them is the scheduler's choice.
TRACED_COMMAND = re.compile(r"probectl trace .* -- ")
# An event line as trace prints it: ``     usdt_target  23634 [001] 10176.115904: GROUP:EVENT: ...``.
EVENT_LINE = re.compile(r"\s*\S.*?\s\d+ \[\d{3}\] \d+\.\d+: \S+:.*")


def match_streams(expected: list[str], actual: list[str], vary: list[tuple[str, str]],
                  paths: dict[str, str]) -> dict[str, str]:
    """:func:`match_output` of a traced command's output as two streams, each in its own order: the
    event lines, and the rest (trace's notices and the command's lines, the README's ``…`` among
    them); the bindings of both, which must agree."""
    def events(lines: list[str]) -> list[str]:
        return [line for line in lines if EVENT_LINE.fullmatch(line)]

    def others(lines: list[str]) -> list[str]:
        return [line for line in lines if not EVENT_LINE.fullmatch(line)]

    bound = match_output(events(expected), events(actual), vary, paths)
    rest = match_output(others(expected), others(actual), vary, paths)
    clash = [key for key in bound.keys() & rest.keys() if bound[key] != rest[key]]
    if clash:
        raise Mismatch(f"the values of {', '.join(sorted(clash))} differ between the events and the other lines")
    return {**bound, **rest}


class Run:
    """The pattern of a run of lines of one kind: one or more lines that match ``line``."""

    def __init__(self, line: re.Pattern):
        self.line = line


def match_output(expected: list[str], actual: list[str], vary: list[tuple[str, str]],
                 paths: dict[str, str], histogram_rows: bool = False, kernel_frames: bool = False) -> dict[str, str]:
    """The bindings of the varying values if ``actual`` has the shape of ``expected``; else Mismatch
    saying where they part. With ``histogram_rows``, a run of histogram rows in ``expected`` matches
    one or more rows of any buckets and counts; with ``kernel_frames``, a run of kernel frames matches
    one or more frames of any functions (a stack's frames are the kernel build's)."""
    kinds = [kind for kind, on in ((HISTOGRAM_ROW, histogram_rows), (KERNEL_FRAME, kernel_frames)) if on]

    def kind_of(line: str) -> Optional[re.Pattern]:
        return next((kind for kind in kinds if kind.fullmatch(line)), None)

    pats: list = []
    for line in expected:
        kind = kind_of(line)
        if kind is not None and pats and isinstance(pats[-1], Run) and pats[-1].line is kind:
            continue  # (the run's pattern already stands for this line)
        pats.append(None if line.strip() == WILD else Run(kind) if kind is not None else LinePattern(line, vary, paths))
    expected = [line for k, line in enumerate(expected)
                if not (k and kind_of(line) is not None and kind_of(line) is kind_of(expected[k - 1]))]
    furthest = [(-1, -1)]

    def walk(i: int, j: int, bound: dict[str, str]) -> Optional[dict[str, str]]:
        while i < len(pats):
            pat = pats[i]
            if isinstance(pat, Run):
                rows = 0
                while j + rows < len(actual) and pat.line.fullmatch(actual[j + rows].rstrip()):
                    rows += 1
                if not rows:
                    furthest[0] = max(furthest[0], (j, i))
                    return None
                i, j = i + 1, j + rows
                continue
            if pat is None:
                if i + 1 == len(pats):
                    return bound
                for k in range(j, len(actual) + 1):
                    got = walk(i + 1, k, bound)
                    if got is not None:
                        return got
                return None
            if j >= len(actual):
                got = None
            elif CARET.fullmatch(expected[i]) and i > 0 and j > 0:
                got = bound if _same_caret(expected[i - 1], expected[i], actual[j - 1], actual[j]) else None
            else:
                got = pat.match(actual[j], bound)
            if got is None:
                furthest[0] = max(furthest[0], (j, i))
                return None
            bound, i, j = got, i + 1, j + 1
        if j != len(actual):
            furthest[0] = max(furthest[0], (j, i))
            return None
        return bound

    got = walk(0, 0, {})
    if got is None:
        j, i = furthest[0]
        want = expected[i] if 0 <= i < len(expected) else "(the end of the output)"
        have = actual[j] if 0 <= j < len(actual) else "(the end of the output)"
        raise Mismatch(f"output line {j + 1} does not match README line {i + 1}:\n  README: {want!r}\n"
                       f"  actual: {have!r}\n--- README:\n" + "\n".join(expected) + "\n--- actual:\n" +
                       "\n".join(actual))
    return got


# ---- a pseudo-terminal ------------------------------------------------------------------------------


def render(raw: bytes) -> list[str]:
    """What a terminal shows for ``raw`` (carriage returns, erase-line, other escapes dropped)."""
    lines: list[str] = []
    cur: list[str] = []
    col = 0
    text = raw.decode(errors="replace")
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\x1b":
            m = re.match(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|.)", text[i:])
            seq = m.group(0) if m else ch
            if seq == "\x1b[K":
                del cur[col:]
            i += len(seq)
            continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("".join(cur))
            cur, col = [], 0
        elif ch == "\b":
            col = max(0, col - 1)
        elif ch >= " " or ch == "\t":
            if col < len(cur):
                cur[col] = ch
            else:
                cur.append(ch)
            col += 1
        i += 1
    if cur:
        lines.append("".join(cur))
    return lines


class Terminal:
    """A command running under ``bash -c`` on a pseudo-terminal of its own (as its controlling tty)."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str], argv: Optional[list[str]] = None):
        master, slave = os.openpty()
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        self.fd = master
        self.raw = b""
        self.proc = subprocess.Popen(argv or ["bash", "-c", command], cwd=cwd, env=env, stdin=slave,
                                     stdout=slave, stderr=slave, start_new_session=True,
                                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.eof = False

    def _pump(self, timeout: float) -> None:
        if self.eof:
            time.sleep(min(timeout, 0.05))
            return
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # EIO: every process holding the slave closed it
                data = b""
            if data:
                self.raw += data
            else:
                self.eof = True

    def expect(self, text: str, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while text not in self.raw.decode(errors="replace"):
            if time.monotonic() > end or (self.eof and self.proc.poll() is not None):
                raise AssertionError(f"{text!r} did not appear on the terminal; it shows:\n" + self.screen())
            self._pump(0.1)

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def interrupt(self) -> None:
        """Ctrl-C: SIGINT to the terminal's foreground process group (without the ^C echo)."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self, timeout: float = COMMAND_TIMEOUT) -> int:
        end = time.monotonic() + timeout
        while not self.eof or self.proc.poll() is None:
            if time.monotonic() > end:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
                raise AssertionError(f"still running after {timeout} s; the terminal shows:\n" + self.screen())
            self._pump(0.1)
        os.close(self.fd)
        return self.proc.returncode

    def lines(self) -> list[str]:
        return [line.rstrip() for line in render(self.raw)]

    def screen(self) -> str:
        return "\n".join(self.lines()[-40:])


# ---- drivers: who sits at the terminal -------------------------------------------------------------


def type_hello_world(term: Terminal, session: "Tour") -> None:
    """Answer the ``read -e -p "type a line: "`` prompt of the workload with ``hello world``."""
    term.expect("type a line: ")
    term.type("hello world\r")


def interactive_bash(term: Terminal, session: "Tour") -> None:
    """In another terminal, an interactive bash reads ``ls -l /tmp/nothing-here`` and ``exit`` with
    readline while the trace runs; then Ctrl-C ends the trace."""
    term.expect("Hit Ctrl-C to end.")
    env = dict(session.env, HOME=str(session.cwd), HISTFILE="/dev/null", PS1="$ ", INPUTRC="/dev/null")
    user = Terminal("", session.cwd, env, argv=["bash", "--norc", "--noprofile", "-i"])
    try:
        user.expect("$ ")
        user.type("ls -l /tmp/nothing-here\r")
        user.expect("No such file or directory")
        user.type("exit\r")
        assert user.finish(30) == 2  # ls's status, bash's last command
    finally:
        if user.proc.poll() is None:
            os.killpg(user.proc.pid, signal.SIGKILL)
    term.expect('line="exit"', 30)
    term.interrupt()


DRIVERS: dict[str, Callable[[Terminal, "Tour"], None]] = {
    "type-hello-world": type_hello_world,
    "interactive-bash": interactive_bash,
}


# ---- the tour: one working directory, the blocks in order -------------------------------------------


def _event_groups(lines: list[str]) -> set[str]:
    """The probe groups named in output lines (probectl's default groups: probe, probe_BINARY)."""
    return set(re.findall(r"\b(probe_?\w*):\w", "\n".join(lines)))


def _listed_group(line: str) -> Optional[str]:
    """The group of a ``probectl list`` line (``  GROUP:EVENT  (on ...)``), or None."""
    m = re.match(r"\s+([\w.-]+):\S+\s+\(on ", line)
    return m.group(1) if m else None


_LOCK_WAIT = re.compile(r"waiting for another probectl run to finish \(lock .*\)")


class Tour:
    def __init__(self, tmp: Path):
        self.cwd = tmp / "work"
        self.cwd.mkdir()
        bindir = tmp / "bin"
        bindir.mkdir()
        wrapper = bindir / "probectl"
        wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m probectl \"$@\"\n")
        wrapper.chmod(0o755)
        self.env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
                        PYTHONPATH=str(ROOT) + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
                        TERM="xterm", LC_ALL="C.UTF-8", COLUMNS="200")
        self.env.pop("PROBECTL_DEBUG", None)
        self.done: dict[int, object] = {}        # block line → None (passed) or the exception
        self.live_checked = False
        self.live_error = ""
        self.tour_groups = set().union(*(_event_groups(c.expected) for b in BLOCKS if b.mode == "live"
                                         for c in b.commands))
        self.before: set[tuple[str, str]] = set()

    # -- live gate and clean-up
    def need_tracefs(self) -> None:
        require_tracefs()
        if not self.live_checked:
            self.live_checked = True
            self.before = self.probe_events()
            taken = sorted(f"{g}:{e}" for g, e in self.before if g in self.tour_groups)
            if taken:  # every live block fails: the tour's add and del would collide with them
                self.live_error = (f"tracefs already has events in the README's groups: {', '.join(taken)}; the "
                                   f"tour would add and delete them (remove them with 'probectl del')")
        assert not self.live_error, self.live_error

    @staticmethod
    def probe_events() -> set[tuple[str, str]]:
        out = set()
        for name in ("uprobe_events", "kprobe_events"):
            path = TRACEFS / name
            if path.exists():
                for line in path.read_text().splitlines():
                    m = re.match(r"[pr]\S*:([^/\s]+)/(\S+)", line)
                    if m:
                        out.add((m.group(1), m.group(2)))
        return out

    def clean_up(self) -> list[str]:
        """Remove the probe events the tour made and left (when an example failed before its ``del``)."""
        if not self.live_checked:
            return []
        left = sorted((g, e) for g, e in self.probe_events() - self.before if g in self.tour_groups)
        if left:
            from probectl.tracefs import Tracefs
            Tracefs(TRACEFS).remove(left)
        return [f"{g}:{e}" for g, e in left]

    # -- running blocks
    def run_through(self, block: Block) -> None:
        """Run every block up to ``block`` (those it builds on) once, then ``block``."""
        for b in BLOCKS:
            if b.line not in self.done:
                try:
                    self.run_block(b)
                    self.done[b.line] = None
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # noqa: BLE001 (pytest's skips too: each block's test reports its own)
                    self.done[b.line] = exc
            if b is block:
                break
        result = self.done[block.line]
        if result is not None:
            raise result  # type: ignore[misc]

    def paths(self, block: Block) -> dict[str, str]:
        out = {}
        for text, where in _pairs(block.markup.get("path", "")):
            if where.startswith("./"):
                out[text] = str(self.cwd / where[2:])
            elif where.startswith("repo:"):
                out[text] = str(ROOT / where[5:])
            elif where.startswith("kernel:"):
                out[text] = str(kernel_testdata(*where[7:].split("/")))
            else:
                raise ValueError(f"README line {block.line}: unknown path {where!r}")
        return out

    def place_files(self, block: Block) -> None:
        for name, what in _pairs(block.markup.get("file", "")):
            kind, _, spec = what.partition(":")
            if kind == "fixture":
                fixture, _, opt = spec.partition(":")
                built = build_fixture(fixture, opt or "-O0")
            elif kind == "usdt":
                built = build_usdt(spec or "-O0")[0]
            elif kind == "go":
                built = build_go_fixture(spec)
            elif kind == "cxx":
                fixture, _, opt = spec.partition(":")
                built = build_cxx_fixture(fixture, opt or "-O0")
            elif kind == "arm64":
                fixture, _, opt = spec.partition(":")
                built = build_arm64_fixture(fixture, opt or "-O0")
            else:
                raise AssertionError(f"README line {block.line}: unknown file {what!r}")
            dest = self.cwd / name
            if not dest.exists() or dest.read_bytes() != built.read_bytes():
                shutil.copyfile(built, dest)
                dest.chmod(0o755)

    def run_block(self, block: Block) -> None:
        mode = block.mode
        if mode == "skip":
            pytest.skip(f"by design: {block.markup['skip']}")
        if mode == "output":
            return  # checked with the ```sh block before it
        assert mode, f"README line {block.line}: a ```{block.lang} block without a <!-- tour: ... --> comment"
        if mode == "live":
            self.need_tracefs()
        self.place_files(block)
        paths = self.paths(block)
        if block.lang == "python":
            return self.run_python(block)
        expected_after = None
        if block.lang == "sh":
            nxt = BLOCKS[BLOCKS.index(block) + 1] if block is not BLOCKS[-1] else None
            if nxt is not None and nxt.mode == "output":
                expected_after = nxt
        processes = []
        env = dict(self.env)
        try:
            for url, directory in _pairs(block.markup.get("debuginfod", "")):
                proc, paths[url] = self.start_debuginfod(self.cwd / directory)
                processes.append(proc)
                env["DEBUGINFOD_CACHE_PATH"] = paths["/root/.cache/debuginfod_client"] = \
                    str(self.cwd / "debuginfod_client")
            for pid, program in _pairs(block.markup.get("process", "")):
                proc = subprocess.Popen([program], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, cwd=self.cwd)
                processes.append(proc)
                paths[pid] = str(proc.pid)
            for cmd in block.commands:
                self.run_command(block, cmd, paths, expected_after, env)
        finally:
            for proc in processes:
                proc.kill()
                proc.wait()

    def start_debuginfod(self, directory: Path) -> tuple[subprocess.Popen, str]:
        """``debuginfod -F DIRECTORY`` on a free port, once it serves every ELF file there (as
        tests/test_debuginfod.py's server); its process and URL."""
        from tests.test_debuginfod import build_id, free_port

        exe = shutil.which("debuginfod")
        if exe is None:
            missing("debuginfod (apt debuginfod) is not installed")
        port = free_port()
        log = open(self.cwd / f"debuginfod-{port}.log", "w")
        proc = subprocess.Popen([exe, "-F", "-d", str(self.cwd / f"debuginfod-{port}.sqlite"), "-p", str(port),
                                 "-t", "0", "-g", "0", str(directory)], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        url = f"http://127.0.0.1:{port}"
        wanted = [build_id(p) for p in sorted(directory.iterdir()) if p.read_bytes()[:4] == b"\x7fELF"]
        deadline = time.monotonic() + 60
        while wanted and time.monotonic() < deadline and proc.poll() is None:
            try:
                urllib.request.urlopen(f"{url}/buildid/{wanted[0]}/debuginfo", timeout=5).read(1)
                wanted.pop(0)
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        if wanted:
            proc.kill()
            proc.wait()
            raise AssertionError(f"debuginfod did not serve {directory}:\n" +
                                 (self.cwd / f"debuginfod-{port}.log").read_text()[-2000:])
        return proc, url

    def run_command(self, block: Block, cmd: Command, paths: dict[str, str], output: Optional[Block],
                    env: dict[str, str]) -> None:
        text, expected, vary = cmd.text, cmd.expected, _pairs(block.markup.get("vary", ""))
        hist, synthetic = (TRACEFS / "events/sched/sched_switch/hist").exists(), (TRACEFS / "synthetic_events").exists()
        expected = [kernel_notice(line, hist, synthetic) for line in expected]
        if block.lang == "sh":
            text = re.sub(r"^tools/bootstrap\.sh[^&]*&&\s*", "", text)
            text = text.replace(".venv/bin/probectl", "probectl")
            assert text.startswith("probectl "), f"README line {block.line}: {cmd.text!r} is no probectl command"
            if output is not None:
                expected = output.commands[0].expected
                vary = _pairs(output.markup.get("vary", ""))
        for tool in block.markup.get("optional", "").split():
            if shutil.which(tool) is None and re.search(rf"\|\s*{re.escape(tool)}\b", text):
                text = re.split(rf"\s*\|\s*{re.escape(tool)}\b", text)[0]
                warnings.warn(f"README line {block.line}: {tool} is not installed; ran {text!r} without it")
                expected = [WILD]
        for readme_path, real in paths.items():
            text = text.replace(readme_path, real)
        text = text.replace(".venv/bin/python", shlex.quote(sys.executable))
        argv = None
        if block.markup.get("hostname"):
            argv = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec bash -c "$1"',
                    block.markup["hostname"], text]
        term = Terminal(text, self.cwd, env, argv)
        try:
            driver = block.markup.get("driver")
            if driver:
                DRIVERS[driver](term, self)
            status = term.finish()
        finally:
            if term.proc.poll() is None:
                os.killpg(term.proc.pid, signal.SIGKILL)
                term.proc.wait()
        # Another engineer's (or CI job's) probectl holding the add lock makes ours say so and wait: a
        # fact of the shared machine, not of the example.
        actual = [line for line in term.lines() if not _LOCK_WAIT.fullmatch(line)]
        while actual and not actual[-1]:
            actual.pop()
        if "other-events" in block.markup:
            shown = {_listed_group(line) for line in expected}
            actual = [line for line in actual if _listed_group(line) in shown]
        where = f"README line {block.line}: {text}"
        failed = any(line.startswith("Error:") for line in expected)
        assert (status != 0) == failed, f"{where}: exit status {status}\n" + "\n".join(actual)
        assert not any("Traceback (most recent call last)" in line for line in actual), f"{where}\n" + "\n".join(actual)
        if expected == [WILD] and block.markup.get("optional"):
            assert actual, f"{where}: no output"
            return
        try:
            try:
                match_output(expected, actual, vary, paths, "histogram-rows" in block.markup,
                             "kernel-frames" in block.markup)
            except Mismatch:
                if not TRACED_COMMAND.match(text):
                    raise
                match_streams(expected, actual, vary, paths)
        except Mismatch as exc:
            raise Mismatch(f"{where}\n{exc}") from None

    def run_python(self, block: Block) -> None:
        code = "\n".join(block.body)
        check = block.markup.get("then")
        if check:
            code += f"\nassert {check}, {check!r}\n"
        out = subprocess.run([sys.executable, "-c", code], cwd=self.cwd, env=self.env, capture_output=True,
                             text=True, timeout=COMMAND_TIMEOUT)
        assert out.returncode == 0, f"README line {block.line}: the Python example failed:\n{out.stderr}"


@pytest.fixture(scope="module")
def tour(tmp_path_factory):
    # Two tours at once (two checkouts on one machine) would add and delete each other's probes in the
    # README's groups: the second waits for the first.
    lock_dir = Path("/run/lock") if os.access("/run/lock", os.W_OK) else Path(tempfile.gettempdir())
    with open(lock_dir / "probectl-readme-tour.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        session = Tour(tmp_path_factory.mktemp("readme-tour"))
        yield session
        removed = session.clean_up()
    assert not removed, f"the tour left these events behind: {removed}"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.ident for b in BLOCKS])
def test_readme_example(tour, block):
    if block.mode == "output":
        pytest.skip(f"output of the block before (README line {block.line}), checked there")
    tour.run_through(block)


# ---- the inventory and the machinery itself ----------------------------------------------------------


def test_every_example_is_marked_and_known():
    """Every block says how it runs; every driver, mode and vary kind it names exists; the tour
    has the examples this test was written for (a section lost from the README fails here)."""
    unmarked = [b.line for b in BLOCKS if not b.mode]
    assert not unmarked, \
        f"README blocks without a <!-- tour: live|offline|output|skip=WHY --> comment: lines {unmarked}"
    for b in BLOCKS:
        assert b.markup.get("driver", next(iter(DRIVERS))) in DRIVERS, f"README line {b.line}: unknown driver"
        for kind, value in _pairs(b.markup.get("vary", "")):
            _vary_pattern(kind, value)
            assert any(value in line for c in b.commands for line in c.expected), \
                f"README line {b.line}: vary {kind}={value} appears in no output line"
        if b.mode == "output":
            i = BLOCKS.index(b)
            assert i and BLOCKS[i - 1].lang == "sh", f"README line {b.line}: output of no ```sh block"
    commands = [c for b in BLOCKS if b.mode in ("live", "offline") for c in b.commands]
    assert len(commands) >= 59  # the tour of 2026-11-25; more as sections are added
    assert {"add", "del", "list", "funcs", "lines", "vars", "record", "script", "trace", "tracepoints",
            "fields", "report", "query", "hist", "latency"} <= {w for c in commands for w in c.text.split()[1:2]}


def test_matcher_accepts_the_shape_and_rejects_the_rest():
    vary = [("pid", "10319"), ("cpu", "000"), ("time", "4631.646998"), ("addr", "55d4aad73c20")]
    readme = ["x", "  bash  10319 [000]  4631.646998: ev: (55d4aad73c20) a=1", "…", "again 10319"]
    good = ["x", "  bash 1234567 [001]  12.500000: ev: (7f00aa) a=1", "more", "lines", "again 1234567"]
    assert match_output(readme, good, vary, {})["10319"] == "1234567"
    assert match_output(["[000] a", "[000] b"], ["[001] a", "[000] b"], [("cpu", "000")], {}) == {}
    for bad in (
        ["x", "  bash 1234567 [001]  12.500000: ev: (7f00aa) a=2", "again 1234567"],      # a literal value
        ["x", "  bash 1234567 [1]  12.500000: ev: (7f00aa) a=1", "again 1234567"],        # cpu digits
        ["x", "  bash 1234567 [001]  12.5: ev: (7f00aa) a=1", "again 1234567"],           # time decimals
        ["x", "  bash 1234567 [001]  12.500000: ev: (7f00aa) a=1", "again 7654321"],      # one pid, two values
        ["x", "  bash 1234567 [001]  12.500000: ev: (7f00aa) a=1"],                       # a line missing
        ["x", "  bash 1234567 [001]  12.500000: ev: (7f00aa) a=1", "again 1234567", "+"],  # a line too many
    ):
        with pytest.raises(Mismatch):
            match_output(readme, bad, vary, {})
    # a JSON number of microseconds drops trailing zeros: 0 to 3 decimals, never more
    json = [("usec", "12257257389.037")]
    for ts in ("26900366234.2", "26900366234", "1.037"):
        assert match_output(['"ts":12257257389.037,'], [f'"ts":{ts},'], json, {}) == {}
    with pytest.raises(Mismatch):
        match_output(['"ts":12257257389.037,'], ['"ts":1.0375,'], json, {})
    paths = {"/path/app": "/tmp/x/app"}
    assert match_output(["a …;z", "p /path/app:1"], ["a b;c;z", "p /tmp/x/app:1"], [], paths) == {}
    with pytest.raises(Mismatch):
        match_output(["p /path/app:1"], ["p /tmp/y/app:1"], [], {"/path/app": "/tmp/x/app"})
    # a kernel frame is the kernel build's: another function, offset or outermost frame still matches
    ksym = [("addr", "ffffffff814c7050"), ("ksym", "__uprobe_trace_func+0xa0"), ("ksym", "__uprobe_trace_func"),
            ("ksym", "asm_exc_int3"), ("ksym", "asm_exc_int3_[k]")]
    frame = ["\tffffffff814c7050 __uprobe_trace_func+0xa0 ([kernel.kallsyms])"]
    assert match_output(frame, ["\tffffffff81234567 uprobe_trace_func+0xe0 ([kernel.kallsyms])"], ksym, {}) == {
        "ffffffff814c7050": "ffffffff81234567"}
    assert match_output(["1,asm_exc_int3;…;__uprobe_trace_func,malloc"], ["1,exc_int3;a;b;uprobe_trace,malloc"],
                        ksym, {}) == {}
    assert match_output(["ls;malloc;asm_exc_int3_[k];… 9"], ["ls;malloc;entry_int3_[k];x_[k] 9"], ksym, {}) == {}
    for bad in (["\tffffffff81234567 +0xe0 ([kernel.kallsyms])"], ["\tffffffff81234567 f+0xe0 ([vmlinux])"]):
        with pytest.raises(Mismatch):
            match_output(frame, bad, ksym, {})
    # the engine's notice is the running kernel's: in the kernel where it has hist triggers
    notice = "[ probectl: user space aggregation of a:b -> a:c (this kernel has no hist triggers) ]"
    assert kernel_notice(notice, hist=False, synthetic=False) == notice
    assert kernel_notice(notice, hist=True, synthetic=False) == notice  # a latency needs synthetic events too
    assert kernel_notice(notice, hist=True, synthetic=True) == "[ probectl: hist trigger in the kernel of a:b -> a:c ]"
    # a run of kernel frames stands for one or more frames of any functions
    stack = ["@[", "    trace_event_raw_event_x+…", "    bprm_execve+…", ", true]: 1"]
    assert match_output(stack, ["@[", "    f+0x10", ", true]: 1"], [], {}, kernel_frames=True) == {}
    # a traced command's own lines and trace's events, in either order between them, each in its own
    traced = ["Tracing g:e", "EXPECT a=1", WILD, "DONE", "  prog  12 [001] 5.000001: g:e: (1f) a=1",
              "  prog  12 [001] 5.000002: g:e: (1f) a=2"]
    early = [traced[0], traced[1], traced[4], "EXPECT a=2", traced[3], traced[5]]
    assert match_streams(traced, early, [("pid", "12")], {}) == {"12": "12"}
    with pytest.raises(Mismatch):  # (the events' own order is kept)
        match_streams(traced, [traced[0], traced[1], traced[5], traced[3], traced[4]], [("pid", "12")], {})
    assert match_output(stack, ["@[", "    f+0x10", "    g.isra.0+0x8", "    h+0x1", ", true]: 1"], [], {},
                        kernel_frames=True) == {}
    for bad in (["@[", ", true]: 1"], ["@[", "    f", ", true]: 1"]):
        with pytest.raises(Mismatch):
            match_output(stack, bad, [], {}, kernel_frames=True)
    # a value is a whole token: 000 is not the cpu inside 1000
    with pytest.raises(Mismatch):
        match_output(["size=1000"], ["size=1007"], [("cpu", "000")], {})
    # histogram rows: a run of them stands for one or more, of any buckets; anything else still matches
    hist = ["@x:", "(1, 2]  3 |@@@ |", "(2, 4]  1 |@   |", "", "4 pairs"]
    assert match_output(hist, ["@x:", "(8, 16]  4 |@@@@|", "", "4 pairs"], [], {}, histogram_rows=True) == {}
    for bad in (["@x:", "", "4 pairs"], ["@x:", "(8, 16]  4 |@@@@|", "(8, 16]  four", "", "4 pairs"],
                ["@x:", "(8, 16]  4 |@@@@|", "", "5 pairs"]):
        with pytest.raises(Mismatch):
            match_output(hist, bad, [], {}, histogram_rows=True)
    with pytest.raises(Mismatch):  # without the clause, rows are literal
        match_output(hist, ["@x:", "(8, 16]  4 |@@@@|", "", "4 pairs"], [], {})


def test_terminal_rendering():
    assert render(b"a\r\nprogress 1\r\x1b[Kdone\r\n\x1b[?2004hok\x1b[?2004l\r\n") == ["a", "done", "ok"]
    assert _pairs("count=15,686,7,2624 size=1,493") == [("count", "15,686"), ("count", "7"), ("count", "2624"),
                                                         ("size", "1"), ("size", "493")]
    assert parse_markup("live; vary pid=1 cpu=0,1; driver=x; other-events") == {
        "live": "", "vary": "pid=1 cpu=0,1", "driver": "x", "other-events": ""}
