"""Recordings for timeline viewers: the Chrome JSON trace event format, which Perfetto
(ui.perfetto.dev), chrome://tracing and Speedscope open.

Chrome JSON and not Perfetto's TrackEvent protobuf: Perfetto reads the JSON format as it is, and writing
it needs no library (Perfetto's Python package reads traces through a trace_processor binary it
downloads at run time, and writes none).

Each process is a process track and each thread a thread track, named from the file's saved command
names. An entry probe and a return probe of one function (the entry's ``__probe_ip`` is the return's
``__probe_func``: the kernel's own fields, whatever the events are named) on one thread are a slice: a
``B`` (begin) at the entry with its fields as arguments and an ``E`` (end) at the return with its own; every other event is a thread-scoped instant (``i``) with its fields. A return without an entry
open on its thread (the recording started inside the call) is an instant too, so that every recorded
event is in the output once, and slices nest. Fields named in ``counters`` also make counter tracks
(``C``) of their numeric values. With stacks (``record -g``) each event's frames are its ``stack``
argument, innermost first.
"""
from __future__ import annotations

import fnmatch
import io
import json
from typing import Any, BinaryIO, Iterable, Sequence, TextIO

from ..outputfile import OutputFile
from ..script.stacks import STACK_EVENTS
from ..script.stacks import records_with_stacks
from .stacks import stack_folder

_MAX_SAFE = (1 << 53) - 1  # larger integers lose digits in JavaScript: written as hex text


def _value(v: Any) -> Any:
    if isinstance(v, int):
        return v if -_MAX_SAFE <= v <= _MAX_SAFE else hex(v)
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", "replace")
    if isinstance(v, (tuple, list)):
        return [_value(x) for x in v]
    return v


def _fields(fmt: Any, values: Any) -> dict[str, Any]:
    if fmt is None or values is None:
        return {}
    return {f.name: _value(v) for f, v in zip(fmt.event_fields, values)}


class _TimelineWriter:
    def __init__(self, out: TextIO):
        self.out = out
        self.first = True
        self.written = 0

    def emit(self, event: dict) -> None:
        self.out.write(("" if self.first else ",\n") + json.dumps(event, separators=(",", ":")))
        self.first = False
        self.written += 1


def _index(fmt: Any, name: str) -> int | None:
    names = [f.name for f in fmt.event_fields]
    return names.index(name) if name in names else None


def _at(values: Any, index: int | None) -> Any:
    return values[index] if index is not None and index < len(values) else None


def _returned_functions(trace: Any, formats: list, func_index: dict[int, int]) -> set[int]:
    """The addresses of the functions the return probes of the file saw return (``__probe_func``): an
    entry probe at one of them (its ``__probe_ip``) begins a slice."""
    called: set[int] = set()
    if not formats:
        return called
    reader = trace.reader(formats=formats)
    try:
        for rows, _lost in reader.rows():
            for row in rows:
                i = func_index.get(row[2])
                if i is not None and row[6] is not None and i < len(row[6]):
                    called.add(row[6][i])
    finally:
        reader.close()
    return called


def write_chrome_json(trace: Any, out: TextIO, events: Sequence[str] = (), counters: Iterable[str] = (),
                      demangle: bool = True) -> int:
    """Write the events of an open trace (``events``: ``-e`` globs) as one Chrome JSON trace object;
    the number of recorded events written (counter samples and track names not included); stacks'
    C++ and Rust functions demangled unless ``demangle`` is off."""
    counter_globs = tuple(counters)
    folded, formats = stack_folder(trace, events, need_stacks=False, demangle=demangle)
    f = folded.formatter
    by_id = {fmt.id: fmt for fmt in formats}
    entry_ip = {fmt.id: i for fmt in formats if (i := _index(fmt, "__probe_ip")) is not None}
    return_func = {fmt.id: i for fmt in formats if (i := _index(fmt, "__probe_func")) is not None}
    called = _returned_functions(trace, [by_id[i] for i in return_func], return_func)

    writer = _TimelineWriter(out)
    out.write('{"displayTimeUnit":"ns","otherData":{"source":' + json.dumps(str(trace.where)) + '},"traceEvents":[\n')
    named: set[int] = set()
    open_slices: dict[int, list[int]] = {}  # tid -> entry ids of the slices open on it, innermost last
    recorded = 0
    for rec in records_with_stacks(trace, formats):
        ts, _cpu, event_id, tid = rec.row[:4]
        fmt = by_id.get(event_id)
        if fmt is None or (fmt.system, fmt.name) in STACK_EVENTS or f.plan(event_id).skip:
            continue
        pid = f.tgids[tid]
        if tid not in named:
            named.add(tid)
            if pid not in named and pid != tid:
                named.add(pid)
                writer.emit({"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
                             "args": {"name": f.comms[pid]}})
            if pid == tid:
                writer.emit({"ph": "M", "name": "process_name", "pid": pid, "tid": tid,
                             "args": {"name": f.comms[tid]}})
            writer.emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": f.comms[tid]}})
        args = _fields(fmt, rec.row[6])
        if rec.stacks:
            args["stack"] = [f"{name}+{off:#x} ({dso})" if off else f"{name} ({dso})"
                             for _k, _a, name, off, dso in f.frames(rec)]
        us = ts / 1000
        base = {"pid": pid, "tid": tid, "ts": us, "cat": fmt.system}
        stack = open_slices.setdefault(tid, [])
        values = rec.row[6] or ()
        ip = _at(values, entry_ip.get(event_id))
        func = _at(values, return_func.get(event_id))
        if ip is not None and ip in called:
            stack.append(ip)
            writer.emit({"ph": "B", "name": fmt.name, **base, "args": args})
        elif func is not None and func in stack:
            while stack[-1] != func:  # (a slice left without its return: longjmp, a lost event) ends here
                stack.pop()
                writer.emit({"ph": "E", **base, "args": {"ended_by": fmt.full_name}})
            stack.pop()
            writer.emit({"ph": "E", **base, "args": args})
        else:
            writer.emit({"ph": "i", "s": "t", "name": fmt.full_name, **base, "args": args})
        recorded += 1
        for name, v in args.items():
            if isinstance(v, int) and any(fnmatch.fnmatchcase(name, g) for g in counter_globs):
                writer.emit({"ph": "C", "name": f"{fmt.full_name} {name}", "pid": pid, "tid": tid, "ts": us,
                             "cat": fmt.system, "args": {name: v}})
    out.write("\n]}\n")
    return recorded


def write_chrome_json_file(trace: Any, output: OutputFile, events: Sequence[str] = (),
                           counters: Iterable[str] = (), demangle: bool = True) -> int:
    """:func:`write_chrome_json` streamed into ``output``, whole or not at all, in bounded memory (the
    timeline of a large recording is larger than the memory it may take); the events written."""
    written = 0

    def produce(out: BinaryIO) -> None:
        nonlocal written
        text = io.TextIOWrapper(out, encoding="utf-8", errors="surrogateescape", newline="")
        try:
            written = write_chrome_json(trace, text, events, counters, demangle)
            text.flush()
        finally:
            text.detach()  # (the output file is its owner's to close)

    output.write(produce)
    return written
