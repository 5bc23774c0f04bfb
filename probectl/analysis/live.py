"""Running ``hist`` and ``latency``: the events named (probe definitions added for the run), the path
chosen — in the kernel with hist triggers where the events have a ``hist`` file, otherwise from the
events streamed out of probectl's own instance into the native aggregator — and the answer; or the
answer from a recording. Each live path is a :class:`~probectl.record.session.TracedRun` with its part
(:class:`TriggerPart` in the kernel, a raw :class:`~probectl.record.livestream.LiveStream` in user
space), which removes what it wrote (triggers, synthetic event, instance, probes) on every exit: the end
of the command, ``--duration``, Ctrl-C, SIGTERM or an error."""
from __future__ import annotations

import contextlib
import os
import time
from array import array
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..errors import AnalysisError, did_you_mean
from ..notice import notice_stderr
from ..record.cleanup import SYNTHETIC_PREFIX
from ..record.livestream import LiveStream
from ..record.selection import SelectedEvent
from ..record.session import RunPart, RunScope, TracedRun
from ..record.teardown import CleanupSteps
from ..termtext import backslashed
from ..tracefs import Tracefs, new_error_log_entry, os_error, write_once
from .keys import (LINEAR, LOG2, ROLE_END, ROLE_START, SRC_LATENCY, KeyPart, hist_plan, named_variants,
                   native_aggregator, parse_keys, parse_value, stack_plan)
from .latency import (MICROSECONDS, LatencyResult, TimeUnit, plan_parts, result_from_kernel,
                      result_from_pairs)
from .table import HistRow, HistTable, rows_from_entries
from .triggers import LatencyTriggers, hist_trigger, latency_triggers, parse_hist, remove_trigger

USER_PATH = "user space"
KERNEL_PATH = "kernel"
KEYS_HINT = "check the keys with 'probectl fields EVENT'"
Progress = Optional[Callable[[int], None]]  # called with the events counted so far, after every batch
MIN_INTERVAL = 0.01  # seconds: --interval's floor (perf stat's -I has the same)


# ---- hist -------------------------------------------------------------------------------------------


def hist(tfs: Tracefs, word: str, target: Callable[[], Any], key_text: str, *, value_name: Optional[str] = None,
         bucket: str = "", filter_text: Optional[str] = None, scope: RunScope = RunScope(), user_space: bool = False,
         buffer_kb: Optional[int] = None, notice: Callable[[str], None] = notice_stderr,
         progress: Progress = None, interval: Optional[float] = None,
         on_interval: Optional[Callable[[HistTable], None]] = None) -> HistTable:
    """``probectl hist`` live: the event ``word`` names (a definition on ``target()`` is added for the
    run), keyed by ``key_text`` (``bucket``: ``log2`` or ``buckets=N`` for the first key) with
    ``value_name`` summed, counted in the kernel where it can (unless ``user_space``), else in user
    space; a notice says which. With ``interval`` (seconds), what was counted in each interval is
    handed to ``on_interval`` as it ends (the last one, cut short by the end of the run, too); the
    answer is still the whole run's."""
    from ..record.trace import LiveNames

    _check_interval(interval)
    with TracedRun(tfs, scope, notice=notice) as run:
        (names,) = run.events_of([word], target)
        event = _selected(tfs, _one(names, word), filter_text)
        keys = parse_keys(key_text, event.format, bucket=bucket)
        value = parse_value(value_name, event.format)
        # (a counted string's key in the kernel would be its bytes read to a NUL, past its length; a
        # C++ vector's size, its begin pointer)
        counted = any(k.field is not None and k.field.bound is not None and not k.field.element_size for k in keys)
        vector = any(k is not None and k.field is not None and k.field.element_size for k in (*keys, value))
        in_kernel = not user_space and not counted and not vector and kernel_has_hist(tfs, [event])
        _path_notice(notice, KERNEL_PATH if in_kernel else USER_PATH, event.name, user_space,
                     "" if user_space else "a key is a string counted by a length" if counted
                     else "a C++ vector's size is worked out from its two pointers" if vector else "")
        live_names = LiveNames(tfs.root, {})

        def named(table: HistTable) -> HistTable:
            if table.path == USER_PATH and any(k.is_thread_name for k in keys):
                table.merge_by(live_names.comm, next(i for i, k in enumerate(keys) if k.is_thread_name))
            named_variants(table, keys)
            return table

        every = None
        if interval is not None and on_interval is not None:
            callback = on_interval
            every = IntervalSplitter(interval, lambda before, now: callback(named(table_since(now, before))))
        if in_kernel:
            table = kernel_hist(run, event, keys, value, every)
        else:
            table = user_hist(run, event, keys, value, buffer_kb=buffer_kb, progress=progress, every=every)
        named(table)
    table.command_exit = run.command_exit
    return table


def _check_interval(interval: Optional[float]) -> None:
    if interval is not None and interval < MIN_INTERVAL:
        raise AnalysisError(f"an interval of {interval:g} s is too short",
                            f"intervals are at least {MIN_INTERVAL:g} s (--interval {MIN_INTERVAL:g})")


class IntervalSplitter(RunPart):
    """Every ``seconds`` while a run lasts (after the parts before it in the run have read their
    events), the cumulative answer so far (``take``, set by the path) and the one of the interval
    before are handed to ``emit``; :meth:`last` emits the interval the end of the run cut short."""

    def __init__(self, seconds: float, emit: Callable[[Any, Any], None]):
        self.seconds = seconds
        self.emit = emit
        self.interval = min(RunPart.interval, seconds / 4)
        self.take: Callable[[], Any] = lambda: None
        self._before: Any = None
        self._next = 0.0
        self._last_at = 0.0

    def started(self, run: TracedRun) -> None:
        self._last_at = time.monotonic()
        self._next = self._last_at + self.seconds

    def tick(self, run: TracedRun, now: float) -> None:
        if now >= self._next:
            self._emit(now)
            while self._next <= now:
                self._next += self.seconds

    def last(self, final: Any) -> None:
        """The interval since the last one, from the run's ``final`` answer (none when nothing was traced)."""
        if self._last_at:
            now = self.take() if final is None else final
            self.emit(self._before, now)

    def _emit(self, now: float) -> None:
        current = self.take()
        self.emit(self._before, current)
        self._before = current
        self._last_at = now


def table_since(now: HistTable, before: Optional[HistTable]) -> HistTable:
    """What was counted between two readings of one growing table: the rows whose count grew, by how
    much (their sums too)."""
    prev = {r.key: r for r in before.rows} if before is not None else {}
    rows = []
    for r in now.rows:
        p = prev.get(r.key)
        count = r.count - (p.count if p is not None else 0)
        if count > 0:
            total = None if r.sum is None else r.sum - (p.sum or 0 if p is not None else 0)
            rows.append(HistRow(r.key, count, total))
    return HistTable(now.event, list(now.keys), now.value, rows, now.path,
                     dropped=now.dropped - (before.dropped if before is not None else 0))


def recorded_hist(path: Path, word: str, key_text: str, *, value_name: Optional[str] = None,
                  bucket: str = "") -> tuple[HistTable, bytes]:
    """``probectl hist -i FILE``: the histogram of the events ``word`` names in a recording, and the
    recording's kallsyms (to name ``.sym`` keys)."""
    from ..tracedat import open_trace

    with open_trace(path) as trace:
        fmt = recorded_event(trace, word)
        keys = parse_keys(key_text, fmt, bucket=bucket)
        value = parse_value(value_name, fmt)
        table = file_hist(path, fmt, keys, value)
        if any(k.is_thread_name for k in keys):
            table.merge_by(lambda tid: backslashed(trace.comm(tid)),
                           next(i for i, k in enumerate(keys) if k.is_thread_name))
        named_variants(table, keys)
        return table, trace.kallsyms


def kernel_hist(run: TracedRun, event: SelectedEvent, keys: Sequence[KeyPart], value: Optional[KeyPart],
                every: Optional[IntervalSplitter] = None) -> HistTable:
    """A hist trigger on ``event`` in the run's instance, read back when the run stops (and at every
    interval of ``every``: the kernel's table only grows, so an interval is the difference of two
    readings, and no event falls between a read and a clear)."""
    trigger = hist_trigger(keys, value, filter_text=event.filter.text if event.filter else "")
    part = TriggerPart([(event, trigger)], enable=[event], read=event)
    parts: list[RunPart] = [part]
    if every is not None:
        every.take = lambda: parse_hist(part.read_now(run), event.name, keys, value)
        parts.append(every)
    run.trace(parts, buffer_kb=4)
    table = parse_hist(part.text, event.name, keys, value)
    if every is not None:
        every.last(table)
    return table


def user_hist(run: TracedRun, event: SelectedEvent, keys: Sequence[KeyPart], value: Optional[KeyPart], *,
              buffer_kb: Optional[int] = None, progress: Progress = None,
              every: Optional[IntervalSplitter] = None) -> HistTable:
    """The events of ``event`` streamed from the run's instance into the native aggregator. A
    ``stacktrace`` key has the kernel write each event's stack after it (options/stacktrace) and
    counts the two together. With ``every``, the aggregator's table at each interval (after the
    stream read the pages of it)."""
    stacks = any(k.is_stack for k in keys)
    plans = [hist_plan(event.format, keys, value)]
    if stacks:
        plans.append(stack_plan(run.tfs.event_format("ftrace", "kernel_stack")))
    agg = native_aggregator(plans)

    def table_now() -> HistTable:
        return HistTable(event.name, list(keys), value.name if value else None,
                         rows_from_entries(agg.entries(), keys, value is not None), USER_PATH)

    parts: list[RunPart] = [_aggregating([event], agg, progress)]
    if every is not None:
        every.take = table_now
        parts.append(every)
    run.trace(parts, buffer_kb=buffer_kb, buffer_percent=0, stacks=stacks)
    table = table_now()
    table.lost = run.lost
    if every is not None:
        every.last(table)
    table.extra["stopped_by"] = run.stopped_by
    return table


def file_hist(path: Path, fmt: Any, keys: Sequence[KeyPart], value: Optional[KeyPart]) -> HistTable:
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


# ---- latency ----------------------------------------------------------------------------------------


def latency(tfs: Tracefs, words: tuple[str, str], target: Callable[[], Any], key_text: str = "common_pid", *,
            buckets: Optional[int] = None, unit: TimeUnit = MICROSECONDS, filter_text: Optional[str] = None,
            end_filter: Optional[str] = None, pairs: bool = False, scope: RunScope = RunScope(),
            user_space: bool = False, buffer_kb: Optional[int] = None,
            notice: Callable[[str], None] = notice_stderr, progress: Progress = None,
            interval: Optional[float] = None,
            on_interval: Optional[Callable[[LatencyResult], None]] = None) -> LatencyResult:
    """``probectl latency`` live: the time from the start to the end event ``words`` name (definitions
    on ``target()`` added for the run), paired on ``key_text``; in the kernel where it can (a synthetic
    event filled by hist triggers; streamed when the ``pairs`` are wanted), unless ``user_space``,
    else paired natively in user space; a notice says which. No pair measured is an error. With
    ``interval`` (seconds), the latencies measured in each interval are handed to ``on_interval`` as
    it ends (the last one too), as ``hist`` does; not with ``pairs``."""
    _check_interval(interval)
    if interval is not None and pairs:
        raise AnalysisError("--interval and --pairs do not go together", "the pairs file holds every pair: "
                            "draw it by time with 'probectl heatmap -i PAIRS'")
    every = None
    if interval is not None and on_interval is not None:
        callback = on_interval
        every = IntervalSplitter(interval, lambda before, now: callback(latency_since(now, before)))
    with TracedRun(tfs, scope, notice=notice) as run:
        start_names, end_names = run.events_of(words, target)
        start = _selected(tfs, _one(start_names, words[0]), filter_text)
        end = _selected(tfs, _one(end_names, words[1]), end_filter)
        _two_events(start.name, end.name)
        in_kernel = (not user_space and kernel_has_hist(tfs, [start, end])
                     and (tfs.root / "synthetic_events").exists())
        skeys = parse_keys(key_text, start.format)
        ekeys = parse_keys(key_text, end.format)
        _path_notice(notice, KERNEL_PATH if in_kernel else USER_PATH, f"{start.name} -> {end.name}", user_space)
        if not in_kernel:
            result = user_latency(run, start, end, skeys, ekeys, buckets=buckets, unit=unit, buffer_kb=buffer_kb,
                                  progress=progress, every=every)
        else:
            texts = latency_triggers(latency_name(), f"{start.group}.{start.event}", skeys, ekeys,
                                     unit.kernel_timestamp, start_filter=start.filter.text if start.filter else "",
                                     end_filter=end.filter.text if end.filter else "")
            if pairs:  # (the synthetic event streamed: a pair a record)
                result = kernel_latency_pairs(run, start, end, texts, unit=unit, buffer_kb=buffer_kb,
                                              progress=progress)
            else:
                result = kernel_latency(run, start, end, texts, unit=unit, every=every)
    result.command_exit = run.command_exit
    return _measured(result, notice, key_text)


def latency_since(now: LatencyResult, before: Optional[LatencyResult]) -> LatencyResult:
    """The latencies measured between two readings of one run's growing answer."""
    if now.counts is not None:
        prev = before.counts or {} if before is not None else {}
        counts = {v: n - prev.get(v, 0) for v, n in now.counts.items() if n > prev.get(v, 0)}
        return LatencyResult(now.start, now.end, array("Q"), array("Q"), now.path, now.unit, counts=counts)
    done = len(before.latencies) if before is not None else 0
    return LatencyResult(now.start, now.end, now.ends[done:], now.latencies[done:], now.path, now.unit,
                         unmatched=now.unmatched - (before.unmatched if before is not None else 0),
                         replaced=now.replaced - (before.replaced if before is not None else 0),
                         pending=now.pending)


def recorded_latency(path: Path, words: tuple[str, str], key_text: str = "common_pid", *,
                     buckets: Optional[int] = None, unit: TimeUnit = MICROSECONDS,
                     notice: Callable[[str], None] = notice_stderr) -> LatencyResult:
    """``probectl latency -i FILE``: the latencies between the two events ``words`` name in a recording."""
    from ..tracedat import open_trace

    with open_trace(path) as trace:
        sfmt, efmt = recorded_event(trace, words[0]), recorded_event(trace, words[1])
    _two_events(sfmt.full_name, efmt.full_name)
    return _measured(file_latency(path, sfmt, efmt, parse_keys(key_text, sfmt), parse_keys(key_text, efmt),
                                  buckets, unit), notice, key_text)


def latency_plans(start: SelectedEvent, end: SelectedEvent, start_keys: Sequence[KeyPart],
                  end_keys: Sequence[KeyPart], buckets: Optional[int]) -> list[tuple]:
    value = (SRC_LATENCY, None, LINEAR, buckets, 8) if buckets else (SRC_LATENCY, None, LOG2, 0, 8)
    return [(start.format.id, ROLE_START, plan_parts(start_keys), None),
            (end.format.id, ROLE_END, plan_parts(end_keys), value)]


def user_latency(run: TracedRun, start: SelectedEvent, end: SelectedEvent, start_keys: Sequence[KeyPart],
                 end_keys: Sequence[KeyPart], *, buckets: Optional[int] = None, unit: TimeUnit = MICROSECONDS,
                 buffer_kb: Optional[int] = None, progress: Progress = None,
                 every: Optional[IntervalSplitter] = None) -> LatencyResult:
    """Start and end events streamed from the run's instance, paired natively on their keys (with
    ``every``, the pairs so far at each interval)."""
    agg = native_aggregator(latency_plans(start, end, start_keys, end_keys, buckets), time_div=unit.ns)

    def result_now() -> LatencyResult:
        return result_from_pairs(start.name, end.name, *agg.pairs(), agg.counters(), USER_PATH, run.lost, unit)

    parts: list[RunPart] = [_aggregating([start, end], agg, progress)]
    if every is not None:
        every.take = result_now
        parts.append(every)
    run.trace(parts, buffer_kb=buffer_kb, buffer_percent=0)
    result = result_now()
    if every is not None:
        every.last(result)
    return result


def file_latency(path: Path, start_fmt: Any, end_fmt: Any, start_keys: Sequence[KeyPart],
                 end_keys: Sequence[KeyPart], buckets: Optional[int] = None,
                 unit: TimeUnit = MICROSECONDS) -> LatencyResult:
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


def kernel_latency(run: TracedRun, start: SelectedEvent, end: SelectedEvent, texts: LatencyTriggers, *,
                   unit: TimeUnit = MICROSECONDS, every: Optional[IntervalSplitter] = None) -> LatencyResult:
    """A synthetic event filled by onmatch() in the run's instance, and the histogram of it (read at
    each interval of ``every`` too)."""
    with _synthetic_event(run.tfs, texts):
        synth = SelectedEvent("synthetic", texts.synthetic_name, run.tfs.event_format("synthetic", texts.synthetic_name))
        part = TriggerPart([(start, texts.start), (end, texts.end), (synth, texts.histogram)],
                           enable=[start, end, synth], read=synth)
        parts: list[RunPart] = [part]
        if every is not None:
            every.take = lambda: result_from_kernel(start.name, end.name, parse_hist(
                part.read_now(run), texts.synthetic_name, [KeyPart("lat")], None), unit)
            parts.append(every)
        run.trace(parts, buffer_kb=4)
    table = parse_hist(part.text, texts.synthetic_name, [KeyPart("lat")], None)
    result = result_from_kernel(start.name, end.name, table, unit)
    if every is not None:
        every.last(result)
    return result


def kernel_latency_pairs(run: TracedRun, start: SelectedEvent, end: SelectedEvent, texts: LatencyTriggers, *,
                         unit: TimeUnit = MICROSECONDS, buffer_kb: Optional[int] = None,
                         progress: Progress = None) -> LatencyResult:
    """Latencies measured in the kernel (the start and end triggers fill the synthetic event), with
    the pairs: the synthetic event is recorded as an ordinary event and streamed from the instance,
    one ``lat`` record a pair, stamped when its end happened. Only it reaches user space: the start
    and end events are not enabled (their triggers run all the same, in the kernel's soft mode)."""
    with _synthetic_event(run.tfs, texts):
        synth = SelectedEvent("synthetic", texts.synthetic_name, run.tfs.event_format("synthetic", texts.synthetic_name))
        lat_index = [f.name for f in synth.format.event_fields].index("lat")
        ends, lats = array("Q"), array("Q")

        def on_pages(reader: Any) -> None:
            for _n, tables in reader.tables():
                for t in tables:
                    ends.frombytes(t.ts)
                    lats.frombytes(t.fields[lat_index])
            if progress is not None:
                progress(len(lats))

        triggers = TriggerPart([(start, texts.start), (end, texts.end)])
        run.trace([LiveStream([synth], on_pages), triggers], buffer_kb=buffer_kb, buffer_percent=0)
    return LatencyResult(start.name, end.name, ends, lats, KERNEL_PATH, unit, lost=run.lost)


def latency_name() -> str:
    """The synthetic event of this run (one per process: runs never share it)."""
    return f"{SYNTHETIC_PREFIX}{os.getpid()}"


# ---- the kernel's side: triggers and the synthetic event ---------------------------------------------


def kernel_has_hist(tfs: Tracefs, events: Sequence[SelectedEvent]) -> bool:
    """Whether the kernel has hist triggers for every one of ``events``."""
    return all((tfs.root / "events" / e.group / e.event / "hist").exists() for e in events)


class TriggerPart(RunPart):
    """Hist triggers in a run's instance: ``triggers`` ((event, text), written in order before tracing
    starts; a refusal is an error with the kernel's own words), the ``enable`` events enabled, and the
    ``hist`` file of ``read`` read into :attr:`text` when tracing stops. The triggers are taken out
    again on every way out, before the instance (the kernel keeps an instance that has triggers)."""

    def __init__(self, triggers: Sequence[tuple[SelectedEvent, str]], *, enable: Sequence[SelectedEvent] = (),
                 read: Optional[SelectedEvent] = None):
        self.triggers = list(triggers)
        self.enable = list(enable)
        self.read = read
        self.text = ""
        self._written: list[tuple[Path, str]] = []

    def arm(self, run: TracedRun) -> None:
        inst = run.instance
        assert inst is not None
        for event, text in self.triggers:
            path = inst.events_dir / event.group / event.event / "trigger"
            write_trigger(path, text, "hist trigger", inst.path / "error_log")
            self._written.append((path, text))
        for event in self.enable:
            inst.write(f"events/{event.group}/{event.event}/enable", "1")

    def stop(self, run: TracedRun, step: CleanupSteps, complete: bool) -> None:
        inst = run.instance
        assert inst is not None
        read = self.read
        if complete and read is not None and inst.created:
            step(lambda: self._read_hist(inst.events_dir / read.group / read.event / "hist"))
        while self._written:
            path, text = self._written.pop()
            _unwrite(path, remove_trigger(text))

    def read_now(self, run: TracedRun) -> str:
        """The ``read`` event's hist file as it is now, while the run lasts."""
        inst = run.instance
        assert inst is not None and self.read is not None
        path = inst.events_dir / self.read.group / self.read.event / "hist"
        try:
            return path.read_text()
        except OSError as err:
            raise os_error(err, "read the kernel's histogram", path) from None

    def _read_hist(self, path: Path) -> None:
        try:
            self.text = path.read_text()
        except OSError as err:
            raise os_error(err, "read the kernel's histogram", path) from None


def write_trigger(path: Path, text: str, what: str, error_log: Path, hint: str = KEYS_HINT) -> None:
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


@contextlib.contextmanager
def _synthetic_event(tfs: Tracefs, texts: LatencyTriggers):
    """The run's synthetic event, defined for the block and removed after it (after the instance,
    whose triggers use it)."""
    write_trigger(tfs.root / "synthetic_events", texts.synthetic, "synthetic event", tfs.root / "error_log",
                  f"its name is this process's; another tool made one of that name: see {tfs.root}/synthetic_events")
    try:
        yield
    finally:
        if (tfs.root / "events" / "synthetic" / texts.synthetic_name).exists():
            _unwrite(tfs.root / "synthetic_events", "!" + texts.synthetic_name)


# ---- the events of a run or a recording ----------------------------------------------------------------


def _aggregating(events: Sequence[SelectedEvent], agg: Any, progress: Progress) -> LiveStream:
    """A stream of ``events`` whose pages are fed, undecoded, to the native aggregator ``agg``."""

    def on_pages(streams: list, layout: Any) -> None:
        agg.feed(streams, long_size=layout.long_size, big_endian=layout.big_endian, page_size=layout.page_size)
        if progress is not None:
            progress(agg.counters()["events"])

    return LiveStream(events, on_pages, raw=True)


def _selected(tfs: Tracefs, name: tuple[str, str], filter_text: Optional[str]) -> SelectedEvent:
    from ..filters import compile_filter

    fmt = tfs.event_format(*name)
    return SelectedEvent(name[0], name[1], fmt, compile_filter(filter_text, fmt) if filter_text else None)


def _one(names: list[tuple[str, str]], word: str) -> tuple[str, str]:
    if len(names) != 1:
        raise AnalysisError(f"{word!r} made {len(names)} events, and one is needed here",
                            "name one place (e.g. FUNC@FILE or a binary with -x)")
    return names[0]


def recorded_event(trace: Any, word: str) -> Any:
    """The format of the one event of a recording that ``word`` names (GROUP:EVENT or EVENT)."""
    pattern = word.replace("/", ":", 1)
    fmts = [f for f in trace.event_formats if f.full_name == pattern or f.name == pattern]
    if len(fmts) != 1:
        names = [f.full_name for f in trace.present_formats()]
        raise AnalysisError(f"{trace.where} has no event {word!r}" if not fmts else f"{word!r} is ambiguous",
                            did_you_mean(pattern, names, quote=True) or f"its events: {', '.join(names) or 'none'}")
    return fmts[0]


def _two_events(start: str, end: str) -> None:
    if start == end:
        raise AnalysisError(f"the start and the end are one event ({start})",
                            "time between two events: a function's entry and return, or --start A --end B")


def _measured(result: LatencyResult, notice: Callable[[str], None], key_text: str) -> LatencyResult:
    """``result``, unless it measured nothing: then an error that says why. Starts that replaced a start
    of their key before its end get a notice: the nested calls of one key (a recursive function on one
    thread), of which only the innermost is timed, as bpftrace's @start[tid] pairs them (the kernel's
    hist triggers pair so, and user space agrees with them); their ends had no start left. Ends
    without a start alone say nothing: the ends of calls already running when the tracing began."""
    if result.replaced and result.count:
        notice(f"probectl: {result.replaced:,} starts came before the end of an earlier start of their key "
               f"({key_text}), which they replaced (nested calls: a recursive function on one thread); only the "
               f"innermost is timed, and {result.unmatched:,} ends had no start left")
    if not result.count:
        hint = ("the start event never fired: check the function and the scope (-p, -- COMMAND)"
                if not result.pending and not result.unmatched else
                f"{result.pending:,} starts never ended and {result.unmatched:,} ends had no start: check --key")
        raise AnalysisError(f"no latency measured between {result.start} and {result.end}", hint)
    return result


def _path_notice(notice: Callable[[str], None], path: str, event: str, forced: bool, reason: str = "") -> None:
    """Which path answers; for user space, why: asked for, ``reason``, or the kernel has no hist triggers."""
    why = ("" if path == KERNEL_PATH else " (--user-space)" if forced else f" ({reason})" if reason
           else " (this kernel has no hist triggers)")
    notice(f"[ probectl: {'hist trigger in the kernel' if path == KERNEL_PATH else path + ' aggregation'}"
           f" of {event}{why} ]")
