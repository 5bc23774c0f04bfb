"""A recording session: a private tracefs instance, events enabled with their filters, an optional
workload, the native per-CPU recorder, and a trace.dat file at the end — and nothing left behind.

The steps of :meth:`Recording.run`:

1. remove what crashed runs left (:func:`cleanup_stale`), expand the event globs and check every
   filter against its event's fields (errors here touch nothing);
2. fork the workload (``-- COMMAND``) stopped at a gate (a pipe it reads before ``exec``), so its
   pid is known before it runs;
3. create ``instances/probectl-<pid>``, set its buffer size, CPU mask, stack options and
   ``set_event_pid`` (with ``options/event-fork``), write the filters, start the recorder, enable
   the events, then open the gate;
4. wait for the workload, ``--duration``, Ctrl-C or SIGTERM, showing a live count on a terminal;
5. turn tracing off, disable the events, drain the recorder, read the per-CPU statistics (lost
   events), and remove the instance — in ``finally`` blocks, with Ctrl-C and SIGTERM held off, so
   that no failure leaves an event enabled;
6. write trace.dat with the metadata, the command names and thread groups of the recorded pids and
   the memory maps of the traced processes (:data:`OPTION_PROC_MAPS`, for user-space symbols).

A run killed with SIGKILL leaves its instance (and, for ``probectl trace``, its probes); the next
``record``/``trace`` run or ``probectl cleanup`` finds instances whose pid is dead by their name, and
probes through the state file the run left in :data:`STATE_DIRS`.

The parts have their own modules: :mod:`~probectl.record.selection` (the events), :mod:`~probectl.record.workload`
(the command), :mod:`~probectl.record.processes` (names and maps), :mod:`~probectl.record.teardown` (signals and
clean-up steps) and :mod:`~probectl.record.cleanup` (what dead runs left); :mod:`~probectl.record.livestream`
streams the events of an instance instead of recording them, for :mod:`~probectl.record.trace` (what
``probectl trace`` streams).
"""
from __future__ import annotations

import contextlib
import mmap
import os
import re
import shutil
import tempfile
import threading
import time
from itertools import compress, repeat
from operator import eq
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from ..dataclass import dataclass, field
from ..errors import ProbectlError
from ..formats import EventFormat
from ..notice import notice_stderr
from ..outputfile import OutputFile
from ..ringbuf import EventReader, PageLayout, Recorder
from ..tracedat import (DEFAULT_FILE, collect_metadata, instance_cpus, parse_cmdlines, parse_tgids, read_cpustats,
                        write_tracedat)
from ..tracedat.procmaps import OPTION_PROC_MAPS, decode_proc_maps, encode_proc_maps
from ..tracefs import Tracefs, os_error
from .cleanup import INSTANCE_PREFIX, STATE_DIRS, cleanup_stale, probe_state, remove_instance
from .filter_file import apply_filter
from .processes import MAX_MAPS_PIDS, ProcessWatch, pid_alive, proc_comm, read_maps, synthesize_maps, traced_tids
from .selection import EventRequest, SelectedEvent, select_events
from .teardown import CleanupSteps, Terminated, signals_held, stop_signals
from .workload import Workload

__all__ = [
    "DEFAULT_OUTPUT",
    "EventRequest",
    "Instance",
    "RecordOptions",
    "RecordResult",
    "Recording",
    "SelectedEvent",
    "cpu_mask",
    "lost_of",
    "parse_cpus",
    "parse_cpustat",
    "select_events",
    # re-exported from the modules a recording is made of
    "INSTANCE_PREFIX",
    "OPTION_PROC_MAPS",
    "STATE_DIRS",
    "ProcessWatch",
    "Workload",
    "cleanup_stale",
    "decode_proc_maps",
    "encode_proc_maps",
    "instance_cpus",
    "probe_state",
    "read_maps",
    "remove_instance",
    "signals_held",
    "stop_signals",
    "synthesize_maps",
]

DEFAULT_OUTPUT = DEFAULT_FILE


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
                  stacks: bool = False, pids: Sequence[int] = (), follow_forks: bool = True,
                  buffer_percent: Optional[int] = None) -> None:
        self.write("tracing_on", "0")
        if buffer_kb:
            self.write("buffer_size_kb", str(buffer_kb))
        if buffer_percent is not None:
            self.write("buffer_percent", str(buffer_percent))
        if cpus is not None:
            self.write("tracing_cpumask", cpu_mask(cpus))
        if stacks:
            self.write("options/stacktrace", "1")
            self.write("options/userstacktrace", "1")
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


# ---- the recording ------------------------------------------------------------------------------


@dataclass
class RecordOptions:
    """What ``probectl record`` was asked for."""

    events: Sequence[EventRequest]
    output: Path = DEFAULT_OUTPUT
    cpus: Optional[Sequence[int]] = None  # None: every CPU
    pids: Sequence[int] = ()  # -p: only these processes (and their threads, and forks)
    command: Sequence[str] = ()  # -- COMMAND: run it, record while it runs
    system_wide: bool = False  # -a with a command: every process, not only the command's
    stacks: bool = False  # -g
    duration: Optional[float] = None
    buffer_kb: Optional[int] = None  # per CPU
    version: int = 7


@dataclass
class RecordResult:
    path: Path
    events: int
    lost: int
    lost_by_cpu: dict[int, int]
    bytes: int
    stopped_by: str  # "command", "duration", "SIGINT", "SIGTERM"
    command_status: Optional[int] = None
    selected: list[str] = field(default_factory=list)


class Recording:
    """One ``probectl record`` run (see the module documentation for the steps)."""

    def __init__(self, tfs: Tracefs, options: RecordOptions, *, notice: Callable[[str], None] = notice_stderr,
                 progress: Optional[Callable[[int, int], None]] = None, progress_interval: float = 0.5):
        self.tfs = tfs
        self.options = options
        self.notice = notice
        self.progress = progress
        self.progress_interval = progress_interval
        self.instance: Optional[Instance] = None

    def run(self) -> RecordResult:
        opts = self.options
        for what in cleanup_stale(self.tfs, self.notice):
            self.notice(f"probectl: removed the leftover {what} of a dead run")
        selected = select_events(self.tfs, opts.events)
        ncpus = instance_cpus(self.tfs.root)
        cpus = list(opts.cpus) if opts.cpus is not None else list(range(ncpus))
        for p in opts.pids:
            if not pid_alive(p) or proc_comm(p) is None:
                raise ProbectlError(f"no process {p}", "give the pid of a running process to -p")
        output = OutputFile(opts.output)  # (claimed now: a FIFO nobody reads is an error before, not after)
        workdir = output.directory
        try:
            tmp = Path(tempfile.mkdtemp(prefix=".probectl-", dir=workdir))
        except OSError as err:
            output.close()
            raise ProbectlError(f"cannot write in {workdir}: {err.strerror}",
                                "record to a writable directory (-o DIR/FILE)") from None
        workload: Optional[Workload] = None
        try:
            state = _RunState(Instance(self.tfs), cpus, ncpus, selected, ProcessWatch())
            self.instance = state.instance
            workload = state.workload = Workload(opts.command) if opts.command else None
            try:
                with stop_signals():
                    stopped_by = self._record(state, tmp)
            except BaseException:
                with signals_held():
                    self._teardown(state, quiet=True)
                raise
            with signals_held():
                meta = self._teardown(state, quiet=False)
                assert state.recorder is not None and state.layout is not None and meta is not None
                events, seen = _count_and_pids(state.recorder.files, state.layout,
                                               {sel.format.id for sel in state.selected})
                self._names(meta, seen, state)
                write_tracedat(output, meta, state.recorder.files, version=opts.version)
        finally:
            output.close()
            if workload is not None:
                workload.stop()
            shutil.rmtree(tmp, ignore_errors=True)
        lost = {cpu: lost_of(parse_cpustat(text)) for cpu, text in meta.cpustats.items()}
        return RecordResult(path=output.path, events=events, lost=sum(lost.values()), lost_by_cpu=lost,
                            bytes=output.path.stat().st_size, stopped_by=stopped_by,
                            command_status=workload.status if workload else None,
                            selected=[e.name for e in selected])

    def _record(self, state: "_RunState", tmp: Path) -> str:
        """Set up, record until the end condition; returns what ended it. Ctrl-C or SIGTERM before
        the recorder runs propagate (nothing was recorded); after, they end the recording."""
        opts, inst, workload = self.options, state.instance, state.workload
        try:
            inst.create()
            command = workload.pid if workload is not None and not opts.system_wide else None
            state.pids = traced_tids(opts.pids, command)
            inst.configure(buffer_kb=opts.buffer_kb, cpus=opts.cpus, stacks=opts.stacks, pids=state.pids)
            if not state.pids:
                # Traced system-wide, probectl's own syscalls would be recorded too: the recorder's
                # poll/splice/write for every page it moves (raw_syscalls:*, a feedback loop), and
                # this thread's. The recorder threads it starts below inherit the exclusion.
                inst.untrace(threading.get_native_id(), follow_forks=True)
            state.layout = PageLayout.from_header_page(inst.read("events/header_page"))
            state.recorder = Recorder(inst.path, state.cpus, tmp, state.layout.page_size)
            state.watch.look(list(opts.pids) + ([workload.pid] if workload else []), maps=False)
            inst.enable(state.selected)
            state.recorder.start()
            inst.tracing(True)
            if workload is not None:
                workload.release()
                # (the gate returns once exec succeeded: the program and ld.so are mapped)
                state.watch.look([workload.pid], maps=True)
            return self._wait(state)
        except KeyboardInterrupt:
            if state.recorder is None or not state.recorder.running:
                raise
            return "SIGINT"
        except Terminated:
            if state.recorder is None or not state.recorder.running:
                raise KeyboardInterrupt from None
            return "SIGTERM"

    def _teardown(self, state: "_RunState", *, quiet: bool) -> Any:
        """Every clean-up step, each attempted whatever the others did; returns the metadata of a
        complete recording. With ``quiet`` (an error is already on its way) failures are only
        reported; otherwise the first one is raised at the end."""
        inst = state.instance
        step = CleanupSteps()
        meta = None
        if inst.created:
            step(lambda: self._capture(state))
            step(lambda: inst.tracing(False))
            step(lambda: inst.write("events/enable", "0"))
        recorder_ok = False
        if state.recorder is not None:
            recorder_ok = step(lambda: state.recorder.stop() or True) is not None  # type: ignore[union-attr]
            state.recorder.close()
        if inst.created and recorder_ok:
            cpustats = read_cpustats(inst.path, state.cpus)
            meta = step(lambda: collect_metadata(inst.path, {e.group for e in state.selected},
                                                 root=self.tfs.root, cpus=state.ncpus))
            if meta is not None:
                meta.cpustats = cpustats
        if state.workload is not None:
            state.workload.stop()
        step(inst.remove)
        step.finish(quiet, self.notice)
        return meta

    def _wait(self, state: "_RunState") -> str:
        opts, inst, workload = self.options, state.instance, state.workload
        start = time.monotonic()
        next_progress = start
        next_look = start
        while True:
            now = time.monotonic()
            if workload is not None and workload.poll() is not None:
                return "command"
            if opts.duration is not None and now - start >= opts.duration:
                return "duration"
            if now >= next_look:
                state.watch.look(self._watched(state), maps=True)
                next_look = now + 0.2
            if self.progress is not None and now >= next_progress:
                stats = inst.stats(state.cpus)
                events = sum(s.get("read events", 0) + s.get("entries", 0) for s in stats.values())
                self.progress(events, sum(lost_of(s) for s in stats.values()))
                next_progress = now + self.progress_interval
            wait = 0.05
            if opts.duration is not None:
                wait = min(wait, max(0.0, start + opts.duration - now))
            time.sleep(wait)

    def _watched(self, state: "_RunState") -> list[int]:
        """The processes whose names and maps are worth keeping: the traced ones."""
        pids = state.instance.traced_pids() if state.pids and state.instance.created else []
        pids += list(self.options.pids)
        if state.workload is not None:
            pids.append(state.workload.pid)
        return sorted(set(pids))

    def _capture(self, state: "_RunState") -> None:
        """Names and maps of the traced processes while they still exist."""
        state.watch.look(self._watched(state), maps=True)

    def _names(self, meta: Any, seen: set[int], state: "_RunState") -> None:
        """Command names and thread groups of every recorded pid into the metadata, and the maps of
        the traced processes (with stacks or probe events: of every recorded process still alive)."""
        watch = state.watch
        cmdlines = parse_cmdlines(meta.cmdlines)
        tgids = parse_tgids(meta.tgids)
        probes = any(f.name in ("__probe_ip", "__probe_func") for e in state.selected for f in e.format.event_fields)
        missing = sorted(p for p in seen if p and p not in watch.comms)
        watch.look(missing[:MAX_MAPS_PIDS], maps=self.options.stacks or probes)
        for tgid, text in self._probe_maps(state, lambda pid: watch.tgids.get(pid, tgids.get(pid, pid))).items():
            if tgid in watch.maps:
                watch.maps[tgid] += "\n" + text
            elif len(watch.maps) < MAX_MAPS_PIDS:
                watch.maps[tgid] = text
        for pid in seen:
            if pid in watch.comms and pid not in cmdlines:
                cmdlines[pid] = watch.comms[pid]
            if pid in watch.tgids:
                tgids[pid] = watch.tgids[pid]
        meta.cmdlines = "".join(f"{p} {c}\n" for p, c in sorted(cmdlines.items()))
        meta.tgids = "".join(f"{p} {t}\n" for p, t in sorted(tgids.items()) if t)
        if watch.maps:
            meta.extra_options.append((OPTION_PROC_MAPS, encode_proc_maps(watch.maps)))


    def _probe_maps(self, state: "_RunState", tgid_of: Callable[[int], int]) -> dict[int, str]:
        """tgid → maps lines of the probed binaries its maps lack, each placed by the runtime address of
        one of its uprobe events and the file offset of the event's definition. A process's maps lack a
        probed library when it ended before they were read, or when they were read only at exec, before
        the dynamic loader mapped its libraries (``record -- ls`` probing libc: ls is gone in 0.2 s)."""
        places: dict[int, tuple[str, int, str]] = {}
        by_name = {}
        for d in self.tfs.definitions():
            if d.is_uprobe:
                by_name.setdefault((d.group, d.event), []).append(d)
        for ev in state.selected:
            defs = by_name.get((ev.group, ev.event), [])
            ip = "__probe_func" if ev.format.field("__probe_func") else "__probe_ip"
            if len(defs) == 1 and ev.format.field(ip):
                places[ev.format.id] = (defs[0].uprobe_path, defs[0].uprobe_offset, ip)
        if not places or state.recorder is None or state.layout is None:
            return {}
        found: dict[int, str] = {}
        for (pid, fid), address in _first_addresses(state.recorder.files, state.layout,
                                                    [e.format for e in state.selected if e.format.id in places],
                                                    {fid: ip for fid, (_p, _o, ip) in places.items()}).items():
            path, offset, _ip = places[fid]
            tgid = tgid_of(pid)
            if _maps_path(state.watch.maps.get(tgid, "") + "\n" + found.get(tgid, ""), path):
                continue
            text = synthesize_maps(path, offset, address)
            if text:
                found[tgid] = found[tgid] + "\n" + text if tgid in found else text
        return found


def _maps_path(maps: str, path: str) -> bool:
    """Whether maps lines map ``path`` (or the file it links to: /proc shows the real path)."""
    names = {path, os.path.realpath(path)}
    return any(len(parts) == 6 and parts[5] in names for parts in (line.split(None, 5) for line in maps.split("\n")))


def _first_addresses(files: dict[int, Path], layout: PageLayout, formats: list[EventFormat],
                     ip_fields: dict[int, str]) -> dict[tuple[int, int], int]:
    """(pid, format id) → the address of the first event of that format and pid."""
    out: dict[tuple[int, int], int] = {}
    with _mapped(files, layout) as streams:
        if not streams:
            return out
        reader = EventReader(streams, formats, layout, strict=False)
        try:
            for batch in reader.batches():
                ids = batch.id
                for fmt in formats:
                    mask = list(map(eq, ids, repeat(fmt.id)))
                    if not any(mask):
                        continue
                    ips = batch.column(fmt, ip_fields[fmt.id])
                    for pid, ip in zip(compress(batch.pid, mask), ips):
                        out.setdefault((pid, fmt.id), ip)
        finally:
            reader.close()
    return out


@contextlib.contextmanager
def _mapped(files: dict[int, Path], layout: PageLayout) -> Iterator[list[tuple[int, Any, int, int]]]:
    maps, streams = [], []
    try:
        for cpu, path in files.items():
            size = path.stat().st_size
            size -= size % layout.page_size
            if not size:
                continue
            with open(path, "rb") as f:
                m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            maps.append(m)
            streams.append((cpu, m, 0, size))
        yield streams
    finally:
        for m in maps:
            m.close()


@dataclass
class _RunState:
    instance: Instance
    cpus: list[int]
    ncpus: int
    selected: list[SelectedEvent]
    watch: ProcessWatch
    workload: Optional[Workload] = None
    recorder: Optional[Recorder] = None
    layout: Optional[PageLayout] = None
    pids: list[int] = field(default_factory=list)


def _count_and_pids(files: dict[int, Path], layout: PageLayout, ids: set[int]) -> tuple[int, set[int]]:
    """Events of the types ``ids`` in the per-CPU files (the records ``-g`` adds after each event,
    ``ftrace:kernel_stack``/``user_stack``, are not events), and the pids of all the records
    (decoded natively, no field values)."""
    with _mapped(files, layout) as streams:
        if not streams:
            return 0, set()
        count, pids = 0, set()
        reader = EventReader(streams, [], layout, strict=False)
        try:
            for batch in reader.batches():
                count += sum(map(ids.__contains__, batch.id))
                pids.update(batch.pid)
        finally:
            reader.close()
        return count, pids
