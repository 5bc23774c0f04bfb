"""Recordings as Arrow tables: one table per event format, columns straight from the native decoder.

The decoder hands each batch over as Arrow-layout buffers (:meth:`probectl.ringbuf.EventReader.tables`:
integers as int64 arrays, text as offsets + UTF-8 data, no Python object per event); this module wraps
them as :mod:`pyarrow` arrays without copying, with what the records do not hold: the command name
(``comm``, from the file's saved cmdlines, a dictionary column whose indexes the decoder writes) and
the thread group (``pid``, from probectl's saved tgids; the thread id when unknown), both looked up
in C as the rows are laid out, not per event in Python.

pyarrow earns its place twice: DuckDB scans Arrow tables in place (zero copy, in parallel), so SQL runs
on the decoder's buffers; and it writes Parquet (:mod:`.parquet`).

Every table has the header columns :data:`HEADER` first, then the event's own fields by their format
names. A composed field (a Rust enum, a slice of structs: :mod:`probectl.formats`) is the text script
shows (``Some(2)``, ``Green``, ``Rect{w:3 h:4}``, ``[{id:101 price:5}]``), made from its hidden parts
here (an enum's by Arrow's kernels, :func:`variant_array`; the rest a row at a time, as script makes
it: :func:`probectl.ringbuf.composed_column`): one type for the column whatever the variant holds
(Parquet has no union type, and a struct of a member per variant would be mostly nulls), compared and
grouped in SQL as it reads (``n = 'None'``, ``GROUP BY c``), the variant's name alone
``split_part(n, '(', 1)``.

A field whose name is a header name (``pid`` and ``comm`` of ``sched:sched_wakeup``) keeps its name
and the header column is renamed ``common_<name>``, as the kernel names its common fields.
"""
from __future__ import annotations

import os
from array import array
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping, Optional, Sequence

import pyarrow as pa

from ..dataclass import dataclass, field
from ..errors import ProbectlError, did_you_mean
from ..formats import EventFormat, Field, Piece, event_matches, variant_pieces
from ..ringbuf import (KIND_BYTES, KIND_INT, KIND_INT_ARRAY, KIND_STR, SKIP_CPU, SKIP_TGID, SKIP_THREAD, SKIP_TID,
                       SKIP_TS, FormatTable, VarColumn, composed_column, composed_part_names, format_specs)
from ..script import lost_events
from ..tracedat import TraceFile, open_trace
from .recording import HEADER, UNKNOWN_COMM, event_formats, header_name, host_of, recording_name, thread_names

BATCH_EVENTS = 1 << 20
# A file is decoded in time slices of about this many bytes of pages, a round of one per thread at
# a time (progress is shown between rounds).
SLICE_BYTES = 32 << 20


def field_type(spec: tuple) -> pa.DataType:
    """The Arrow type of a field from its decoder spec (offset, size, loc, kind, elem_size, signed[, a
    counted string's bound and head])."""
    _offset, size, _loc, kind, _elem, signed = spec[:6]
    if kind == KIND_INT:
        return pa.uint64() if size == 8 and not signed else pa.int64()
    if kind == KIND_STR:
        return pa.large_string()
    if kind == KIND_INT_ARRAY:
        return pa.large_list(pa.int64())
    assert kind == KIND_BYTES
    return pa.large_binary()


def event_schema(fmt: EventFormat, long_size: int = 8) -> pa.Schema:
    """The Arrow schema of the table of ``fmt``."""
    types = {"ts": pa.int64(), "cpu": pa.int32(), "tid": pa.int32(), "pid": pa.int32(),
             "comm": pa.dictionary(pa.int32(), pa.string())}
    cols = [pa.field(header_name(fmt, n), t) for n, t in types.items()]
    for f, spec in zip(fmt.event_fields, format_specs(fmt, long_size)):
        cols.append(pa.field(f.name, pa.large_string() if f.is_composed else field_type(spec)))
    return pa.schema(cols)


def _buffer(data: Optional[bytes]) -> Optional[pa.Buffer]:
    return None if data is None else pa.py_buffer(data)


def _var_array(col: VarColumn, rows: int, typ: pa.DataType) -> pa.Array:
    validity, offsets = _buffer(col.validity), pa.py_buffer(col.offsets)
    if pa.types.is_large_list(typ):
        count = len(col.data) // 8
        values = pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(col.data)])
        return pa.Array.from_buffers(typ, rows, [validity, offsets], null_count=col.nulls, children=[values])
    return pa.Array.from_buffers(typ, rows, [validity, offsets, pa.py_buffer(col.data)], null_count=col.nulls)


class ThreadNames:
    """The threads a file names: ids (ascending) with their thread groups, for the decoder to look
    each row's thread up in (:meth:`~probectl.ringbuf.EventReader.tables`), and their command names
    as the dictionary of the ``comm`` column (the decoder's thread index is its index array)."""

    def __init__(self, trace: TraceFile):
        comms = thread_names(trace)
        tids = sorted({*comms, *trace.tgids})
        self.lookup = (array("i", tids).tobytes(), array("i", [trace.tgids.get(t, t) for t in tids]).tobytes())
        self.names = pa.array([comms.get(t, UNKNOWN_COMM) for t in tids] + [UNKNOWN_COMM], pa.string())


# The header columns as the decoder's FormatTable holds them: (its attribute, the Arrow type).
_HEADER_COLUMNS = {"ts": ("ts", pa.int64()), "cpu": ("cpu", pa.int32()), "tid": ("pid", pa.int32()),
                   "pid": ("tgid", pa.int32()), "comm": ("thread", None)}


def batch_of(table: FormatTable, schema: pa.Schema, names: ThreadNames,
             header: Sequence[str] = tuple(HEADER)) -> pa.RecordBatch:
    """One decoded :class:`~probectl.ringbuf.FormatTable` (read with ``names.lookup``) as an Arrow
    record batch of ``schema``: the ``header`` columns (those of :data:`HEADER` it has, in order),
    then the table's fields."""
    n = table.rows
    arrays: list[pa.Array] = []
    for name in header:
        attr, typ = _HEADER_COLUMNS[name]
        data = getattr(table, attr)
        assert data is not None, f"read without the {attr} column"
        if typ is None:
            arrays.append(pa.DictionaryArray.from_buffers(schema.field(len(arrays)).type, n,
                                                          [None, pa.py_buffer(data)], dictionary=names.names))
        else:
            arrays.append(pa.Array.from_buffers(typ, n, [None, pa.py_buffer(data)]))
    composed = {f.name: f for f in table.format.event_fields if f.is_composed}
    for col, f in zip(table.fields, list(schema)[len(arrays):]):
        if isinstance(col, VarColumn):
            arrays.append(_var_array(col, n, f.type))
        elif f.name in composed:
            arrays.append(_composed_array(composed[f.name], col, table))
        else:
            arrays.append(pa.Array.from_buffers(f.type, n, [None, pa.py_buffer(col)]))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _composed_array(f: Field, col: bytes, table: FormatTable) -> pa.Array:
    """The composed field ``f`` (an enum, a slice of structs) as the text script shows (``Some(2)``,
    ``Rect{w:3 h:4}``, ``[{id:101 price:5}]``), made from its number and its parts' columns: an
    enum's by Arrow's kernels (:func:`variant_array`), a slice of structs' a row at a time, as script
    makes it."""
    def numbers(field: Field, data: bytes) -> pa.Array:
        return pa.Array.from_buffers(pa.int64() if field.signed else pa.uint64(), table.rows,
                                     [None, pa.py_buffer(data)])

    # (its own parts: another composed field's may be texts, the elements of a C++ vector of strings)
    names = set(composed_part_names(f))
    mine = [(p, data) for p, data in zip(table.format.composed_parts, table.parts) if p.name in names]
    if f.variants and len(table.parts) == len(table.format.composed_parts):
        return variant_array(f, numbers(f, col), {p.name: numbers(p, data) for p, data in mine
                                                  if not isinstance(data, VarColumn)})

    def row_values(field: Field, data: "bytes | VarColumn") -> Sequence[Any]:
        if isinstance(data, VarColumn):  # (an element that is a text)
            return _var_array(data, table.rows, pa.large_string()).to_pylist()
        return memoryview(data).cast("q" if field.signed else "Q")

    return pa.array(composed_column(f, row_values(f, col), {p.name: row_values(p, data) for p, data in mine}),
                    pa.large_string())


def variant_array(f: Field, tags: pa.Array, parts: Mapping[str, pa.Array]) -> pa.Array:
    """The texts of the enum ``f`` for a column of its discriminants, as :func:`probectl.formats.variant_text`
    writes each (from the same :func:`~probectl.formats.variant_pieces`), by Arrow's compute kernels:
    no Python object per row, but for a value shown in hex (a pointer: Arrow writes no hex). The names
    of the variants that hold nothing are taken by the index of the discriminant's value; the text of
    each other variant is made from its rows alone and put in their places."""
    import pyarrow.compute as pc

    text = pa.large_string()

    def shown(piece: Piece, rows: pa.Array) -> Any:
        if isinstance(piece, str):
            return pa.scalar(piece, text)
        field, in_hex, names = piece
        values = pc.filter(parts[field], rows)
        numbers = pa.array([hex(v) for v in values.to_pylist()], text) if in_hex else pc.cast(values, text)
        if not names:
            return numbers
        named = pc.take(pa.array([n for _, n in names], text),
                        pc.index_in(values, value_set=pa.array([v for v, _ in names], values.type)))
        return pc.coalesce(named, numbers)

    chosen = {v.value: v for v in reversed(f.variants) if v.value is not None}  # (the first of a value)
    other = next((v for v in f.variants if v.value is None), None)  # (the variant of every other value)
    held = [v for v in [*chosen.values(), other] if v is not None and v.payload_fields]
    named = [v for v in chosen.values() if not v.payload_fields]
    out = pc.take(pa.array([v.name for v in named], text),
                  pc.index_in(tags, value_set=pa.array([v.value for v in named], tags.type)))
    listed = pa.array(list(chosen), tags.type)
    for v in held:
        rows = pc.equal(tags, pa.scalar(v.value, tags.type)) if v.value is not None \
            else pc.invert(pc.is_in(tags, value_set=listed))
        made = [shown(p, rows) for p in variant_pieces(v)]
        out = pc.replace_with_mask(out, rows, pc.binary_join_element_wise(*made, pa.scalar("", text)))
    if other is None or not other.payload_fields:
        # (the values no variant has: the number itself, or the name of the variant of every other value)
        rows = pc.invert(pc.is_in(tags, value_set=listed))
        missing = pc.filter(tags, rows)
        out = pc.replace_with_mask(out, rows, pc.cast(missing, text) if other is None
                                   else pa.array([other.name] * len(missing), text))
    return out


@dataclass
class _Columns:
    """The columns of one format's table that are decoded: header names, field indexes, and the
    Arrow schema of those."""

    header: list[str]
    fields: list[int]
    schema: pa.Schema


def _columns_of(fmt: EventFormat, full: pa.Schema, wanted: Optional[set[str]]) -> _Columns:
    """The columns of ``fmt``'s table named in ``wanted`` (lower case; all when None). A header
    column is decoded under either of its names (``pid`` is ``common_pid`` in the table of an event
    with a field ``pid``, and ``pid`` again in the ``events`` view)."""
    if wanted is None:
        return _Columns(list(HEADER), list(range(len(fmt.event_fields))), full)
    header = [h for h in HEADER if h in wanted or header_name(fmt, h).lower() in wanted]
    fields = [i for i, f in enumerate(fmt.event_fields) if f.name.lower() in wanted]
    if not header and not fields:
        header = ["cpu"]  # (a table has a column, if only to count its rows: the narrowest)
    schema = pa.schema([full.field(header_name(fmt, h)) for h in header] +
                       [full.field(len(HEADER) + i) for i in fields])
    return _Columns(header, fields, schema)


def _decoded(fmt: EventFormat, fields: list[int]) -> list[int]:
    """The indexes of the decoder's columns that give ``fields`` of ``fmt``: with a composed field
    among them, every hidden part after the event fields too (which it is made from)."""
    if not any(fmt.event_fields[i].is_composed for i in fields):
        return fields
    first = len(fmt.event_fields)
    return fields + list(range(first, first + len(fmt.composed_parts)))


@dataclass
class EventTables:
    """The events of one recording as Arrow tables, by ``system:event`` name."""

    path: Path
    recording: str  # its name in SQL and Parquet partitions (the file name without .dat by default)
    host: str
    formats: dict[str, EventFormat] = field(default_factory=dict)
    tables: dict[str, pa.Table] = field(default_factory=dict)  # (of the columns read: see ``schemas``)
    events: int = 0  # records read (stack records and events without a format included)
    lost: int = 0  # events the kernel lost while recording (the file's statistics)
    # (system, message) of the file's format texts that did not parse: their events are in no table
    format_failures: list[tuple[str, str]] = field(default_factory=list)
    # every column of each table, those not read included (read_tables' ``columns``)
    schemas: dict[str, pa.Schema] = field(default_factory=dict)


def decode_workers() -> int:
    """The threads that decode a file: one per CPU this process may run on."""
    return len(os.sched_getaffinity(0))


def read_tables(trace: TraceFile, recording: Optional[str] = None, batch_events: int = BATCH_EVENTS,
                progress: Optional[Callable[[str, int], None]] = None, *, workers: Optional[int] = None,
                slice_bytes: int = SLICE_BYTES, columns: Optional[Collection[str]] = None) -> EventTables:
    """Every event of an open trace file (stack records aside) as one Arrow table per event, rows
    in time order; ``progress(path, events so far)`` is called after each batch. With ``columns``
    (names, in any case), a table holds only the columns so named; ``schemas`` has them all.

    The file is decoded in time slices of about ``slice_bytes`` on ``workers`` threads (default:
    :func:`decode_workers`); ``workers=0``, or a file whose slices cannot be cut exactly (a CPU's
    time going back, a bad page), is read by the merged reader in batches of ``batch_events``.
    Both give the same tables."""
    out = EventTables(trace.path, recording or recording_name(trace.path), host_of(trace))
    formats = event_formats(trace)
    wanted = None if columns is None else {c.lower() for c in columns}
    full = {f.id: event_schema(f, trace.layout.long_size) for f in formats}
    cols = {f.id: _columns_of(f, full[f.id], wanted) for f in formats}
    read = {h for c in cols.values() for h in c.header}
    skip = sum(bit for h, bit in (("ts", SKIP_TS), ("cpu", SKIP_CPU), ("tid", SKIP_TID), ("comm", SKIP_THREAD),
                                  ("pid", SKIP_TGID)) if h not in read)
    names = ThreadNames(trace)
    threads = names.lookup if read & {"comm", "pid"} else None
    batches: dict[int, list[pa.RecordBatch]] = {f.id: [] for f in formats}
    reader = trace.reader(formats=formats, fields=None if wanted is None else {
        f.id: _decoded(f, cols[f.id].fields) for f in formats})
    try:
        decoded: Optional[Iterable[tuple[int, list[FormatTable]]]] = None if workers == 0 else reader.slice_tables(
            workers or decode_workers(), threads, slice_bytes=slice_bytes, skip=skip,
            progress=None if progress is None else lambda events: progress(trace.where, events))
        if decoded is None:  # (time going back on a CPU, a bad page: merged, as the row decoder reads it)
            decoded = reader.tables(batch_events, threads)
        for n, tables in decoded:
            out.events += n
            for t in tables:
                c = cols[t.format.id]
                batches[t.format.id].append(batch_of(t, c.schema, names, c.header))
            if progress is not None:
                progress(trace.where, out.events)
    finally:
        reader.close()
    for f in formats:
        if batches[f.id]:
            out.formats[f.full_name] = f
            out.tables[f.full_name] = pa.Table.from_batches(batches[f.id], cols[f.id].schema)
            out.schemas[f.full_name] = full[f.id]
    out.lost = lost_events(trace)
    out.format_failures = trace.format_failures()
    return out


def open_recordings(paths: Sequence[str | os.PathLike], names: Sequence[str] = (), *,
                    progress: Optional[Callable[[str, int], None]] = None,
                    columns: Optional[Collection[str]] = None) -> Iterator[EventTables]:
    """The tables of each trace file in ``paths`` (named by ``names`` when given, else by file name;
    of the ``columns`` so named only, when given)."""
    for i, path in enumerate(paths):
        with open_trace(path) as trace:
            yield read_tables(trace, names[i] if i < len(names) else None, progress=progress, columns=columns)


def event_tables_matching(tables: EventTables, globs: Sequence[str]) -> EventTables:
    """``tables`` limited to the events matching ``globs`` (``script -e``'s rule); a glob that matches
    nothing is an error naming the events there are."""
    if not globs:
        return tables
    names = sorted(tables.tables)
    for glob in globs:
        if not any(event_matches(tables.formats[e], glob) for e in names):
            raise ProbectlError(f"no event in {tables.path} matches {glob!r}",
                                did_you_mean(glob, names) or (f"the file holds {', '.join(names)}" if names
                                                              else "the file holds no events"))
    keep = [e for e in names if any(event_matches(tables.formats[e], g) for g in globs)]
    return EventTables(tables.path, tables.recording, tables.host, {e: tables.formats[e] for e in keep},
                       {e: tables.tables[e] for e in keep}, tables.events, tables.lost, tables.format_failures,
                       {e: tables.schemas[e] for e in keep if e in tables.schemas})

