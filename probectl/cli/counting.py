"""The counting command: stat."""
from __future__ import annotations

import sys

import click

from ..tracefs import Tracefs
from . import cli, notice, target_ns_option, target_value_callback
from .probes import make_target
from .recording import _pids, _SplitCommand, event_requests


@cli.command(cls=_SplitCommand)
@click.argument("probedefs", nargs=-1)
@click.option("-e", "--event", "events", multiple=True, metavar="GROUP:EVENT",
              help="Events to count (repeatable; globs such as 'syscalls:sys_enter_*'; 'a,b' names two).")
@click.option("--filter", "filters", multiple=True, metavar="EXPR",
              help="Kernel filter for the -e before it (before any -e: for the probe definitions).")
@click.option("--exec", "exec_", metavar="BINARY", callback=target_value_callback,
              help="User binary or library of the probe definitions (-x is perf's field separator here).")
@target_ns_option
@click.option("-k", "--vmlinux", metavar="VMLINUX", callback=target_value_callback,
              help="Kernel image with debug information (kernel definitions).")
@click.option("--module", metavar="NAME|PATH", callback=target_value_callback, help="Kernel module of the definitions.")
@click.option("-a", "--all-cpus", "system_wide", is_flag=True,
              help="Every process (the default without a command or -p).")
@click.option("-C", "--cpu", "cpus", metavar="CPUS", help="Only these CPUs: 0-3,6 (a system-wide count).")
@click.option("-p", "--pid", "pids", metavar="PID[,PID]", help="Only these processes (their threads, and children they start).")
@click.option("--cgroup", "cgroup_path", metavar="PATH",
              help="Only the processes of this cgroup (a container's), those that enter it later too, as perf stat -G.")
@click.option("--cgroup-of", "cgroup_pid", type=click.IntRange(min=1), metavar="PID",
              help="Only the processes of the cgroup process PID is in (as --cgroup).")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help="Stop after this long.")
@click.option("-I", "--interval-print", "interval_ms", type=int, metavar="MS",
              help="Print the counts of every MS milliseconds (at least 10).")
@click.option("-A", "--no-aggr", "--per-cpu", "per_cpu", is_flag=True, help="One count per CPU (with -a or -C).")
@click.option("-r", "--repeat", type=click.IntRange(min=1), default=1, metavar="N",
              help="Run the command N times: the mean counts and their spread.")
@click.option("-x", "--field-separator", "separator", metavar="SEP", help="perf stat's CSV lines, fields split by SEP.")
@click.option("--json", "as_json", is_flag=True, help="perf stat -j's JSON objects, one a line.")
@click.pass_context
def stat(ctx, probedefs, events, filters, exec_, target_ns, vmlinux, module, system_wide, cpus, pids, cgroup_path,
         cgroup_pid, duration, interval_ms, per_cpu, repeat, separator, as_json):
    """Count events exactly in the kernel, as perf stat -e does (no event is copied out), for
    COMMAND, -p processes or everything, until it ends, --duration or Ctrl-C; probe definitions are
    added for the run and removed:

    \b
        probectl stat -e 'syscalls:sys_enter_read,syscalls:sys_enter_write' -- ls /
        probectl stat -a -A -I 1000 -e 'sched:sched_switch'
        probectl stat --exec libc malloc free -- ls /
    """
    from ..analysis import counting
    from ..record import instance_cpus, parse_cpus
    from ..record.cgroups import scope_cgroup
    from ..record.session import RunScope

    if separator is not None and as_json:
        raise click.UsageError("-x and --json are two output forms: choose one")
    if separator == "":
        raise click.UsageError("-x needs a separator, such as -x ,")
    order = list(ctx.meta.get("probectl.order", []))
    definitions_filter = None
    if order and order[0] == "filters":  # (a --filter before any -e is the definitions')
        definitions_filter, filters = filters[0], filters[1:]
        order = order[1:]
    requests = event_requests(order, events, filters)
    if not requests and not probedefs:
        raise click.UsageError("no event to count: name one with -e GROUP:EVENT, or give probe definitions")
    if definitions_filter is not None and not probedefs:
        raise click.UsageError("--filter must follow the -e EVENT it applies to")
    if pids and (cgroup_path is not None or cgroup_pid is not None):
        raise click.UsageError("-p and --cgroup both say whose events to count: give one")
    cgroup = scope_cgroup(cgroup_path, cgroup_pid)
    tfs = Tracefs.open(notice=notice)
    command = ctx.meta.get("probectl.command", [])
    options = counting.StatOptions(requests=requests, definitions=probedefs, definitions_filter=definitions_filter,
                                   cpus=parse_cpus(cpus, instance_cpus(tfs.root)) if cpus else None,
                                   per_cpu=per_cpu, interval_ms=interval_ms, repeat=repeat, cgroup=cgroup)
    scope = RunScope(command, _pids(pids), system_wide, duration)
    out = sys.stdout
    header = [not (separator is not None or as_json)]

    def on_interval(block: "counting.IntervalRows") -> None:
        if separator is not None:
            out.write(counting.csv_lines(block.rows, separator, block.at))
        elif as_json:
            out.write(counting.json_lines(block.rows, block.at))
        else:
            if header[0]:
                out.write(counting.interval_header(per_cpu))
                header[0] = False
            out.write(counting.interval_text(block))
        out.flush()

    result = counting.stat(tfs, options, scope, target=lambda: make_target(exec_, vmlinux, module, target_ns),
                           notice=notice, on_interval=on_interval if interval_ms is not None else None)
    if interval_ms is None:
        if separator is not None:
            out.write(counting.csv_lines(result.rows, separator))
        elif as_json:
            out.write(counting.json_lines(result.rows))
        else:
            # (perf stat writes its block on stderr; here it is the answer, on stdout)
            out.write(counting.stat_text(result))
    out.flush()
    for note in counting.costly_rates(counting.stat_rates(result), result.seconds):
        notice(note)
    return result.command_exit or 0
