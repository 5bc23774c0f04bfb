"""Traced runs and recordings: every command that traces (``record``, ``trace``, ``hist``, ``latency``)
runs one :class:`~probectl.record.session.TracedRun` — a private tracefs instance scoped to a command,
processes or everything, the probes added for the run, its parts, the wait and a teardown that leaves
nothing behind — and ``record`` writes what it recorded to a trace.dat file.

The steps of :meth:`Recording.run`:

1. remove what crashed runs left (:func:`cleanup_stale`), expand the event globs and check every
   filter against its event's fields (errors here touch nothing), claim the output file;
2. trace (:meth:`TracedRun.trace`) with a :class:`RecorderPart`: the filters written and the events
   enabled, the native recorder moving every CPU's pages to files, the names and maps of the traced
   processes read while they live, a live count on a terminal; and, once tracing is off, the metadata;
3. write trace.dat with the metadata, the command names and thread groups of the recorded pids,
   the memory maps of the traced processes (:data:`OPTION_PROC_MAPS`, for user-space symbols) and
   their JIT maps (``/tmp/perf-PID.map``: :mod:`~probectl.record.jitmaps`).

A run killed with SIGKILL leaves its instance (and, for ``probectl trace``, its probes); the next
run or ``probectl cleanup`` finds instances whose pid is dead by their name, and probes through the
state file the run left in :data:`STATE_DIRS`.

The parts have their own modules: :mod:`~probectl.record.session` (the traced run),
:mod:`~probectl.record.instance` (the tracefs instance), :mod:`~probectl.record.selection` (the events),
:mod:`~probectl.record.workload` (the command), :mod:`~probectl.record.processes` (names and maps),
:mod:`~probectl.record.teardown` (signals and clean-up steps) and :mod:`~probectl.record.cleanup` (what
dead runs left); :mod:`~probectl.record.livestream` is the part that streams an instance's events instead
of recording them, for :mod:`~probectl.record.trace` (``probectl trace``) and the analyses.
"""
from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import tempfile
from itertools import compress, repeat
from operator import eq
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from ..dataclass import dataclass, field
from ..errors import ProbectlError
from ..events import EventDefinition
from ..formats import EventFormat
from ..notice import notice_stderr
from ..outputfile import OutputFile
from ..ringbuf import EventReader, PageLayout, PerfRingStats, Recorder
from ..tracedat import (DEFAULT_FILE, collect_metadata, instance_cpus, parse_cmdlines, parse_tgids, read_cpustats,
                        write_tracedat)
from ..tracedat.nspids import OPTION_NS_PIDS, encode_ns_pids
from ..tracedat.writer import CpuPages
from ..tracedat.procmaps import OPTION_PROC_MAPS, decode_proc_maps, encode_proc_maps
from ..tracefs import Tracefs
from .callchains import (PERF_TRACE_CLOCK, Callchains, add_callchains, entry_fixup_supported, entry_uprobes, ring_pages,
                         uprobe_events)
from .cgroups import cgroup_events, cgroup_pids
from .stackcopies import DEFAULT_STACK_COPY, RING_DATA_PAGES as STACK_RING_PAGES, UnwindStats, copied_events
from .cleanup import INSTANCE_PREFIX, STATE_DIRS, cleanup_stale, probe_state, remove_instance
from .instance import Instance, cpu_mask, lost_of, parse_cpus, parse_cpustat
from .jitmaps import jit_maps_option
from .processes import MAX_MAPS_PIDS, ProcessWatch, other_root, pid_alive, proc_comm, read_maps, synthesize_maps
from .selection import EventRequest, SelectedEvent, expand_event_requests
from .session import RunPart, RunScope, TracedRun
from .teardown import CleanupSteps, signals_held, stop_signals
from .workload import Workload

__all__ = [
    "DEFAULT_OUTPUT",
    "EventRequest",
    "Instance",
    "RecordOptions",
    "RecordResult",
    "Recording",
    "RunPart",
    "RunScope",
    "SelectedEvent",
    "TracedRun",
    "cpu_mask",
    "expand_event_requests",
    "lost_of",
    "parse_cpus",
    "parse_cpustat",
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


# ---- the recording ------------------------------------------------------------------------------


# The instance's buffer per CPU when a recording's events all come from perf (uprobes with -g): the
# kernel writes nothing there, and -m sizes the perf rings instead of allocating twice.
UNUSED_BUFFER_KB = 16


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
    call_graph: str = "auto"  # with stacks: "fp", "dwarf" (stack copies unwound), "auto" (per file)
    stack_copy: int = DEFAULT_STACK_COPY  # bytes of user stack each sample copies (dwarf)
    cgroup: Optional[Path] = None  # --cgroup: only the tasks of this cgroup (its directory), from perf: .cgroups
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
    command_exit: Optional[int] = None  # (TracedRun.command_exit)
    selected: list[str] = field(default_factory=list)
    stacks_lost: int = 0  # of ``lost``: lost in the perf rings of -g (uprobe events, or stacks of the others)


class Recording:
    """One ``probectl record`` run (see the module documentation for the steps)."""

    def __init__(self, tfs: Tracefs, options: RecordOptions, *, notice: Callable[[str], None] = notice_stderr,
                 progress: Optional[Callable[[int, int], None]] = None, progress_interval: float = 0.5):
        self.tfs = tfs
        self.options = options
        self.notice = notice
        self.progress = progress
        self.progress_interval = progress_interval
        self.traced: Optional[TracedRun] = None

    @property
    def instance(self) -> Optional[Instance]:
        """The run's tracefs instance (gone once :meth:`run` returns)."""
        return self.traced.instance if self.traced is not None else None

    def run(self) -> RecordResult:
        opts = self.options
        # (a cgroup's scope is perf's: the instance, which records nothing then, is not scoped to pids)
        run = self.traced = TracedRun(self.tfs, RunScope(opts.command, opts.pids,
                                                         opts.system_wide or opts.cgroup is not None, opts.duration),
                                      notice=self.notice)
        run.remove_stale()
        selected = expand_event_requests(self.tfs, opts.events)
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
        try:
            part = RecorderPart(self, selected, tmp, self.tfs.definitions())
            buffer_kb = opts.buffer_kb
            if buffer_kb and (opts.cgroup is not None or
                              opts.stacks and len(uprobe_events(part.definitions, selected)) == len(selected)):
                buffer_kb = UNUSED_BUFFER_KB  # (every event comes from perf's rings, -m sizes those)
            stopped_by = run.trace([part], buffer_kb=buffer_kb, cpus=opts.cpus, stacks=opts.stacks,
                                   trace_clock=PERF_TRACE_CLOCK if opts.stacks or opts.cgroup else None)
            with signals_held():
                meta = part.metadata
                assert part.recorder is not None and part.layout is not None and meta is not None
                part.files = {cpu: CpuPages(path) for cpu, path in part.recorder.files.items()}
                perf_maps: dict[int, list[str]] = {}
                if part.callchains is not None:
                    part.files, perf_maps = add_callchains(meta, part.files, part.callchains, part.layout, tmp,
                                                           dict(part.watch.maps), self._unwound)
                files = part.files
                counted = part.callchains.counted() if part.callchains is not None else None
                events, seen = counted or _count_and_pids(files, part.layout, {sel.format.id for sel in selected})
                if perf_maps:  # (of the recorded processes only: perf reports every exec on a CPU)
                    groups = parse_tgids(meta.tgids)
                    recorded = seen | {groups[p] for p in seen if p in groups}
                    part.watch.add_maps({t: lines for t, lines in perf_maps.items() if t in recorded}, MAX_MAPS_PIDS)
                self._names(meta, seen, part, run)
                write_tracedat(output, meta, files, version=opts.version)
        finally:
            output.close()
            shutil.rmtree(tmp, ignore_errors=True)
        lost = {cpu: lost_of(parse_cpustat(text)) for cpu, text in meta.cpustats.items()}
        stacks_lost = sum(s.lost for s in part.callchain_stats)
        for s in part.callchain_stats:
            lost[s.cpu] = lost.get(s.cpu, 0) + s.lost
        return RecordResult(path=output.path, events=events, lost=sum(lost.values()), lost_by_cpu=lost,
                            stacks_lost=stacks_lost,
                            bytes=output.path.stat().st_size, stopped_by=stopped_by,
                            command_status=run.command_status, command_exit=run.command_exit,
                            selected=[e.name for e in selected])

    def _unwound(self, stats: UnwindStats) -> None:
        """Say how the stack copies came out, where some could not be unwound to their outermost frame."""
        if not stats.stopped:
            return
        stopped = sum(stats.stopped.values())
        why = "; ".join(f"{reason} ({n:,})" for reason, n in stats.stopped.most_common(3))
        self.notice(f"probectl: {stopped:,} of {stats.total:,} user stacks end in [unknown] where the unwinding "
                    f"stopped: {why}")

    def _names(self, meta: Any, seen: set[int], part: "RecorderPart", run: TracedRun) -> None:
        """Command names and thread groups of every recorded pid into the metadata, and the maps of
        the traced processes (with stacks or probe events: of every recorded process still alive)."""
        watch = part.watch
        cmdlines = parse_cmdlines(meta.cmdlines)
        tgids = parse_tgids(meta.tgids)
        probes = any(f.name in ("__probe_ip", "__probe_func") for e in part.selected for f in e.format.event_fields)
        missing = sorted(p for p in seen if p and p not in watch.comms)
        watch.look(missing[:MAX_MAPS_PIDS], maps=self.options.stacks or probes)
        for tgid, text in self._probe_maps(part, lambda pid: watch.tgids.get(pid, tgids.get(pid, pid)), seen).items():
            if tgid in watch.maps:
                watch.maps[tgid] += "\n" + text
            elif len(watch.maps) < MAX_MAPS_PIDS:
                watch.maps[tgid] = text
        # (scoped to a cgroup, every event came from perf: the kernel's saved_cmdlines may hold the name of
        # an earlier task of the pid, one ftrace wrote events of; the name read while it ran is the one)
        from_perf = self.options.cgroup is not None
        for pid in seen:
            if pid in watch.comms and (pid not in cmdlines or from_perf):
                cmdlines[pid] = watch.comms[pid]
            if pid in watch.tgids:
                tgids[pid] = watch.tgids[pid]
        meta.cmdlines = "".join(f"{p} {c}\n" for p, c in sorted(cmdlines.items()))
        meta.tgids = "".join(f"{p} {t}\n" for p, t in sorted(tgids.items()) if t)
        if watch.maps:
            meta.extra_options.append((OPTION_PROC_MAPS, encode_proc_maps(watch.maps)))
        nspids = {pid: watch.nspids[pid] for pid in seen if pid in watch.nspids}
        if nspids:
            meta.extra_options.append((OPTION_NS_PIDS, encode_ns_pids(nspids)))
        jit = jit_maps_option({*watch.tgids.values(), *watch.maps, *(tgids.get(p, p) for p in seen if p)},
                              self.notice)
        if jit is not None:
            meta.extra_options.append(jit)

    def _probe_maps(self, part: "RecorderPart", tgid_of: Callable[[int], int], seen: set[int]) -> dict[int, str]:
        """tgid → maps lines of the probed binaries its maps lack, each placed by the runtime address of
        one of its uprobe events and the file offset of the event's definition. A process's maps lack a
        probed library when it ended before they were read, or when they were read only at exec, before
        the dynamic loader mapped its libraries (``record -- ls`` probing libc: ls may be gone before its maps are read again)."""
        places: dict[int, tuple[str, int, str]] = {}
        by_name: dict[tuple[str, str], list[EventDefinition]] = {}
        for d in part.definitions:
            if d.is_uprobe:
                by_name.setdefault((d.group, d.event), []).append(d)
        for ev in part.selected:
            defs = by_name.get((ev.group, ev.event), [])
            ip = "__probe_func" if ev.format.field("__probe_func") else "__probe_ip"
            if len(defs) == 1 and ev.format.field(ip):
                places[ev.format.id] = (defs[0].uprobe_path, defs[0].uprobe_offset, ip)
        if not places or part.layout is None:
            return {}
        paths = {path for path, _o, _ip in places.values()}
        if all(_maps_path(part.watch.maps.get(tgid_of(pid), ""), path) for pid in seen if pid for path in paths):
            return {}  # (every recorded process's maps have the probed files: no event need be read)
        found: dict[int, str] = {}
        for (pid, fid), address in _first_addresses(part.files, part.layout,
                                                    [e.format for e in part.selected if e.format.id in places],
                                                    {fid: ip for fid, (_p, _o, ip) in places.items()}).items():
            path, offset, _ip = places[fid]
            tgid = tgid_of(pid)
            if _maps_path(part.watch.maps.get(tgid, "") + "\n" + found.get(tgid, ""), path):
                continue
            text = synthesize_maps(path, offset, address)
            if text:
                found[tgid] = found[tgid] + "\n" + text if tgid in found else text
        return found


class RecorderPart(RunPart):
    """What a recording does in its traced run: the native recorder moves every CPU's pages to a file
    in ``tmp``, the names and maps of the traced processes are read while they live, and the metadata
    of a complete recording is read before the instance goes."""

    def __init__(self, recording: Recording, selected: list[SelectedEvent], tmp: Path,
                 definitions: list[EventDefinition]):
        """``definitions``: the probe events of tracefs (a recording adds none: read once)."""
        self.recording = recording
        self.selected = selected
        self.definitions = definitions
        self.tmp = tmp
        self.watch = ProcessWatch()
        self.recorder: Optional[Recorder] = None
        self.callchains: Optional[Callchains] = None
        self.callchain_stats: list[PerfRingStats] = []
        self.files: dict[int, CpuPages] = {}  # the per-CPU pages to write: the recorder's, or with the callchains
        self.layout: Optional[PageLayout] = None
        self.metadata: Any = None
        self._next_look = 0.0
        self._next_progress = 0.0

    def arm(self, run: TracedRun) -> None:
        inst, opts = run.instance, self.recording.options
        assert inst is not None
        self.layout = PageLayout.from_header_page(inst.read("events/header_page"))
        self.recorder = Recorder(inst.path, run.cpus, self.tmp, self.layout.page_size)
        self.watch.look(list(opts.pids) + ([run.workload.pid] if run.workload else []), maps=False)
        uprobes: list[int] = []
        scoped = list(opts.pids) + (cgroup_pids(opts.cgroup) if opts.cgroup is not None else [])
        copied = copied_events(opts.call_graph, self.definitions, self.selected, self.recording.notice,
                               _programs(run, scoped)) if opts.stacks else []
        entry = entry_uprobes(self.definitions, self.selected) if opts.stacks and opts.cgroup is None else []
        if opts.call_graph == "auto" and not entry_fixup_supported():
            # (AArch64: at a function's entry the return address into the caller is in x30, which the
            # kernel's walk of the frame records never reads; the unwinder of a copy starts from it)
            copied += [ev for ev in entry if ev not in copied]
        pages = ring_pages(opts.buffer_kb) if opts.buffer_kb or not copied else STACK_RING_PAGES
        if opts.cgroup is not None:  # every event from perf, in the cgroup alone: none enabled in the instance
            self.callchains = cgroup_events(run, self.selected, self.tmp, opts.cgroup, opts.stacks, pages,
                                            copied, opts.stack_copy, self.layout)
            uprobes = [e.format.id for e in self.selected]
        elif opts.stacks:
            uprobes = uprobe_events(self.definitions, self.selected)
            self.callchains = Callchains(self.selected, run.cpus, self.tmp, entry, uprobes, data_pages=pages,
                                         tids=run.pids, stack_events=copied, stack_copy=opts.stack_copy,
                                         layout=self.layout)
        inst.enable([e for e in self.selected if e.format.id not in uprobes])
        self.recorder.start()
        if self.callchains is not None:
            self.callchains.start()

    def tick(self, run: TracedRun, now: float) -> None:
        # (the first tick comes right after the command's exec: the program and ld.so are mapped)
        if now >= self._next_look:
            self.watch.look(self._watched(run), maps=True)
            self._next_look = now + 0.2
        if self.callchains is not None:  # (rules for the stack copies walked as they come)
            self.callchains.give_rules(self._maps_of)
        progress = self.recording.progress
        if progress is not None and now >= self._next_progress:
            assert run.instance is not None
            stats = run.instance.stats(run.cpus)
            events = sum(s.get("read events", 0) + s.get("entries", 0) for s in stats.values())
            lost = sum(lost_of(s) for s in stats.values())
            if self.callchains is not None:
                perf = self.callchains.stats()
                events += sum(s.samples for s in perf)
                lost += sum(s.lost for s in perf)
            progress(events, lost)
            self._next_progress = now + self.recording.progress_interval

    def stop(self, run: TracedRun, step: CleanupSteps, complete: bool) -> None:
        inst = run.instance
        assert inst is not None
        if inst.created:
            step(lambda: self.watch.look(self._watched(run), maps=True))  # while they still exist
        if self.recorder is None:
            return
        recorder = self.recorder
        recorder_ok = step(lambda: recorder.stop() or True) is not None
        recorder.close()
        chains = self.callchains
        if chains is not None:
            stats = step(chains.stop)
            chains.close()
            recorder_ok = recorder_ok and stats is not None
            self.callchain_stats = stats or []
        if inst.created and recorder_ok and complete:
            cpustats = read_cpustats(inst.path, run.cpus)
            self.metadata = step(lambda: collect_metadata(inst.path, {e.group for e in self.selected},
                                                          root=run.tfs.root, cpus=instance_cpus(run.tfs.root),
                                                          kallsyms=self._kernel_addresses()))
            if self.metadata is not None:
                self.metadata.cpustats = cpustats

    def _maps_of(self, pid: int) -> str:
        """The maps text of process ``pid``: as last read for the recording, or read now."""
        text = self.watch.maps.get(pid)
        return text if text is not None else read_maps(pid) or ""

    def _kernel_addresses(self) -> bool:
        """Whether the recording can hold kernel addresses, which readers name from the kallsyms the
        file keeps (some 5 MiB, and the CPU of reading /proc/kallsyms): not when every event is a
        uprobe fetching no kernel symbol, whose stacks (user ones, from perf) have none either."""
        uprobes = {(d.group, d.event): d for d in self.definitions if d.is_uprobe}
        return not all((e.group, e.event) in uprobes and
                       not any(a.type.startswith("sym") for a in uprobes[(e.group, e.event)].args)
                       for e in self.selected)

    def _watched(self, run: TracedRun) -> list[int]:
        """The processes whose names and maps are worth keeping: the traced ones."""
        inst = run.instance
        pids = inst.traced_pids() if run.pids and inst is not None and inst.created else []
        pids += list(self.recording.options.pids)
        if run.workload is not None:
            pids.append(run.workload.pid)
        if self.recording.options.cgroup is not None:
            pids += cgroup_pids(self.recording.options.cgroup)
        return sorted(set(pids))


def _programs(run: TracedRun, pids: Sequence[int]) -> list[str]:
    """The files the processes a run is scoped to run: its command's, the -p processes'."""
    out = [run.workload.program] if run.workload is not None else []
    for pid in pids:
        with contextlib.suppress(OSError):
            # (a container's process names its file in its own tree: reached through its root)
            out.append((other_root(pid) or "") + os.readlink(f"/proc/{pid}/exe"))
    return out


def _maps_path(maps: str, path: str) -> bool:
    """Whether maps lines map ``path`` (or the file it links to: /proc shows the real path)."""
    names = {path, os.path.realpath(path)}
    return any(len(parts) == 6 and parts[5] in names for parts in (line.split(None, 5) for line in maps.split("\n")))


def _first_addresses(files: dict[int, CpuPages], layout: PageLayout, formats: list[EventFormat],
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
                    # (a dict of the reversed pairs keeps each pid's first address, built without a
                    # Python step per event)
                    pids = list(compress(batch.pid, mask))
                    for pid, ip in dict(zip(reversed(pids), reversed(list(ips)))).items():
                        out.setdefault((pid, fmt.id), ip)
        finally:
            reader.close()
    return out


@contextlib.contextmanager
def _mapped(files: dict[int, CpuPages], layout: PageLayout) -> Iterator[list[tuple[int, Any, int, int]]]:
    maps, streams = [], []
    try:
        for cpu, (path, offset) in files.items():
            size = path.stat().st_size - offset
            size -= size % layout.page_size
            if size <= 0:
                continue
            with open(path, "rb") as f:
                m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            maps.append(m)
            streams.append((cpu, m, offset, size))
        yield streams
    finally:
        for m in maps:
            m.close()


def _count_and_pids(files: dict[int, CpuPages], layout: PageLayout, ids: set[int]) -> tuple[int, set[int]]:
    """Events of the types ``ids`` in the per-CPU files (the records ``-g`` adds after each event,
    ``ftrace:kernel_stack``/``user_stack``, are not events), and the pids of all the records
    (decoded natively, no field values)."""
    with _mapped(files, layout) as streams:
        if not streams:
            return 0, set()
        count, pids = 0, set[int]()
        reader = EventReader(streams, [], layout, strict=False)
        try:
            for batch in reader.batches():
                count += sum(map(ids.__contains__, batch.id))
                pids.update(batch.pid)
        finally:
            reader.close()
        return count, pids
