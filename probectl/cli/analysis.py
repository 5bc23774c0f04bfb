"""Answer commands: hist and latency."""
from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import click

from ..analysis.names import KeyNames
from ..outputfile import OutputFile
from ..tracefs import Tracefs
from . import cli, notice, path_value_callback
from .probes import make_target, target_options
from .recording import _pids, _SplitCommand

if TYPE_CHECKING:
    from ..analysis.latency import LatencyResult
    from ..analysis.table import HistTable


def _scope_options(func):
    """-p, -a, --duration and -b: what is counted and for how long, as ``record`` scopes it."""
    for option in reversed((
            click.option("-p", "--pid", "pids", metavar="PID[,PID]", help="Only these processes."),
            click.option("-a", "--all", "system_wide", is_flag=True,
                         help="With a command: every process, not only its."),
            click.option("--duration", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
                         help="Stop after this long."),
            click.option("-b", "--buffer-size", "buffer_kb", type=click.IntRange(min=1), metavar="KB",
                         help="Ring buffer per CPU, in KiB (user space)."))):
        func = option(func)
    return func


@contextlib.contextmanager
def _progress(what: str, command: list, wanted: bool = True):
    """A running count of the events on stderr when it is a terminal and no COMMAND writes there too
    (its lines would run into the count); None otherwise (and when not ``wanted``: --interval's
    tables are the progress then)."""
    if not sys.stderr.isatty() or command or not wanted:
        yield None
        return

    def show(events: int) -> None:
        sys.stderr.write(f"\r[ probectl {what}: {events:,} events ]\033[K")
        sys.stderr.flush()

    try:
        yield show
    finally:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()


def _interval_option(func):
    return click.option("--interval", type=click.FloatRange(min=0), metavar="SECONDS",
                        help="Print what was counted in every interval and start again (on a terminal: "
                             "the table redrawn in place, the top rows that fit), until Ctrl-C.")(func)


class _IntervalPrinter:
    """Each interval's answer as it ends: on a terminal the screen redrawn with it (the top rows that
    fit unless --top says), else one block after another under the time it ended (one JSON object a
    line with --json)."""

    def __init__(self, as_json: bool, top: Optional[int]):
        self.as_json = as_json
        self.tty = sys.stdout.isatty() and not as_json

    def rows(self, top: Optional[int]) -> Optional[int]:
        if top is not None or not self.tty:
            return top
        return max(1, shutil.get_terminal_size().lines - 4)

    def show(self, as_json: Callable[[], dict], as_text: Callable[[], str]) -> None:
        stamp = time.strftime("%H:%M:%S")
        if self.as_json:
            sys.stdout.write(json.dumps({"time": stamp, **as_json()}) + "\n")
        elif self.tty:
            sys.stdout.write(f"\033[H\033[2J{stamp}  (Ctrl-C to end)\n{as_text()}")
        else:
            sys.stdout.write(f"{stamp}\n{as_text()}\n")
        sys.stdout.flush()


@cli.command(cls=_SplitCommand)
@click.argument("what", nargs=-1)
@target_options
@click.option("--key", "key_text", required=True, metavar="KEYS",
              help="Fields, comm, pid, cpu or stacktrace, with .log2 .buckets=N .hex .sym .syscall; ',' joins up to 3.")
@click.option("--value", "value_name", metavar="FIELD", help="A number field to sum per key.")
@click.option("--log2", is_flag=True, help="Log2 buckets of the first key (as KEY.log2).")
@click.option("--buckets", type=click.IntRange(min=1), metavar="N", help="Linear buckets of size N.")
@click.option("--filter", "filter_", metavar="EXPR", help="Kernel filter of the event.")
@click.option("--sort", "sort_by", type=click.Choice(("count", "sum", "key")), help="Row order.")
@click.option("--top", type=click.IntRange(min=1), metavar="N", help="Only the first N rows.")
@_interval_option
@_scope_options
@click.option("-i", "--input", "input_", metavar="FILE",
              callback=path_value_callback, help="Count the events of a recording instead.")
@click.option("--user-space", is_flag=True, help="Aggregate in user space even where the kernel could.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.pass_context
def hist(ctx, what, exec_, target_ns, vmlinux, module, key_text, value_name, log2, buckets, filter_, sort_by, top, interval,
         pids, system_wide, duration, buffer_kb, input_, user_space, as_json):
    """Count an event by key: a histogram (log2 or linear buckets) or a count table, until Ctrl-C,
    --duration or the end of COMMAND; probe definitions are added for the run and removed:

    \b
        probectl hist -x libc 'malloc size=%di:u64' --key size --log2 -- ls
        probectl hist sched:sched_switch --key prev_comm --top 5 --duration 1
    """
    from ..analysis import live
    from ..analysis.table import render_text, to_json
    from ..record.session import RunScope

    if len(what) != 1:
        raise click.UsageError("name one event (GROUP:EVENT) or one probe definition")
    bucket = "log2" if log2 else f"buckets={buckets}" if buckets else ""
    command = ctx.meta.get("probectl.command", [])
    if input_ and filter_:
        raise click.UsageError("--filter runs in the kernel, while events are counted or recorded: "
                               "with -i, record with --filter instead")
    if input_ and (command or pids or system_wide or duration or interval):
        raise click.UsageError("-i counts a recording: -p, -a, --duration, --interval and a command do not apply")
    kallsyms = None
    names = KeyNames(kallsyms)
    if input_:
        table, kallsyms = live.recorded_hist(Path(input_), what[0], key_text, value_name=value_name, bucket=bucket)
        names = KeyNames(kallsyms)
    else:
        printer = None
        if interval is not None:
            printer = _IntervalPrinter(as_json, top)

            def show(part: "HistTable") -> None:
                part.sort(sort_by, top=printer.rows(top))
                printer.show(lambda: to_json(part, names), lambda: render_text(part, names))
        with _progress("hist", command, interval is None) as progress:
            table = live.hist(Tracefs.open(notice=notice), what[0],
                              lambda: make_target(exec_, vmlinux, module, target_ns),
                              key_text, value_name=value_name, bucket=bucket, filter_text=filter_,
                              scope=RunScope(command, _pids(pids), system_wide, duration), user_space=user_space,
                              buffer_kb=buffer_kb, notice=notice, progress=progress, interval=interval,
                              on_interval=show if printer is not None else None)
    table.sort(sort_by, top=top)
    if interval is None:  # (with it, each interval was printed as it ended, the last one too)
        if as_json:
            click.echo(json.dumps(to_json(table, names), indent=2))
        else:
            sys.stdout.write(render_text(table, names))
    sys.stdout.flush()  # the answer, then what is to be said about it
    if table.lost:
        notice(f"Warning: the kernel lost {table.lost:,} events; the counts are short (use a bigger -b KB)")
    if table.dropped:
        notice(f"Warning: the kernel's table was full: {table.dropped:,} events were not counted")
    return table.command_exit or 0


@cli.command(cls=_SplitCommand)
@click.argument("what", nargs=-1)
@target_options
@click.option("--start", "start_name", metavar="EVENT|DEF", help="The start event (with --end).")
@click.option("--end", "end_name", metavar="EVENT|DEF", help="The end event.")
@click.option("--key", "key_text", default="common_pid", show_default=True, metavar="FIELDS",
              help="What pairs a start with its end: the thread, or fields both events have (dev,sector).")
@click.option("--buckets", type=click.IntRange(min=1), metavar="N", help="Linear buckets of N µs (ns) (default log2).")
@click.option("--ns", "in_ns", is_flag=True, help="Latencies in nanoseconds (default microseconds).")
@click.option("--pairs", "pairs_file", metavar="FILE",
              callback=path_value_callback, help="Write 'completion_time latency' lines (heat maps).")
@click.option("--filter", "filter_", metavar="EXPR", help="Kernel filter of the start event: only these are timed.")
@click.option("--end-filter", "end_filter", metavar="EXPR", help="Kernel filter of the end event.")
@_interval_option
@_scope_options
@click.option("-i", "--input", "input_", metavar="FILE",
              callback=path_value_callback, help="Pair the events of a recording instead.")
@click.option("--user-space", is_flag=True, help="Pair the events in user space even where the kernel could.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.pass_context
def latency(ctx, what, exec_, target_ns, vmlinux, module, start_name, end_name, key_text, buckets, in_ns, pairs_file, filter_,
            end_filter, interval, pids, system_wide, duration, buffer_kb, input_, user_space, as_json):
    """Time from a start to an end event of the same thread (or key): a histogram in µs and p50, p90,
    p99, max. One function's entry and return:

    \b
        probectl latency -x libc malloc -- ls
        probectl latency --start block:block_rq_issue --end block:block_rq_complete --key dev,sector
    """
    from ..analysis import live
    from ..analysis.latency import MICROSECONDS, NANOSECONDS, latency_part, render_summary
    from ..analysis.table import render_text, to_json
    from ..record.session import RunScope

    if what and (start_name or end_name):
        raise click.UsageError("give one function, or --start and --end, not both")
    if not what and not (start_name and end_name):
        raise click.UsageError("give a function (its entry and return are timed), or --start and --end")
    if len(what) > 1:
        raise click.UsageError("give one function")
    words = (what[0], what[0] + "%return") if what else (start_name, end_name)
    unit = NANOSECONDS if in_ns else MICROSECONDS
    command = ctx.meta.get("probectl.command", [])
    if input_ and (filter_ or end_filter):
        raise click.UsageError("--filter and --end-filter run in the kernel, while events are paired or recorded: "
                               "with -i, record with --filter instead")
    # (claimed before measuring: a FIFO nobody reads, or a directory, is said now, not after the work)
    pairs_out = OutputFile(pairs_file) if pairs_file else None
    if input_ and interval is not None:
        raise click.UsageError("-i pairs a recording: --interval does not apply")
    if input_:
        result = live.recorded_latency(Path(input_), words, key_text, buckets=buckets, unit=unit)
    else:
        printer = None
        if interval is not None:
            printer = _IntervalPrinter(as_json, None)

            def show(part: "LatencyResult") -> None:
                ptable = part.histogram(latency_part(buckets, unit))

                def as_text() -> str:
                    return render_text(ptable) + render_summary(part) if part.count else "no pair measured\n"
                printer.show(lambda: {**to_json(ptable), **(part.summary() if part.count else {})}, as_text)
        with _progress("latency", command, interval is None) as progress:
            result = live.latency(Tracefs.open(notice=notice), words,
                                  lambda: make_target(exec_, vmlinux, module, target_ns),
                                  key_text, buckets=buckets, unit=unit, filter_text=filter_, end_filter=end_filter,
                                  pairs=pairs_out is not None, scope=RunScope(command, _pids(pids), system_wide, duration),
                                  user_space=user_space, buffer_kb=buffer_kb, notice=notice, progress=progress,
                                  interval=interval, on_interval=show if printer is not None else None)
    table = result.histogram(latency_part(buckets, unit))
    if pairs_out is not None:
        pairs = result.pairs_text().encode()
        pairs_out.write(lambda out: out.write(pairs))
    if interval is None:  # (with it, each interval was printed as it ended, the last one too)
        if as_json:
            out = to_json(table)
            out.update(result.summary())
            out.update(unit=result.unit.name, unmatched=result.unmatched, replaced=result.replaced,
                       pending=result.pending)
            click.echo(json.dumps(out, indent=2))
        else:
            sys.stdout.write(render_text(table))
            sys.stdout.write(render_summary(result))
    sys.stdout.flush()
    if result.lost:
        notice(f"Warning: the kernel lost {result.lost:,} events; some pairs are missing (use a bigger -b KB)")
    return result.command_exit or 0
