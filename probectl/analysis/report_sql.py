"""Reports (:mod:`.report`) of any recordings, built on SQL: the events of a
:class:`~.sql.RecordingsDatabase` (trace.dat files and Parquet datasets) grouped and counted in DuckDB
over the decoder's columns; only the distinct probe addresses are symbolized in Python."""
from __future__ import annotations

from typing import Optional, Sequence

import pyarrow as pa

from ..script import Symbolizer, TraceSource, UNKNOWN_SYMBOL, is_kernel_address
from ..tracedat import open_trace
from . import histogram
from .recording import HEADER, header_name
from .report import (DEFAULT_KEYS, KEY_TITLES, SYM_KEY, Histogram, Report, ReportRow, address_field, check_hist_field,
                     check_keys, holding, matching_event_names)
from .sql import RecordingsDatabase, literal, quote


class Reporter:
    """Reports of a database of recordings, limited to the events matching ``globs`` (all when empty)."""

    def __init__(self, db: RecordingsDatabase, globs: Sequence[str] = ()):
        self.db = db
        self.selected = matching_event_names(sorted(db.events), globs, holding([str(r.path) for r in db.recordings]))
        self._sym_table: Optional[str] = None

    # -- keys
    def field_names(self) -> list[str]:
        names: dict[str, None] = {}
        for e in self.selected:
            names.update(dict.fromkeys(self.db.fields(e)))
        return list(names)

    def check_keys(self, keys: Sequence[str]) -> None:
        check_keys(keys, self.field_names())

    def _events_with(self, fields: Sequence[str]) -> list[str]:
        return [e for e in self.selected if all(f in self.db.fields(e) for f in fields)]

    def _header(self, event: str, name: str) -> str:
        """The column of header key ``name`` in ``event``'s table (``common_name`` when a field has the name)."""
        return f"common_{name}" if name in self.db.fields(event) else name

    def _address_field(self, event: str) -> Optional[str]:
        """The field ``sym`` names in ``event`` (:func:`~.report.address_field`)."""
        fmt = next((r.formats[event] for r in self.db.recordings if event in r.formats), None)
        return address_field(fmt, self.db.fields(event))

    # -- the rows, as SQL
    def _source(self, keys: Sequence[str], value: Optional[str] = None) -> str:
        """A SELECT of the key columns (and ``value``) of every selected event that has them."""
        fields = [k for k in keys if k not in KEY_TITLES] + ([value] if value else [])
        parts = []
        for event in self._events_with(fields):
            system, _, name = event.partition(":")
            cols, join = [], ""
            for k in keys:
                if k == "event":
                    cols.append(f"{literal(event)} AS {quote(k)}")
                elif k in HEADER:
                    cols.append(f"t.{quote(self._header(event, k))} AS {quote(k)}")
                elif k == SYM_KEY:
                    addr = self._address_field(event)
                    if addr is None:
                        cols.append(f"{literal(UNKNOWN_SYMBOL)} AS {quote(k)}")
                        continue
                    join = (f" LEFT JOIN {self._symbols()} s ON s.event = {literal(event)} AND "
                            f"s.recording = t.recording AND s.pid = t.{quote(self._header(event, 'pid'))} "
                            f"AND s.addr = t.{quote(addr)}")
                    cols.append(f"coalesce(s.sym, {literal(UNKNOWN_SYMBOL)}) AS {quote(k)}")
                else:
                    cols.append(f"t.{quote(k)} AS {quote(k)}")
            if value:
                cols.append(f"t.{quote(value)} AS _value")
            parts.append(f"SELECT {', '.join(cols) or '1 AS _one'} FROM {quote(system)}.{quote(name)} t{join}")
        return " UNION ALL BY NAME ".join(parts)

    def _symbols(self) -> str:
        """The table (event, recording, pid, addr, sym) of every distinct probe address, symbolized."""
        if self._sym_table is not None:
            return self._sym_table
        rows: dict[str, list] = {"event": [], "recording": [], "pid": [], "addr": [], "sym": []}
        for rec in self.db.recordings:
            with open_trace(rec.path) as trace:
                symbolizer = Symbolizer(TraceSource(trace))
                for event in self.selected:
                    fmt = rec.formats.get(event)
                    addr = self._address_field(event)
                    if fmt is None or addr is None:
                        continue
                    system, _, name = event.partition(":")
                    found = self.db.sql(f"SELECT DISTINCT {quote(header_name(fmt, 'pid'))}, {quote(addr)} "
                                        f"FROM {quote(system)}.{quote(name)} "
                                        f"WHERE recording = {literal(rec.recording)}")
                    for pid, a in found.rows:
                        rows["event"].append(event)
                        rows["recording"].append(rec.recording)
                        rows["pid"].append(pid)
                        rows["addr"].append(a)
                        rows["sym"].append(symbolizer.resolve(pid, a, is_kernel_address(a))[0])
        table = pa.table({"event": pa.array(rows["event"], pa.string()),
                          "recording": pa.array(rows["recording"], pa.string()),
                          "pid": pa.array(rows["pid"], pa.int32()), "addr": pa.array(rows["addr"], pa.uint64()),
                          "sym": pa.array(rows["sym"], pa.string())})
        self.db.con.register("_probe_symbols", table)
        self._sym_table = "_probe_symbols"
        return self._sym_table

    def counts(self, keys: Sequence[str] = DEFAULT_KEYS, top: int = 0) -> Report:
        """Events counted by ``keys``, most first (``top`` rows when not 0)."""
        keys = list(keys) or list(DEFAULT_KEYS)
        self.check_keys(keys)
        source = self._source(keys)
        report = Report(keys, 0, self.selected)
        if not source:
            return report
        group = ", ".join(quote(k) for k in keys)
        limit = f" LIMIT {int(top)}" if top else ""
        result = self.db.sql(f"SELECT {group}, count(*) AS n FROM ({source}) GROUP BY {group} "
                             f"ORDER BY n DESC, {group}{limit}")
        report.rows = [ReportRow(tuple(r[:-1]), r[-1]) for r in result.rows]
        report.total = self.db.sql(f"SELECT count(*) FROM ({source})").rows[0][0]
        return report

    def histograms(self, value: str, keys: Sequence[str] = (), top: int = 0) -> list[Histogram]:
        """Log2 histograms of the integer field ``value``, one per value of ``keys`` (the
        largest ``top`` groups when not 0)."""
        self.check_keys(keys)

        def type_of(event: str) -> tuple[bool, str]:
            if value not in self.db.fields(event):
                return False, ""
            typ = dict(self.db.describe(event.replace(":", ".", 1)))[value]
            return typ in ("BIGINT", "UBIGINT", "INTEGER"), typ

        check_hist_field(value, self.field_names(), self.selected, type_of)
        source = self._source(keys, value)
        if not (keys and top) and self._few_values(source):
            # (a size or an error code takes a handful of values: counted by value first, the
            # bucket is worked out once per value instead of once per event (bench_answers.py's --hist);
            # a time or an address takes millions, and counting by value first would cost more)
            source = f"SELECT {', '.join([quote(k) for k in keys] + ['_value'])}, count(*) AS _n FROM ({source}) GROUP BY ALL"
        else:
            source = f"SELECT *, 1 AS _n FROM ({source})"
        rows = self._bucket_rows(source, keys, top, histogram.sql_log2_bucket_fast("_value"), extremes=True)
        if not histogram.exact_groups((r[-4], r[-2], r[-1]) for r in rows):
            rows = self._bucket_rows(source, keys, top, histogram.sql_log2_bucket("_value"), extremes=False)
        else:
            rows = [r[:-2] for r in rows]
        out: dict[tuple, Histogram] = {}
        for row in rows:
            key = tuple(row[:len(keys)])
            h = out.get(key)
            if h is None:
                h = out[key] = Histogram(value, dict(zip(keys, key)), {})
            h.counts[row[-2]] = row[-1]
        return sorted(out.values(), key=lambda h: -h.total)

    def _few_values(self, source: str, sample: int = 1 << 16, few: int = 1 << 12) -> bool:
        """Whether the first ``sample`` values of ``source`` take at most ``few`` distinct values."""
        return self.db.sql(f"SELECT count(DISTINCT _value) FROM (SELECT _value FROM ({source}) LIMIT {sample})"
                           ).rows[0][0] <= few

    def _bucket_rows(self, source: str, keys: Sequence[str], top: int, bucket: str, extremes: bool) -> list[tuple]:
        """(keys..., bucket, count[, min, max]) of the values of ``source`` (keys, ``_value`` and
        ``_n``, the events it stands for) by keys and bucket; with ``top``, of the ``top`` largest
        groups of keys only."""
        group = [quote(k) for k in keys]
        more = ", min(_value), max(_value)" if extremes else ""
        select = f"SELECT {', '.join(group + [bucket])} AS _bucket, sum(_n)::BIGINT{more}"
        if group and top:
            g = ", ".join(group)
            sql = (f"WITH src AS ({source}), best AS (SELECT {g} FROM src GROUP BY ALL ORDER BY sum(_n) DESC, {g} "
                   f"LIMIT {int(top)}) {select} FROM src SEMI JOIN best USING ({g}) GROUP BY ALL ORDER BY ALL")
        else:
            sql = f"{select} FROM ({source}) GROUP BY ALL ORDER BY ALL"
        return self.db.sql(sql).rows

