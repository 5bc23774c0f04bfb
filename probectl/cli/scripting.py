"""The `script` command: print a trace.dat file (perf script). Its own module, so that printing a
file imports only the reader and the formatters — not the recorder, filters or grammars."""
from __future__ import annotations

import sys

import click

from ..script import DEFAULT_FIELDS, FIELDS, OUTPUT_FORMATS, lost_events, parse_fields, write_script
from ..tracedat import DEFAULT_FILE, open_trace
from . import cli, notice

# Timeline formats (probectl.pictures.timeline): Chrome JSON, which Perfetto opens.
TIMELINE_FORMATS = ("chrome-json", "perfetto")


@cli.command()
@click.option("-i", "--input", "input_", default=str(DEFAULT_FILE), show_default=True, metavar="FILE",
              help="trace.dat file (probectl's or trace-cmd's).")
@click.option("-F", "--fields", metavar="FIELDS", help=f"Fields of text/csv lines, from {','.join(FIELDS)}.")
@click.option("--format", "kind", type=click.Choice(OUTPUT_FORMATS + TIMELINE_FORMATS), default="text",
              show_default=True, help="text (perf script), csv, json (one object a line), folded (stacks, for "
              "flamegraph.pl), chrome-json (a timeline for Perfetto; perfetto is the same).")
@click.option("-e", "--event", "events", multiple=True, metavar="GLOB", help="Only these events (repeatable).")
@click.option("--counter", "counters", multiple=True, metavar="FIELD",
              help="chrome-json: also a counter track of these numeric fields (globs, repeatable).")
def script(input_, fields, kind, events, counters):
    """Print the events of a trace.dat file."""
    if counters and kind not in TIMELINE_FORMATS:
        raise click.UsageError("--counter makes counter tracks of a timeline: use it with --format chrome-json")
    if kind in TIMELINE_FORMATS:
        if fields:
            raise click.UsageError("-F picks the fields of text and CSV lines; a timeline carries every field")
        from ..pictures.timeline import write_chrome_json

        with open_trace(input_) as trace:
            write_chrome_json(trace, sys.stdout, events, counters)
        return
    if fields and kind in ("json", "folded"):
        raise click.UsageError(f"-F picks the fields of text and CSV lines; --format {kind} prints "
                               + ("every field of each event" if kind == "json" else "stacks, not fields"))
    chosen = parse_fields(fields) if fields else DEFAULT_FIELDS
    if kind == "csv" and not fields:
        chosen = ("time", "cpu", "pid", "tid", "comm", "event", "trace")
    with open_trace(input_) as trace:
        write_script(trace, sys.stdout, kind, chosen, events=events)
        sys.stdout.flush()
        lost = lost_events(trace)
        failed = trace.format_failures()  # (of the events in the file; the others are not parsed)
        if failed:
            shown = ", ".join(f"{s}: {m}" for s, m in failed[:3])
            notice(f"Warning: {len(failed)} event formats could not be read ({shown}); "
                   "their events print as unknown")
    if lost:
        notice(f"Warning: {lost:,} events were lost while recording (the file's per-CPU statistics)")
