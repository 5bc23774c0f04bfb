"""``probectl stat``: exact counts of events from the kernel's own counters, as ``perf stat -e`` takes them.

Each event (a tracepoint, or the event of a probe added for the run) gets a perf counting event
(``perf_event_open`` with ``PERF_TYPE_TRACEPOINT`` and the event's id): no sample period, no ring
buffer, so no event is copied to user space; the kernel adds one to the counter each time the event
fires (and its filter, set with ``PERF_EVENT_IOC_SET_FILTER``, passes). Counters are opened as
``perf stat`` opens them: one per CPU for a system-wide count (``-a``, ``-C``), one per task with
``inherit`` for a command (enabled at its ``exec``) or ``-p`` processes (their threads). Reading one
gives the count and the times it was enabled and running (a counter the PMU multiplexed is scaled by
their ratio; a tracepoint's counter is a software one and normally always runs).

The counters live in a :class:`CountingPart` of a :class:`~probectl.record.session.TracedRun`, which
owns the probes added for the run, the command, the wait and the teardown on every way out.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import math
import os
import resource
import struct
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..arch.x86_64 import (PERF_EVENT_IOC_DISABLE, PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_SET_FILTER,
                           PERF_EVENT_OPEN_SYSCALL)
from ..dataclass import dataclass, field
from ..errors import AnalysisError
from ..notice import notice_stderr
from ..record.selection import EventRequest, SelectedEvent, expand_event_requests
from ..record.session import RunPart, RunScope, TracedRun
from ..record.teardown import CleanupSteps
from ..tracefs import Tracefs

# include/uapi/linux/perf_event.h
PERF_TYPE_TRACEPOINT = 2
PERF_ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER7: every field a counting event sets is in it
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
ATTR_DISABLED = 1 << 0  # the bits of the attr's flag word
ATTR_INHERIT = 1 << 1
ATTR_ENABLE_ON_EXEC = 1 << 12
ATTR_EXCLUDE_GUEST = 1 << 20
PERF_FLAG_FD_CLOEXEC = 1 << 3
PERF_FLAG_PID_CGROUP = 1 << 2  # pid is a cgroup directory's descriptor (per CPU)

# Descriptors the process keeps for itself besides the counters (Python, its imports, tracefs files).
SPARE_FDS = 64
MIN_INTERVAL_MS = 10  # perf stat's own floor for -I
# Events a second from which tracing an event costs the traced program noticeably: the cost is per
# event (a uprobe's trap on every hit, counted or recorded; a recorded event's copy into the ring
# buffer), and at this rate the per-hit cost bench/bench_stat.py measures for a uprobe comes to about
# 1% of a CPU (rounded down: the trap costs more on older kernels and slower machines).
COSTLY_RATE = 10_000


def perf_attr(event_id: int, *, inherit: bool, enable_on_exec: bool) -> bytes:
    """A ``perf_event_attr`` for counting tracepoint ``event_id``: counting mode (no sample period,
    no sample type), read with the enabled and running times, opened disabled."""
    flags = ATTR_DISABLED | ATTR_EXCLUDE_GUEST
    if inherit:
        flags |= ATTR_INHERIT
    if enable_on_exec:
        flags |= ATTR_ENABLE_ON_EXEC
    head = struct.pack("<IIQQQQQ", PERF_TYPE_TRACEPOINT, PERF_ATTR_SIZE, event_id, 0, 0,
                       PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING, flags)
    return head + bytes(PERF_ATTR_SIZE - len(head))


class _Libc:
    """perf_event_open and the filter ioctl through libc (the filter's argument is a C string)."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.syscall = libc.syscall
        self.syscall.restype = ctypes.c_long
        self.syscall.argtypes = (ctypes.c_long, ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                 ctypes.c_ulong)
        self.ioctl = libc.ioctl
        self.ioctl.restype = ctypes.c_int
        self.ioctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p)

    def open(self, attr: bytes, pid: int, cpu: int, cgroup: bool = False) -> int:
        """``cgroup``: ``pid`` is an open cgroup directory, whose tasks alone are counted on ``cpu``."""
        flags = PERF_FLAG_FD_CLOEXEC | (PERF_FLAG_PID_CGROUP if cgroup else 0)
        fd = self.syscall(PERF_EVENT_OPEN_SYSCALL, attr, pid, cpu, -1, flags)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
        return int(fd)

    def set_filter(self, fd: int, text: str) -> None:
        if self.ioctl(fd, PERF_EVENT_IOC_SET_FILTER, text.encode()) < 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def control(self, fd: int, request: int) -> None:
        import fcntl

        fcntl.ioctl(fd, request, 0)


@dataclass
class Count:
    """What one counter (or the sum of an event's counters) read: the count, scaled when the counter
    ran only part of the time it was enabled; ``counted`` is False when it never ran."""

    value: int = 0
    enabled_ns: int = 0
    running_ns: int = 0

    @property
    def counted(self) -> bool:
        return self.running_ns > 0 or self.value > 0

    @property
    def running_pct(self) -> float:
        return 100.0 * self.running_ns / self.enabled_ns if self.enabled_ns else 100.0

    def scaled(self) -> int:
        if self.running_ns and self.running_ns < self.enabled_ns:
            return round(self.value * self.enabled_ns / self.running_ns)
        return self.value

    def __sub__(self, other: "Count") -> "Count":
        return Count(self.value - other.value, self.enabled_ns - other.enabled_ns,
                     self.running_ns - other.running_ns)

    def __add__(self, other: "Count") -> "Count":
        return Count(self.value + other.value, self.enabled_ns + other.enabled_ns,
                     self.running_ns + other.running_ns)


@dataclass
class CountRow:
    """One line of an answer: an event's count (on one CPU with ``cpu``), scaled."""

    event: str
    count: int
    counted: bool = True
    cpu: Optional[int] = None
    running_ns: int = 0
    running_pct: float = 100.0
    spread_pct: Optional[float] = None  # of -r N: the standard deviation of the mean, in % of it


@dataclass
class IntervalRows:
    """The counts of one interval (``-I``): ``at`` seconds since the start."""

    at: float
    rows: list[CountRow]


@dataclass
class StatResult:
    """The answer of ``probectl stat``: per event (per CPU with ``per_cpu``), the elapsed time (of
    each run with ``-r``), the command's user and system time, what stopped the run."""

    target: str
    rows: list[CountRow]
    elapsed: list[float]
    user_s: Optional[float] = None
    sys_s: Optional[float] = None
    runs: int = 1
    stopped_by: str = ""
    intervals: list[IntervalRows] = field(default_factory=list)
    command_exit: Optional[int] = None  # of the last run (TracedRun.command_exit)

    @property
    def seconds(self) -> float:
        return sum(self.elapsed) / len(self.elapsed) if self.elapsed else 0.0


@dataclass(frozen=True)
class StatOptions:
    """What ``probectl stat`` counts and how it answers."""

    requests: Sequence[EventRequest] = ()
    definitions: Sequence[str] = ()
    definitions_filter: Optional[str] = None
    cpus: Optional[Sequence[int]] = None
    per_cpu: bool = False
    interval_ms: Optional[int] = None
    repeat: int = 1
    cgroup: Optional[Path] = None  # only the tasks of this cgroup (its directory: record/cgroups.py), per CPU


def fd_budget(needed: int) -> None:
    """Make room for ``needed`` counters: the soft limit of open files raised as far as the hard limit
    allows (as perf does); when even that is too few, an error that says what to raise."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + SPARE_FDS
    if want <= soft:
        return
    if hard != resource.RLIM_INFINITY and want > hard:
        raise AnalysisError(f"counting needs {needed:,} file descriptors (one per event and CPU or task), and the "
                            f"limit of open files is {hard:,}",
                            f"raise it (ulimit -n {want}, or LimitNOFILE= for a service; the kernel's ceiling is "
                            "/proc/sys/fs/nr_open), or count fewer events or CPUs (-C)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


class CountingPart(RunPart):
    """The counters of a run: opened when the run arms (before the command runs), enabled when tracing
    starts (a command's at its exec), read at every interval and when the run stops, closed on every way
    out."""

    def __init__(self, events: Sequence[SelectedEvent], *, per_cpu_scope: bool, interval_ms: Optional[int] = None,
                 on_interval: Optional[Callable[[IntervalRows], None]] = None, per_cpu: bool = False,
                 cgroup: Optional[Path] = None):
        self.events = list(events)
        self.cgroup = cgroup  # (counted per CPU, the cgroup's tasks only: perf stat -G)
        self.per_cpu_scope = per_cpu_scope
        self.interval_ms = interval_ms
        self.on_interval = on_interval
        self.per_cpu = per_cpu
        if interval_ms is not None:
            self.interval = min(RunPart.interval, interval_ms / 1000 / 4)
        else:
            self.interval = 0.01  # how soon the end of a command is seen (the elapsed time)
        self.fds: list[tuple[int, Optional[int], int]] = []  # (event index, cpu or None, fd)
        self.last: dict[tuple[int, Optional[int]], Count] = {}
        self.final: Optional[dict[tuple[int, Optional[int]], Count]] = None
        self.started_at = 0.0
        self.ended_at = 0.0
        self.intervals: list[IntervalRows] = []
        self._next = 0.0
        self._libc = _Libc()

    def arm(self, run: TracedRun) -> None:
        libc = self._libc
        if self.per_cpu_scope:
            places: list[tuple[int, int]] = [(-1, cpu) for cpu in run.cpus]
        else:
            places = [(tid, -1) for tid in run.pids]
        fd_budget(len(places) * len(self.events) + 1)
        workload = run.workload
        on_exec = workload is not None and not self.per_cpu_scope
        group = self._open_cgroup()
        try:
            self._open_counters(libc, places, workload, on_exec, group)
        finally:
            if group is not None:
                os.close(group)  # (each counter holds the cgroup)

    def _open_cgroup(self) -> Optional[int]:
        if self.cgroup is None:
            return None
        try:
            return os.open(self.cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as err:
            raise AnalysisError(f"cannot open the cgroup {self.cgroup}: {err.strerror}") from None

    def _open_counters(self, libc: "_Libc", places: list[tuple[int, int]], workload: Any, on_exec: bool,
                       group: Optional[int]) -> None:
        for k, event in enumerate(self.events):
            for pid, cpu in places:
                attr = perf_attr(event.format.id, inherit=not self.per_cpu_scope,
                                 enable_on_exec=on_exec and workload is not None and pid == workload.pid)
                try:
                    fd = libc.open(attr, group, cpu, cgroup=True) if group is not None else libc.open(attr, pid, cpu)
                except OSError as err:
                    raise self._open_error(err, event, pid, cpu, len(places)) from None
                self.fds.append((k, cpu if cpu >= 0 else None, fd))
                if event.filter is not None:
                    try:
                        libc.set_filter(fd, event.filter.text)
                    except OSError as err:
                        raise AnalysisError(f"the kernel refused the filter {event.filter.text!r} of {event.name} "
                                            f"on its counter: {err.strerror}",
                                            "check it with probectl record --filter, which shows the kernel's "
                                            "reason") from None

    def _open_error(self, err: OSError, event: SelectedEvent, pid: int, cpu: int, places: int) -> AnalysisError:
        where = f"CPU {cpu}" if cpu >= 0 else f"task {pid}"
        if err.errno in (errno.EMFILE, errno.ENFILE):
            return AnalysisError(f"out of file descriptors opening the counter of {event.name} on {where} "
                                 f"({len(self.fds):,} open, {places * len(self.events):,} needed)",
                                 "raise the limit of open files (ulimit -n; /proc/sys/fs/file-max system-wide), "
                                 "or count fewer events or CPUs (-C)")
        if err.errno == errno.ESRCH:
            return AnalysisError(f"no process {pid} to count {event.name} in: it has exited")
        if err.errno == errno.EACCES or err.errno == errno.EPERM:
            return AnalysisError(f"not allowed to count {event.name} on {where}: {err.strerror}",
                                 "run as root, or lower /proc/sys/kernel/perf_event_paranoid")
        return AnalysisError(f"the kernel refused a counter for {event.name} (id {event.format.id}) on {where}: "
                             f"{err.strerror}", "this kernel may have no perf events for tracepoints "
                             "(CONFIG_PERF_EVENTS)")

    def started(self, run: TracedRun) -> None:
        for _k, _cpu, fd in self.fds:
            if run.workload is None or self.per_cpu_scope:
                self._libc.control(fd, PERF_EVENT_IOC_ENABLE)
        self.started_at = time.monotonic()
        if self.interval_ms is not None:
            self._next = self.started_at + self.interval_ms / 1000

    def tick(self, run: TracedRun, now: float) -> None:
        if self.final is not None:
            return
        self.ended_at = now
        # The counts are taken as soon as the run is over (the command gone, the duration passed),
        # not after the teardown: a system-wide count then holds only the run's time.
        over = run.workload is not None and run.workload.status is not None
        if run.scope.duration is not None and now - self.started_at >= run.scope.duration:
            over = True
        if over:
            self._finish(now)
        elif self.interval_ms is not None and now >= self._next:
            self._interval(now)
            while self._next <= now:
                self._next += self.interval_ms / 1000

    def _finish(self, now: float) -> None:
        for _k, _cpu, fd in self.fds:
            self._libc.control(fd, PERF_EVENT_IOC_DISABLE)
        self.ended_at = now
        self.final = self._read()
        if self.interval_ms is not None and (not self.intervals or now - self._last_at() > 1e-3):
            self._interval(now, self.final)  # the last interval, partial

    def stop(self, run: TracedRun, step: CleanupSteps, complete: bool) -> None:
        try:
            if complete and self.fds and self.final is None:
                step(lambda: self._finish(time.monotonic()))
        finally:
            while self.fds:
                _k, _cpu, fd = self.fds.pop()
                step(functools.partial(os.close, fd))

    def _last_at(self) -> float:
        return self.intervals[-1].at + self.started_at if self.intervals else self.started_at

    def _read(self) -> dict[tuple[int, Optional[int]], Count]:
        """The counters' sums, per event and (per CPU, or None for tasks) place."""
        out: dict[tuple[int, Optional[int]], Count] = {}
        for k, cpu, fd in self.fds:
            value, enabled, running = struct.unpack("<QQQ", os.read(fd, 24))
            key = (k, cpu)
            out[key] = out.get(key, Count()) + Count(value, enabled, running)
        return out

    def _interval(self, now: float, counts: Optional[dict[tuple[int, Optional[int]], Count]] = None) -> None:
        counts = self._read() if counts is None else counts
        delta = {key: c - self.last.get(key, Count()) for key, c in counts.items()}
        self.last = counts
        rows = self.rows(delta)
        block = IntervalRows(now - self.started_at, rows)
        self.intervals.append(block)
        if self.on_interval is not None:
            self.on_interval(block)

    def rows(self, counts: dict[tuple[int, Optional[int]], Count]) -> list[CountRow]:
        """Rows per event (per event and CPU with ``per_cpu``), in the order the events were asked."""
        rows: list[CountRow] = []
        for k, event in enumerate(self.events):
            mine = sorted(((cpu, c) for (i, cpu), c in counts.items() if i == k), key=lambda t: (t[0] or 0))
            groups = [[(cpu, c)] for cpu, c in mine] if self.per_cpu and self.per_cpu_scope else [mine]
            for group in groups:
                total = Count()
                for _cpu, c in group:
                    total = total + c
                cpu = group[0][0] if len(group) == 1 and self.per_cpu else None
                rows.append(CountRow(event.name, total.scaled(), total.counted, cpu, total.running_ns,
                                     total.running_pct))
        return rows


def stat_events(tfs: Tracefs, run: TracedRun, options: StatOptions, target: Callable[[], object]) -> list[SelectedEvent]:
    """The events to count: those of the ``-e`` requests (globs), and those of the definitions, added
    to the run for it."""
    requests = list(options.requests)
    if options.definitions:
        made = run.add_probes(list(options.definitions), target())  # type: ignore[arg-type]
        if not made:
            raise AnalysisError("no probe was added for the definitions", "see the warnings above")
        requests += [EventRequest(f"{g}:{e}", options.definitions_filter) for g, e in made]
    return expand_event_requests(tfs, requests)


def stat(tfs: Tracefs, options: StatOptions, scope: RunScope = RunScope(), *,
         target: Callable[[], object] = lambda: None, notice: Callable[[str], None] = notice_stderr,
         on_interval: Optional[Callable[[IntervalRows], None]] = None) -> StatResult:
    """``probectl stat``: count the events ``options`` names in ``scope`` (``options.repeat`` times),
    with the probes of its definitions added for the run and removed after it."""
    if options.interval_ms is not None and options.interval_ms < MIN_INTERVAL_MS:
        raise AnalysisError(f"an interval of {options.interval_ms} ms is too short",
                            f"print intervals are at least {MIN_INTERVAL_MS} ms (-I {MIN_INTERVAL_MS})")
    if options.repeat > 1 and not scope.command:
        raise AnalysisError("-r repeats a command", "give one after --: probectl stat -r 5 -e ... -- COMMAND")
    per_cpu_scope = scope.system_wide or options.cpus is not None or (not scope.command and not scope.pids) \
        or options.cgroup is not None
    if options.per_cpu and not per_cpu_scope:
        raise AnalysisError("-A counts per CPU, which needs a system-wide count", "add -a (or -C CPUS)")
    with TracedRun(tfs, scope, notice=notice) as run:
        events = stat_events(tfs, run, options, target)
        results: list[dict[tuple[int, Optional[int]], Count]] = []
        elapsed: list[float] = []
        user = system = 0.0
        last: Optional[CountingPart] = None
        for _ in range(options.repeat):
            part = CountingPart(events, per_cpu_scope=per_cpu_scope, interval_ms=options.interval_ms,
                                on_interval=on_interval, per_cpu=options.per_cpu, cgroup=options.cgroup)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            run.trace([part], buffer_kb=4, cpus=options.cpus)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            user += after.ru_utime - before.ru_utime
            system += after.ru_stime - before.ru_stime
            results.append(part.final or {})
            elapsed.append(part.ended_at - part.started_at)
            last = part
            if run.stopped_by in ("SIGINT", "SIGTERM"):
                break
    assert last is not None
    rows = _mean_rows(last, results)
    target_text = (f"'{' '.join(scope.command)}'" if scope.command and not per_cpu_scope else
                   "'system wide'" if options.cpus is None or not per_cpu_scope else
                   f"'CPU(s) {_cpu_list(options.cpus)}'")
    if scope.pids and not scope.command:
        target_text = f"process id '{','.join(map(str, scope.pids))}'"
    if options.cgroup is not None:
        target_text = f"cgroup '{options.cgroup}'"
    return StatResult(target_text, rows, elapsed, user / len(results) if scope.command else None,
                      system / len(results) if scope.command else None, len(results), run.stopped_by,
                      last.intervals, run.command_exit)


def _mean_rows(part: CountingPart, results: list[dict[tuple[int, Optional[int]], Count]]) -> list[CountRow]:
    """The rows of one run, or the means of several with their spread (perf's: the standard deviation
    of the mean in percent of it)."""
    per_run = [part.rows(r) for r in results]
    if len(per_run) == 1:
        return per_run[0]
    out = []
    for k, row in enumerate(per_run[0]):
        values = [rows[k].count for rows in per_run]
        mean = sum(values) / len(values)
        variance = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
        spread = 100 * math.sqrt(variance / len(values)) / mean if mean else 0.0
        out.append(CountRow(row.event, round(mean), all(rows[k].counted for rows in per_run), row.cpu,
                            row.running_ns, row.running_pct, spread))
    return out


def costly_rates(counts: dict[str, int], seconds: float) -> list[str]:
    """Notes on the events of ``counts`` (event name -> events in ``seconds``) whose rate will cost the
    traced program noticeably (:data:`COSTLY_RATE`), highest first. A run shorter than a second at that
    rate is not named: its few events cost little in all, whatever their rate."""
    if seconds <= 0:
        return []
    rates = sorted(((n / seconds, name) for name, n in counts.items()
                    if n >= COSTLY_RATE and n / seconds >= COSTLY_RATE), reverse=True)
    return [f"Note: {name} fired {rate:,.0f} times a second: its tracing cost grows with that rate (a uprobe traps "
            "on every hit, a recording copies every event); narrow it (--filter, -p) or count it in the kernel "
            "(stat, hist) before recording it" for rate, name in rates]


def stat_rates(result: StatResult) -> dict[str, int]:
    """Each event's count in ``result`` (its CPUs' rows added up)."""
    out: dict[str, int] = {}
    for row in result.rows:
        out[row.event] = out.get(row.event, 0) + row.count
    return out


def _cpu_list(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus))


# ---- perf stat's output shapes ------------------------------------------------------------------------


def _name_width(rows: Sequence[CountRow]) -> int:
    return max((len(r.event) for r in rows), default=0)


def _count_text(row: CountRow) -> str:
    return f"{row.count:,}" if row.counted else "<not counted>"


def stat_text(result: StatResult) -> str:
    """The block ``perf stat`` prints at the end: counts and event names, the elapsed time."""
    runs = f" ({result.runs} runs)" if result.runs > 1 else ""
    lines = ["", f" Performance counter stats for {result.target}{runs}:", ""]
    width = _name_width(result.rows)
    for row in result.rows:
        cpu = f"CPU{row.cpu:<4}" if row.cpu is not None else ""
        spread = f"  ( +- {row.spread_pct:.2f}% )" if row.spread_pct else ""
        scaled = f"  ({row.running_pct:.2f}%)" if row.counted and row.running_pct < 99.995 else ""
        lines.append(f"{cpu}{_count_text(row):>18}      {row.event:<{width}}{spread}{scaled}".rstrip())
    lines.append("")
    if result.runs > 1:
        mean = result.seconds
        sd = math.sqrt(sum((e - mean) ** 2 for e in result.elapsed) / (len(result.elapsed) - 1) / len(result.elapsed))
        pct = f"  ( +- {100 * sd / mean:.2f}% )" if mean else ""
        lines.append(f"{mean:>18.5f} +- {sd:.5f} seconds time elapsed{pct}")
    else:
        lines.append(f"{result.seconds:>18.9f} seconds time elapsed")
    if result.user_s is not None and result.sys_s is not None and result.runs == 1:
        lines += ["", f"{result.user_s:>18.9f} seconds user", f"{result.sys_s:>18.9f} seconds sys"]
    return "\n".join(lines) + "\n\n"


def interval_header(per_cpu: bool) -> str:
    return "#           time CPU                    counts unit events\n" if per_cpu else \
        "#           time             counts unit events\n"


def interval_text(block: IntervalRows) -> str:
    """``-I``: one line per event (and CPU) of an interval, stamped with the seconds since the start."""
    width = _name_width(block.rows)
    out = []
    for row in block.rows:
        cpu = f" CPU{row.cpu:<4}" if row.cpu is not None else ""
        count_width = 18 if row.cpu is None else 17
        out.append(f"{block.at:>16.9f}{cpu}{_count_text(row):>{count_width}}      {row.event:<{width}}".rstrip())
    return "\n".join(out) + "\n"


def csv_lines(rows: Sequence[CountRow], sep: str, at: Optional[float] = None) -> str:
    """perf stat -x's fields: [time,][CPUn,]count,unit,event,run time,percent running,,"""
    out = []
    for row in rows:
        fields = []
        if at is not None:
            fields.append(f"{at:.9f}")
        if row.cpu is not None:
            fields.append(f"CPU{row.cpu}")
        fields += [str(row.count) if row.counted else "<not counted>", "", row.event]
        if row.spread_pct is not None:
            fields.append(f"{row.spread_pct:.2f}%")
        fields += [str(row.running_ns), f"{row.running_pct:.2f}", "", ""]
        out.append(sep.join(fields))
    return "".join(line + "\n" for line in out)


def json_lines(rows: Sequence[CountRow], at: Optional[float] = None) -> str:
    """perf stat -j's objects, one a line."""
    import json

    out = []
    for row in rows:
        obj: dict[str, object] = {}
        if at is not None:
            obj["interval"] = round(at, 9)
        if row.cpu is not None:
            obj["cpu"] = str(row.cpu)
        obj.update({"counter-value": f"{row.count:.6f}" if row.counted else "<not counted>", "unit": "",
                    "event": row.event, "event-runtime": row.running_ns, "pcnt-running": round(row.running_pct, 2)})
        if row.spread_pct is not None:
            obj["variance"] = round(row.spread_pct, 2)
        out.append(json.dumps(obj))
    return "".join(line + "\n" for line in out)
