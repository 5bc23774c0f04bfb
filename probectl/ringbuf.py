"""Ring-buffer pages from Python: the native decoder and recorder behind a small API.

The C core (``probectl._native``, sources in ``native/``) does all per-event work. This module
turns event formats into the C field tables, wraps the decoded batches, and maps failures to
probectl's errors:

* :class:`EventReader` merges the pages of several CPUs by time and decodes them with the
  formats it was given, in batches: :meth:`EventReader.batches` (columnar, :class:`Columns`),
  :meth:`EventReader.tables` (a :class:`FormatTable` of Arrow-layout buffers per event format,
  for SQL and Parquet) or :meth:`EventReader.events` (one :class:`Event` per record, built in
  batches).
* :class:`Recorder` copies ``per_cpu/cpuN/trace_pipe_raw`` of a tracefs instance to one file per
  CPU, a thread per CPU, with splice.
* :func:`parse_page` decodes one page, for tests and tools.
"""
from __future__ import annotations

import errno as _errno
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Optional, Sequence, Union

from . import _native
from .dataclass import dataclass
from .errors import FormatError, ProbectlError, TraceFileError, TracefsError
from .formats import EventFormat, Field, elements_text, parse_fields, variant_text

Buffer = Union[bytes, bytearray, memoryview, Any]  # anything with the buffer protocol (mmap too)

LOC_FIXED, LOC_DATA, LOC_REL, LOC_TAIL = (_native.LOC_FIXED, _native.LOC_DATA, _native.LOC_REL,
                                          _native.LOC_TAIL)
KIND_INT, KIND_STR, KIND_BYTES, KIND_INT_ARRAY = (_native.KIND_INT, _native.KIND_STR,
                                                  _native.KIND_BYTES, _native.KIND_INT_ARRAY)
KIND_STR_ARRAY = _native.KIND_STR_ARRAY
# Header columns EventReader.slice_tables may leave out (TAB_SKIP_*, native/tables.h).
SKIP_TS, SKIP_CPU, SKIP_TID, SKIP_THREAD, SKIP_TGID = 1, 2, 4, 8, 16

_CHAR_TYPES = {"char", "signed char", "unsigned char"}
_FIXED_SIZES = {
    "u8": 1, "s8": 1, "__u8": 1, "__s8": 1, "bool": 1, "_Bool": 1,
    "short": 2, "unsigned short": 2, "u16": 2, "s16": 2, "__u16": 2, "__s16": 2,
    "int": 4, "unsigned int": 4, "unsigned": 4, "u32": 4, "s32": 4, "__u32": 4, "__s32": 4,
    "pid_t": 4,
    "long long": 8, "unsigned long long": 8, "u64": 8, "s64": 8, "__u64": 8, "__s64": 8,
}
_LONG_TYPES = {"long", "unsigned long", "size_t", "ssize_t", "void *"}


@dataclass(frozen=True)
class PageLayout:
    """How a kernel lays out its pages: ``long_size`` 8 or 4, byte order, sub-buffer size."""

    long_size: int = 8
    big_endian: bool = False
    page_size: int = 4096

    @classmethod
    def from_header_page(cls, text: str, big_endian: bool = False) -> "PageLayout":
        """Read ``events/header_page``: the size of ``commit`` is the kernel long, and the
        sub-buffer size is the offset plus the size of ``data``."""
        try:
            fields = {f.name: f for f in parse_fields(text)}
        except FormatError as err:
            raise TraceFileError(f"unreadable header_page: {err.message}") from None
        commit, data = fields.get("commit"), fields.get("data")
        if commit is None or data is None or commit.size not in (4, 8):
            raise TraceFileError("header_page lacks a 'commit' of 4 or 8 bytes or a 'data' field")
        return cls(long_size=commit.size, big_endian=big_endian, page_size=data.offset + data.size)


def _element_size(elem: str, long_size: int) -> Optional[int]:
    elem = elem.replace("const ", "").replace("volatile ", "").strip()
    if elem in _FIXED_SIZES:
        return _FIXED_SIZES[elem]
    if elem in _LONG_TYPES or elem.endswith("*"):
        return long_size
    return None


# (offset, size, loc, kind, elem_size, signed), and a counted string's bound and head (probectl._native's _FieldSpec)
FieldSpec = Union[tuple[int, int, int, int, int, bool], tuple[int, int, int, int, int, bool, int, int, int, int]]


def field_spec(field: Field, long_size: int = 8, *, tail: bool = False) -> FieldSpec:
    """The C decoder's description of ``field``: (offset, size, loc, kind, elem_size, signed), and
    for a counted string or slice (``Field.bound``, :mod:`probectl.formats`) its length's (size,
    offset) and its head's (size, offset) after them (0, 0 without a head); for a C++ vector's
    integers, its end pointer's and its begin pointer's (``Field.begin``) in their places; for a C++
    vector's begin pointer read as its length, its end pointer's and its element's size (``Field.element_size``).

    Integers of 1, 2, 4 or 8 bytes are numbers; ``char`` arrays and ``__data_loc char[]`` are text
    (up to the first NUL); ``__data_loc char[][N]`` (a probe's ``:string[N]``: N data_loc words,
    each locating one string) is a tuple of N strings, None for one the kernel could not read;
    other arrays are tuples of numbers when their element size is known, and bytes otherwise. A ``[]`` array of size 0 (``char buf[]`` of ftrace's ``print``) runs to
    the end of the record, and so does any array when ``tail`` is set.
    """
    elem = field.element_type
    signed = bool(field.signed)
    if field.is_data_loc:
        loc = LOC_REL if field.is_rel_loc else LOC_DATA
        if field.array_len is not None:  # an array of data_loc words
            if elem in _CHAR_TYPES and field.size == 4 * field.array_len:
                return (field.offset, field.size, loc, KIND_STR_ARRAY, 4, False)
            return (field.offset, field.size, LOC_FIXED, KIND_BYTES, 0, False)
        if elem in _CHAR_TYPES:
            if field.bound is not None:
                head_offset, head_size = field.head or (0, 0)
                return (field.offset, 4, loc, KIND_STR, 0, False, field.bound[1], field.bound[0], head_size,
                        head_offset)
            return (field.offset, 4, loc, KIND_STR, 0, False)
        esize = _element_size(elem, long_size)
        if esize in (1, 2, 4, 8):
            return (field.offset, 4, loc, KIND_INT_ARRAY, esize, signed)
        return (field.offset, 4, loc, KIND_BYTES, 0, False)
    if field.is_array:
        loc = LOC_TAIL if tail or field.size == 0 else LOC_FIXED
        if elem in _CHAR_TYPES:
            return (field.offset, field.size, loc, KIND_STR, 0, False)
        esize = None
        if field.array_len:
            esize = field.size // field.array_len if field.size % field.array_len == 0 else None
        esize = esize or _element_size(elem, long_size)
        if esize in (1, 2, 4, 8) and (loc == LOC_TAIL or field.size % esize == 0):
            if field.bound is not None and loc == LOC_FIXED:  # (a slice: as many elements as its length)
                begin_offset, begin_size = field.begin or (0, 0)  # (a vector: as its two pointers span)
                return (field.offset, field.size, loc, KIND_INT_ARRAY, esize, signed, field.bound[1],
                        field.bound[0], begin_size, begin_offset)
            return (field.offset, field.size, loc, KIND_INT_ARRAY, esize, signed)
        return (field.offset, field.size, loc, KIND_BYTES, 0, False)
    if field.size in (1, 2, 4, 8):
        if field.bound is not None and field.element_size:
            return (field.offset, field.size, LOC_FIXED, KIND_INT, 0, signed, field.bound[1], field.bound[0],
                    field.element_size, 0)
        return (field.offset, field.size, LOC_FIXED, KIND_INT, 0, signed)
    return (field.offset, field.size, LOC_FIXED, KIND_BYTES, 0, False)


# Records whose last array is longer than the format says: kernel_stack's ``caller[8]`` holds
# ``size`` entries, as many as the stack has (trace-cmd reads it to the end of the record too).
_TAIL_FIELDS = {("ftrace", "kernel_stack", "caller")}


def format_specs(fmt: EventFormat, long_size: int = 8) -> tuple[FieldSpec, ...]:
    """The C field table of every non-common field of ``fmt``, in the format's order, and after them
    the hidden parts its composed fields are made of (:attr:`EventFormat.composed_parts`: enums'
    variants' scalars, slices of structs' members), which :class:`ComposedValues` turns into text."""
    return tuple(
        field_spec(f, long_size, tail=(fmt.system, fmt.name, f.name) in _TAIL_FIELDS)
        for f in fmt.event_fields
    ) + tuple(field_spec(f, long_size) for f in fmt.composed_parts)


class ComposedValues:
    """The composed fields of one format (an enum shown by variant, ``Some(5)``:
    :func:`probectl.formats.variant_text`; a slice of structs, ``[{id:1} {id:2}]``:
    :func:`probectl.formats.elements_text`): the decoder gives each one's number (a discriminant, a
    length) in its place and the parts after the event fields; this puts the text in its place and
    leaves the parts out."""

    def __init__(self, fmt: EventFormat):
        self.fields = fmt.event_fields
        self.count = len(self.fields)
        self.composed = [(j, f) for j, f in enumerate(self.fields) if f.is_composed]
        self.parts = {f.name: self.count + k for k, f in enumerate(fmt.composed_parts)}

    @classmethod
    def of(cls, fmt: EventFormat) -> Optional["ComposedValues"]:
        return cls(fmt) if any(f.is_composed for f in fmt.event_fields) else None

    def row(self, values: Optional[tuple]) -> Optional[tuple]:
        """One event's values, the composed fields as text."""
        if values is None or len(values) < self.count:
            return values
        out = list(values[:self.count])
        whole = len(values) == self.count + len(self.parts)
        for j, f in self.composed:
            parts = {n: values[self.parts[n]] for n in composed_part_names(f)} if whole else {}
            out[j] = composed_text(f, values[j], parts)
        return tuple(out)

    def column(self, columns: Sequence[Any], j: int) -> list[Any]:
        """The text of the composed field ``j`` for a batch's columns (every field, then the parts)."""
        f = self.fields[j]
        values = columns[j]
        if len(columns) != self.count + len(self.parts):
            return composed_column(f, values, {})
        return composed_column(f, values, {n: columns[self.parts[n]] for n in composed_part_names(f)})


def composed_part_names(f: Field) -> list[str]:
    """The names of the hidden fields the composed field ``f`` is made from."""
    return [n for v in f.variants for n in v.payload_fields] + [p.field for p in f.elements]


def composed_text(f: Field, value: Any, parts: Mapping[str, Any]) -> Any:
    """The text of the composed field ``f`` whose own number reads ``value``, its parts ``parts``."""
    return variant_text(f, value, parts) if f.variants else elements_text(f, value, parts)


def composed_column(f: Field, values: Sequence[Any], parts: Mapping[str, Sequence[Any]]) -> list[Any]:
    """The texts of the composed field ``f`` for a column of its numbers, ``parts`` the columns of the
    hidden fields it is made from by name (any missing: the texts say only what the numbers do)."""
    names = composed_part_names(f)
    if any(n not in parts for n in names):
        return [composed_text(f, v, {}) for v in values]
    cols = [parts[n] for n in names]
    return [composed_text(f, v, dict(zip(names, row))) for v, *row in zip(values, *cols)]


@dataclass
class Page:
    """One decoded page: its header and its data records as (timestamp, payload)."""

    timestamp: int
    size: int
    flags: int
    missed: int  # 0 none, > 0 events lost before this page, -1 lost but not counted
    data_offset: int
    events: list[tuple[int, bytes]]


def parse_page(data: Buffer, layout: PageLayout = PageLayout()) -> Page:
    """Decode one page; raise :class:`TraceFileError` if it is corrupt."""
    try:
        d = _native.parse_page(data, long_size=layout.long_size, big_endian=layout.big_endian,
                               page_size=layout.page_size)
    except _native.DecodeError as err:
        raise _decode_error(err, "page") from None
    return Page(**d)


def _decode_error(err: _native.DecodeError, source: str) -> TraceFileError:
    message, _code, cpu, page_offset, pos = err.args
    where = source
    if cpu is not None:
        where += f": cpu {cpu}: page at data offset {page_offset:#x}"
    if pos:
        where += f", byte {pos}"
    return TraceFileError(f"{where}: corrupt ring-buffer page: {message}",
                          "the file is damaged or truncated; read it with strict=False to skip bad pages")


@dataclass(frozen=True)
class Lost:
    """Events lost on ``cpu`` just before the event at ``index`` (``count`` -1: not counted)."""

    index: int
    cpu: int
    count: int


class Event:
    """One decoded record: time stamp (ns, in the trace clock), CPU, common fields and values."""

    __slots__ = ("ts", "cpu", "id", "pid", "flags", "preempt", "format", "values", "raw")

    def __init__(self, ts: int, cpu: int, id: int, pid: int, flags: int, preempt: int,
                 format: Optional[EventFormat], values: Optional[tuple], raw: Optional[bytes] = None):
        self.ts = ts
        self.cpu = cpu
        self.id = id
        self.pid = pid
        self.flags = flags
        self.preempt = preempt
        self.format = format
        self.values = values
        self.raw = raw

    @property
    def name(self) -> str:
        """``system:event``, or ``unknown:<id>`` for an id without a format."""
        return self.format.full_name if self.format else f"unknown:{self.id}"

    @property
    def fields(self) -> dict[str, Any]:
        """The non-common fields by name."""
        if self.format is None or self.values is None:
            return {}
        return {f.name: v for f, v in zip(self.format.event_fields, self.values)}

    def __getitem__(self, name: str) -> Any:
        return self.fields[name]

    def __repr__(self) -> str:
        return f"Event({self.ts}, cpu={self.cpu}, pid={self.pid}, {self.name}, {self.fields})"


class Columns:
    """One batch of decoded events, column by column.

    ``ts``, ``cpu``, ``id``, ``pid``, ``flags``, ``preempt`` and ``row`` are memoryviews with one
    item per event, in time order. The event at ``i`` has the format whose ``id`` is ``id[i]``, and
    its values at ``row[i]`` of that format's columns: :meth:`column` gives them, a memoryview of
    integers for number fields and a list otherwise. ``lost`` marks lost events.
    """

    def __init__(self, raw: "_native._Columns", formats: Sequence[EventFormat]):
        self.n: int = raw["n"]
        self.ts = memoryview(raw["ts"]).cast("Q")
        self.cpu = memoryview(raw["cpu"]).cast("i")
        self.id = memoryview(raw["id"]).cast("H")
        self.pid = memoryview(raw["pid"]).cast("i")
        self.flags = memoryview(raw["flags"]).cast("B")
        self.preempt = memoryview(raw["preempt"]).cast("B")
        self.row = memoryview(raw["row"]).cast("I")
        self.raw: Optional[list[bytes]] = raw["raw"]
        self.lost = [Lost(*t) for t in raw["lost"]]
        self._formats = formats
        self._columns = raw["formats"]
        self._index = {(f.system, f.name): i for i, f in enumerate(formats)}
        self._composed: dict[int, ComposedValues] = {}

    def __len__(self) -> int:
        return self.n

    def column(self, fmt: Union[EventFormat, str], field: str) -> Sequence[Any]:
        """The values of ``field`` for the events of ``fmt`` (an EventFormat or 'system:event')."""
        if isinstance(fmt, str):
            system, _, name = fmt.partition(":")
            i = self._index[(system, name)]
        else:
            i = self._index[(fmt.system, fmt.name)]
        f = self._formats[i]
        names = [x.name for x in f.event_fields]
        j = names.index(field)
        if f.event_fields[j].is_composed:
            composed = self._composed.get(i)
            if composed is None:
                composed = self._composed[i] = ComposedValues(f)
            return composed.column([self._int_column(f, k, col) for k, col in enumerate(self._columns[i])], j)
        return self._int_column(f, j, self._columns[i][j])

    @staticmethod
    def _int_column(f: EventFormat, j: int, col: Any) -> Sequence[Any]:
        if isinstance(col, bytes):
            fields = f.event_fields + f.composed_parts
            return memoryview(col).cast("q" if j < len(fields) and fields[j].signed else "Q")
        return col


@dataclass(frozen=True)
class VarColumn:
    """A variable-size column in Arrow's "large" layout: ``offsets`` (rows + 1 int64; for an integer
    array they count elements), ``data`` (UTF-8 text with invalid bytes as U+FFFD, raw bytes, or the
    int64 elements of integer arrays) and ``validity`` (a bitmap, None when no value is missing)."""

    offsets: bytes
    data: bytes
    validity: Optional[bytes]
    nulls: int


@dataclass(frozen=True)
class FormatTable:
    """The rows of one event format in one batch, in time order: ``ts`` (uint64 ns), ``cpu`` and
    ``pid`` (int32, the record's common_pid: a thread id) and, per non-common field of the format,
    the int64 values of an integer field (the bits of a u64 for an unsigned 8-byte one) or a
    :class:`VarColumn`. Every buffer is a bytes object (or, from :meth:`EventReader.slice_tables`,
    a read-only ``_native.ColumnBuffer``) that Arrow or numpy can wrap without a copy."""

    format: EventFormat
    rows: int
    ts: Optional[bytes]  # (a header column is None when :meth:`EventReader.slice_tables` skipped it)
    cpu: Optional[bytes]
    pid: Optional[bytes]
    fields: list[Union[bytes, VarColumn]]  # (those the reader decodes: all, or its ``fields``)
    thread: Optional[bytes] = None  # with threads: each row's index in them (int32; n: not there)
    tgid: Optional[bytes] = None  # with threads: each row's thread group (int32; the tid: not there)
    # the hidden fields the composed fields are made from (EventFormat.composed_parts: int64 columns,
    # and texts, a C++ vector's strings), when they were all decoded; else empty
    parts: Sequence[Union[bytes, VarColumn]] = ()


class EventReader:
    """Decode the pages of several CPUs, merged by time stamp.

    ``streams`` gives per CPU ``(cpu, buffer, offset, size)``: ``size`` bytes of pages at
    ``offset`` of ``buffer`` (bytes, an mmap...). ``formats`` are the events to decode; records
    of other ids come out with ``format`` None. With ``strict`` off, a corrupt page is skipped
    (counted in :meth:`stats`) instead of raising :class:`TraceFileError`. ``fields`` (format id ->
    the indexes of its fields to decode; every field of the others) leaves the rest out of every
    batch, table and row.
    """

    def __init__(self, streams: Sequence[tuple[int, Buffer, int, int]], formats: Sequence[EventFormat],
                 layout: PageLayout = PageLayout(), *, strict: bool = True, raw: bool = False,
                 source: str = "trace", fields: Optional[Mapping[int, Sequence[int]]] = None):
        self.formats = list(formats)
        self.layout = layout
        self.source = source
        self._by_id = {f.id: f for f in self.formats}
        self._raw = raw
        self._composed_rows = {f.id: e for f in self.formats for e in [ComposedValues.of(f)] if e is not None}
        streams = list(streams)
        self._bytes = sum(size for _cpu, _buf, _offset, size in streams)
        tables = [(f.id, format_specs(f, layout.long_size)) for f in self.formats]
        # (per format: how many of the columns decoded are its event fields, the composed parts after them)
        self._decoded_fields = {f.id: len(f.event_fields) if not fields or f.id not in fields
                                else sum(k < len(f.event_fields) for k in fields[f.id]) for f in self.formats}
        if fields:
            tables = [(i, tuple(specs[k] for k in fields[i]) if i in fields else specs) for i, specs in tables]
        self._native = _native.Reader(streams, tables, long_size=layout.long_size,
                                      big_endian=layout.big_endian, page_size=layout.page_size,
                                      strict=strict, raw=raw)

    def batches(self, max_events: int = 1 << 20) -> Iterator[Columns]:
        """Columnar batches of up to ``max_events`` events until the end."""
        while True:
            try:
                raw = self._native.read_columns(max_events)
            except _native.DecodeError as err:
                raise _decode_error(err, self.source) from None
            if raw is None:
                return
            yield Columns(raw, self.formats)

    def tables(self, max_events: int = 1 << 20,
               threads: Optional[tuple[bytes, bytes]] = None) -> Iterator[tuple[int, list[FormatTable]]]:
        """Batches of up to ``max_events`` events as (events decoded, a :class:`FormatTable` per
        format with rows in the batch), until the end; no Python object per event. ``threads``
        (ascending thread ids and their thread groups, as int32 buffers) adds each row's index in
        them and its thread group."""
        while True:
            try:
                got = self._native.read_tables(max_events, threads)
            except _native.DecodeError as err:
                raise _decode_error(err, self.source) from None
            if got is None:
                return
            n, raw = got
            yield n, self._format_tables(raw)

    def slice_tables(self, workers: int, threads: Optional[tuple[bytes, bytes]] = None, *,
                     slice_bytes: int = 32 << 20, skip: int = 0,
                     progress: Optional[Callable[[int], None]] = None) -> Optional[list[tuple[int, list[FormatTable]]]]:
        """Every event at once, as :meth:`tables` gives them, decoded on ``workers`` threads: the
        pages are cut into time slices of about ``slice_bytes`` (a multiple of ``workers`` of them),
        each slice merged and decoded on its own thread (native/tables.h); the slices in order are
        the batches. ``progress(events so far)`` after each round of ``workers`` slices. None when
        the pages cannot be cut so (a CPU's time going back, a bad page): :meth:`tables` reads them
        (and reports a bad page where it is). ``skip`` (``SKIP_*``) names header columns not to
        fill: None in their place."""
        workers = max(1, workers)
        rounds = max(1, -(-self._bytes // (workers * max(1, slice_bytes))))
        count = self._native.plan_slices(1 if self._bytes <= slice_bytes else workers * rounds)
        if not count:
            return None
        out, events = [], 0
        for first in range(0, count, workers):
            got = self._native.read_slices(first, min(workers, count - first), threads, skip=skip)
            if got is None:
                return None
            for n, raw in got:
                events += n
                out.append((n, self._format_tables(raw)))
            if progress is not None:
                progress(events)
        return out

    def _format_tables(self, raw: list) -> list[FormatTable]:
        tables = []
        for fmt, t in zip(self.formats, raw):
            if t is not None:
                rows, ts, cpu, pid, fields, thread, tgid = t
                # (a composed field stays a number here, an enum's discriminant or a slice's length;
                # its parts come apart, for a reader to compose it: analysis/columns.py)
                count = self._decoded_fields[fmt.id]
                parts = [VarColumn(*p) if isinstance(p, tuple) else p for p in fields[count:]] \
                    if len(fields) - count == len(fmt.composed_parts) else []
                tables.append(FormatTable(fmt, rows, ts, cpu, pid,
                                          [VarColumn(*f) if isinstance(f, tuple) else f for f in fields[:count]],
                                          thread, tgid, parts))
        return tables

    def rows(self, max_events: int = 1 << 16) -> Iterator[tuple[list[tuple], list[Lost]]]:
        """Batches of plain tuples ``(ts, cpu, id, pid, flags, preempt, values[, raw])``."""
        while True:
            try:
                got = self._native.read_rows(max_events)
            except _native.DecodeError as err:
                raise _decode_error(err, self.source) from None
            if got is None:
                return
            rows, lost = got
            if self._composed_rows:
                composed = self._composed_rows
                rows = [r if r[2] not in composed else r[:6] + (composed[r[2]].row(r[6]),) + r[7:] for r in rows]
            yield rows, [Lost(*t) for t in lost]

    def events(self, max_events: int = 1 << 16) -> Iterator[Event]:
        """Every event as an :class:`Event` (the lost markers are in :meth:`stats`)."""
        by_id = self._by_id
        for rows, _lost in self.rows(max_events):
            for r in rows:
                yield Event(r[0], r[1], r[2], r[3], r[4], r[5], by_id.get(r[2]), r[6],
                            r[7] if self._raw else None)

    def stats(self) -> list["_native._StreamStats"]:
        """Per CPU: pages, events, missed_events (stored counts), missed_unknown (flagged pages
        without a count) and bad_pages (skipped when not strict), so far."""
        return self._native.stats()

    @property
    def short_records(self) -> int:
        """Records too short for one of their fields so far (those values read as 0/None)."""
        return self._native.short_records

    def close(self) -> None:
        """Release the buffers (an mmap can be closed after this)."""
        self._native.close()

    def __enter__(self) -> "EventReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class RecorderStats:
    cpu: int
    bytes: int  # written, page padding included
    splice_bytes: int
    read_bytes: int
    pages: int
    wakeups: int
    errno: int
    error_op: Optional[str]


class Recorder:
    """Copy the pages of a tracefs instance to ``out_dir/cpuN.raw``, a native thread per CPU.

    ``instance`` is the instance directory (``.../instances/<name>``, or the tracefs root);
    ``subbuf_size`` its sub-buffer size (see :meth:`PageLayout.from_header_page`). Turn tracing
    off in the instance before :meth:`stop`, which drains what is left, partial page included.
    """

    def __init__(self, instance: Path | str, cpus: Sequence[int], out_dir: Path | str, subbuf_size: int,
                 *, poll_ms: int = 250, use_read: bool = False, pipe_size: int = 0,
                 flush_max_bytes: int = 0):
        self.instance = Path(instance)
        self.cpus = list(cpus)
        self.files = {cpu: Path(out_dir) / f"cpu{cpu}.raw" for cpu in self.cpus}
        self._fds: list[int] = []
        in_fds, out_fds = [], []
        try:
            for cpu in self.cpus:
                path = self.instance / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw"
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError as err:
                    raise TracefsError(f"cannot open {path}: {err.strerror}",
                                       "record as root, on a CPU that exists") from None
                self._fds.append(fd)
                in_fds.append(fd)
                out = self.files[cpu]
                try:
                    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
                except OSError as err:
                    raise ProbectlError(f"cannot create {out}: {err.strerror}",
                                        "record to a writable directory") from None
                self._fds.append(fd)
                out_fds.append(fd)
            self._native = _native.Recorder(self.cpus, in_fds, out_fds, subbuf_size, poll_ms=poll_ms,
                                            pipe_size=pipe_size, use_read=use_read,
                                            flush_max_bytes=flush_max_bytes)
        except BaseException:
            self._close_fds()
            raise

    def start(self) -> None:
        self._native.start()

    @property
    def running(self) -> bool:
        return self._native.running

    def stats(self) -> list[RecorderStats]:
        """Per-CPU counters; may be read while recording."""
        return [RecorderStats(**d) for d in self._native.stats()]

    def stop(self) -> list[RecorderStats]:
        """Drain the buffers, end the threads and close the files; raise if a CPU failed."""
        self._native.stop()
        self._close_fds()
        stats = self.stats()
        failed = [s for s in stats if s.errno]
        if failed:
            s = failed[0]
            raise ProbectlError(
                f"recording cpu {s.cpu} failed: {s.error_op}: {os.strerror(s.errno)}",
                "check free space where the trace is written" if s.errno == _errno.ENOSPC else "")
        return stats

    def _close_fds(self) -> None:
        for fd in self._fds:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds = []

    def close(self) -> None:
        """Stop (if running) and close everything, without raising for CPU failures."""
        if getattr(self, "_native", None) is not None:
            self._native.stop()
        self._close_fds()

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class PerfRingStats:
    cpu: int
    bytes: int  # records copied
    samples: int
    lost: int  # events the kernel lost (its PERF_RECORD_LOST counts)
    lost_records: int
    errno: int
    error_op: Optional[str]


class PerfRings:
    """Copy the records of perf event mmap rings (one per CPU, ``perf_fds``) to ``out_fds``, verbatim,
    from a native thread; counts samples and lost events on the way. The caller owns the descriptors;
    disable the events before :meth:`stop`, which drains what is left."""

    def __init__(self, cpus: Sequence[int], perf_fds: Sequence[int], out_fds: Sequence[int], data_pages: int,
                 *, poll_ms: int = 100, stream: Optional["PageStream"] = None):
        """``stream``: the samples written into pages as they come (see :class:`PageStream`)."""
        native_stream = None
        if stream is not None:
            native_stream = (list(stream.pages_fds), list(stream.events), stream.layout.long_size,
                             stream.layout.big_endian, stream.layout.page_size, stream.callchain_id, stream.stack)
        try:
            self._native: Any = _native.PerfRings(list(cpus), list(perf_fds), list(out_fds), data_pages,
                                                  poll_ms=poll_ms, stream=native_stream)
        except OSError as err:
            raise ProbectlError(f"cannot map the perf rings: {err.strerror}",
                                "raise kernel.perf_event_mlock_kb, or record without -g") from None

    def start(self) -> None:
        self._native.start()

    def stats(self) -> list[PerfRingStats]:
        return [PerfRingStats(**d) for d in self._native.stats()]

    def stop(self) -> list[PerfRingStats]:
        """Drain every ring and end the thread; raise if a CPU failed."""
        self._native.stop()
        stats = self.stats()
        failed = [s for s in stats if s.errno]
        if failed:
            s = failed[0]
            raise ProbectlError(f"copying the stacks of cpu {s.cpu} failed: {s.error_op}: {os.strerror(s.errno)}",
                                "check free space where the trace is written" if s.errno == _errno.ENOSPC else "")
        return stats

    def streamed(self) -> list["Streamed"]:
        """Per CPU, once stopped, what its :class:`PageStream` wrote ([] without one)."""
        return [Streamed(*t) for t in self._native.streamed()]

    def wanted(self) -> list[tuple[int, int]]:
        """The (pid, address) pairs whose rules the streams' walks of stack copies wanted (see the stub)."""
        return self._native.wanted()

    def put_rules(self, rules: Sequence[tuple[int, int, tuple[int, int, int, int, int, int]]]) -> None:
        self._native.put_rules(list(rules))

    def close(self) -> None:
        if getattr(self, "_native", None) is not None:
            self._native.stop()
            self._native = None


@dataclass(frozen=True)
class PageStream:
    """Pages written as the perf rings are read: each CPU's samples into ``pages_fds`` (one per CPU,
    as ``out_fds``), each event's record then its ``probectl:user_callchain`` record (of id
    ``callchain_id``), and only the other records (execs, mappings, losses) to ``out_fds``. For
    ``events`` (as :func:`write_callchains` takes them) whose samples all carry their record and take
    stack copies only with ``stack``: then the pages need nothing else (save the samples a walk left
    whole), and the records are not copied and read again."""

    pages_fds: Sequence[int]
    events: Sequence[tuple[int, int, int]]
    layout: PageLayout
    callchain_id: int
    # (nregs, ip, sp, bp, max_frames): the samples of events of flag 4 walked natively by rules the
    # caller gives as they are wanted (PerfRings.wanted, put_rules); those it cannot walk go whole
    stack: Optional[tuple[int, int, int, int, int]] = None


class Streamed(NamedTuple):
    """What a CPU's :class:`PageStream` wrote."""

    events: int
    pages: int
    tids: list[int]  # of the events' threads
    walked: int  # samples whose stack copies were walked as they came
    whole: int  # samples with stack copies left whole to the other records (to unwind at the end)


# An executable mapping perf reported: (pid, address, length, file offset, device major, minor, inode,
# prot, flags, path).
PerfMmap = tuple[int, int, int, int, int, int, int, int, int, bytes]


def write_callchains(src: Optional[Buffer], perf: Buffer, out_fd: int, layout: PageLayout, callchain_id: int,
                     window_ns: int, events: Sequence[tuple[int, int, int]],
                     pids: Optional[Sequence[int]], chains: Optional[tuple[Buffer, Buffer]] = None
                     ) -> tuple[int, int, int, list[tuple[int, int, bytes]], list[PerfMmap]]:
    """One CPU's pages ``src`` written to ``out_fd`` with the samples of ``perf`` in them, natively
    (see :func:`probectl.tracedat.callchain.write_with_callchains`); (callchains written, samples left,
    pages written, (pid, tid, command name) of each exec, the executable mappings made: see the stub).
    ``chains``: the callchains unwound from the stack copies of samples (see the stub)."""
    try:
        return _native.write_callchains(src, perf, out_fd, layout.long_size, layout.big_endian, layout.page_size,
                                        callchain_id, window_ns, list(events), pids, chains)
    except OSError as err:
        raise ProbectlError(f"cannot write the stacks into the recording: {err.strerror}",
                            "check free space where the trace is written") from None


class StackSample(NamedTuple):
    """A perf sample with the user registers and a copy of the user stack (``--call-graph dwarf``)."""

    offset: int  # of its record in the perf records
    pid: int
    tid: int
    time: int
    registers: bytes  # u64 each, in perf's order (the bits of sample_regs_user)
    stack_offset: int  # of the copy in the perf records
    stack_len: int


def perf_names(perf: Buffer) -> tuple[list[tuple[int, int, bytes]], list[PerfMmap]]:
    """The (pid, tid, command name) of each exec and the executable mappings made that the perf
    records ``perf`` report."""
    return _native.perf_names(perf)


def unwind_copies(perf: Buffer, events: Sequence[tuple[int, int, int]], nregs: int, ip: int, sp: int, bp: int,
                  max_frames: int, rule_of: Callable[[int, int], Optional[tuple[int, int, int, int, int, int]]]
                  ) -> tuple[bytes, bytes, list[tuple[int, "StackSample"]]]:
    """The stack copies of a CPU's perf records unwound natively by simple call-frame rules (see the
    stub): (index, pool) as :func:`write_callchains` takes ``chains``, and the samples left to unwind
    otherwise, each with the index of its triple (whose count is 0)."""
    index, pool, others = _native.unwind_copies(perf, list(events), nregs, ip, sp, bp, max_frames, rule_of)
    return index, pool, [(t[0], StackSample(*t[1:])) for t in others]


def fold_stacks(streams: Sequence[tuple[int, Any, int, int]], layout: PageLayout, selected: Sequence[int],
                stacks: Sequence[tuple[int, int, Optional[FieldSpec], Optional[FieldSpec]]],
                probe_ips: Sequence[tuple[int, FieldSpec]], source: str = "trace"
                ) -> tuple[int, int, list[tuple[bytes, int]]]:
    """The events of ids ``selected`` counted natively by thread and stacks (see the stub): (records
    read, events counted, [(key, count)])."""
    try:
        return _native.fold_stacks(streams, list(selected), list(stacks), list(probe_ips), long_size=layout.long_size,
                                   big_endian=layout.big_endian, page_size=layout.page_size)
    except _native.DecodeError as err:
        raise _decode_error(err, source) from None
