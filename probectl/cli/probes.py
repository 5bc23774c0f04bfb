"""Probe commands: add, del, list, funcs, lines, vars.

What they print from files (symbol names, source lines and paths, names and types from DWARF) goes
through ``termtext.printable``: a control character in a file is shown, never sent to the terminal."""
from __future__ import annotations

import os
import sys

import click

from ..errors import ProbectlError, ProbePointNotFound, ProbeSyntaxError, TracefsError, did_you_mean
from ..events import definition_bytes
from ..target import Target, find_binary, find_target, shared_file_note
from ..termtext import printable
from ..tracefs import Tracefs
from . import cli, exec_option, notice, path_value_callback, target_ns_option, target_value_callback


def _json_text(value) -> str:
    """``--json`` output (json is imported for the listings that print it, not by every add)."""
    import json

    return json.dumps(value, indent=2)


def _open_tracefs() -> Tracefs:
    return Tracefs.open(notice=notice)


def make_target(exec_: str | None, vmlinux: str | None = None, module: str | None = None,
                target_ns: int | None = None) -> Target:
    """The target of -x/-k/-m and --target-ns (see :func:`probectl.target.find_target`); -x excludes
    the other two, --target-ns goes with -x."""
    if exec_ and (vmlinux or module):
        raise click.UsageError("-x cannot be used with -k or -m")
    if target_ns is not None and (vmlinux or module):
        raise click.UsageError("--target-ns applies to -x BINARY (a process's files), not to -k or -m")
    return find_target(exec_, vmlinux, module, target_ns)


def target_options(func):
    """-x BINARY, --target-ns PID, -k VMLINUX and -m MODULE, shared by the commands that read a target."""
    func = click.option("-m", "--module", metavar="NAME|PATH", callback=target_value_callback,
                        help="Kernel module (name, or .ko file).")(func)
    func = click.option("-k", "--vmlinux", metavar="VMLINUX", callback=target_value_callback,
                        help="Kernel image with debug information.")(func)
    return exec_option()(target_ns_option(func))


@cli.command()
@click.argument("probedefs", nargs=-1)
@click.option("-a", "--add", "added", multiple=True, metavar="PROBEDEF", help="A definition (repeatable).")
@target_options
@click.option("-f", "--force", is_flag=True, help="Add duplicates as EVENT_1, EVENT_2, ...")
@click.option("-n", "--dry-run", is_flag=True, help="Resolve and name everything, write nothing.")
@click.option("-D", "--definition", "definition", is_flag=True,
              help="Print the definition lines that would be written, one per line, and nothing else "
                   "(also of a program for another machine: an AArch64 build on x86-64).")
@click.option("-s", "--source", "source_dir", metavar="DIR",
              callback=path_value_callback, help="Where the sources are (for lazy patterns).")
@click.option("--btf", "use_btf", is_flag=True,
              help="Kprobes: C arguments from BTF even when a vmlinux with DWARF is there.")
@click.option("--max-probes", type=click.IntRange(min=0), metavar="N",
              help="Places one definition may expand to (globs, static duplicates, inline copies); "
                   "default 128, as perf; 0: no limit.")
def add(probedefs, added, exec_, target_ns, vmlinux, module, force, dry_run, definition, source_dir, use_btf,
        max_probes):
    """Add probe events; each PROBEDEF is one quoted definition:

    [[GROUP:]EVENT=]FUNC[@SRC][:RLN|+OFFS|%return|;PTN] [ARG ...]

    ARG is [NAME=]EXPR[:TYPE][@user]; EXPR a variable with its member chain (p->a.b[2]), a C++
    container's size (v.size()), %REG, $retval, $argN, @SYMBOL, +OFFS(EXPR) or \\IMM.
    """
    from ..probes import ProbeSet, check_native, definitions
    from ..resolve import MAX_POINTS

    texts = list(added) + list(probedefs)
    if not texts:
        raise click.UsageError("no probe definition given")
    target = make_target(exec_, vmlinux, module, target_ns)
    if not definition and not dry_run:
        check_native(target)  # (before tracefs is opened: a user without root is told the real reason)
    tfs = None
    # (-D of another machine's program: this kernel's features are not the ones that will read it)
    if not definition or (os.geteuid() == 0 and not target.foreign):
        try:
            tfs = _open_tracefs()
        except TracefsError:
            if not definition:
                raise
    limit = MAX_POINTS if max_probes is None else max_probes or None
    probes = ProbeSet.resolve(texts, target, tfs.features if tfs else None, source_dir=source_dir, use_btf=use_btf,
                              max_points=limit)
    for note in probes.notes:
        notice(f"probectl: {note}")
    for warning in probes.warnings:
        notice(f"Warning: {warning}")
    shared = shared_file_note(target)
    if shared is not None and not definition:
        notice(f"probectl: {shared}")

    if definition:
        # -D only shows definitions, as perf -D does: no lock, and names as if nothing existed. As ls
        # does, a terminal sees control characters and bytes that are not UTF-8 as cat -v shows them;
        # a pipe or a file gets the line's own bytes, which are what the kernel must be given.
        # (A caller's text stream without a binary buffer, in process, gets the text as it is.)
        tty, binary = sys.stdout.isatty(), hasattr(sys.stdout, "buffer")
        for d in definitions(probes.name(force=force)):
            line = d.render()
            click.echo(printable(line) if tty else definition_bytes(line) if binary else line)
        return
    _print_added(probes.add(tfs, force=force, dry_run=dry_run), target, dry_run)


def _print_added(named, target: Target, dry_run: bool) -> None:
    from ..probes.listing import added

    listings = added(named, target)
    event = "event" if len(listings) == 1 else "events"
    click.echo(f"Would add new {event} (dry run, nothing was written):" if dry_run else f"Added new {event}:")
    for listing in listings:
        click.echo(printable(listing.line()))
    if dry_run:
        return
    click.echo("\nYou can now use it in all perf tools, such as:\n")
    click.echo(f"\tperf record -e {listings[-1].definition.full_name} -aR sleep 1\n")


@cli.command("del")
@click.argument("patterns", nargs=-1, required=True)
@exec_option(help_text="Only events on this binary.")
@click.option("-n", "--dry-run", is_flag=True, help="Show what would be removed.")
def delete(patterns, exec_, dry_run):
    """Remove probe events matching [GROUP:]EVENT globs (no GROUP matches any group)."""
    from ..probes.listing import match_definitions

    tfs = _open_tracefs()
    binary = str(find_binary(exec_)) if exec_ is not None else None
    with tfs.lock():
        defs = tfs.definitions()
        for pattern in patterns:
            if not match_definitions(defs, [pattern], binary):
                raise ProbectlError(f'"{pattern}" does not hit any event.',
                                    hint="list the events with 'probectl list'")
        chosen = match_definitions(defs, list(patterns), binary)
        names = list(dict.fromkeys((d.group, d.event) for d in chosen))
        if not dry_run:
            tfs.remove(names)
    for group, event in names:
        click.echo(f"Would remove event: {group}:{event}" if dry_run else f"Removed event: {group}:{event}")


@cli.command("list")
@click.argument("patterns", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="One JSON array of events.")
@click.option("--tracepoints", is_flag=True, help="List tracepoints instead (same as 'probectl tracepoints').")
@click.option("-k", "--vmlinux", metavar="VMLINUX", callback=target_value_callback,
              help="Kernel image with debug information, for the source places of kprobes "
                   "(default: the running kernel's, where perf looks for it).")
@click.pass_context
def list_(ctx, patterns, as_json, tracepoints, vmlinux):
    """List probe events (kprobes and uprobes, whoever added them)."""
    from ..probes.listing import describe, match_definitions

    if tracepoints:
        if len(patterns) > 1:
            raise click.UsageError("--tracepoints takes one GLOB")
        return ctx.invoke(cli.get_command(ctx, "tracepoints"), pattern=patterns[0] if patterns else None,
                          as_json=as_json)
    tfs = _open_tracefs()
    elf_cache: dict = {}
    dwarf_cache: dict = {}
    chosen = match_definitions(tfs.definitions(), list(patterns))
    kernel = None
    if any(not d.is_uprobe for d in chosen):
        kernel = str(make_target(None, vmlinux).path) if vmlinux else _running_vmlinux()
    listings = [describe(d, elf_cache, dwarf_cache, kernel) for d in chosen]
    if as_json:
        click.echo(_json_text([entry.as_json() for entry in listings]))
        return
    for entry in listings:
        click.echo(printable(entry.line()))


def _running_vmlinux() -> str | None:
    """The running kernel's vmlinux with DWARF where perf looks for it (None: places stay symbolic)."""
    from ..target.kernel import find_running_vmlinux

    path, _tried = find_running_vmlinux()
    return str(path) if path is not None else None


@cli.command()
@click.argument("pattern", required=False)
@target_options
@click.option("--sdt", is_flag=True, help="List SDT (USDT) probes instead, as sdt_PROVIDER:NAME (GLOB: PROVIDER:NAME).")
@click.option("-p", "--pid", type=int, help="With --sdt: the SDT probes of every file the process maps.")
@click.option("--json", "as_json", is_flag=True, help="JSON array of {name, address, size}.")
@click.option("--no-demangle", "no_demangle", is_flag=True,
              help="C++ and Rust functions by their symbols (_Z...), not by their demangled names.")
def funcs(pattern, exec_, target_ns, vmlinux, module, sdt, pid, as_json, no_demangle):
    """List probe-able functions (default filter, like perf: not '_*', not '*@plt'); C++ and Rust
    functions by their demangled names (GLOB matches those), as perf -F lists them, and those inlined
    at every call that DWARF defines and add finds code for (address 0 in --json)."""
    from ..debuginfo.kallsyms import Kallsyms

    if pid is not None and not sdt:
        raise click.UsageError("-p PID lists the SDT probes of a process: add --sdt")
    if sdt:
        return _sdt_funcs(pattern, exec_, target_ns, vmlinux, module, pid, as_json)
    if exec_ is not None or vmlinux is not None or module is not None or target_ns is not None:
        from ..debuginfo.dwarf.funcnames import function_rows

        rows = function_rows(str(make_target(exec_, vmlinux, module, target_ns).path), demangled=not no_demangle)
    else:
        rows = {}
        for sym in Kallsyms().symbols:
            if sym.is_function:
                rows.setdefault(sym.name, (sym.address, 0))
    if pattern:
        from ..debuginfo.demangle import matches_function

        names = [n for n in rows if matches_function(n, pattern)]
        if not names:
            where = exec_ or vmlinux or module or "the running kernel"
            raise ProbectlError(f"no function in {where} matches {pattern!r}",
                                hint=did_you_mean(pattern, rows) or "'probectl funcs' lists them all")
    else:
        names = [n for n in rows if not n.startswith("_") and not n.endswith("@plt")]
    names.sort()
    if as_json:
        click.echo(_json_text([{"name": n, "address": rows[n][0], "size": rows[n][1]} for n in names]))
        return
    if names:  # (one write: click.echo per name was a sixth of funcs on libstdc++'s 7,000)
        click.echo("\n".join(map(printable, names)))


def _sdt_funcs(pattern, exec_, target_ns, vmlinux, module, pid, as_json) -> None:
    from ..probes.listing import sdt_probes
    from ..target import process_objects

    if vmlinux or module:
        raise click.UsageError("--sdt lists the probes of user binaries: give -x BINARY or -p PID")
    if (exec_ is None) == (pid is None):
        raise click.UsageError("--sdt needs one of -x BINARY or -p PID")
    if exec_ is not None:
        binary = make_target(exec_, target_ns=target_ns).path  # (a uprobe target's: always there)
        paths = [binary] if binary is not None else []
    else:
        paths = process_objects(pid)
    listings = sdt_probes(paths, pattern)
    if not listings:
        where = exec_ or f"the files process {pid} maps"
        raise ProbectlError(f"no SDT probe in {where}" + (f" matches {pattern!r}" if pattern else ""),
                            hint="'probectl funcs --sdt' without a GLOB lists them all" if pattern else
                            "SDT probes come from <sys/sdt.h> (.note.stapsdt); this has none")
    if as_json:
        click.echo(_json_text([entry.as_json() for entry in listings]))
        return
    for entry in listings:
        click.echo(entry.line(with_path=pid is not None))


@cli.command()
@click.argument("linedesc")
@target_options
@click.option("-s", "--source", "source_dir", metavar="DIR",
              callback=path_value_callback, help="Where the sources are.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of perf's listing.")
def lines(linedesc, exec_, target_ns, vmlinux, module, source_dir, as_json):
    """Show the source lines that can be probed (perf -L).

    LINEDESC: FUNC[@SRC][:RLN[+NUM|-RLN2]] or SRC[:ALN[+NUM|-ALN2]]. Numbered lines can be probed
    (as FUNC:N, numbers relative to the function); unnumbered ones have no code of their own.
    """
    from ..probes.show import list_lines_of
    from ..resolve import Resolver
    from ..spec import parse_line_range

    resolver = Resolver(make_target(exec_, vmlinux, module, target_ns), source_dir=source_dir)
    resolver.source(required=True)
    for note in resolver.notes:  # (where the debug information came from, before any error)
        notice(f"probectl: {note}")
    told = len(resolver.notes)
    listings = list_lines_of(resolver, parse_line_range(linedesc), source_dir)
    for note in resolver.notes[told:]:
        notice(f"probectl: {note}")
    if as_json:
        click.echo(_json_text([listing.as_json() for listing in listings]))
        return
    for listing in listings:
        for line in listing.render():
            click.echo(printable(line))


@cli.command("vars")
@click.argument("probepoint")
@target_options
@click.option("--externs", is_flag=True, help="Also list global variables.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of perf's listing.")
@click.option("--btf", "use_btf", is_flag=True, help="Kernel functions: parameters from BTF, not DWARF.")
def vars_(probepoint, exec_, target_ns, vmlinux, module, externs, as_json, use_btf):
    """Show the variables that can be fetched at a probe point (perf -V)."""
    from ..probes.show import list_btf_variables, list_variables, point_title
    from ..resolve import Resolver
    from ..spec import parse_point

    try:
        point = parse_point(probepoint)
    except ProbeSyntaxError:
        # GROUP:EVENT is no probe point (FUNC:N takes a number); it may name a tracepoint
        system, _, event = probepoint.partition(":")
        if event and system.isidentifier() and event.isidentifier():
            _tracepoint_hint(event, system)
        raise
    resolver = Resolver(make_target(exec_, vmlinux, module, target_ns), use_btf=use_btf)
    try:
        if resolver.btf_describes(point):
            places = list_btf_variables(resolver, point)
        else:
            places = list_variables(resolver, point, externs)
        for note in resolver.notes:
            notice(f"probectl: {note}")
    except ProbePointNotFound:
        _tracepoint_hint(point.function or "")
        raise
    if as_json:
        click.echo(_json_text({"point": point.text, "places": [p.as_json() for p in places]}))
        return
    click.echo(printable(f"Available variables at {point_title(resolver.as_go_function(point))}"))
    for place in places:
        for line in place.render():
            click.echo(printable(line))


def _tracepoint_hint(name: str, system: str = "*") -> None:
    """`vars` on a tracepoint's name (``sys_enter_read`` or ``syscalls:sys_enter_read``): say where its
    fields are instead of only "not found" or a syntax error."""
    try:
        matches = _open_tracefs().tracepoints(f"{system}:{name}")
    except ProbectlError:
        return
    if matches:
        system, event = matches[0]
        raise ProbectlError(f"{name} is a tracepoint ({system}:{event}), not a function",
                            hint=f"its fields are listed by 'probectl fields {system}:{event}'")
