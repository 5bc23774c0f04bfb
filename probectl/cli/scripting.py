"""The `script` command: print a trace.dat file (perf script). Its own module, so that printing a
file imports only the reader and the formatters — not the recorder, filters or grammars."""
from __future__ import annotations

import sys

import click

from ..script import DEFAULT_FIELDS, FIELDS, OUTPUT_FORMATS, lost_events, parse_fields, write_script
from ..tracedat import DEFAULT_FILE, open_trace
from . import cli, notice, path_value_callback

# Timeline formats (probectl.pictures.timeline): Chrome JSON, which Perfetto opens.
TIMELINE_FORMATS = ("chrome-json", "perfetto")


@cli.command()
@click.option("-i", "--input", "input_", default=str(DEFAULT_FILE), show_default=True, metavar="FILE",
              callback=path_value_callback,
              help="trace.dat file (probectl's or trace-cmd's).")
@click.option("-F", "--fields", metavar="FIELDS", help=f"Fields of text/csv lines, from {','.join(FIELDS)}.")
@click.option("--format", "kind", type=click.Choice(OUTPUT_FORMATS + ("parquet",) + TIMELINE_FORMATS), default="text",
              show_default=True, help="text (perf script), csv, json (one object a line), folded (stacks, for "
                                      "flamegraph.pl), parquet (a dataset per event under -o DIR), chrome-json "
                                      "(a timeline for Perfetto; perfetto is the same).")
@click.option("-e", "--event", "events", multiple=True, metavar="GLOB", help="Only these events (repeatable).")
@click.option("-o", "--output", "output", metavar="DIR|FILE", callback=path_value_callback,
              help="--format parquet: the directory of the datasets, DIR/SYSTEM.EVENT/host=H/recording=R/; "
                   "chrome-json: the file (written whole or not at all; default stdout).")
@click.option("--host", "host", metavar="NAME", help="--format parquet: the host partition (default: the "
                                                     "node name the file was recorded on).")
@click.option("--recording", "recording", metavar="NAME", help="--format parquet: the recording partition "
                                                               "(default: the file name without .dat).")
@click.option("--counter", "counters", multiple=True, metavar="FIELD",
              help="chrome-json: also a counter track of these numeric fields (globs, repeatable).")
@click.option("--no-demangle", "no_demangle", is_flag=True,
              help="Name the C++ and Rust functions of stacks by their symbols as written (mangled), as perf "
                   "script --no-demangle does.")
def script(input_, fields, kind, events, output, host, recording, counters, no_demangle):
    """Print the events of a trace.dat file, or write them as Parquet datasets (--format parquet -o DIR)
    or as a timeline (--format chrome-json)."""
    if counters and kind not in TIMELINE_FORMATS:
        raise click.UsageError("--counter makes counter tracks of a timeline: use it with --format chrome-json")
    if kind in TIMELINE_FORMATS:
        _timeline(input_, fields, events, output, host, recording, counters, not no_demangle)
        return
    if kind == "parquet" or output or host or recording:
        if no_demangle and kind == "parquet":
            raise click.UsageError("--no-demangle names the functions of stacks, which Parquet datasets do not hold")
        _parquet(input_, fields, kind, events, output, host, recording)
        return
    if fields and kind in ("json", "folded"):
        raise click.UsageError(f"-F picks the fields of text and CSV lines; --format {kind} prints "
                               + ("every field of each event" if kind == "json" else "stacks, not fields"))
    chosen = parse_fields(fields) if fields else DEFAULT_FIELDS
    if kind == "csv" and not fields:
        chosen = ("time", "cpu", "pid", "tid", "comm", "event", "trace")
    with open_trace(input_) as trace:
        write_script(trace, sys.stdout, kind, chosen, events=events, demangle=not no_demangle)
        sys.stdout.flush()
        lost = lost_events(trace)
        failed = trace.format_failures()  # (of the events in the file; the others are not parsed)
        if failed:
            shown = ", ".join(f"{s}: {m}" for s, m in failed[:3])
            notice(f"Warning: {len(failed)} event formats could not be read ({shown}); "
                   "their events print as unknown")
    if lost:
        notice(f"Warning: {lost:,} events were lost while recording (the file's per-CPU statistics)")


def _timeline(input_, fields, events, output, host, recording, counters, demangle):
    """script --format chrome-json: the recording as a Chrome JSON trace (pictures.timeline)."""
    if fields:
        raise click.UsageError("-F picks the fields of text and CSV lines; a timeline carries every field")
    if host or recording:
        raise click.UsageError("--host and --recording go with --format parquet")
    from ..outputfile import OutputFile
    from ..pictures.timeline import write_chrome_json, write_chrome_json_file

    if output and output != "-":
        with OutputFile(output) as out, open_trace(input_) as trace:  # (claimed before the work)
            written = write_chrome_json_file(trace, out, events, counters, demangle)
        notice(f"[ probectl script: {written:,} events written to {output} ]")
    else:
        with open_trace(input_) as trace:
            write_chrome_json(trace, sys.stdout, events, counters, demangle)


def _parquet(input_, fields, kind, events, output, host, recording):
    """script --format parquet -o DIR: every event (or those of -e) as Parquet (analysis.parquet)."""
    if kind != "parquet":
        raise click.UsageError("-o, --host and --recording go with --format parquet")
    if not output:
        raise click.UsageError("--format parquet writes files: give their directory with -o DIR")
    if fields:
        raise click.UsageError("-F picks the fields of text and CSV lines; Parquet holds every field")
    from ..analysis.columns import event_tables_matching, read_tables
    from ..analysis.parquet import write_parquet

    with open_trace(input_) as trace:
        tables = event_tables_matching(read_tables(trace, recording), events)
    result = write_parquet(tables, output, host=host or "", recording=recording or "")
    notice(f"[ probectl script: {result.rows:,} events of {len(result.files)} event types written under {output} ]")
    if tables.lost:
        notice(f"Warning: {tables.lost:,} events were lost while recording (the file's per-CPU statistics)")
