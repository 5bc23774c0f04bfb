"""The `report` and `query` commands: counts, histograms and SQL over recordings (analysis.report,
analysis.report_aggregate, analysis.report_sql, analysis.sql). Their own module: DuckDB and pyarrow
are imported only when one of them needs them."""
from __future__ import annotations

import sys
from typing import Any, Sequence

import click

from ..tracedat import DEFAULT_FILE
from . import cli, notice, path_value_callback


def _progress_reader():
    """A progress callback for reading recordings (on a terminal only) and its finisher."""
    if not sys.stderr.isatty():
        return None, lambda: None

    def progress(path: str, events: int) -> None:
        sys.stderr.write(f"\r[ reading {path}: {events:,} events ]\033[K")
        sys.stderr.flush()

    def done() -> None:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()

    return progress, done


def _load(inputs: Sequence[str], names: Sequence[str], then: str, columns=None):
    """The recordings of -i: trace.dat files (their ``columns`` only, when given), and the Parquet
    datasets of the -i that are directories; meanwhile, module ``then`` (what the command runs on
    them) is imported on another thread."""
    import importlib
    import os
    import threading

    from ..analysis.columns import open_recordings
    from ..analysis.parquet import find_datasets

    # (DuckDB's import is the largest of the command's; the decoder releases the GIL, so the
    # two overlap. Started once the modules both need are in: the threads never import one module
    # at once. A failed import fails again, with its error, where the command imports it. Not a
    # daemon: a run that ends early, on an error, waits for the import; one that left it half-done
    # aborted in DuckDB's C++ as the interpreter shut down.)
    threading.Thread(target=importlib.import_module, args=(then,)).start()

    inputs = list(inputs) or [str(DEFAULT_FILE)]
    dirs = [path for path in inputs if os.path.isdir(path)]
    files = [path for path in inputs if path not in dirs]
    if len(names) > len(files):  # (the datasets of a directory carry their own names)
        raise click.UsageError(f"{len(names)} --name for {len(files)} trace.dat file{'s' * (len(files) != 1)}")
    datasets = [find_datasets(path) for path in dirs]
    progress, done = _progress_reader()
    try:
        recordings = list(open_recordings(files, names, progress=progress, columns=columns))
    finally:
        done()
    for rec in recordings:
        _warn_of(rec.path, rec.lost, rec.format_failures)
    return recordings, datasets


def _warn_of(path, lost: int, format_failures: Sequence[tuple[str, str]]) -> None:
    """The warnings of a recording read: formats that did not parse, events lost while recording."""
    if format_failures:
        shown = ", ".join(f"{system}: {message}" for system, message in format_failures[:3])
        notice(f"Warning: {len(format_failures)} event format{'s' * (len(format_failures) != 1)} of "
               f"{path} could not be read ({shown}); their events are in no table")
    if lost:
        notice(f"Warning: {lost:,} events were lost while recording {path} (the file's per-CPU "
               "statistics): counts are of the events recorded")


def _cell(value: Any) -> Any:
    """A value for CSV and the terminal: bytes in hex, the rest as Python prints it."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return value


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """A terminal table: numbers right and text left, as tabulate finds them; or, when ``right``
    names columns (numbers already written as text, 1,234), those right and the others left."""
    from tabulate import tabulate

    cells = [[_cell(v) for v in r] for r in rows]
    if not right:
        return tabulate(cells, headers=list(headers), tablefmt="simple") + "\n"
    align = ["right" if i in right else "left" for i in range(len(headers))]
    return tabulate(cells, headers=list(headers), tablefmt="simple", colalign=align, disable_numparse=True) + "\n"


def _json_objects(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The rows as JSON objects, one a line, separated by commas (the inside of an array)."""
    import json

    return ",\n".join(json.dumps(dict(zip(columns, map(_json_value, r)))) for r in rows)


def _json_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    inside = _json_objects(columns, rows)
    return "[\n" + inside + ("\n" if inside else "") + "]\n"


def _json_value(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)  # (dates, decimals: as DuckDB prints them)


def _csv_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]], header: bool = True) -> str:
    import csv
    import io

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    if header:
        writer.writerow(columns)
    writer.writerows([[_cell(v) for v in r] for r in rows])
    return buf.getvalue()


_INPUT_HELP = ("trace.dat file, or a directory of Parquet datasets (script --format parquet); repeat for "
                     "several (default probectl.dat).")
_NAME_HELP = "Name of the recording of each -i FILE, in order (default: the file name without .dat)."


# ---- report -------------------------------------------------------------------------------------


@cli.command()
@click.option("-i", "--input", "inputs", multiple=True, metavar="FILE|DIR",
              callback=path_value_callback, help=_INPUT_HELP)
@click.option("--name", "names", multiple=True, metavar="NAME", help=_NAME_HELP)
@click.option("-e", "--event", "events", multiple=True, metavar="GLOB", help="Only these events (repeatable).")
@click.option("-s", "--sort", "sort", metavar="KEYS",
              help="Count by these keys, as perf report: event, comm, pid, tid, cpu, sym, recording, host, "
                   "or a field of the events (default: event).")
@click.option("--hist", "hist_field", metavar="FIELD",
              help="A log2 histogram of an integer field, in the kernel's buckets as hist draws them "
                   "(one per value of --sort keys).")
@click.option("-n", "--top", type=click.IntRange(min=0), default=0, metavar="N", help="Only the N largest rows/groups.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
def report(inputs, names, events, sort, hist_field, top, as_json):
    """Count the events of recordings (trace.dat files, or directories of Parquet datasets) by
    event, command, process, probed function or field value:

    \b
        probectl report -i probectl.dat --sort comm,sym
        probectl report -e malloc --hist size --sort comm
    """
    import os

    from ..analysis.report import parse_keys
    from ..analysis.report_aggregate import aggregate_report

    keys = parse_keys(sort)
    files = list(inputs) or [str(DEFAULT_FILE)]
    # (the common shapes, of trace.dat files, are counted by the native aggregator, as hist -i counts:
    # no DuckDB to import, no columns to fill; the others, and errors in reading, are SQL's)
    answer = None
    if not any(os.path.isdir(f) for f in files):
        progress, done = _progress_reader()
        try:
            answer = aggregate_report(files, names, events, keys, hist_field, top, progress=progress)
        finally:
            done()
    if answer is not None:
        for facts in answer.files:
            _warn_of(facts.path, facts.lost, facts.format_failures)
        if hist_field:
            _print_histograms(hist_field, answer.selected, answer.histograms, as_json)
        else:
            _print_report(answer.report, top, as_json)
        return
    recordings, datasets = _load(inputs, names, then="probectl.analysis.report_sql")
    from ..analysis.report_sql import Reporter
    from ..analysis.sql import RecordingsDatabase

    with RecordingsDatabase(recordings, datasets=datasets) as db:
        reporter = Reporter(db, events)
        if hist_field:
            _print_histograms(hist_field, reporter.selected, reporter.histograms(hist_field, keys, top), as_json)
        else:
            _print_report(reporter.counts(keys or ["event"], top), top, as_json)


def _print_histograms(hist_field: str, selected: Sequence[str], hists, as_json: bool) -> None:
    from ..analysis.histogram import LOG2, histogram_lines
    from ..analysis.report import KEY_TITLES

    if as_json:
        import json

        click.echo(json.dumps({"field": hist_field, "events": list(selected), "histograms": [
            {"keys": {k: _json_value(v) for k, v in h.keys.items()}, "total": h.total,
             "buckets": [{"bucket": b, "range": list(LOG2.range(b)), "label": LOG2.label(b), "count": c}
                         for b, c in sorted(h.counts.items())]} for h in hists]}, indent=2))
        return
    out = []
    for h in hists:
        where = ", ".join(f"{KEY_TITLES.get(k, k).lower()}={_cell(v)}" for k, v in h.keys.items())
        out.append(f"@{hist_field}.log2{f'[{where}]' if where else ''}: {h.total:,} events\n"
                   + "".join(line + "\n" for line in histogram_lines(LOG2, h.counts)))
    click.echo("\n".join(out), nl=False)


def _print_report(rep, top: int, as_json: bool) -> None:
    if as_json:
        import json

        click.echo(json.dumps({"total": rep.total, "events": rep.events, "keys": rep.keys, "rows": [
            {**{k: _json_value(v) for k, v in zip(rep.keys, r.keys)}, "samples": r.count}
            for r in rep.rows]}, indent=2))
        return
    shown = ", ".join(rep.events[:4]) + (f" and {len(rep.events) - 4} more" if len(rep.events) > 4 else "")
    title = "Available samples" if rep.keys == ["event"] else f"{rep.total:,} samples of {shown}"
    rows = [[f"{r.count:,}", f"{100.0 * r.count / rep.total:.2f}%" if rep.total else "-", *r.keys]
            for r in rep.rows]
    click.echo(f"# {title}\n" + _table(["Samples", "Overhead", *rep.titles()], rows, right=(0, 1)), nl=False)
    if top and len(rep.rows) == top:
        notice(f"(the {top} largest rows; {rep.total:,} samples in all)")


# ---- query --------------------------------------------------------------------------------------


@cli.command()
@click.argument("sql", required=False)
@click.option("-i", "--input", "inputs", multiple=True, metavar="FILE|DIR",
              callback=path_value_callback, help=_INPUT_HELP)
@click.option("--name", "names", multiple=True, metavar="NAME", help=_NAME_HELP)
@click.option("--csv", "as_csv", is_flag=True, help="CSV with a header line.")
@click.option("--json", "as_json", is_flag=True, help="A JSON array of objects.")
@click.option("--list-tables", "list_tables", is_flag=True, help="The tables, their rows and columns.")
def query(sql, inputs, names, as_csv, as_json, list_tables):
    """Run SQL (DuckDB) over the events of recordings: a table per event, SYSTEM.EVENT
    (probe_libc:malloc is probe_libc.malloc), and the view `events` of every event's ts, cpu, tid,
    pid, comm, event; every table also has `host` and `recording`. A Rust enum or a slice of structs
    is its text as script shows it (n = 'Some(2)', c = 'Green'). A directory of Parquet datasets
    (script --format parquet -o DIR) is read as the recordings it holds:

    \b
        probectl query -i a.dat -i b.dat 'SELECT recording, comm, count(*) FROM probe_libc.malloc GROUP BY ALL'
    """
    if as_csv and as_json:
        raise click.UsageError("--csv and --json are two output formats: give one")
    if not sql and not list_tables:
        raise click.UsageError("give an SQL query, or --list-tables to see what there is to query")
    from ..analysis.sqlcolumns import columns_named, reads_only_columns

    # (the columns the query's text names are decoded, the others are typed NULLs; when DuckDB's
    # parse of it reads more than it names, a whole row or an alias, all are decoded again)
    needed = None if list_tables else columns_named(sql)
    recordings, datasets = _load(inputs, names, then="probectl.analysis.sql", columns=needed)
    from ..analysis.sql import RecordingsDatabase

    db = RecordingsDatabase(recordings, datasets=datasets)
    if needed is not None and not reads_only_columns(db.con, sql, db.column_names):
        db.close()
        recordings, datasets = _load(inputs, names, then="probectl.analysis.sql")
        db = RecordingsDatabase(recordings, datasets=datasets)
    with db:
        if list_tables:
            rows = [[t, db.row_count(t), ", ".join(f"{c} {typ.lower()}" for c, typ in db.describe(t))]
                    for t in db.table_names()]
            if as_json:
                click.echo(_json_rows(["table", "rows", "columns"], rows), nl=False)
            elif as_csv:
                click.echo(_csv_rows(["table", "rows", "columns"], rows), nl=False)
            else:
                click.echo(_table(["Table", "Rows", "Columns"], [[t, f"{n:,}", c] for t, n, c in rows], right=(1,)),
                           nl=False)
            if not sql:
                return
        if as_json or as_csv:  # (written as the rows come: an answer may have millions)
            columns, chunks = db.stream(sql)
            if as_csv:
                if columns:
                    sys.stdout.write(_csv_rows(columns, []))
                for rows in chunks:
                    sys.stdout.write(_csv_rows(columns, rows, header=False))
            else:
                sys.stdout.write("[\n")
                some = False
                for rows in chunks:
                    sys.stdout.write((",\n" if some else "") + _json_objects(columns, rows))
                    some = True
                sys.stdout.write("\n]\n" if some else "]\n")
            return
        result = db.sql(sql)
        if result.columns:
            click.echo(_table(result.columns, result.rows), nl=False)
