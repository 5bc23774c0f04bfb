"""Recording commands: record, trace, tracepoints, fields, cleanup."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import click

from ..errors import ProbectlError, close_matches
from ..script import DEFAULT_FIELDS, parse_fields, print_live
from ..tracedat import DEFAULT_FILE
from ..tracefs import Tracefs
from . import Command, cli, exec_option, notice, path_value_callback, target_ns_option, target_value_callback

if TYPE_CHECKING:
    from ..record import EventRequest

# The recorder, filters (their grammar) and live stream are imported by the commands that use them,
# so that `tracepoints`, `fields` and `cleanup` start quickly.


def _open_tracefs() -> Tracefs:
    return Tracefs.open(notice=notice)


class _OrderedCommand(Command):
    """A command that remembers the order of its options (``--filter`` belongs to the ``-e`` before
    it, as in perf) in ``ctx.meta['probectl.order']``, and takes ``-- COMMAND ARGS`` after its
    own arguments into ``ctx.meta['probectl.command']``."""

    split_command = False

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = list(args)
        command: list[str] = []
        if self.split_command and "--" in args:
            i = args.index("--")
            args, command = args[:i], args[i + 1:]
        ctx.meta["probectl.command"] = command
        order: list[str] = []
        try:
            _opts, _rest, params = self.make_parser(ctx).parse_args(args=list(args))
            order = [p.name for p in params if p.name]
        except click.UsageError:
            pass  # the real parse below reports it
        ctx.meta["probectl.order"] = order
        return super().parse_args(ctx, args)


class _SplitCommand(_OrderedCommand):
    split_command = True


def event_requests(order: list[str], events: tuple[str, ...], filters: tuple[str, ...]) -> list[EventRequest]:
    """Pair each ``--filter`` with the ``-e`` before it (an ``-e a,b`` names two events)."""
    from ..record import EventRequest

    groups: list[list[Any]] = []
    ei = fi = 0
    for name in order:
        if name == "events" and ei < len(events):
            groups.append([events[ei], None])
            ei += 1
        elif name == "filters" and fi < len(filters):
            if not groups:
                raise click.UsageError("--filter must follow the -e EVENT it applies to")
            if groups[-1][1] is not None:
                raise click.UsageError(f"two --filter options for -e {groups[-1][0]}: join them with && in one")
            groups[-1][1] = filters[fi]
            fi += 1
    if ei < len(events) or fi < len(filters):  # (no order known: pair in sequence)
        groups = [[e, filters[i] if i < len(filters) else None] for i, e in enumerate(events)]
    out = []
    for pattern, flt in groups:
        for part in pattern.split(","):
            if part.strip():
                out.append(EventRequest(part.strip(), flt))
    return out


def _pids(text: Optional[str]) -> list[int]:
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise click.BadParameter(f"{text!r} is not a list of pids", param_hint="'-p'")
        out.append(int(part))
    return out


def _human(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{size} B"
        size /= 1024  # type: ignore[assignment]
    return f"{size} B"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


# ---- record ---------------------------------------------------------------------------------------


def _call_graph_value(ctx, param, value):
    if value is None:
        return None
    from ..record.stackcopies import parse_call_graph

    try:
        return parse_call_graph(value)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None


@cli.command(cls=_OrderedCommand, context_settings={"allow_interspersed_args": False})
@click.option("-e", "--event", "events", multiple=True, metavar="GROUP:EVENT",
              help="Event to record (repeatable; globs such as 'probe:*'; 'a,b' names two).")
@click.option("--filter", "filters", multiple=True, metavar="EXPR",
              help="Kernel filter for the -e before it, e.g. 'size > 0 && skc_state != 1'.")
@click.option("-a", "--all-cpus", "system_wide", is_flag=True,
              help="Every process (the default without a command or -p).")
@click.option("-C", "--cpu", "cpus", metavar="CPUS", help="Only these CPUs: 0-3,6.")
@click.option("-p", "--pid", "pids", metavar="PID[,PID]", help="Only these processes (their threads and children too).")
@click.option("--cgroup", "cgroup_path", metavar="PATH",
              help="Only the processes of this cgroup (a container's), those that enter it later too: its "
                   "directory, or its name as /proc/PID/cgroup shows it.")
@click.option("--cgroup-of", "cgroup_pid", type=click.IntRange(min=1), metavar="PID",
              help="Only the processes of the cgroup process PID is in (as --cgroup).")
@click.option("-g", "stacks", is_flag=True,
              help="Kernel and user stack with each event (the user stack by frame pointers, or unwound from "
                   "call-frame information in files that keep none).")
@click.option("--call-graph", "call_graph", metavar="fp|dwarf[,SIZE]", callback=_call_graph_value,
              help="-g with the user stack by frame pointers only (fp), or always unwound from a SIZE-byte copy "
                   "of it (dwarf; 8192 by default).")
@click.option("-o", "--output", default=str(DEFAULT_FILE), show_default=True, metavar="FILE",
              callback=path_value_callback,
              help="The trace.dat file to write.")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Stop after this long.")
@click.option("-m", "--buffer-size", "buffer_kb", type=click.IntRange(min=1), metavar="KB",
              help="Ring buffer per CPU, in KiB.")
@click.option("--file-version", type=click.Choice(["6", "7"]), default="7", show_default=True,
              help="trace.dat version to write.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def record(ctx, events, filters, system_wide, cpus, pids, cgroup_path, cgroup_pid, stacks, call_graph, output, duration,
           buffer_kb, file_version, command):
    """Record events to a trace.dat file (trace-cmd's format) until Ctrl-C, --duration or the end
    of COMMAND:

        probectl record -e 'probe_libc:malloc' --filter 'size > 4k' -g -- make

    With -g, stacks in a file that keeps no frame pointers (gcc -O2, most distributions' libraries) are
    unwound from its call-frame information when the recording ends, as perf's --call-graph dwarf does.
    """
    from ..record import Recording, RecordOptions, instance_cpus, parse_cpus
    from ..record.cgroups import scope_cgroup
    from ..record.stackcopies import DEFAULT_STACK_COPY

    requests = event_requests(ctx.meta.get("probectl.order", []), events, filters)
    if not requests:
        raise click.UsageError("no event to record: name one with -e GROUP:EVENT")
    if pids and (cgroup_path is not None or cgroup_pid is not None):
        raise click.UsageError("-p and --cgroup both say whose events to record: give one")
    cgroup = scope_cgroup(cgroup_path, cgroup_pid)
    tfs = _open_tracefs()
    ncpus = instance_cpus(tfs.root)
    opts = RecordOptions(events=requests, output=Path(output),
                         cpus=parse_cpus(cpus, ncpus) if cpus else None, pids=_pids(pids),
                         command=list(command), system_wide=system_wide, stacks=stacks or call_graph is not None,
                         call_graph=call_graph[0] if call_graph else "auto",
                         stack_copy=call_graph[1] if call_graph and call_graph[1] else DEFAULT_STACK_COPY,
                         cgroup=cgroup, duration=duration,
                         buffer_kb=buffer_kb, version=int(file_version))
    live = sys.stderr.isatty()

    # The live count is the ring buffer's entries: with -g, each event's stack records are entries too.
    unit = "records" if opts.stacks else "events"

    def progress(count: int, lost: int) -> None:
        sys.stderr.write(f"\r[ probectl record: {count:,} {unit}, {lost:,} lost ]\033[K")
        sys.stderr.flush()

    began = time.monotonic()
    result = Recording(tfs, opts, notice=notice, progress=progress if live else None).run()
    seconds = time.monotonic() - began
    if live:
        sys.stderr.write("\r\033[K")
    notice(f"[ probectl record: {_count(result.events, 'event')} ({_human(result.bytes)}) written to {result.path}"
           f"{'' if not result.lost else f', {result.lost:,} lost'} ]")
    if result.lost:
        per_cpu = ", ".join(f"cpu{c}: {n:,}" for c, n in sorted(result.lost_by_cpu.items()) if n)
        perf = f", {result.stacks_lost:,} of them in the perf rings of -g" if result.stacks_lost else ""
        notice(f"Warning: the kernel lost {_count(result.lost, 'event')} ({per_cpu}{perf}); record with a bigger "
               f"buffer (-m KB, now {buffer_kb or 'the default'}) or filter more")
    from ..analysis.counting import costly_rates

    for note in costly_rates({", ".join(result.selected) or "the events": result.events}, seconds):
        notice(note)
    return result.command_exit or 0


# ---- trace ----------------------------------------------------------------------------------------


@cli.command(cls=_SplitCommand)
@click.argument("probedefs", nargs=-1)
@exec_option(help_text="User binary or library of the probes.")
@target_ns_option
@click.option("-k", "--vmlinux", metavar="VMLINUX", callback=target_value_callback,
              help="Kernel image with debug information (for line probes and locals).")
# (no -m: that is the buffer size here, as in record)
@click.option("--module", metavar="NAME|PATH", callback=target_value_callback,
              help="Kernel module of the probes (name, or .ko file).")
@click.option("-e", "--event", "events", multiple=True, metavar="GROUP:EVENT",
              help="Also stream these existing events (globs work).")
@click.option("--filter", "filter_", metavar="EXPR", help="Kernel filter for every traced event.")
@click.option("-p", "--pid", "pids", metavar="PID[,PID]", help="Only these processes.")
@click.option("-a", "--all", "system_wide", is_flag=True, help="With a command: every process, not only its.")
@click.option("-F", "--fields", metavar="FIELDS", help="Fields of the lines (as in 'script').")
@click.option("--format", "kind", type=click.Choice(("text", "json", "csv")), default="text", show_default=True)
@click.option("-m", "--buffer-size", "buffer_kb", type=click.IntRange(min=1), metavar="KB")
@click.pass_context
def trace(ctx, probedefs, exec_, target_ns, vmlinux, module, events, filter_, pids, system_wide, fields, kind, buffer_kb):
    """Add probes, print their events as they happen until Ctrl-C (or the end of COMMAND after --),
    then remove the probes (an existing GROUP:EVENT among them is streamed as with -e):

        probectl trace -x bash 'readline%return line=+0($retval):string'
    """
    command = ctx.meta.get("probectl.command", [])
    if not probedefs and not events:
        raise click.UsageError("give probe definitions to add, or existing events with -e")
    from ..record.session import RunScope
    from ..record.trace import LiveTrace
    from .probes import make_target

    chosen = parse_fields(fields) if fields else DEFAULT_FIELDS
    scope = RunScope(command, _pids(pids), system_wide)
    with LiveTrace(_open_tracefs(), scope, buffer_kb=buffer_kb, notice=notice) as live:
        live.select(probedefs, lambda: make_target(exec_, vmlinux, module, target_ns), events, filter_)
        shown = ", ".join(live.added)
        # Said once the events are traced, not before: what a user does after reading it is seen.
        started = (lambda: notice(f"Tracing {shown}" + ("" if command else "... Hit Ctrl-C to end."))) if shown else None
        print_live(live, sys.stdout, kind, chosen, started)
    if live.lost:
        notice(f"Warning: the kernel lost {live.lost:,} events; use a bigger buffer (-m KB)")
    return live.command_exit or 0


# ---- tracepoints, fields, cleanup -----------------------------------------------------------------


@cli.command()
@click.argument("pattern", required=False)
@click.option("--json", "as_json", is_flag=True, help="One JSON array of events.")
def tracepoints(pattern, as_json):
    """List the events that can be recorded (perf list style): tracepoints and probe events.

    PATTERN is a glob on GROUP:EVENT (or on the event name): 'sched:*', 'sys_enter_*'.
    """
    tfs = _open_tracefs()
    names = [(g, e) for g, e in tfs.tracepoints(pattern or "*") if g != "ftrace"]
    probes = {(d.group, d.event): d for d in tfs.definitions()}
    if pattern and not names:
        raise ProbectlError(f"no event matches {pattern!r}", "try a glob such as 'sched:*' or '*sched*'")
    if as_json:
        click.echo(json.dumps([{"name": f"{g}:{e}", "group": g, "event": e,
                                "kind": ("uprobe" if probes[(g, e)].is_uprobe else "kprobe") if (g, e) in probes
                                else "tracepoint"} for g, e in names], indent=2))
        return
    width = max((len(g) + len(e) + 1 for g, e in names), default=0)
    lines = [f"  {g}:{e:<{width - len(g) - 1}}  [Tracepoint event]\n" for g, e in names]
    sys.stdout.write("".join(lines))


def _one_event(tfs: Tracefs, name: str) -> tuple[str, str]:
    pattern = name.replace("/", ":", 1)
    if ":" in pattern:
        g, _, e = pattern.partition(":")
        return g, e
    hits = [(g, e) for g, e in tfs.event_names() if e == pattern and g != "ftrace"]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise ProbectlError(f"{name!r} is in several groups: {', '.join(f'{g}:{e}' for g, e in sorted(hits))}",
                            "name it as GROUP:EVENT")
    return "", pattern


@cli.command()
@click.argument("event")
@click.option("--json", "as_json", is_flag=True, help="One JSON object.")
@click.option("--all", "show_common", is_flag=True, help="Also the common fields (common_pid...).")
def fields(event, as_json, show_common):
    """The fields of an event (tracepoint or probe) from its format file: what --filter and script see."""
    tfs = _open_tracefs()
    g, e = _one_event(tfs, event)
    if not g:
        names = sorted(f"{g_}:{e_}" for g_, e_ in tfs.event_names())
        close = close_matches(e, [n.split(":", 1)[1] for n in names], cutoff=0.7)
        hint = (f"did you mean {' or '.join(n for n in names if n.split(':', 1)[1] in close)}?" if close
                else "list the events with 'probectl tracepoints'")
        raise ProbectlError(f"no event {event}", hint)
    fmt = tfs.event_format(g, e)
    shown = fmt.fields if show_common else fmt.event_fields
    rows = [{"name": f.name, "type": f.type, "offset": f.offset, "size": f.size, "signed": f.signed,
             "common": f.is_common} for f in shown]
    if as_json:
        click.echo(json.dumps({"event": fmt.full_name, "id": fmt.id, "fields": rows,
                               "print_fmt": fmt.print_fmt}, indent=2))
        return
    click.echo(f"{fmt.full_name} (id {fmt.id})")
    if not rows:
        click.echo("  (no fields)")
        return
    nw = max(len("field"), *(len(r["name"]) for r in rows))
    tw = max(len("type"), *(len(r["type"]) for r in rows))
    click.echo(f"  {'field':<{nw}}  {'type':<{tw}}  offset  size  signed")
    for r in rows:
        click.echo(f"  {r['name']:<{nw}}  {r['type']:<{tw}}  {r['offset']:>6}  {r['size']:>4}  "
                   f"{'yes' if r['signed'] else 'no'}")


@cli.command()
def cleanup():
    """Remove what killed probectl runs left behind: their tracefs instances and 'trace' probes."""
    from ..record.cleanup import cleanup_stale

    tfs = _open_tracefs()
    removed = cleanup_stale(tfs, notice)
    if not removed:
        click.echo("Nothing to clean up.")
    for what in removed:
        click.echo(f"Removed {what}")
