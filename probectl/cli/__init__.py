"""The `probectl` command line: click commands that parse options, call the layers, and print.

perf users may type perf's own command flags (`probectl -x BIN -a DEF`, `-d`, `-l`, `-F`, `-L`, `-V`,
`-D`); ``main`` rewrites them into the subcommand form before click sees them. The commands live in
one module per area (``COMMAND_MODULES``); this module holds the group and the error contract.
"""
from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import io
import os
import signal
import sys
import types
from typing import Optional


_interrupted = False  # a Ctrl-C came while the command ran


def _command_interrupt(signum: int, frame: Optional[types.FrameType]) -> None:
    """Ctrl-C while the command runs: KeyboardInterrupt, as Python's own handler raises it, and the
    fact remembered, for a library that turns it into an error of its own (DuckDB's "Query
    interrupted", "counting the rows ... failed: KeyboardInterrupt")."""
    global _interrupted
    _interrupted = True
    signal.default_int_handler(signum, frame)


def _interrupt_again(unraisable: "sys.UnraisableHookArgs") -> None:
    """sys.unraisablehook while the command runs: a Ctrl-C whose KeyboardInterrupt was raised inside
    a callback Python cannot raise from (a weakref callback of the import machinery, as a module the
    command imports late is loaded) is not printed as "Exception ignored in ..." with a traceback,
    nor lost: it is delivered again, to the command (_thread.interrupt_main). Anything else is
    reported as Python reports it."""
    if unraisable.exc_type is KeyboardInterrupt:
        import _thread

        _thread.interrupt_main()
        return
    sys.__unraisablehook__(unraisable)


def _quiet_interrupt(signum: int, frame: object) -> None:
    """Ctrl-C before the command runs (its imports) or after it ended: nothing is changed yet or any
    more, so the program ends with 130 and no word, not a traceback from wherever the import was."""
    os._exit(130)


# Installed as the program's command line is imported (``probectl``, or ``python -m probectl`` whose
# __main__ installed it even before and says what the handler was; not a test or a script importing
# it), when Ctrl-C would raise KeyboardInterrupt (a shell's '&' job ignores SIGINT: left so); ``main``
# gives the command KeyboardInterrupt back.
_INT_HANDLER = getattr(sys.modules.get("__main__"), "INT_HANDLER_AT_START", None) or signal.getsignal(signal.SIGINT)
_PROGRAM = (os.path.basename(sys.argv[0]) == "probectl" if sys.argv and sys.argv[0] else False) or \
    getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None) == "probectl.__main__"
if _PROGRAM and _INT_HANDLER is signal.default_int_handler:
    signal.signal(signal.SIGINT, _quiet_interrupt)

# The program's collector: CPython collects its young generation every 700 allocations of objects
# that may form cycles, and the imports of a command (click, the resolver, the DWARF reader: tens
# of thousands of such objects, nearly none garbage) made dozens of collections of an `add -D`.
# Every 20,000 leaves a short command none; a long one (record, script) still collects, with at
# most that many objects waiting. Set as the command line is imported, before the rest of it (a
# test that imports it to run commands in its own process only collects less often); ``main`` then
# freezes what the imports made.
GC_THRESHOLD = 20_000
gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])

import click  # noqa: E402

from .. import __version__  # noqa: E402
from ..errors import OutputError, ProbectlError, close_matches, did_you_mean  # noqa: E402
from ..notice import notice_stderr  # noqa: E402
from ..termtext import bounded  # noqa: E402

# perf's command flags → probectl subcommands (for `probectl -a DEF` muscle memory).
PERF_COMMAND_FLAGS = {
    "-a": "add", "--add": "add",
    "-D": "add", "--definition": "add",
    "-d": "del", "--del": "del",
    "-l": "list", "--list": "list",
    "-F": "funcs", "--funcs": "funcs",
    "-L": "lines", "--line": "lines",
    "-V": "vars", "--vars": "vars",
}
# perf options that take a value, so their value is not mistaken for a command flag.
_VALUED = {"-x", "--exec", "-m", "--module", "-k", "--vmlinux", "-s", "--source", "--target-ns"}
# The options of `add` (perf's own): with one of them, bare words are definitions, as in perf
# (`probectl -x BIN 'malloc size=%di'`); without, a first word that is no command is an error.
_PERF_ADD_OPTIONS = _VALUED | {"-f", "--force", "-n", "--dry-run", "--btf"}
_PERF_ADD_SHORT = "xmksfn"  # (-xBIN, -fn: click's short-option forms)


# --debug (before the command) or this variable set (not to 0): an internal error shows its traceback.
DEBUG_ENV = "PROBECTL_DEBUG"
BUG_HINT = ("this is a bug in probectl: re-run the command with --debug (or {env}=1) for the traceback, "
            "and report it with that output and the command line")

# What the commands print on stderr (warnings, progress): the library's one default notice.
notice = notice_stderr

# Which module defines each command: a command's module is imported only when it runs, so that
# `probectl script` does not pay for the probe resolver's imports (DWARF, grammars) and vice versa.
COMMAND_MODULES = {
    "add": "probes", "del": "probes", "list": "probes", "funcs": "probes", "lines": "probes", "vars": "probes",
    "record": "recording", "script": "scripting", "trace": "recording", "tracepoints": "recording",
    "fields": "recording", "cleanup": "recording", "report": "reports", "query": "reports",
    "hist": "analysis", "latency": "analysis", "stat": "counting", "flamegraph": "pictures", "heatmap": "pictures",
}


# The class of probectl's commands: click's own, option parser included. (An override of click's
# private _match_long_opt spared add -D the import of difflib for click's did-you-mean of -D tried as
# a long option; measured again in issue 21, it made no difference to the command: click parses.)
Command = click.Command


class LazyGroup(click.Group):
    """A click group whose commands register themselves when their module is first imported."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMAND_MODULES))

    def get_command(self, ctx: click.Context, name: str):
        if name not in self.commands and name in COMMAND_MODULES:
            importlib.import_module(f"{__name__}.{COMMAND_MODULES[name]}")
        return super().get_command(ctx, name)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        """click's, with the did-you-mean of every command (click's own suggests only the commands
        already imported)."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as err:
            hint = did_you_mean(err.command_name, self.list_commands(ctx), quote=True)
            message = f"No such command {err.command_name!r}." + (f" D{hint[1:]}" if hint else "")
            raise click.exceptions.NoSuchCommand(err.command_name, message, ctx=ctx) from None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="probectl")
@click.option("--debug", is_flag=True, expose_value=False,
              help=f"Show the traceback of an internal error (first option only; or {DEBUG_ENV}=1).")
def cli():
    """Dynamic-tracing probe manager: perf-probe definitions to kprobe/uprobe events."""


@cli.command("help")
@click.argument("command", required=False)
@click.pass_context
def help_(ctx: click.Context, command: str | None) -> None:
    """Show the help of probectl, or of one COMMAND."""
    group = ctx.parent
    assert group is not None
    if not command:
        click.echo(group.get_help())
        return
    _name, cmd, _rest = cli.resolve_command(group, [command])
    assert cmd is not None
    click.echo(cmd.get_help(click.Context(cmd, info_name=command, parent=group)))


# What an empty -x, -k or -m should have been (an empty value used to mean "no option": the
# running kernel was probed instead of the binary a script's empty variable was meant to name).
_TARGET_VALUES = {
    "-x": ("path", "give a binary or a library (a path, or a name such as libc), or leave -x out"),
    "-k": ("path", "give a vmlinux with debug information, or leave -k out for the running kernel's"),
    "-m": ("name", "give a module name or a .ko file, or leave -m out to probe the kernel itself"),
    "--module": ("name", "give a module name or a .ko file, or leave --module out to probe the kernel itself"),
}


def check_target_value(flag: str, value: str | None) -> str | None:
    """``value`` of the -x/-k/-m option ``flag``; a usage error naming it when it is empty or blank."""
    if value is not None and not value.strip():
        what, hint = _TARGET_VALUES[flag]
        raise click.UsageError(f"{flag} was given an empty {what}; {hint}")
    return value


def target_value_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """The callback of -x/-k/-m: their values are checked as they are parsed, on every command."""
    flag = next((opt for opt in param.opts if not opt.startswith("--")), param.opts[0])
    return check_target_value(flag, value)


def path_value_callback(ctx: click.Context, param: click.Parameter, value):
    """The callback of the options that name a file or a directory (-i, -o, --pairs, -s): an empty
    one is a usage error, not "the option left out" (a script's empty variable used to send the
    output to stdout, or read stdin, instead of the file it meant)."""
    for one in value if isinstance(value, tuple) else (value,):
        if one is not None and not one.strip():
            flag = next((opt for opt in param.opts if not opt.startswith("--")), param.opts[0])
            raise click.UsageError(f"{flag} was given an empty {param.metavar or 'path'}; give a path "
                                   f"('-' where it means stdin or stdout), or leave {flag} out")
    return value


def exec_option(help_text: str = "User binary or library (path or name, e.g. libc)."):
    """-x BINARY (the commands without -k and -m take it too: del, trace)."""
    return click.option("-x", "--exec", "exec_", metavar="BINARY", callback=target_value_callback, help=help_text)


def target_ns_option(func):
    """--target-ns=PID (perf's): -x BINARY is a file as process PID sees it (a container's)."""
    return click.option("--target-ns", "target_ns", type=click.IntRange(min=1), metavar="PID",
                        help="-x BINARY as process PID sees it: its mount namespace and root (a container's "
                             "files; a library name means the library it maps).")(func)


def _is_perf_add_option(arg: str) -> bool:
    flag = arg.partition("=")[0]
    return flag in _PERF_ADD_OPTIONS or (len(arg) > 1 and arg[0] == "-" and arg[1] in _PERF_ADD_SHORT)


def rewrite_perf_flags(argv: list[str]) -> list[str]:
    """`probectl -x BIN -a DEF -f` → `probectl add -x BIN -f DEF`; leaves subcommand forms alone.

    Bare words become definitions (`probectl -x BIN 'malloc size=%di'` → `add`) only next to an
    option of `add` (-x, -k, -m, -s, -f, -n, --btf), and never when the first word is close to a
    command name: otherwise click says "No such command", instead of a typo being probed.
    """
    if not argv or argv[0] in COMMAND_MODULES or argv[0] in cli.commands or argv[0] in ("-h", "--help", "--version"):
        return argv
    command = None
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, value = arg.partition("=")
        if flag in _VALUED:
            rest.append(arg)
            if not eq and i + 1 < len(argv):
                rest.append(argv[i + 1])
                i += 1
        elif flag in PERF_COMMAND_FLAGS and command in (None, PERF_COMMAND_FLAGS[flag]):
            command = PERF_COMMAND_FLAGS[flag]
            if flag in ("-D", "--definition"):
                rest.append("-D")
            takes_value = command in ("add", "del", "lines", "vars") or (
                command == "funcs" and i + 1 < len(argv) and not argv[i + 1].startswith("-"))
            if eq:
                rest.append(value)
            elif takes_value and i + 1 < len(argv):
                rest.append(argv[i + 1])
                i += 1
        else:
            rest.append(arg)
        i += 1
    if command is None:
        if not any(_is_perf_add_option(arg) for arg in argv):
            return argv  # no command and no perf option: let click say which word it does not know
        if not argv[0].startswith("-") and close_matches(argv[0], COMMAND_MODULES, n=1, cutoff=0.7):
            return argv  # a mistyped subcommand: let click say so
        # perf-style bare definitions: `probectl -x BIN 'malloc size=%di'`.
        command = "add"
    return [command] + rest


def main(argv: list[str] | None = None) -> None:
    """Run the command line; exits with the command's status (returns on success)."""
    if argv is None:
        # The program's own start-up: what its imports made (modules, classes, functions: tens of
        # thousands of objects, nearly no garbage) would be traced again by each of CPython's
        # collections (docs/ledger.md, gc settings). Frozen, they are left out; what the command
        # allocates from here on is collected as usual. (A caller that passes argv, such as a test
        # running commands in its own process, keeps its collector as it was.) Index files the
        # command loads are frozen with it (indexcache.FREEZE_AFTER_LOAD).
        gc.freeze()
        from ..debuginfo import indexcache

        indexcache.FREEZE_AFTER_LOAD = True
    args = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get(DEBUG_ENV, "") not in ("", "0")
    while args and args[0] == "--debug":  # (only before the command: later it may be a traced command's)
        debug = True
        args.pop(0)
    args = rewrite_perf_flags(args)
    stdout = _GuardedStdout.install()
    try:
        status = _run(args, owns_stdout=stdout is not None, debug=debug)
    except KeyboardInterrupt:  # (one that came while _run reported how the command ended)
        status = 130
    finally:
        if _PROGRAM and argv is None and _INT_HANDLER is signal.default_int_handler:
            signal.signal(signal.SIGINT, _quiet_interrupt)  # (the command has ended)
        if stdout is not None:
            stdout.restore()
    if status == 130 and argv is None and _PROGRAM:
        _exit_now(status)
    if argv is None:
        # The process ends here: the collection CPython makes as it exits (after an
        # `add -D`) would only free what the exit frees anyway (probectl closes its files and
        # undoes its changes itself, and atexit handlers still run).
        gc.disable()
    if status:
        sys.exit(status)


def _run(args: list[str], owns_stdout: bool, debug: bool = False) -> int:
    """The command's exit status; every failure becomes a message on stderr (or, for a closed
    pipe, none), never a traceback unless ``debug`` is set and the failure is a bug (an exception
    that is no ProbectlError)."""
    try:
        if signal.getsignal(signal.SIGINT) is _quiet_interrupt:
            signal.signal(signal.SIGINT, _command_interrupt)  # (the command's own clean-up on Ctrl-C)
            sys.unraisablehook = _interrupt_again
        # (a command that ran one of its own, -- COMMAND, returns that one's exit status)
        status = cli.main(args=args, prog_name="probectl", standalone_mode=False)
        sys.stdout.flush()  # (what is still buffered fails here, where it is reported)
        return status if isinstance(status, int) else 0
    except OutputError as err:
        if err.errno == errno.EPIPE:
            return _closed_pipe(owns_stdout)
        click.echo(f"Error: cannot write to standard output: {err.strerror}", err=True)
        return 1
    except ProbectlError as err:
        if _interrupted:  # (an error that a Ctrl-C made: the command was interrupted)
            return 130
        # (messages echo the user's input and names from files: printable, huge inputs as excerpts)
        click.echo(f"Error: {bounded(str(err))}", err=True)
        if err.hint:
            click.echo(f"  Hint: {bounded(err.hint)}", err=True)
        return 1
    except click.exceptions.Abort:
        return 130
    except click.ClickException as err:
        # (click marks message Final for its own classes; this exception is done being raised, and its
        # message, which may quote the user's input, is made printable before click shows it)
        err.message = bounded(err.message)  # type: ignore[misc]
        err.show()
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # (stderr's reader gone, or a caller's own stdout)
        return _closed_pipe(owns_stdout)
    except Exception as err:  # a bug: said in one line (and its traceback with --debug)
        if _interrupted:
            return 130
        if debug:
            import traceback

            traceback.print_exc()
        click.echo(f"Error: internal error: {type(err).__name__}: {bounded(str(err))}", err=True)
        if not debug:
            click.echo(f"  Hint: {BUG_HINT.format(env=DEBUG_ENV)}", err=True)
        return 1


def _exit_now(status: int) -> None:
    """End the program interrupted by Ctrl-C, its command unwound (probes removed, files closed),
    without the interpreter's shutdown: that waits for other threads (a module importing in the
    background) and runs DuckDB's C++ teardown, which a query interrupted mid-way could leave hanging.
    The output is flushed and the atexit handlers run first."""
    import atexit

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is not None:
        run_exitfuncs()
    os._exit(status)


def _closed_pipe(owns_stdout: bool) -> int:
    """The reader of the output went away (`probectl script | head`): end as perf and coreutils do,
    killed by SIGPIPE with no message, which a shell reports as status 141 and a pipeline with
    ``pipefail`` as a failure; xargs and the like stop on it as on any killed command. Python
    ignores SIGPIPE (so that the write raises instead), and a command was already unwound (probes
    of `trace` removed, files closed) when this is reached; the atexit handlers run before.
    A caller's own stdout (main called in a process it does not own) gets the status without
    the signal."""
    if owns_stdout:
        import atexit

        with contextlib.suppress(Exception):
            sys.stderr.flush()
        run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
        if run_exitfuncs is not None:
            run_exitfuncs()
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    return 128 + 13  # (SIGPIPE)


class _FailingStdout(io.FileIO):
    """File descriptor 1 under the guarded sys.stdout: a failed write raises OutputError. After one
    failure the rest is dropped, so that nothing fails again when the buffer is flushed at exit."""

    failed = False

    def write(self, data) -> int:
        if self.failed:
            return len(memoryview(data))
        try:
            return super().write(data)
        except OSError as err:
            self.failed = True
            raise OutputError(err) from None


class _GuardedStdout:
    """sys.stdout while main runs, when it is the process's own (not a caller's stream): the same
    encoding and buffering over a :class:`_FailingStdout`, so that every write of a command (click,
    print, the formatters' buffer writes) reports a failure as OutputError, and ``restore`` puts the
    original back.

    A closed descriptor 0, 1 or 2 is first reopened on /dev/null (1 read-only, so that writing to
    it fails with EBADF, as on a closed descriptor): the files probectl opens then never take these
    numbers, where a print or a traced command would write into them."""

    def __init__(self, original):
        self.original = original
        raw = _FailingStdout(1, "w", closefd=False)
        encoding = getattr(original, "encoding", None) or "utf-8"
        errors = getattr(original, "errors", None) or "strict"
        line_buffering = getattr(original, "line_buffering", None)
        if line_buffering is None:
            line_buffering = raw.isatty()
        self.stream = io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors=errors,
                                       line_buffering=line_buffering)

    @classmethod
    def install(cls) -> "_GuardedStdout | None":
        if sys.stdout is not sys.__stdout__:
            return None
        _reserve_standard_fds()
        if sys.stdout is not None:
            sys.stdout.flush()
        guard = cls(sys.stdout)
        sys.stdout = guard.stream
        return guard

    def restore(self) -> None:
        if sys.stdout is self.stream:
            sys.stdout = self.original
        with contextlib.suppress(Exception, OutputError):
            self.stream.flush()  # (nothing left after _run's flush, or dropped after a failure)


def _reserve_standard_fds() -> None:
    for fd, flags in ((0, os.O_RDONLY), (1, os.O_RDONLY), (2, os.O_WRONLY)):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, flags)
        if null != fd:
            os.dup2(null, fd, inheritable=True)
            os.close(null)
        else:
            os.set_inheritable(fd, True)
    if sys.stderr is None:  # (print(file=None) would write notices to stdout)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
