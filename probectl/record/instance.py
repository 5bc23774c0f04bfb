"""A private tracefs instance of this process (``instances/probectl-<pid>[-N]``): its settings, the
events it enables and its per-CPU statistics; and the CPU lists and masks it is scoped with."""
from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Optional, Sequence

from ..errors import ProbectlError
from ..tracefs import Tracefs, os_error
from .cleanup import INSTANCE_PREFIX, remove_instance
from .filter_file import apply_filter
from .selection import SelectedEvent


# ---- tracefs files and CPU lists ---------------------------------------------------------------


def _write(path: Path, text: str, what: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    except OSError as err:
        raise os_error(err, what, path) from None
    try:
        os.write(fd, text.encode())
    except OSError as err:
        raise os_error(err, what, path) from None
    finally:
        os.close(fd)


def parse_cpus(text: str, ncpus: Optional[int] = None) -> list[int]:
    """``0-3,6`` → [0, 1, 2, 3, 6]; checked against ``ncpus`` when given."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ProbectlError(f"bad CPU list {text!r}", "write CPUs as a list of numbers and ranges: 0-3,6")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ProbectlError(f"bad CPU range {part!r} in {text!r}", "write ranges low-high: 0-3")
        cpus.update(range(lo, hi + 1))
    if not cpus:
        raise ProbectlError(f"bad CPU list {text!r}", "name at least one CPU: -C 0 or -C 0-3")
    if ncpus is not None:
        bad = sorted(c for c in cpus if c >= ncpus)
        if bad:
            raise ProbectlError(f"CPU {bad[0]} does not exist (this machine has CPUs 0-{ncpus - 1})",
                                f"choose CPUs below {ncpus}")
    return sorted(cpus)


def cpu_mask(cpus: Sequence[int]) -> str:
    """The ``tracing_cpumask`` text for ``cpus``: hex words of 32 bits, comma-separated."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    words = []
    while True:
        words.append(f"{mask & 0xFFFFFFFF:08x}")
        mask >>= 32
        if not mask:
            break
    return ",".join(reversed(words))


# ---- instances ----------------------------------------------------------------------------------


class Instance:
    """A private tracefs instance of this process: ``instances/probectl-<pid>[-N]``."""

    _counter = 0
    _counter_lock = threading.Lock()

    def __init__(self, tfs: Tracefs):
        self.tfs = tfs
        with Instance._counter_lock:
            Instance._counter += 1
            n = Instance._counter
        name = f"{INSTANCE_PREFIX}{os.getpid()}" + ("" if n == 1 else f"-{n}")
        self.path = tfs.root / "instances" / name
        self.created = False
        self.enabled: list[SelectedEvent] = []

    def create(self) -> None:
        try:
            os.mkdir(self.path)
        except FileExistsError:
            # our own pid's leftover (a previous run in this process that could not remove it)
            remove_instance(self.path)
            try:
                os.mkdir(self.path)
            except OSError as err:
                raise os_error(err, "create a tracefs instance", self.path) from None
        except OSError as err:
            raise os_error(err, "create a tracefs instance", self.path) from None
        self.created = True

    def write(self, name: str, text: str) -> None:
        _write(self.path / name, text, f"set {name} of the recording instance")

    def untrace(self, pid: int, *, follow_forks: bool = False) -> None:
        """Leave out the events of thread ``pid`` (``set_event_notrace_pid``, Linux 5.8+; older kernels
        trace it): a live reader's own read() calls would otherwise be counted among the system's.
        With ``follow_forks`` (``options/event-fork``) the threads it starts from now on are left
        out too, as the kernel adds a child of a listed task to the list."""
        if (self.path / "set_event_notrace_pid").exists():
            if follow_forks:
                self.write("options/event-fork", "1")
            self.write("set_event_notrace_pid", str(pid))

    def read(self, name: str) -> str:
        """A file of the instance ('' when it cannot be read)."""
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    @property
    def events_dir(self) -> Path:
        return self.path / "events"

    def configure(self, *, buffer_kb: Optional[int] = None, cpus: Optional[Sequence[int]] = None,
                  stacks: bool = False, trace_clock: Optional[str] = None,
                  pids: Sequence[int] = (), follow_forks: bool = True,
                  buffer_percent: Optional[int] = None) -> None:
        """``stacks``: the kernel stack after each event (user stacks are perf's: ftrace's holds 8
        frames, see record/callchains.py); ``trace_clock`` the instance's clock (the kernel's default: local)."""
        self.write("tracing_on", "0")
        if trace_clock:
            self.write("trace_clock", trace_clock)
        if buffer_kb:
            self.write("buffer_size_kb", str(buffer_kb))
        if buffer_percent is not None:
            self.write("buffer_percent", str(buffer_percent))
        if cpus is not None:
            self.write("tracing_cpumask", cpu_mask(cpus))
        if stacks:
            self.write("options/stacktrace", "1")
        if pids:
            if follow_forks:
                self.write("options/event-fork", "1")
            self.write("set_event_pid", " ".join(str(p) for p in pids))

    def traced_pids(self) -> list[int]:
        return [int(p) for p in self.read("set_event_pid").split() if p.isdigit()]

    def enable(self, events: Sequence[SelectedEvent]) -> None:
        """Write the filters, then enable; on any failure the caller's teardown disables all."""
        for ev in events:
            if ev.filter is not None:
                apply_filter(self.events_dir, ev.group, ev.event, ev.filter)
        for ev in events:
            _write(self.events_dir / ev.group / ev.event / "enable", "1", f"enable {ev.name}")
            self.enabled.append(ev)

    def tracing(self, on: bool) -> None:
        self.write("tracing_on", "1" if on else "0")

    def stats(self, cpus: Sequence[int]) -> dict[int, dict[str, int]]:
        out = {}
        for cpu in cpus:
            out[cpu] = parse_cpustat(self.read(f"per_cpu/cpu{cpu}/stats"))
        return out

    def remove(self) -> None:
        if self.created:
            remove_instance(self.path)
            self.created = False


def parse_cpustat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            try:
                out[key.strip()] = int(value.split()[0]) if "." not in value else 0
            except (ValueError, IndexError):
                continue
    return out


def lost_of(stats: dict[str, int]) -> int:
    return stats.get("overrun", 0) + stats.get("dropped events", 0)
