"""SQL over recordings: DuckDB, in memory, scanning the Arrow tables of :mod:`.columns` in place.

Names, chosen so that SQL can type them without quotes:

* one table per event, ``system.event`` (DuckDB schema ``system``, view ``event``): the events of
  ``probe_libc:malloc`` are ``probe_libc.malloc``; an event name that is a reserved SQL word needs double
  quotes (``sched."select"``);
* ``events``: the header columns of every event of every recording, with ``event`` ('system:event');
* every table has ``host`` (the node name the file was recorded on) and ``recording`` (the file name
  without ``.dat``, or ``--name``) as its last columns, so that many recordings query as one.

The events come from trace.dat files (:class:`~.columns.EventTables`) and from directories of the
Parquet datasets ``script --format parquet`` writes (:class:`~.parquet.ParquetDatasets`, read by
DuckDB with their ``host`` and ``recording`` partitions), together.

The SQL a user gives reads those recordings and nothing else (``query`` runs as root: a query someone
shared must not read ``/etc/shadow`` or write ``authorized_keys``). Once the views are made, DuckDB's
own switches are thrown and locked (:data:`LOCKDOWN`): no file but the Parquet files of the inputs
(named one by one in ``allowed_paths``), no extension loaded or installed, no setting changed; and
:meth:`RecordingsDatabase.sql` runs one statement, a SELECT, as DuckDB's parser types it.

What a query may cost is bounded too: DuckDB spills what does not fit in memory to a temporary
directory, by default ``.tmp`` in the working directory and up to 90% of that disk's free space; a
query's spill goes to a private directory removed at the end and may take at most half the free space
there (:data:`SPILL_SHARE`).
"""
from __future__ import annotations

import shutil
import tempfile
import threading
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, Sequence, TypeVar

import duckdb

from ..dataclass import dataclass
from ..errors import ProbectlError, did_you_mean
from .columns import EventTables
from .recording import HEADER
from .parquet import ParquetDatasets

if TYPE_CHECKING:
    from pathlib import Path

# The columns of the `events` view, in order, with their SQL types.
EVENTS_VIEW = (("ts", "BIGINT"), ("cpu", "INTEGER"), ("tid", "INTEGER"), ("pid", "INTEGER"),
               ("comm", "VARCHAR"), ("event", "VARCHAR"), ("host", "VARCHAR"), ("recording", "VARCHAR"))


class SqlError(ProbectlError):
    """DuckDB refused a query: its own message (with its did-you-mean and caret) is the message."""


# What a query may do, once the tables are set up: read them (and the Parquet files of the inputs,
# DuckDB reading those when queried), nothing else. The last one locks these (and every other
# setting: ``SET memory_limit``, ``PRAGMA``, ``RESET``) against the query itself.
LOCKDOWN = ("SET enable_external_access = false", "SET autoload_known_extensions = false",
            "SET autoinstall_known_extensions = false", "SET allow_community_extensions = false",
            "SET allow_unsigned_extensions = false", "SET lock_configuration = true")
# The statements a query may be, as DuckDB's parser types them (``FROM t``, ``WITH``, ``VALUES``,
# ``DESCRIBE``, ``SUMMARIZE``, ``SHOW`` and ``PIVOT ... IN (...)`` are SELECTs).
READS = frozenset({duckdb.StatementType.SELECT})
T = TypeVar("T")
SPILL_SHARE = 0.5  # of the free space of the temporary directory's file system, a query's spill at most


def quote(name: str) -> str:
    """An SQL identifier, double-quoted."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def table_name(event: str) -> str:
    """The SQL name of the table of ``system:event``: ``system.event``."""
    system, _, name = event.partition(":")
    return f"{system}.{name}"


@dataclass(frozen=True)
class Result:
    """A query's answer: column names and rows (Python values)."""

    columns: list[str]
    rows: list[tuple]


class RecordingsDatabase:
    """An in-memory DuckDB database with a table per event and the ``events`` view over ``recordings``."""

    def __init__(self, recordings: Sequence[EventTables], threads: Optional[int] = None,
                 datasets: Sequence[ParquetDatasets] = (), memory_limit: Optional[str] = None):
        """``memory_limit``: DuckDB's (``"1GB"``; its default, 80% of the memory, without it)."""
        self.recordings = list(recordings)
        self.datasets = list(datasets)
        self.spill = tempfile.TemporaryDirectory(prefix="probectl-query-")
        self.con = duckdb.connect(":memory:")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        if memory_limit:
            self.con.execute("SET memory_limit = ?", [memory_limit])
        self.con.execute("SET temp_directory = ?", [self.spill.name])
        room = int(shutil.disk_usage(self.spill.name).free * SPILL_SHARE)
        self.con.execute("SET max_temp_directory_size = ?", [f"{max(room, 1 << 20)}B"])
        self.events: dict[str, list[str]] = {}  # system:event -> SELECTs of its rows, one per source
        self._fields: dict[str, list[str]] = {}
        # every column name of the tables and views (those not decoded included)
        self.column_names: set[str] = {c for c, _ in EVENTS_VIEW}
        self._register()
        self._lock()

    def _lock(self) -> None:
        """Leave the query nothing to reach but the tables: the Parquet files of the inputs are the
        only paths DuckDB may open (its views read them when queried), then external access,
        extensions and settings are off, locked."""
        files = sorted({f for ds in self.datasets for fs in ds.events.values() for f in fs})
        if files:
            self.con.execute("SET allowed_paths = ?", [files])
        for statement in LOCKDOWN:
            self.con.execute(statement)

    def _register(self) -> None:
        seen_names: dict[str, Path] = {}  # recording name -> its file
        columns: dict[str, set[str]] = {}  # system:event -> its column names, when known without DuckDB
        for i, rec in enumerate(self.recordings):
            if rec.recording in seen_names:
                raise ProbectlError(f"two recordings are named {rec.recording!r} ({seen_names[rec.recording]} "
                                    f"and {rec.path})", "name them apart with --name NAME for each -i FILE")
            seen_names[rec.recording] = rec.path
            for k, (event, table) in enumerate(rec.tables.items()):
                arrow = f"_arrow_{i}_{k}"
                self.con.register(arrow, table)
                schema = rec.schemas.get(event, table.schema)
                columns.setdefault(event, set()).update(schema.names)
                self.events.setdefault(event, []).append(
                    f"SELECT {_columns(schema, table.schema.names)}, {literal(rec.host)} AS host, "
                    f"{literal(rec.recording)} AS recording FROM {arrow}")
        for ds in self.datasets:
            for event, files in ds.events.items():
                listed = "[" + ", ".join(literal(f) for f in files) + "]"
                self.events.setdefault(event, []).append(
                    f"SELECT * FROM read_parquet({listed}, hive_partitioning = true, union_by_name = true)")
                columns[event] = set()  # (asked of DuckDB once the view is made)
        selects = []
        for system in sorted({event.partition(":")[0] for event in self.events}):
            self.con.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(system)}")
        for event, parts in sorted(self.events.items()):
            system, _, name = event.partition(":")
            table = f"{quote(system)}.{quote(name)}"
            self._execute(f"CREATE VIEW {table} AS " + " UNION ALL BY NAME ".join(parts))
            names = columns[event] or {r[0] for r in self._execute(f"DESCRIBE {table}").fetchall()}
            self.column_names.update(names)
            # (a field named like a header column keeps its name: the header one is common_<name>)
            cols = [f"{quote(f'common_{c}' if f'common_{c}' in names else c)} AS {c}" for c in HEADER]
            selects.append(f"SELECT {', '.join(cols)}, {literal(event)} AS event, host, recording FROM {table}")
        if not selects:
            empty = ", ".join(f"NULL::{t} AS {c}" for c, t in EVENTS_VIEW)
            selects.append(f"SELECT {empty} WHERE false")
        self.con.execute("CREATE VIEW events AS " + " UNION ALL ".join(selects))

    # -- what the database holds
    def table_names(self) -> list[str]:
        return ["events"] + [table_name(e) for e in sorted(self.events)]

    def describe(self, table: str) -> list[tuple[str, str]]:
        """(column, SQL type) of ``table`` (``events`` or ``system.event``)."""
        return [(r[0], r[1]) for r in self.sql(f"DESCRIBE {self._sql_table(table)}").rows]

    def _sql_table(self, table: str) -> str:
        if table == "events":
            return "events"
        event = table.replace(".", ":", 1) if ":" not in table else table
        if event not in self.events:
            raise SqlError(f"no table {table!r}",
                           did_you_mean(table, self.table_names()) or "--list-tables shows the tables")
        system, _, name = event.partition(":")
        return f"{quote(system)}.{quote(name)}"

    def fields(self, event: str) -> list[str]:
        """The columns of ``system:event``'s table that are its fields (not the header's, host or
        recording), whichever source (trace.dat or Parquet) the rows come from."""
        if event not in self._fields:
            names = [c for c, _ in self.describe(event)]
            header = {*HEADER, "host", "recording"} | {f"common_{c}" for c in HEADER if f"common_{c}" in names}
            # (a field named like a header column keeps its name, and the header one is common_<name>)
            self._fields[event] = [c for c in names if c not in header or f"common_{c}" in names]
        return self._fields[event]

    def row_count(self, table: str) -> int:
        return self.sql(f"SELECT count(*) FROM {self._sql_table(table)}").rows[0][0]

    # -- queries
    def _execute(self, text: str) -> duckdb.DuckDBPyConnection:
        try:
            return self.con.execute(text)
        except duckdb.Error as err:
            raise sql_error(err, self.table_names()) from None
        except RuntimeError as err:
            raise _interrupted(err) from None

    def check(self, text: str) -> None:
        """That ``text`` is one statement, a SELECT, by DuckDB's own parser; else an :class:`SqlError`
        saying what it is."""
        try:
            text.encode()
        except UnicodeEncodeError as err:  # (bytes of an argument that are not UTF-8: DuckDB takes text)
            bad = err.object[err.start:err.end].encode("utf-8", "surrogateescape").hex()
            raise SqlError(f"the SQL is not UTF-8 text: byte 0x{bad[:2]} at character {err.start + 1}",
                           "write the query in UTF-8") from None
        try:
            statements = self.con.extract_statements(text)
        except duckdb.Error as err:
            raise sql_error(err, self.table_names()) from None
        if len(statements) != 1:
            raise SqlError(f"the SQL is {len(statements)} statements: query runs one" if statements
                           else "the SQL has no statement", "give one SELECT")
        kind = statements[0].type
        if kind not in READS:
            what = "several statements (PIVOT without IN)" if kind == duckdb.StatementType.MULTI else \
                f"a {kind.name} statement"
            raise SqlError(f"the SQL is {what}: query runs a SELECT only (it reads the recordings, "
                           "it changes nothing)", "PIVOT ... ON column IN (values) is a SELECT"
                           if kind == duckdb.StatementType.MULTI else "")

    def sql(self, text: str) -> Result:
        """Run one query, a SELECT (:meth:`check`); a refused one is an :class:`SqlError` carrying
        DuckDB's message."""
        self.check(text)
        try:
            cur = self._interruptible(lambda: self.con.execute(text))
            if cur.description is None:
                return Result([], [])
            return Result([d[0] for d in cur.description], self._interruptible(cur.fetchall))
        except duckdb.Error as err:
            raise sql_error(err, self.table_names()) from None
        except RuntimeError as err:
            raise _interrupted(err) from None

    def stream(self, text: str, chunk: int = 1 << 16) -> tuple[list[str], Iterator[list[tuple]]]:
        """Run one query: its column names and its rows a chunk at a time (an answer of millions of
        rows is never held whole); errors are :class:`SqlError` as for :meth:`sql`."""
        self.check(text)
        try:
            cur = self._interruptible(lambda: self.con.execute(text))
        except duckdb.Error as err:
            raise sql_error(err, self.table_names()) from None
        except RuntimeError as err:
            raise _interrupted(err) from None
        if cur.description is None:
            return [], iter(())

        def chunks() -> Iterator[list[tuple]]:
            while True:
                try:
                    rows = self._interruptible(lambda: cur.fetchmany(chunk))
                except duckdb.Error as err:
                    raise sql_error(err, self.table_names()) from None
                except RuntimeError as err:
                    raise _interrupted(err) from None
                if not rows:
                    return
                yield rows

        return [d[0] for d in cur.description], chunks()

    def _interruptible(self, work: Callable[[], T]) -> T:
        """``work()`` (a DuckDB call), which Ctrl-C interrupts: DuckDB runs it on another thread while
        this one waits, where Python's signal handler can run (it runs on the main thread between
        bytecodes: DuckDB's own check of the signal missed some queries, a cross join ran on), and
        a KeyboardInterrupt interrupts the query, waits for it to stop and goes on up."""
        done: list = []

        def run() -> None:
            try:
                done.append((True, work()))
            except BaseException as err:  # (handed to the waiting thread)
                done.append((False, err))

        worker = threading.Thread(target=run, name="probectl-query", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.05)
        except KeyboardInterrupt:
            self.con.interrupt()
            worker.join()
            raise
        ok, value = done[0]
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self.con.close()
        self.spill.cleanup()

    def __enter__(self) -> "RecordingsDatabase":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# The SQL types of the Arrow types of the decoder's columns (analysis.columns.field_type).
_SQL_TYPES = {"int64": "BIGINT", "uint64": "UBIGINT", "int32": "INTEGER", "large_string": "VARCHAR",
              "dictionary<values=string, indices=int32, ordered=0>": "VARCHAR", "large_list<item: int64>": "BIGINT[]",
              "large_binary": "BLOB"}


def _columns(schema, read: Sequence[str]) -> str:
    """The select list of a table of ``schema`` of which the columns ``read`` were decoded: the
    others are typed NULLs, never read (the query named none of them), there for the names only,
    so that DuckDB binds, describes and suggests as over the whole table."""
    if list(read) == schema.names:
        return "*"
    have = set(read)
    return ", ".join(quote(f.name) if f.name in have else f"NULL::{_SQL_TYPES[str(f.type)]} AS {quote(f.name)}"
                     for f in schema)


def _interrupted(err: RuntimeError) -> BaseException:
    """What DuckDB's "Query interrupted" (a Ctrl-C while it ran: it took the signal's
    KeyboardInterrupt) is: that KeyboardInterrupt again, which the command line ends quietly with."""
    return KeyboardInterrupt() if "interrupted" in str(err).lower() else err


def sql_error(err: Exception, tables: Iterable[str]) -> SqlError:
    """DuckDB's message as an error; a missing table gets the tables of the recordings as its hint."""
    text = str(err).strip()
    hint = ""
    if "Table with name" in text or "does not exist" in text:
        hint = "the tables: " + ", ".join(tables) + " (--list-tables shows their columns)"
    return SqlError(text, hint)

