"""The exception hierarchy: every failure a user can cause is a ProbectlError with a message and a hint.

The CLI prints ``Error: <message>`` and, when present, ``  Hint: <hint>``, with no traceback. The
classes here are the ones that cross packages (raised in one stage, caught in another); an exception
that stays inside its module lives there. At the end, what errors are made with: the did-you-mean
hint (:func:`did_you_mean`) and the guard that turns a parser's failure on a damaged file into a
DebugInfoError (:func:`guard_decoding`).
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TypeVar

from .termtext import caret_excerpt, printable

_T = TypeVar("_T")


class ProbectlError(Exception):
    """A failure the user can act on: ``message`` says what went wrong, ``hint`` what to do about it.

    Both are made printable here (newlines kept), once for every error: a message quotes what a
    file or an argument holds (a trace.dat's event system name, a path, a symbol), and an API
    caller who prints the exception must not get the file's escape sequences on a terminal."""

    def __init__(self, message: str, hint: str = ""):
        message = printable(message, newlines=True)
        super().__init__(message)
        self.message = message
        self.hint = printable(hint, newlines=True)

    def __str__(self) -> str:
        return self.message


class LocatedError(ProbectlError):
    """A failure at a place in one line of text, shown with the line and a caret under ``column``
    (0-based into ``text``)."""

    def __init__(self, message: str, text: str, column: int, hint: str = ""):
        super().__init__(message, hint)
        self.text = text
        self.column = column

    def __str__(self) -> str:
        shown, column = caret_excerpt(self.text, self.column)
        return f"{self.message}\n  {shown}\n  {' ' * column}^"


class ProbeSyntaxError(LocatedError):
    """A probe definition (or filter) that does not parse; ``column`` is 0-based into ``text``."""


class ProbeSemanticError(ProbectlError):
    """A definition that parses but cannot mean anything (offset with %return, $retval at entry...)."""


class KernelRuleError(LocatedError, ProbeSemanticError):
    """A definition the kernel would refuse, found before anything is written: ``text`` is the
    definition line (or an excerpt of it) and ``column`` the start of the offending argument."""


class TargetError(ProbectlError):
    """The binary, library, kernel or module to probe cannot be found or read."""


class DebugInfoError(ProbectlError):
    """ELF/DWARF/BTF information is missing, unreadable or does not contain what was asked for."""


class ResolveError(ProbectlError):
    """A probe point or argument cannot be found in the target (unknown function, variable, member...)."""


class TypeMismatchError(ResolveError):
    """A member chain, cast or type that does not fit the variable's C type (raised by the DWARF
    and BTF type models of debuginfo and by the fetches of resolve)."""


class ValueTooWideError(TypeMismatchError):
    """A struct or union value wider than the 64 bits a probe argument holds."""


class ProbePointNotFound(ResolveError):
    """No function, line or pattern match for a probe point (perf: "Probe point '...' not found.")."""

    def __init__(self, point: str, hint: str = ""):
        super().__init__(f"Probe point '{point}' not found.", hint)
        self.point = point


class LocationError(ResolveError):
    """A place the kernel's fetch arguments cannot express (found by the DWARF location evaluator,
    the member-chain walker or the renderer); ``reason`` classifies it:
    ``entry_value``, ``piece``, ``implicit_pointer``, ``computed``, ``tls``, ``register``,
    ``frame_base``, ``empty``, ``offset`` (out of the kernel's range), ``unsupported``."""

    def __init__(self, message: str, reason: str, hint: str = ""):
        super().__init__(message, hint)
        self.reason = reason


class VariableNotFound(ResolveError):
    """No variable of that name is visible at the address (raised from the debug information the
    resolvers read, so it lives here rather than in either)."""


class VariableUnavailable(ResolveError):
    """A variable exists but cannot be fetched at the address (optimized out there, or kept in a
    form probe events cannot read). ``ranges`` are the address ranges where it can be fetched,
    ``lines`` the (file, line) pairs of those ranges, ``reason`` a LocationError reason or
    ``optimized_out``."""

    def __init__(self, message: str, hint: str, name: str, address: int,
                 ranges: list[tuple[int, int]], lines: list[tuple[str, int]], reason: str):
        super().__init__(message, hint)
        self.name = name
        self.address = address
        self.ranges = ranges
        self.lines = lines
        self.reason = reason


class InstructionDecodeError(ResolveError):
    """The bytes at ``offset`` of the decoded buffer are not an instruction the x86 decoder
    (:mod:`probectl.arch.x86_insn`) can size. Raised by arch and resolve.boundary, caught by the
    resolvers, which turn it into a warning, so it lives here."""

    def __init__(self, message: str, offset: int, reason: str, hint: str = ""):
        super().__init__(message, hint)
        self.offset = offset
        self.reason = reason


class TracefsError(ProbectlError):
    """tracefs is missing, not writable, or rejected a write; ``kernel_log`` holds error_log lines."""

    def __init__(self, message: str, hint: str = "", kernel_log: str = ""):
        super().__init__(message, hint)
        self.kernel_log = kernel_log

    def __str__(self) -> str:
        if self.kernel_log:
            return f"{self.message}\n{_caret_excerpts(self.kernel_log)}"
        return self.message


def _caret_excerpts(log: str) -> str:
    """error_log text with each ``Command: ...`` line and the caret under it cut to a window around
    the caret (a 4 KiB definition is not echoed whole; the caret stays under the error)."""
    lines = log.split("\n")
    for i in range(len(lines) - 1):
        head, sep, command = lines[i].partition("Command: ")
        caret = lines[i + 1]
        start = len(head) + len(sep)
        if sep and caret.strip() == "^" and caret.index("^") >= start:
            shown, column = caret_excerpt(command, caret.index("^") - start)
            lines[i], lines[i + 1] = head + sep + shown, " " * (start + column) + "^"
    return "\n".join(lines)


class EventExistsError(TracefsError):
    """An event name is already taken and --force was not given."""

    @classmethod
    def taken(cls, names: "list[tuple[str, str]]") -> "EventExistsError":
        """The error for (group, event) names already in use: naming and tracefs raise this one text."""
        shown = ", ".join(f"{g}:{e}" for g, e in names)
        many = len(names) > 1
        group, event = names[0]
        return cls(f"event{'s' if many else ''} {shown} already exist{'' if many else 's'}",
                   "give the probe another name (EVENT=PROBE), add a duplicate with -f/--force, or remove "
                   f"the old one first ('probectl del {group}:{event}')")


class FormatError(ProbectlError):
    """An event format (or header_page) text that cannot be read as one (raised by
    :mod:`probectl.formats`, caught by the ring-buffer and trace.dat readers)."""


class TraceFileError(ProbectlError):
    """A trace.dat file (or ring-buffer page) is truncated, corrupt or of an unknown version."""


class OutputFileError(ProbectlError):
    """A file named for a command's output (``-o FILE``) cannot be written: a directory, a directory
    that is not writable, a FIFO that no process reads, a full disk (raised by
    :mod:`probectl.outputfile`)."""


class AnalysisError(ProbectlError):
    """A histogram or latency question the events cannot answer: an unknown key, a key that cannot be
    counted, a trigger the kernel refuses, a start event that never fired."""


class OutputError(Exception):
    """Writing a command's output to standard output failed: its reader went away (``errno`` EPIPE),
    the disk is full, the descriptor is closed. Raised where the output is written (the command
    line's stdout, the native formatter's writes to its descriptor), ended on by the command line
    alone: quietly for a closed pipe, as perf and coreutils do, else with one line. Not a
    ProbectlError nor an OSError, so that no ``except`` on the way up takes it for another failure."""

    def __init__(self, err: OSError):
        super().__init__(err.strerror or str(err))
        self.errno = err.errno
        self.strerror = err.strerror or str(err)


# --- what errors are made with ---------------------------------------------------------------------


def close_matches(word: str, candidates: Iterable[str], n: int = 3, cutoff: float = 0.6) -> list[str]:
    """The (at most ``n``) distinct ``candidates`` closest to ``word``, best first (difflib's ratio,
    at least ``cutoff``). difflib is imported here, on the error path, not by every run."""
    from difflib import get_close_matches

    return get_close_matches(word, list(dict.fromkeys(candidates)), n=n, cutoff=cutoff)


def did_you_mean(word: str, candidates: Iterable[str], *, n: int = 3, cutoff: float = 0.6,
                 sep: str = " or ", quote: bool = False) -> str:
    """The hint ``"did you mean a or b?"`` naming the candidates close to ``word`` (see
    :func:`close_matches`), each in single quotes if ``quote``; ``""`` when none is close."""
    close = close_matches(word, candidates, n, cutoff)
    if not close:
        return ""
    if quote:
        close = [f"'{c}'" for c in close]
    return f"did you mean {sep.join(close)}?"


def guard_decoding(caught: tuple[type[BaseException], ...],
                   error: Callable[[object, BaseException], ProbectlError]) -> Callable[[Callable[..., _T]], Callable[..., _T]]:
    """A decorator for the readers of untrusted files (DWARF, BTF): the ``caught`` exceptions, which a
    parser raises on damaged data, become ``error(first_argument, exception)`` (a DebugInfoError
    naming the file), raised without the parser's traceback; probectl's own errors pass through."""

    def decorate(method: Callable[..., _T]) -> Callable[..., _T]:
        @functools.wraps(method)
        def wrapper(first, *args, **kwargs):
            try:
                return method(first, *args, **kwargs)
            except ProbectlError:
                raise
            except caught as exc:
                raise error(first, exc) from None

        return wrapper

    return decorate
