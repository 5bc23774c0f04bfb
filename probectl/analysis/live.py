"""Running ``hist`` and ``latency``: in the kernel with hist triggers where the event has a ``hist``
file, otherwise from the events streamed out of probectl's own instance into the native aggregator;
or from a recording. Every path removes what it wrote (triggers, synthetic event, instance) on every
exit: the end of the command, ``--duration``, Ctrl-C, SIGTERM or an error."""
from __future__ import annotations

import contextlib
import os
import time
from array import array
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..errors import AnalysisError
from ..notice import notice_stderr
from ..record import Instance
from ..record.cleanup import SYNTHETIC_PREFIX
from ..record.livestream import LiveStream
from ..record.processes import traced_tids
from ..record.selection import SelectedEvent
from ..record.teardown import CleanupSteps, Terminated, signals_held, stop_signals
from ..record.workload import Workload
from ..tracefs import Tracefs, os_error, write_once
from .keys import (LINEAR, LOG2, ROLE_END, ROLE_START, SRC_LATENCY, KeyPart, hist_plan, native_aggregator,
                   stack_plan)
from .latency import (MICROSECONDS, LatencyResult, TimeUnit, plan_parts, result_from_kernel,
                      result_from_pairs)
from .table import HistTable, rows_from_entries
from .triggers import LatencyTriggers, hist_trigger, new_error_log_entry, parse_hist, remove_trigger

USER_PATH = "user space"
KERNEL_PATH = "kernel"


def kernel_has_hist(tfs: Tracefs, events: Sequence[SelectedEvent]) -> bool:
    """Whether the kernel has hist triggers for every one of ``events``."""
    return all((tfs.root / "events" / e.group / e.event / "hist").exists() for e in events)


@contextlib.contextmanager
def _scoped(tfs: Tracefs, command: Sequence[str], pids: Sequence[int], system_wide: bool,
            buffer_kb: Optional[int], notice: Callable[[str], None]):
    """A private instance scoped as ``record`` scopes one; removed on the way out."""
    workload = Workload(list(command)) if command else None
    inst = Instance(tfs)
    try:
        inst.create()
        traced = traced_tids(list(pids), workload.pid if workload is not None and not system_wide else None)
        inst.configure(buffer_kb=buffer_kb or 64, pids=traced)
        yield inst, workload
    finally:
        with signals_held():
            step = CleanupSteps()
            if inst.created:
                step(lambda: inst.tracing(False))
                step(lambda: inst.write("events/enable", "0"))
            if workload is not None:
                workload.stop()
            step(inst.remove)
            step.finish(True, notice)


def _wait(workload: Optional[Workload], duration: Optional[float]) -> str:
    """Until the command ends, ``duration`` passes, Ctrl-C or SIGTERM: what stopped it."""
    deadline = time.monotonic() + duration if duration else None
    try:
        with stop_signals():
            if workload is not None:
                workload.release()
            while True:
                if workload is not None and workload.poll() is not None:
                    return "command"
                if deadline is not None and time.monotonic() >= deadline:
                    return "duration"
                time.sleep(0.05)
    except KeyboardInterrupt:
        return "SIGINT"
    except Terminated:
        return "SIGTERM"


KEYS_HINT = "check the keys with 'probectl fields EVENT'"


def _write_trigger(path: Path, text: str, what: str, error_log: Path, hint: str = KEYS_HINT) -> None:
    """Write a trigger (or synthetic event); a refusal is an error with the kernel's own words: the
    entries this write added to ``error_log`` (the instance's own for its events' triggers: the kernel
    logs there), not those of other writers."""
    before = ""
    with contextlib.suppress(OSError):
        before = error_log.read_text()
    try:  # one write, no seek (open(…, "a") seeks to the end, and synthetic_events refuses that)
        write_once(path, (text + "\n").encode(), append=True)
    except OSError as err:
        after = ""
        with contextlib.suppress(OSError):
            after = error_log.read_text()
        log = new_error_log_entry(before, after) or "(the kernel logged no reason in error_log)"
        raise AnalysisError(f"the kernel refused the {what} {text!r}: {err.strerror}\n{log}", hint) from None


def _unwrite(path: Path, text: str) -> None:
    with contextlib.suppress(OSError):
        write_once(path, (text + "\n").encode(), append=True)


def _triggered_run(inst: Instance, workload: Optional[Workload], duration: Optional[float],
                   triggers: Sequence[tuple[Path, str]], hist: Path) -> str:
    """Write ``triggers`` (event directory, text) in order, enable their events, trace until the run
    stops and read ``hist``; the triggers are removed again on every way out."""
    written: list[tuple[Path, str]] = []
    try:
        for d, text in triggers:
            _write_trigger(d / "trigger", text, "hist trigger", inst.path / "error_log")
            written.append((d, text))
        for d in dict.fromkeys(d for d, _ in triggers):
            inst.write(str((d / "enable").relative_to(inst.path)), "1")
        inst.tracing(True)
        _wait(workload, duration)
        inst.tracing(False)
        try:
            return hist.read_text()
        except OSError as err:
            raise os_error(err, "read the kernel's histogram", hist) from None
    finally:
        for d, t in reversed(written):
            _unwrite(d / "trigger", remove_trigger(t))


def _stream_into(agg, stream: LiveStream, progress: Optional[Callable[[int], None]]) -> None:
    """Stream until it stops, each batch of pages fed to the native aggregator as it is read."""

    def on_pages(streams, layout) -> None:
        agg.feed(streams, long_size=layout.long_size, big_endian=layout.big_endian, page_size=layout.page_size)
        if progress is not None:
            progress(agg.counters()["events"])

    stream.run_pages(on_pages)


# ---- hist ------------------------------------------------------------------------------------------


def kernel_hist(tfs: Tracefs, event: SelectedEvent, keys: Sequence[KeyPart], value: Optional[KeyPart], *,
                command: Sequence[str] = (), pids: Sequence[int] = (), system_wide: bool = False,
                duration: Optional[float] = None, notice: Callable[[str], None] = notice_stderr) -> HistTable:
    """A hist trigger on ``event`` in a private instance, read back when it stops."""
    trigger = hist_trigger(keys, value, filter_text=event.filter.text if event.filter else "")
    with _scoped(tfs, command, pids, system_wide, 4, notice) as (inst, workload):
        edir = inst.events_dir / event.group / event.event
        text = _triggered_run(inst, workload, duration, [(edir, trigger)], edir / "hist")
    return parse_hist(text, event.name, keys, value)


def user_hist(tfs: Tracefs, event: SelectedEvent, keys: Sequence[KeyPart], value: Optional[KeyPart], *,
              command: Sequence[str] = (), pids: Sequence[int] = (), system_wide: bool = False,
              buffer_kb: Optional[int] = None, duration: Optional[float] = None,
              notice: Callable[[str], None] = notice_stderr,
              progress: Optional[Callable[[int], None]] = None) -> HistTable:
    """The events of ``event`` streamed from a private instance into the native aggregator;
    ``progress(events)`` after every batch. A ``stacktrace`` key has the kernel write each event's
    stack after it (options/stacktrace) and counts the two together."""
    stacks = any(k.is_stack for k in keys)
    plans = [hist_plan(event.format, keys, value)]
    if stacks:
        plans.append(stack_plan(tfs.event_format("ftrace", "kernel_stack")))
    agg = native_aggregator(plans)
    stream = LiveStream(tfs, [event], command=command, pids=pids, system_wide=system_wide, buffer_kb=buffer_kb,
                        duration=duration, stacks=stacks, notice=notice)
    _stream_into(agg, stream, progress)
    table = HistTable(event.name, list(keys), value.name if value else None,
                      rows_from_entries(agg.entries(), keys, value is not None), USER_PATH, lost=stream.lost)
    table.extra["stopped_by"] = stream.stopped_by
    return table


def file_hist(path: Path, fmt, keys: Sequence[KeyPart], value: Optional[KeyPart]) -> HistTable:
    """The histogram of ``fmt``'s events in a recording."""
    from ..tracedat import open_trace

    plans = [hist_plan(fmt, keys, value)]
    with open_trace(path) as trace:
        if any(k.is_stack for k in keys):
            stack = next((f for f in trace.ftrace_formats if f.name == "kernel_stack"), None)
            if stack is None or stack.id not in trace.event_ids():
                raise AnalysisError(f"{trace.where} has no kernel stacks", "record with -g")
            plans.append(stack_plan(stack))
        agg = native_aggregator(plans)
        streams, layout = trace.page_streams()
        agg.feed(streams, long_size=layout.long_size, big_endian=layout.big_endian, page_size=layout.page_size,
                 strict=False)
    return HistTable(fmt.full_name, list(keys), value.name if value else None,
                     rows_from_entries(agg.entries(), keys, value is not None), "recording")


# ---- latency ---------------------------------------------------------------------------------------


def latency_plans(start: SelectedEvent, end: SelectedEvent, start_keys: Sequence[KeyPart],
                  end_keys: Sequence[KeyPart], buckets: Optional[int]) -> list[tuple]:
    value = (SRC_LATENCY, None, LINEAR, buckets, 8) if buckets else (SRC_LATENCY, None, LOG2, 0, 8)
    return [(start.format.id, ROLE_START, plan_parts(start_keys), None),
            (end.format.id, ROLE_END, plan_parts(end_keys), value)]


def user_latency(tfs: Tracefs, start: SelectedEvent, end: SelectedEvent, start_keys: Sequence[KeyPart],
                 end_keys: Sequence[KeyPart], *, buckets: Optional[int] = None, unit: TimeUnit = MICROSECONDS,
                 command: Sequence[str] = (),
                 pids: Sequence[int] = (), system_wide: bool = False, buffer_kb: Optional[int] = None,
                 duration: Optional[float] = None, notice: Callable[[str], None] = notice_stderr,
                 progress: Optional[Callable[[int], None]] = None) -> LatencyResult:
    """Start and end events streamed from a private instance, paired natively on their keys;
    ``progress(events)`` after every batch."""
    agg = native_aggregator(latency_plans(start, end, start_keys, end_keys, buckets), time_div=unit.ns)
    stream = LiveStream(tfs, [start, end], command=command, pids=pids, system_wide=system_wide,
                        buffer_kb=buffer_kb, duration=duration, notice=notice)
    _stream_into(agg, stream, progress)
    return result_from_pairs(start.name, end.name, *agg.pairs(), agg.counters(), USER_PATH, stream.lost, unit)


def file_latency(path: Path, start_fmt, end_fmt, start_keys: Sequence[KeyPart], end_keys: Sequence[KeyPart],
                 buckets: Optional[int] = None, unit: TimeUnit = MICROSECONDS) -> LatencyResult:
    """Latencies between two events of a recording (a damaged or cut recording: what can be read)."""
    from ..tracedat import open_trace

    s = SelectedEvent(start_fmt.system, start_fmt.name, start_fmt)
    e = SelectedEvent(end_fmt.system, end_fmt.name, end_fmt)
    agg = native_aggregator(latency_plans(s, e, start_keys, end_keys, buckets), time_div=unit.ns)
    with open_trace(path) as trace:
        streams, layout = trace.page_streams()
        agg.feed(streams, long_size=layout.long_size, big_endian=layout.big_endian, page_size=layout.page_size,
                 strict=False)
    return result_from_pairs(s.name, e.name, *agg.pairs(), agg.counters(), "recording", unit=unit)


def kernel_latency(tfs: Tracefs, start: SelectedEvent, end: SelectedEvent, texts: LatencyTriggers, *,
                   unit: TimeUnit = MICROSECONDS, command: Sequence[str] = (), pids: Sequence[int] = (),
                   system_wide: bool = False, duration: Optional[float] = None,
                   notice: Callable[[str], None] = notice_stderr) -> LatencyResult:
    """A synthetic event filled by onmatch() in a private instance, and the histogram of it."""
    synth_dir = tfs.root / "events" / "synthetic" / texts.synthetic_name
    _write_trigger(tfs.root / "synthetic_events", texts.synthetic, "synthetic event", tfs.root / "error_log",
                   f"its name is this process's; another tool made one of that name: see {tfs.root}/synthetic_events")
    try:
        with _scoped(tfs, command, pids, system_wide, 4, notice) as (inst, workload):
            sdir = inst.events_dir / start.group / start.event
            edir = inst.events_dir / end.group / end.event
            hdir = inst.events_dir / "synthetic" / texts.synthetic_name
            text = _triggered_run(inst, workload, duration,
                                  [(sdir, texts.start), (edir, texts.end), (hdir, texts.histogram)], hdir / "hist")
    finally:
        if synth_dir.exists():
            _unwrite(tfs.root / "synthetic_events", "!" + texts.synthetic_name)
    table = parse_hist(text, texts.synthetic_name, [KeyPart("lat")], None)
    return result_from_kernel(start.name, end.name, table, unit)


def kernel_latency_pairs(tfs: Tracefs, start: SelectedEvent, end: SelectedEvent, texts: LatencyTriggers, *,
                         unit: TimeUnit = MICROSECONDS, command: Sequence[str] = (), pids: Sequence[int] = (),
                         system_wide: bool = False, buffer_kb: Optional[int] = None,
                         duration: Optional[float] = None, notice: Callable[[str], None] = notice_stderr,
                         progress: Optional[Callable[[int], None]] = None) -> LatencyResult:
    """Latencies measured in the kernel (the start and end triggers fill the synthetic event), with
    the pairs: the synthetic event is recorded as an ordinary event and streamed from the instance,
    one ``lat`` record a pair, stamped when its end happened. Only it reaches user space: the start
    and end events are not enabled (their triggers run all the same, in the kernel's soft mode)."""
    _write_trigger(tfs.root / "synthetic_events", texts.synthetic, "synthetic event", tfs.root / "error_log",
                   f"its name is this process's; another tool made one of that name: see {tfs.root}/synthetic_events")
    try:
        synth = SelectedEvent("synthetic", texts.synthetic_name, tfs.event_format("synthetic", texts.synthetic_name))
        lat_index = [f.name for f in synth.format.event_fields].index("lat")
        stream = LiveStream(tfs, [synth], command=command, pids=pids, system_wide=system_wide, buffer_kb=buffer_kb,
                            duration=duration, notice=notice)
        written: list[tuple[Path, str]] = []

        def on_start() -> None:
            assert stream.instance is not None
            for event, text in ((start, texts.start), (end, texts.end)):
                path = stream.instance.events_dir / event.group / event.event / "trigger"
                _write_trigger(path, text, "hist trigger", stream.instance.path / "error_log")
                written.append((path, text))

        def on_stop() -> None:  # (before the instance is removed: the kernel keeps one with triggers)
            while written:
                path, text = written.pop()
                _unwrite(path, remove_trigger(text))

        ends, lats = array("Q"), array("Q")

        def on_pages(reader) -> None:
            for _n, tables in reader.tables():
                for t in tables:
                    ends.frombytes(t.ts)
                    lats.frombytes(t.fields[lat_index])
            if progress is not None:
                progress(len(lats))

        stream.run(on_pages, on_start, on_stop)
    finally:
        if (tfs.root / "events" / "synthetic" / texts.synthetic_name).exists():
            _unwrite(tfs.root / "synthetic_events", "!" + texts.synthetic_name)
    return LatencyResult(start.name, end.name, ends, lats, KERNEL_PATH, unit, lost=stream.lost)


def latency_name() -> str:
    """The synthetic event of this run (one per process: runs never share it)."""
    return f"{SYNTHETIC_PREFIX}{os.getpid()}"

