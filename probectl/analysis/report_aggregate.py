"""Reports (:mod:`.report`) of trace.dat files counted by the native aggregator, the one ``hist -i``
counts a recording with (native/aggregate.c): the pages go straight into its hash table, keyed by
the event id and the parts the sort keys need (the thread, the CPU, a field, the probed address, the
log2 bucket of a ``--hist`` field); no column per event, no Arrow, no DuckDB to import. The command
names, processes, recordings and symbols are put on the few distinct keys at the end, in Python.

It takes the common shapes: header keys, ``sym``, integer fields, ``--hist`` of an integer field,
over trace.dat files. Anything else -- a text field as a key, a directory of Parquet datasets, more
key parts than the aggregator holds, a file it cannot read whole (a bad page, a record too short for
its fields), an event whose fields differ between two files -- is for :mod:`.report_sql`, which
then gives the answer, or the error, as it always did: :func:`aggregate_report` returns None.
"""
from __future__ import annotations

import contextlib
import os
import struct
from typing import Callable, Optional, Sequence

from .. import _native
from ..dataclass import dataclass, field
from ..formats import EventFormat
from ..ringbuf import KIND_INT, field_spec
from ..script import Symbolizer, TraceSource, UNKNOWN_SYMBOL, is_kernel_address, lost_events
from ..tracedat import TraceFile, open_trace
from .keys import EXACT, LOG2, ROLE_HIST, SRC_CPU, SRC_FIELD, SRC_PID, native_aggregator
from .recording import UNKNOWN_COMM, event_formats, host_of, recording_name, thread_names
from .report import (DEFAULT_KEYS, SYM_KEY, Histogram, Report, ReportRow, address_field,
                     check_hist_field, check_keys, holding, matching_event_names)

SRC_ID = 6  # the record's event id (AGG_SRC_ID, native/aggregate.h)
MAX_PARTS = 4  # AGG_MAX_KEYS
MAX_PLANS = 256  # AGG_MAX_PLANS
ROUND_BYTES = 32 << 20  # of each CPU's pages between two progress reports
_THREAD_KEYS = ("comm", "pid", "tid")  # (all three from the thread id)
_ID_PART = (SRC_ID, None, EXACT, 0, 8)


@dataclass
class FileFacts:
    """What a report says of each file besides the counts: lost events, formats that did not parse."""

    path: str
    lost: int
    format_failures: list[tuple[str, str]]


@dataclass
class AggregateAnswer:
    """A report (``--sort``) or its histograms (``--hist``), and the files' facts."""

    report: Optional[Report]
    histograms: Optional[list[Histogram]]
    selected: list[str]
    files: list[FileFacts] = field(default_factory=list)


class _Decline(Exception):
    """This shape is for the SQL reporter."""


@dataclass
class _Parts:
    """What the key of every plan holds after the event id, in order: ``thread``, ``cpu``, ``sym``,
    a field name (from the sort keys, each once), and ``value`` (the --hist field's log2 bucket)."""

    names: list[str]

    @classmethod
    def of(cls, keys: Sequence[str], hist_field: Optional[str]) -> "_Parts":
        names: list[str] = []
        for k in keys:
            name = "thread" if k in _THREAD_KEYS else k
            if k == SYM_KEY and "thread" not in names:
                names.append("thread")  # (an address is named in its process)
            if k not in ("event", "recording", "host") and name not in names:
                names.append(name)
        if hist_field:
            names.append("value")
        if 1 + len(names) > MAX_PARTS:
            raise _Decline
        return cls(names)


def _int_field(fmt: EventFormat, name: str) -> Optional[tuple]:
    """The decoder spec of integer field ``name`` of ``fmt``; None when ``fmt`` has no such field;
    a field of another kind is for SQL (text keys, arrays)."""
    f = fmt.field(name)
    if f is None or f.is_common:
        return None
    spec = field_spec(f)
    if spec[3] != KIND_INT:
        raise _Decline
    return spec


def _signed(spec: tuple) -> bool:
    """How an integer field reads back (as the decoder's columns: u64 unsigned, the others int64)."""
    return not (spec[1] == 8 and not spec[5])


class _FilePlan:
    """The aggregator's plans for one file: per event, its key parts, and whether it has every
    field the report needs (an event that lacks one is planned too, keyed by its id alone: its
    entries only say that the file holds it)."""

    def __init__(self, formats: Sequence[EventFormat], parts: _Parts, hist_field: Optional[str]):
        self.formats = {f.id: f for f in formats}
        self.complete: dict[int, bool] = {}
        self.signed: dict[int, list[bool]] = {}
        self.address: dict[int, bool] = {}  # has an address for sym
        self.plans = []
        for fmt in formats:
            names = [f.name for f in fmt.event_fields]
            key: list[tuple[int, Optional[tuple], int, int, int]] = [_ID_PART]
            signed, complete = [False], True
            addr = address_field(fmt, names)
            self.address[fmt.id] = addr is not None
            for part in parts.names:
                if part == "thread":
                    key.append((SRC_PID, None, EXACT, 0, 8))
                    signed.append(True)
                    continue
                if part == "cpu":
                    key.append((SRC_CPU, None, EXACT, 0, 8))
                    signed.append(True)
                    continue
                name = {"value": hist_field, SYM_KEY: addr}.get(part, part)
                spec = _int_field(fmt, name) if name else None
                if spec is None:
                    complete &= part == SYM_KEY  # (sym of an event without an address: [unknown])
                    key.append(_ID_PART)
                    signed.append(False)
                    continue
                key.append((SRC_FIELD, spec, LOG2 if part == "value" else EXACT, 0, 8))
                signed.append(_signed(spec) and part != "value")
            self.complete[fmt.id] = complete
            self.signed[fmt.id] = signed
            self.plans.append((fmt.id, ROLE_HIST, key, None))


def _count(trace: TraceFile, plan: _FilePlan, progress: Optional[Callable[[str, int], None]]) -> list[tuple[bytes, int]]:
    """(key, count) of every key of the file's events; ``progress(file, records so far)`` after
    each round of :data:`ROUND_BYTES` of every CPU's pages (counts need no time order across CPUs,
    nor across rounds: the plans keep no state between two records)."""
    agg = native_aggregator(plan.plans)
    streams, layout = trace.page_streams()
    step = max(1, ROUND_BYTES // layout.page_size) * layout.page_size
    records = 0
    for start in range(0, max((size for _cpu, _buf, _off, size in streams), default=0), step):
        pieces = [(cpu, buf, off + start, min(step, size - start)) for cpu, buf, off, size in streams if start < size]
        try:
            records += agg.feed(pieces, long_size=layout.long_size, big_endian=layout.big_endian,
                                page_size=layout.page_size)
        except _native.DecodeError:
            raise _Decline from None  # (a bad page: the SQL reporter says where, as it always did)
        if progress is not None:
            progress(trace.where, records)
    if agg.counters()["short_records"]:
        raise _Decline  # (a record too short for a field: the columns hold what there is of it)
    return [(key, n) for key, n, _sum, _min, _max in agg.entries()]


def aggregate_report(paths: Sequence[str | os.PathLike], names: Sequence[str] = (), globs: Sequence[str] = (),
                     keys: Sequence[str] = (), hist_field: Optional[str] = None, top: int = 0, *,
                     progress: Optional[Callable[[str, int], None]] = None) -> Optional[AggregateAnswer]:
    """The report of ``paths`` (trace.dat files, named ``names``) by ``keys`` -- the histograms of
    ``hist_field`` when given -- of the events matching ``globs``, as :class:`~.report_sql.Reporter`
    gives it; None when this shape is the SQL reporter's. Bad keys and fields are errors here too.
    ``progress(file, records so far)`` is called as the files are read."""
    if len(names) > len(paths) or not paths:
        return None
    try:
        with contextlib.ExitStack() as stack:
            traces = [stack.enter_context(open_trace(p)) for p in paths]
            return _answer(traces, names, globs, list(keys), hist_field, top, progress)
    except _Decline:
        return None


def _answer(traces: Sequence[TraceFile], names: Sequence[str], globs: Sequence[str], keys: list[str],
            hist_field: Optional[str], top: int, progress: Optional[Callable[[str, int], None]]) -> AggregateAnswer:
    recordings = [names[i] if i < len(names) else recording_name(t.path) for i, t in enumerate(traces)]
    if len(set(recordings)) != len(recordings):
        raise _Decline  # (the SQL reporter's error names the two files)
    sort_keys = keys if hist_field else (keys or list(DEFAULT_KEYS))
    parts = _Parts.of(sort_keys, hist_field)
    formats = [event_formats(t) for t in traces]
    fields: dict[str, list[str]] = {}
    for fmts in formats:
        if len(fmts) > MAX_PLANS:
            raise _Decline
        for f in fmts:
            have = [x.name for x in f.event_fields]
            if fields.setdefault(f.full_name, have) != have:
                raise _Decline  # (SQL unites the two tables by name: NULL where one has no such field)
    plans = [_FilePlan(fmts, parts, hist_field) for fmts in formats]
    counted = [_count(t, p, progress) for t, p in zip(traces, plans)]

    present = sorted({plans[i].formats[struct.unpack_from("=Q", key)[0]].full_name
                      for i, entries in enumerate(counted) for key, _n in entries})
    selected = matching_event_names(present, globs, holding([str(t.path) for t in traces]))
    names_of = list(dict.fromkeys(n for e in selected for n in fields[e]))
    check_keys(sort_keys, names_of)
    if hist_field:
        check_hist_field(hist_field, names_of, selected, lambda event: (True, ""))  # (plans took integers only)

    chosen = set(selected)
    groups: dict[tuple, dict[int, int]] = {}
    for trace, recording, plan, entries in zip(traces, recordings, plans, counted):
        comms, tgids, host = thread_names(trace), trace.tgids, host_of(trace)
        symbolizer = Symbolizer(TraceSource(trace)) if SYM_KEY in parts.names else None
        syms: dict[tuple[int, int], str] = {}
        for key, n in entries:
            event_id = struct.unpack_from("=Q", key)[0]
            fmt = plan.formats[event_id]
            if fmt.full_name not in chosen or not plan.complete[event_id]:
                continue
            values = {p: struct.unpack_from("=q" if s else "=Q", key, 8 * (i + 1))[0]
                      for i, (p, s) in enumerate(zip(parts.names, plan.signed[event_id][1:]))}
            tid = values.get("thread", 0)
            out = []
            for k in sort_keys:
                if k == "event":
                    out.append(fmt.full_name)
                elif k == "comm":
                    out.append(comms.get(tid, UNKNOWN_COMM))
                elif k == "pid":
                    out.append(tgids.get(tid, tid))
                elif k == "tid":
                    out.append(tid)
                elif k == "recording":
                    out.append(recording)
                elif k == "host":
                    out.append(host)
                elif k == SYM_KEY:
                    if not plan.address[event_id]:
                        out.append(UNKNOWN_SYMBOL)
                        continue
                    where = (tgids.get(tid, tid), values[SYM_KEY])
                    if where not in syms and symbolizer is not None:  # (made when SYM_KEY is a key)
                        syms[where] = symbolizer.resolve(where[0], where[1], is_kernel_address(where[1]))[0]
                    out.append(syms[where])
                else:
                    out.append(values[k])
            group = groups.setdefault(tuple(out), {})
            bucket = values.get("value", 0)
            group[bucket] = group.get(bucket, 0) + n

    facts = [FileFacts(str(t.path), lost_events(t), t.format_failures()) for t in traces]
    if hist_field:
        return AggregateAnswer(None, _ranked(groups, hist_field, sort_keys, top), selected, facts)
    rows = sorted((ReportRow(key, sum(c.values())) for key, c in groups.items()), key=lambda r: (-r.count, r.keys))
    report = Report(sort_keys, sum(r.count for r in rows), selected, rows[:top] if top else rows)
    return AggregateAnswer(report, None, selected, facts)


def _ranked(groups: dict[tuple, dict[int, int]], value: str, keys: Sequence[str], top: int) -> list[Histogram]:
    """One :class:`Histogram` per group of key values, the largest first (ties in key order); with
    keys and ``top``, only the ``top`` largest groups (as the SQL reporter ranks them)."""
    hists = [Histogram(value, dict(zip(keys, key)), dict(sorted(counts.items())))
             for key, counts in sorted(groups.items())]
    if keys and top:
        best = {id(h) for h in sorted(hists, key=lambda h: -h.total)[:top]}
        hists = [h for h in hists if id(h) in best]
    return sorted(hists, key=lambda h: -h.total)
