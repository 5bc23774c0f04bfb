"""The picture commands: `flamegraph` (stacks, or off-CPU time, as an interactive SVG) and `heatmap`
(latency pairs as an SVG heat map)."""
from __future__ import annotations

import sys
from typing import Callable, Iterable, TypeVar

import click

from ..pictures.flamegraph import FlameGraphOptions, render_svg
from ..pictures.heatmap import MAX_COLUMNS
from ..pictures.offcpu import off_cpu_stacks
from ..outputfile import write_text
from ..pictures.stacks import parse_folded, trace_stacks
from ..tracedat import DEFAULT_FILE, open_trace
from . import cli, notice, path_value_callback

T = TypeVar("T")


def _pids(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a list of numbers (PID[,PID])", param_hint="--pid") from None


class _Progress:
    """Records read so far, on a terminal's stderr (a big recording takes a while to fold)."""

    def __init__(self, what: str):
        self.what = what
        self.live = sys.stderr.isatty()

    def __call__(self, records: int) -> None:
        sys.stderr.write(f"\r[ probectl {self.what}: {records:,} records read ]\033[K")
        sys.stderr.flush()

    def __enter__(self):
        return self if self.live else None

    def __exit__(self, *exc: object) -> None:
        if self.live:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _parse_text(input_: str | None, parse: Callable[[Iterable[str], str], T]) -> T:
    """``parse(lines, where)`` of the text file ``input_``, or of stdin (none, or ``-``)."""
    if not input_ or input_ == "-":
        return parse(sys.stdin, "stdin")
    try:
        with open(input_, encoding="utf-8", errors="surrogateescape") as f:
            return parse(f, input_)
    except OSError as err:
        raise click.FileError(input_, err.strerror) from None


def _write(text: str, output: str | None) -> None:
    if output and output != "-":
        write_text(output, text)
    else:
        sys.stdout.write(text)


@cli.command()
@click.option("-i", "--input", "input_", metavar="FILE", callback=path_value_callback,
              help=f"trace.dat recorded with -g [default: {DEFAULT_FILE}]; with --folded, folded stacks "
              "[default: stdin].")
@click.option("--folded", "folded_input", is_flag=True, help="The input is folded stacks ('a;b;c COUNT' lines).")
@click.option("--off-cpu", is_flag=True,
              help="Time blocked, per stack, from sched:sched_switch/sched_wakeup recorded with -g.")
@click.option("-o", "--output", metavar="FILE",
              callback=path_value_callback, help="Write the SVG (or folded text) to FILE [default: stdout].")
@click.option("--format", "kind", type=click.Choice(("svg", "folded")), default="svg", show_default=True,
              help="svg, or the weighted stacks as folded text (for flamegraph.pl or diffing).")
@click.option("-e", "--event", "events", multiple=True, metavar="GLOB", help="Only these events' stacks (repeatable).")
@click.option("--comm", "comms", multiple=True, metavar="NAME", help="Only these processes' stacks (repeatable).")
@click.option("--pid", "pids", metavar="PID[,PID]", help="Only these processes or threads.")
@click.option("--weight", metavar="FIELD", help="Weigh each stack by this field of its event (bytes...).")
@click.option("--count-name", metavar="NAME", help="What a count is, for the tooltips [default: samples, "
              "the --weight field, or a time for --off-cpu].")
@click.option("--title", metavar="TEXT", help="The title above the graph.")
@click.option("--width", type=click.IntRange(min=100), default=1200, show_default=True, help="Width in pixels.")
@click.option("--minwidth", type=click.FloatRange(min=0), default=0.1, show_default=True, metavar="PIXELS",
              help="Leave out frames narrower than this (bounds the SVG of huge inputs).")
@click.option("--inverted", is_flag=True, help="An icicle graph: roots at the top, growing down.")
def flamegraph(input_, folded_input, off_cpu, output, kind, events, comms, pids, weight, count_name, title, width,
               minwidth, inverted):
    """Draw the stacks of a recording (record -g) as an interactive flame graph SVG."""
    pid_list = _pids(pids)
    if folded_input:
        if off_cpu or events or comms or pid_list or weight:
            raise click.UsageError("--folded input is already counted stacks: -e, --comm, --pid, --weight and "
                                   "--off-cpu apply to recordings")
        stacks = _parse_text(input_, parse_folded)
    else:
        if off_cpu and (events or weight):
            raise click.UsageError("--off-cpu weighs sched_switch stacks by blocked time: -e and --weight do not apply")
        with open_trace(input_ or str(DEFAULT_FILE)) as trace, _Progress("flamegraph") as progress:
            if off_cpu:
                stacks = off_cpu_stacks(trace, comms, pid_list, progress=progress)
            else:
                stacks = trace_stacks(trace, events, comms, pid_list, weight, progress=progress)
    if kind == "folded":
        _write(stacks.folded_text(), output)
        return
    palette = "io" if off_cpu else "mem" if weight else "hot"
    default_title = ("Off-CPU Time Flame Graph" if off_cpu else "Icicle Graph" if inverted else "Flame Graph")
    options = FlameGraphOptions(title=title or default_title, width=width, min_width=minwidth, inverted=inverted,
                                palette=palette, count_name=count_name)
    _write(render_svg(stacks, options), output)
    if output and output != "-":
        notice(f"[ probectl flamegraph: {len(stacks.counts):,} stacks written to {output} ]")


@cli.command()
@click.option("-i", "--input", "input_", metavar="FILE", callback=path_value_callback,
              help="'completion_time latency' pairs (probectl latency --pairs) [default: stdin]; with --start "
              "and --end, a recording.")
@click.option("--ns", "in_ns", is_flag=True, help="The pairs' latencies are in ns (latency --ns --pairs).")
@click.option("--start", "start_name", metavar="EVENT", help="The start event of the recording's pairs (with --end).")
@click.option("--end", "end_name", metavar="EVENT", help="The end event.")
@click.option("--key", "key_text", default="common_pid", show_default=True, metavar="FIELDS",
              help="What pairs a start with its end (as in latency).")
@click.option("-o", "--output", metavar="FILE",
              callback=path_value_callback, help="Write the SVG to FILE [default: stdout].")
@click.option("--title", default="Latency Heat Map", show_default=True, metavar="TEXT")
@click.option("--width", type=click.IntRange(min=300), default=1200, show_default=True, help="Width in pixels.")
@click.option("--height", type=click.IntRange(min=200), default=600, show_default=True, help="Height in pixels.")
@click.option("--rows", type=click.IntRange(min=1, max=1000), default=50, show_default=True,
              help="About this many latency buckets.")
@click.option("--columns", type=click.IntRange(min=1, max=MAX_COLUMNS), default=100, show_default=True,
              help="About this many time columns.")
@click.option("--step", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Time per column [default: from --columns].")
@click.option("--max-latency", type=click.FloatRange(min=0, min_open=True), metavar="US",
              help="Top of the latency axis in µs; longer ones are counted in the top row [default: the largest].")
def heatmap(input_, in_ns, start_name, end_name, key_text, output, title, width, height, rows, columns, step,
            max_latency):
    """Draw latency pairs as a heat map SVG (time x latency, colour: count): from 'latency --pairs'
    output, or from a recording's start and end events (--start, --end)."""
    from ..pictures.heatmap import bin_pairs, latency_pairs, parse_pairs, render_heatmap_svg

    if start_name or end_name:
        if not (start_name and end_name and input_ and input_ != "-"):
            raise click.UsageError("--start and --end pair the events of a recording: give both, and -i FILE")
        if in_ns:
            raise click.UsageError("--ns is the unit of pairs text; a recording's pairs are timed exactly")
        pairs = latency_pairs(_recorded_latency(input_, start_name, end_name, key_text))
    else:
        pairs = _parse_text(input_, lambda lines, where: parse_pairs(lines, where, ns=in_ns))
    grid = bin_pairs(pairs, columns, rows, step, max_latency)
    _write(render_heatmap_svg(grid, title, width, height), output)
    if output and output != "-":
        notice(f"[ probectl heatmap: {grid.total:,} pairs in {grid.columns} x {grid.rows} cells written to {output} ]")


def _recorded_latency(path: str, start_name: str, end_name: str, key_text: str):
    """analysis' pairing of the recording's start and end events (as 'latency -i' pairs them)."""
    from pathlib import Path

    from ..analysis.latency import NANOSECONDS
    from ..analysis.live import recorded_latency

    return recorded_latency(Path(path), (start_name, end_name), key_text, unit=NANOSECONDS)
