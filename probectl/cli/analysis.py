"""Answer commands: hist and latency."""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import click

from ..analysis.names import KeyNames
from ..outputfile import OutputFile
from ..tracefs import Tracefs
from . import cli, notice, path_value_callback
from .probes import make_target, target_options
from .recording import _pids, _SplitCommand


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
def _progress(what: str, command: list):
    """A running count of the events on stderr when it is a terminal and no COMMAND writes there too
    (its lines would run into the count); None otherwise."""
    if not sys.stderr.isatty() or command:
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
@_scope_options
@click.option("-i", "--input", "input_", metavar="FILE",
              callback=path_value_callback, help="Count the events of a recording instead.")
@click.option("--user-space", is_flag=True, help="Aggregate in user space even where the kernel could.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.pass_context
def hist(ctx, what, exec_, vmlinux, module, key_text, value_name, log2, buckets, filter_, sort_by, top, pids,
         system_wide, duration, buffer_kb, input_, user_space, as_json):
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
    if input_ and (command or pids or system_wide or duration):
        raise click.UsageError("-i counts a recording: -p, -a, --duration and a command do not apply")
    kallsyms = None
    if input_:
        table, kallsyms = live.recorded_hist(Path(input_), what[0], key_text, value_name=value_name, bucket=bucket)
    else:
        with _progress("hist", command) as progress:
            table = live.hist(Tracefs.open(notice=notice), what[0], lambda: make_target(exec_, vmlinux, module),
                              key_text, value_name=value_name, bucket=bucket, filter_text=filter_,
                              scope=RunScope(command, _pids(pids), system_wide, duration), user_space=user_space,
                              buffer_kb=buffer_kb, notice=notice, progress=progress)
    table.sort(sort_by, top=top)
    names = KeyNames(kallsyms)
    if as_json:
        click.echo(json.dumps(to_json(table, names), indent=2))
    else:
        sys.stdout.write(render_text(table, names))
    sys.stdout.flush()  # the answer, then what is to be said about it
    if table.lost:
        notice(f"Warning: the kernel lost {table.lost:,} events; the counts are short (use a bigger -b KB)")
    if table.dropped:
        notice(f"Warning: the kernel's table was full: {table.dropped:,} events were not counted")


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
@_scope_options
@click.option("-i", "--input", "input_", metavar="FILE",
              callback=path_value_callback, help="Pair the events of a recording instead.")
@click.option("--user-space", is_flag=True, help="Pair the events in user space even where the kernel could.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.pass_context
def latency(ctx, what, exec_, vmlinux, module, start_name, end_name, key_text, buckets, in_ns, pairs_file, filter_,
            end_filter, pids, system_wide, duration, buffer_kb, input_, user_space, as_json):
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
    if input_:
        result = live.recorded_latency(Path(input_), words, key_text, buckets=buckets, unit=unit)
    else:
        with _progress("latency", command) as progress:
            result = live.latency(Tracefs.open(notice=notice), words, lambda: make_target(exec_, vmlinux, module),
                                  key_text, buckets=buckets, unit=unit, filter_text=filter_, end_filter=end_filter,
                                  pairs=pairs_out is not None, scope=RunScope(command, _pids(pids), system_wide, duration),
                                  user_space=user_space, buffer_kb=buffer_kb, notice=notice, progress=progress)
    table = result.histogram(latency_part(buckets, unit))
    if pairs_out is not None:
        pairs = result.pairs_text().encode()
        pairs_out.write(lambda out: out.write(pairs))
    if as_json:
        out = to_json(table)
        out.update(result.summary())
        out.update(unit=result.unit.name, unmatched=result.unmatched, pending=result.pending)
        click.echo(json.dumps(out, indent=2))
    else:
        sys.stdout.write(render_text(table))
        sys.stdout.write(render_summary(result))
    sys.stdout.flush()
    if result.lost:
        notice(f"Warning: the kernel lost {result.lost:,} events; some pairs are missing (use a bigger -b KB)")
