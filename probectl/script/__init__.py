"""Formatters for recorded events: perf-script-like text, CSV, JSON lines and folded stacks.

Each event format is compiled once into a :class:`~.plan.Plan`: a ``%`` template for a whole output
line plus, for each ``%`` slot, the column it reads and an optional value conversion. The plans are
the one description of the output; two things run them:

* the native formatter (:mod:`.nativeplan`, ``native/textfmt.c``), which the commands use: each plan
  compiled into literals and value slots, run in C over the decoder's batches, no Python object per
  event; the text is written to the output's file descriptor in large chunks by the same C loop
  (or handed back as one bytes buffer per batch, for a stream without a descriptor);
* the Python batch path (:meth:`~.plan.Formatter.format_batch`, and ``write_script(native=False)``),
  the reference whose output the native one equals byte for byte: a batch formatted format by format
  with ``map(template.__mod__, zip(*columns))``, the lines of several formats put back in time order
  with one iterator per format (the decoder numbers the rows of a format in event order).

Text lines follow perf script::

    uprobe_target  4242 [001]  1641.301826: probe_uprobe_target:add_ints: (55d5e51cf1a9) a=1 b=-3

Probe events are printed with the kernel's own print format (``0x`` for hex types, strings between
double quotes), with their ``(__probe_ip)`` or ``(__probe_func <- __probe_ret_ip)`` as the ``ip``
field; tracepoints print their fields as ``name=value`` (numbers in decimal, pointers in hex,
strings quoted).

Stacks (``record -g``) are the kernel's ``ftrace:kernel_stack`` and ``ftrace:user_stack`` records,
written right after the event they belong to on the same CPU. They are attached to that event
(:class:`StackJoiner`) and symbolized from the file: kernel addresses with the kallsyms section,
user addresses with the process maps probectl stores in the file (see
:data:`probectl.tracedat.procmaps.OPTION_PROC_MAPS`) and the symbol tables of the mapped binaries.

The package: :mod:`.symbols` (names and symbols), :mod:`.printfmt` (print formats as templates),
:mod:`.stacks` (stack records), :mod:`.plan` (the formatter base), :mod:`.formatters` (text, JSON,
CSV), :mod:`.nativeplan` (plans for the native formatter) and :mod:`.folded` (folded stacks); this
module drives a file through them.
"""
from __future__ import annotations

import codecs
from typing import Any, Callable, Iterator, Sequence, TextIO

from .. import _native
from ..dataclass import dataclass, field
from ..errors import OutputError, ProbectlError, did_you_mean
from ..formats import EventFormat, event_matches
from ..ringbuf import EventReader, _decode_error
from ..tracedat.procmaps import Mapping
from .folded import KERNEL_MARK, FoldedPlanner, FoldedStacks
from .formatters import CsvFormatter, JsonFormatter, TextFormatter
from .nativeplan import native_formatter
from .plan import DEFAULT_FIELDS, FIELDS, Formatter, parse_fields
from .printfmt import split_print_fmt, trace_template
from .stacks import STACK_EVENTS, StackJoiner, probe_ip_fields, records_with_stacks, stack_addresses, stack_ids
from .symbols import (UNKNOWN_SYMBOL, KernelSymbols, LiveSource, Source, Symbolizer, TraceSource, UserSymbols,
                      is_kernel_address)

__all__ = [
    "CsvFormatter",
    "DEFAULT_FIELDS",
    "FIELDS",
    "FoldedStacks",
    "KERNEL_MARK",
    "Formatter",
    "JsonFormatter",
    "KernelSymbols",
    "Mapping",
    "OUTPUT_FORMATS",
    "STACK_EVENTS",
    "ScriptResult",
    "LiveSource",
    "Source",
    "StackJoiner",
    "Symbolizer",
    "TextFormatter",
    "TraceSource",
    "UNKNOWN_SYMBOL",
    "UserSymbols",
    "check_event_globs",
    "is_kernel_address",
    "lost_events",
    "make_formatter",
    "native_formatter",
    "parse_fields",
    "print_live",
    "split_print_fmt",
    "stack_addresses",
    "stack_ids",
    "stream_events",
    "trace_template",
    "write_script",
    "events_with_frames",
    "stack_formatter",
]

OUTPUT_FORMATS = ("text", "csv", "json", "folded")
_NATIVE_BATCH = 1 << 13


def make_formatter(kind: str, source: Source, fields: Sequence[str] = DEFAULT_FIELDS, *,
                   long_size: int = 8, events: Sequence[str] = ()) -> Formatter:
    classes = {"text": TextFormatter, "json": JsonFormatter, "csv": CsvFormatter, "folded": FoldedPlanner}
    if kind not in classes:
        raise ProbectlError(f"unknown output format {kind!r}", f"choose one of {', '.join(OUTPUT_FORMATS)}")
    return classes[kind](source, fields, long_size=long_size, events=events)


@dataclass
class ScriptResult:
    events: int = 0  # events decoded (stack records included)
    printed: int = 0  # lines/objects/rows, or stacks counted for folded
    has_stacks: bool = False
    unknown_ids: set[int] = field(default_factory=set)


def _native_calls(reader: EventReader, method: Callable[..., Any], *args: Any) -> Iterator[Any]:
    """``method(*args)`` of the reader's native part until it returns None (the end)."""
    while True:
        try:
            got = method(*args)
        except _native.DecodeError as err:
            raise _decode_error(err, reader.source) from None
        if got is None:
            return
        yield got


def _utf8_buffer(out: TextIO) -> Any:
    """The binary buffer under a text stream that writes UTF-8, or None."""
    buffer = getattr(out, "buffer", None)
    encoding = getattr(out, "encoding", None)
    try:
        utf8 = encoding is not None and codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        utf8 = False
    return buffer if utf8 else None


def _out_fd(out: TextIO) -> int:
    """The file descriptor under a UTF-8 text stream (flushed), to write to directly; -1: none."""
    buffer = _utf8_buffer(out)
    if buffer is None:
        return -1
    try:
        fd = out.fileno()
    except (OSError, ValueError, AttributeError):  # (io.UnsupportedOperation is an OSError)
        return -1
    out.flush()
    return fd


def _byte_writer(out: TextIO) -> Callable[[bytes], Any]:
    """Write UTF-8 bytes to a text stream: straight to its buffer when it writes UTF-8 (after
    flushing what it holds), else as the text they are."""
    buffer = _utf8_buffer(out)
    if buffer is not None:
        out.flush()
        return buffer.write
    return lambda data: out.write(data.decode(errors="surrogateescape"))


def stream_events(reader: EventReader, native: Any, out: TextIO, batch_events: int = _NATIVE_BATCH) -> int:
    """Print the events ``reader`` holds to ``out`` with ``native``, a :func:`native_formatter` (kept
    from one reader to the next of a live stream: its plans and thread names stay compiled); the
    number of events decoded."""
    write = _byte_writer(out)
    count = 0
    for n, data in _native_calls(reader, reader._native.format_text, native, batch_events):
        count += n
        write(data)
    return count


def print_live(live: Any, out: TextIO, kind: str = "text", fields: Sequence[str] = DEFAULT_FIELDS,
               on_start: Callable[[], None] | None = None) -> None:
    """Print the events of a live trace (:class:`~probectl.record.trace.LiveTrace`: its ``formats``,
    its ``names`` of live processes, and ``run(on_pages, on_start)``) to ``out`` as they arrive, until
    it ends; ``on_start`` once they are traced. CSV has the columns of every field of the events."""
    formatter = make_formatter(kind, LiveSource(live.names), fields if kind != "csv" else
                               ("time", "cpu", "pid", "tid", "comm", "event", "trace"))
    formatter.set_formats(live.formats)
    if isinstance(formatter, CsvFormatter):
        formatter.set_present(live.formats)
    out.write(formatter.begin())
    out.flush()
    native = native_formatter(formatter)

    def on_pages(reader: EventReader) -> None:
        stream_events(reader, native, out)
        out.flush()

    live.run(on_pages, on_start)
    out.write(formatter.end())
    out.flush()


def check_event_globs(trace: Any, formats: Sequence[EventFormat], globs: Sequence[str]) -> None:
    """A ``-e`` glob that matches no event of the file is a mistake (a typo, the wrong file), not a
    request for nothing: say so, with the events the file holds."""
    held = [f for f in formats if (f.system, f.name) not in STACK_EVENTS]
    for glob in globs:
        if not any(event_matches(f, glob) for f in held):
            names = [f.full_name for f in held]
            shown = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            raise ProbectlError(f"no event in {trace.where} matches {glob!r}",
                                hint=did_you_mean(glob, names) or (f"the file holds {shown}" if names
                                                                   else "the file holds no events"))


def write_script(trace: Any, out: TextIO, kind: str = "text", fields: Sequence[str] = DEFAULT_FIELDS, *,
                 events: Sequence[str] = (), batch_events: int = 1 << 18, native: bool = True,
                 demangle: bool = True) -> ScriptResult:
    """Print every event of an open :class:`~probectl.tracedat.TraceFile` to ``out``.

    ``kind`` is text, csv, json or folded; ``fields`` the ``-F`` selection; ``events`` globs
    limiting what is printed (each must match an event the file holds). Files without stacks are formatted by the native formatter
    (:mod:`.nativeplan`), or with ``native`` off by the Python batch path (the reference it equals
    byte for byte); files with stacks (recorded with ``-g``) go through the row path that attaches
    stacks to their events, and folded stacks are counted natively
    (:meth:`.FoldedStacks.count_natively`), or with ``native`` off on that row path. With ``demangle``
    off, stacks name C++ and Rust functions by their symbols as written (``_ZN4shop4Cart3addEi``).
    """
    source = TraceSource(trace, demangle=demangle)
    formatter = make_formatter(kind, source, fields, long_size=trace.layout.long_size, events=events)
    # Only the formats of the events the file holds are parsed (one walk over the pages finds
    # their ids): a file recorded from tracefs carries some 1,500 formats and uses a few.
    formats = trace.present_formats()
    check_event_globs(trace, formats, events)
    formatter.set_formats(formats)
    sids = stack_ids(formats)
    result = ScriptResult()
    result.has_stacks = bool(sids)
    formatter.has_stacks = result.has_stacks
    if kind == "folded" and not result.has_stacks:
        raise ProbectlError(f"{trace.where} has no stacks to fold",
                            "record with -g (probectl record -g ...) to get kernel and user stacks")
    if isinstance(formatter, CsvFormatter):
        formatter.set_present(formats)
    out.write(formatter.begin())

    if kind == "folded" and native:  # (counted natively: nothing is printed per event)
        native_folded = FoldedStacks(formatter)
        result.events = native_folded.count_natively(trace, formats)
        out.write(native_folded.text())
        result.printed = native_folded.events
        out.write(formatter.end())
        return result
    reader = trace.reader(formats=formats)
    try:
        if result.has_stacks:
            joiner = StackJoiner(sids, probe_ips=probe_ip_fields(formats))
            folded = FoldedStacks(formatter) if kind == "folded" else None
            for rows, _lost in reader.rows(batch_events):
                result.events += len(rows)
                recs = list(joiner.feed(rows))
                if folded is not None:
                    folded.add(recs)
                else:
                    out.write(formatter.format_records(recs))
            recs = list(joiner.finish())
            if folded is not None:
                folded.add(recs)
                out.write(folded.text())
                result.printed = folded.events
            else:
                out.write(formatter.format_records(recs))
        elif native:
            # (small batches: the columns and the text of one stay in the CPU caches)
            size = min(batch_events, _NATIVE_BATCH)
            fd = _out_fd(out)
            if fd >= 0:  # every batch formatted and written out in C
                try:
                    result.events += reader._native.format_text(native_formatter(formatter), size, fd=fd)
                except _native.DecodeError as err:
                    raise _decode_error(err, reader.source) from None
                except OSError as err:  # (the only OSError there: writing to fd)
                    raise OutputError(err) from None
            else:
                result.events += stream_events(reader, native_formatter(formatter), out, size)
        else:
            for batch in reader.batches(batch_events):
                result.events += len(batch)
                out.write(formatter.format_batch(batch))
    finally:
        reader.close()
    out.write(formatter.end())
    return result


def stack_formatter(trace: Any, events: Sequence[str], demangle: bool = True) -> tuple[Formatter, list[EventFormat]]:
    """The formatter that names the frames, processes and threads of a recording's stacks (and says
    whether it has any: ``has_stacks``), and the formats of the events the recording holds;
    ``events`` are ``-e`` globs, each of which must match one; ``demangle`` as :func:`write_script`'s."""
    formats = trace.present_formats()
    check_event_globs(trace, formats, events)
    formatter = make_formatter("folded", TraceSource(trace, demangle=demangle), long_size=trace.layout.long_size,
                               events=events)
    formatter.set_formats(formats)
    formatter.has_stacks = bool(stack_ids(formats))
    return formatter, formats


def events_with_frames(trace: Any, events: Sequence[str] = ()) -> Iterator[tuple[tuple, list[tuple]]]:
    """The events of a recording (``-e`` globs ``events``, each of which must match one) in time order,
    each with its stacks' frames named as ``script`` names them: (the event's row, [(kind, address,
    name, offset, dso)], kernel frames first, each stack innermost first)."""
    formatter, formats = stack_formatter(trace, events)
    for rec in records_with_stacks(trace, formats):
        if not formatter.plan(rec.row[2]).skip:
            yield rec.row, formatter.frames(rec)


def lost_events(trace: Any) -> int:
    """Events the kernel lost while recording, from the file's per-CPU statistics."""
    total = 0
    for stats in trace.cpustats.values():
        for key in ("overrun", "dropped events"):
            try:
                total += int(str(stats.get(key, "0")).split()[0])
            except (ValueError, IndexError):
                continue
    return total
