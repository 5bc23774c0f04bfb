"""Answer commands: hist and latency."""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Optional

import click

from ..analysis.names import KeyNames
from ..errors import AnalysisError
from ..outputfile import OutputFile
from ..tracefs import Tracefs
from . import cli, notice
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
def _probes_or_events(tfs: Tracefs, words: tuple[str, ...], target_args: tuple):
    """The events named by ``words``: an existing GROUP:EVENT as it is, else a probe definition, added
    now (as ``trace`` adds them) and removed on the way out (``Tracefs.named_event`` tells which).
    Yields one [(group, event)] per word."""
    from ..record.cleanup import cleanup_stale, probe_state

    for what in cleanup_stale(tfs, notice):
        notice(f"probectl: removed the leftover {what} of a dead run")
    with contextlib.ExitStack() as stack:
        out = []
        for word in words:
            name = tfs.named_event(word)
            if name is not None:
                out.append([name])
                continue
            from ..probes import ProbeSet, definitions

            probes = ProbeSet.resolve([word], make_target(*target_args), tfs.features)
            for warning in probes.warnings:
                notice(f"Warning: {warning}")
            defs = definitions(probes.add(tfs, force=True,
                                          before_write=lambda defs: stack.enter_context(probe_state(defs))))
            names = list(dict.fromkeys((d.group, d.event) for d in defs))
            stack.callback(tfs.remove, names)
            out.append(names)
        yield out


def _selected(tfs: Tracefs, name: tuple[str, str], filter_text: Optional[str]):
    from ..filters import compile_filter
    from ..record.selection import SelectedEvent

    fmt = tfs.event_format(*name)
    return SelectedEvent(name[0], name[1], fmt, compile_filter(filter_text, fmt) if filter_text else None)


def _one(names: list, word: str) -> tuple[str, str]:
    if len(names) != 1:
        raise AnalysisError(f"{word!r} made {len(names)} events, and one is needed here",
                            "name one place (e.g. FUNC@FILE or a binary with -x)")
    return names[0]


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


def _two_events(start: str, end: str) -> None:
    if start == end:
        raise AnalysisError(f"the start and the end are one event ({start})",
                            "time between two events: a function's entry and return, or --start A --end B")


def _path_notice(path: str, event: str, forced: bool) -> None:
    """Which path answers; for user space, why: asked for, or the kernel has no hist triggers."""
    why = "" if path == "kernel" else " (--user-space)" if forced else " (this kernel has no hist triggers)"
    notice(f"[ probectl: {'hist trigger in the kernel' if path == 'kernel' else path + ' aggregation'}"
           f" of {event}{why} ]")


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
@click.option("-i", "--input", "input_", metavar="FILE", help="Count the events of a recording instead.")
@click.option("--user-space", is_flag=True, help="Aggregate in user space even where the kernel could.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.pass_context
def hist(ctx, what, exec_, vmlinux, module, key_text, value_name, log2, buckets, filter_, sort_by, top, pids,
         system_wide, duration, buffer_kb, input_, user_space, as_json):
    """Count an event by key: a histogram (log2 or linear buckets) or a count table, until Ctrl-C,
    --duration or the end of COMMAND; probe definitions are added for the run and removed:

    \b
        probectl hist -x libc malloc --key size --log2 -- ls
        probectl hist sched:sched_switch --key prev_comm --top 5 --duration 1
    """
    from ..analysis.keys import parse_keys, parse_value
    from ..analysis.table import render_text, to_json

    if len(what) != 1:
        raise click.UsageError("name one event (GROUP:EVENT) or one probe definition")
    bucket = "log2" if log2 else f"buckets={buckets}" if buckets else ""
    command = ctx.meta.get("probectl.command", [])
    kallsyms = None
    if input_ and filter_:
        raise click.UsageError("--filter runs in the kernel, while events are counted or recorded: "
                               "with -i, record with --filter instead")
    if input_ and (command or pids or system_wide or duration):
        raise click.UsageError("-i counts a recording: -p, -a, --duration and a command do not apply")
    if input_:
        table, kallsyms = _hist_from_file(Path(input_), what[0], key_text, value_name, bucket)
    else:
        from ..analysis import live

        tfs = Tracefs.open(notice=notice)
        with _probes_or_events(tfs, what, (exec_, vmlinux, module)) as groups:
            name = _one(groups[0], what[0])
            event = _selected(tfs, name, filter_)
            in_kernel = not user_space and live.kernel_has_hist(tfs, [event])
            keys = parse_keys(key_text, event.format, bucket=bucket)
            value = parse_value(value_name, event.format)
            _path_notice(live.KERNEL_PATH if in_kernel else live.USER_PATH, event.name, user_space)
            scope = dict(command=command, pids=_pids(pids), system_wide=system_wide, duration=duration, notice=notice)
            if in_kernel:
                table = live.kernel_hist(tfs, event, keys, value, **scope)
            else:
                with _progress("hist", command) as progress:
                    table = live.user_hist(tfs, event, keys, value, buffer_kb=buffer_kb, progress=progress, **scope)
            if any(k.is_thread_name for k in keys) and table.path != "kernel":
                from ..record.trace import LiveNames

                names = LiveNames(tfs.root, {})
                table.merge_by(names.comm, next(i for i, k in enumerate(keys) if k.is_thread_name))
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


def _file_event(trace, word: str):
    pattern = word.replace("/", ":", 1)
    fmts = [f for f in trace.event_formats if f.full_name == pattern or f.name == pattern]
    if len(fmts) != 1:
        from ..errors import did_you_mean

        names = [f.full_name for f in trace.present_formats()]
        raise AnalysisError(f"{trace.where} has no event {word!r}" if not fmts else f"{word!r} is ambiguous",
                            did_you_mean(pattern, names, quote=True) or f"its events: {', '.join(names) or 'none'}")
    return fmts[0]


def _hist_from_file(path: Path, word: str, key_text: str, value_name: Optional[str], bucket: str):
    from ..analysis.keys import parse_keys, parse_value
    from ..analysis.live import file_hist
    from ..tracedat import open_trace

    with open_trace(path) as trace:
        fmt = _file_event(trace, word)
        keys = parse_keys(key_text, fmt, bucket=bucket)
        value = parse_value(value_name, fmt)
        table = file_hist(path, fmt, keys, value)
        if any(k.is_thread_name for k in keys):
            table.merge_by(trace.comm, next(i for i, k in enumerate(keys) if k.is_thread_name))
        return table, trace.kallsyms


@cli.command(cls=_SplitCommand)
@click.argument("what", nargs=-1)
@target_options
@click.option("--start", "start_name", metavar="EVENT|DEF", help="The start event (with --end).")
@click.option("--end", "end_name", metavar="EVENT|DEF", help="The end event.")
@click.option("--key", "key_text", default="common_pid", show_default=True, metavar="FIELDS",
              help="What pairs a start with its end: the thread, or fields both events have (dev,sector).")
@click.option("--buckets", type=click.IntRange(min=1), metavar="N", help="Linear buckets of N µs (ns) (default log2).")
@click.option("--ns", "in_ns", is_flag=True, help="Latencies in nanoseconds (default microseconds).")
@click.option("--pairs", "pairs_file", metavar="FILE", help="Write 'completion_time latency' lines (heat maps).")
@click.option("--filter", "filter_", metavar="EXPR", help="Kernel filter of the start event: only these are timed.")
@click.option("--end-filter", "end_filter", metavar="EXPR", help="Kernel filter of the end event.")
@_scope_options
@click.option("-i", "--input", "input_", metavar="FILE", help="Pair the events of a recording instead.")
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
    from ..analysis.keys import parse_keys
    from ..analysis.latency import MICROSECONDS, NANOSECONDS, latency_part, render_summary
    from ..analysis.table import render_text, to_json

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
        from ..analysis.live import file_latency
        from ..tracedat import open_trace

        with open_trace(Path(input_)) as trace:
            sfmt, efmt = _file_event(trace, words[0]), _file_event(trace, words[1])
        _two_events(sfmt.full_name, efmt.full_name)
        result = file_latency(Path(input_), sfmt, efmt, parse_keys(key_text, sfmt), parse_keys(key_text, efmt),
                              buckets, unit)
    else:
        from ..analysis import live

        tfs = Tracefs.open(notice=notice)
        with _probes_or_events(tfs, words, (exec_, vmlinux, module)) as groups:
            start = _selected(tfs, _one(groups[0], words[0]), filter_)
            end = _selected(tfs, _one(groups[1], words[1]), end_filter)
            _two_events(start.name, end.name)
            in_kernel = (not user_space and live.kernel_has_hist(tfs, [start, end])
                         and (tfs.root / "synthetic_events").exists())
            skeys = parse_keys(key_text, start.format)
            ekeys = parse_keys(key_text, end.format)
            _path_notice(live.KERNEL_PATH if in_kernel else live.USER_PATH, f"{start.name} -> {end.name}", user_space)
            scope = dict(command=command, pids=_pids(pids), system_wide=system_wide, duration=duration, notice=notice)
            if in_kernel:
                from ..analysis.triggers import latency_triggers

                texts = latency_triggers(live.latency_name(), f"{start.group}.{start.event}", skeys, ekeys,
                                         unit.kernel_timestamp, start_filter=start.filter.text if start.filter else "",
                                         end_filter=end.filter.text if end.filter else "")
                if pairs_file:  # (the synthetic event streamed: a pair a record)
                    with _progress("latency", command) as progress:
                        result = live.kernel_latency_pairs(tfs, start, end, texts, unit=unit, buffer_kb=buffer_kb,
                                                           progress=progress, **scope)
                else:
                    result = live.kernel_latency(tfs, start, end, texts, unit=unit, **scope)
            else:
                with _progress("latency", command) as progress:
                    result = live.user_latency(tfs, start, end, skeys, ekeys, buckets=buckets, unit=unit,
                                               buffer_kb=buffer_kb, progress=progress, **scope)
    if not result.count:
        hint = ("the start event never fired: check the function and the scope (-p, -- COMMAND)"
                if not result.pending and not result.unmatched else
                f"{result.pending:,} starts never ended and {result.unmatched:,} ends had no start: check --key")
        raise AnalysisError(f"no latency measured between {result.start} and {result.end}", hint)
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
