"""Event filters: the kernel's filter language, checked against an event's fields before it is written.

A filter is written to ``events/<group>/<event>/filter`` (of probectl's own tracefs instance) and
the kernel then keeps only the events that match it. The kernel's language (events.rst, "Event
filtering")::

    prev_pid == 1 && !(next_comm ~ "kworker*") || call_site.function == ksys_read

``grammar/filter.lark`` parses it, :func:`compile_filter` checks every predicate against the
event's format and renders the text to write; a recording writes it
(:func:`probectl.record.filter_file.apply_filter`) and, if the kernel still refuses it, shows the
kernel's own message and caret. This package itself reads and writes nothing.

What this kernel (6.18) accepts, found by writing filters to a private instance:

- numbers: ``== != < <= > >= &``; strings: ``== != ~`` (``~`` is a glob with ``*``, ``?`` and
  ``[...]``; ``==`` is an exact compare); ``&&`` binds tighter than ``||``; ``!`` before a
  predicate or a parenthesised group; numbers as ``kstrtoll``/``kstrtoull`` read them (``0x`` hex,
  leading ``0`` octal, ``-`` only on signed fields); strings must be quoted (``"..."`` or
  ``'...'``, no escapes, at most 255 bytes); the whole filter at most 4095 bytes;
- ``FIELD.function == SYMBOL`` (``==``/``!=``, long-sized fields only); ``FIELD.ustring`` on string
  fields (reads a ``char *`` from user memory); ``FIELD & CPUS{LIST}`` (also ``==``/``!=``) on
  numbers and cpumask fields; the generic fields ``CPU``/``cpu``/``common_cpu`` and ``COMM``/``comm``.

What probectl checks before the kernel sees the text:

- the field exists (else the event's fields are listed, with a did-you-mean), the operator suits
  its type (``~`` on a number, ``<`` or ``&`` on a string, ``.function`` on a short field...),
  the value suits it too, and numbers fit the field (``300`` on a ``u8``, ``-1`` on an unsigned
  field: the kernel would silently truncate the first one and read the second as a huge number);
- a syntax error is a :class:`~probectl.errors.ProbeSyntaxError` at the exact column, and a
  value or field that does not fit is a :class:`FilterError` with a caret under it.

What probectl adds, always rendered to plain kernel syntax (the kernel never sees an extension):

- symbolic names for numbers: ``skc_state != TCP_ESTABLISHED``, ``flags & O_CREAT|O_EXCL``
  (names joined by ``|`` are or-ed together). Names come from the ``enums`` callback (enum types
  in the probed program's debug info) and from the tables of ``__print_symbolic``/``__print_flags``
  in the event's print format, so tracepoints work without debug info:
  ``sock:inet_sock_set_state newstate == TCP_ESTABLISHED``, ``sched:sched_switch prev_state & D``;
  ``true``/``false`` for ``bool`` fields;
- sizes with units: ``bytes_req > 4k`` (``k``/``K``/``KiB``, ``M``/``MiB``, ``G``/``GiB``,
  ``T``/``TiB``: powers of 1024; ``1.5M`` when the result is whole; ``KB``/``MB``... are refused as
  ambiguous);
- IPv4 addresses for 4-byte address arrays: ``daddr == 127.0.0.1`` (the bytes as the kernel
  compares them, in this machine's byte order);
- unquoted strings on string fields: ``prev_comm == bash``, ``comm ~ *sh*``;
- syscall-entry string arguments (``const char * filename`` of ``syscalls:sys_enter_*``) are
  pointers to user memory, which the kernel reads only with ``.ustring``; without it such a
  filter silently never matches, so probectl adds the suffix.

The package: :mod:`.tree` (the syntax tree), :mod:`.syntax` (text → tree), :mod:`.fields` (what
each field can be filtered on), :mod:`.symbols` (names from print formats) and
:mod:`.checker` (predicates against fields, rendered for the kernel).
"""
from __future__ import annotations

from typing import Optional

from ..formats import EventFormat
from .checker import MAX_STRING_BYTES, Checker, Enums, FilterError
from .symbols import print_fmt_symbols
from .tree import And, CpuList, Filter, Node, Not, Or, Predicate, StringValue, Term, Terms

__all__ = [
    "And",
    "CpuList",
    "Filter",
    "FilterError",
    "MAX_FILTER_BYTES",
    "MAX_STRING_BYTES",
    "Not",
    "Or",
    "Predicate",
    "StringValue",
    "Term",
    "Terms",
    "compile_filter",
    "parse_filter",
    "print_fmt_symbols",
]

MAX_FILTER_BYTES = 4095   # event_filter_write() refuses a write of PAGE_SIZE bytes or more


def parse_filter(text: str) -> Node:
    """The tree of a filter's text (:mod:`.syntax`), imported when a filter is parsed: the parser's
    library is most of what importing this package costs, and most commands parse no filter."""
    from .syntax import parse_filter as parse

    return parse(text)


def compile_filter(text: str, fmt: EventFormat, *, enums: Optional[Enums] = None) -> Filter:
    """Parse ``text``, check it against ``fmt``'s fields and render the kernel's filter text.

    ``enums(field_name)`` returns ``{name: value}`` for a field with an enum (or flags) type, or
    None; names not found there are looked up in the event's print format tables. Raises
    ProbeSyntaxError for text that does not parse and FilterError for one that does not fit
    the event.
    """
    tree = parse_filter(text)
    checker = Checker(text, fmt, enums)
    rendered = checker.render(tree)
    size = len(rendered.encode())
    if size > MAX_FILTER_BYTES:
        raise FilterError(f"the filter is too long for the kernel ({size} bytes as written for it, "
                          f"at most {MAX_FILTER_BYTES})",
                          hint="split it: record the event twice with simpler filters, or filter afterwards")
    return Filter(text=rendered, source=text, fields=tuple(checker.fields))
