"""The syntax tree of a filter, and :class:`Filter`, the checked text the kernel gets."""
from __future__ import annotations

from typing import Union

from ..dataclass import dataclass


@dataclass(frozen=True)
class Term:
    """A number or a bare word as written (``0x400``, ``4k``, ``TCP_ESTABLISHED``, ``bash``)."""

    text: str
    column: int


@dataclass(frozen=True)
class Terms:
    """One or more terms joined by ``|`` (``O_CREAT|O_EXCL``); usually just one."""

    terms: tuple[Term, ...]

    @property
    def column(self) -> int:
        return self.terms[0].column


@dataclass(frozen=True)
class StringValue:
    """A quoted string; ``value`` is without the quotes, ``quote`` is ``"`` or ``'``."""

    value: str
    quote: str
    column: int


@dataclass(frozen=True)
class CpuList:
    """``CPUS{...}``; ``text`` is what is between the braces."""

    text: str
    column: int


Value = Union[Terms, StringValue, CpuList]


@dataclass(frozen=True)
class Predicate:
    """``FIELD[.SUFFIX] OP VALUE``; ``column`` is where the field starts, ``op_column`` the operator."""

    field: str
    suffix: str
    op: str
    value: Value
    column: int
    op_column: int


@dataclass(frozen=True)
class Not:
    """``!operand``; ``column`` is where the ``!`` is."""

    operand: "Node"
    column: int


@dataclass(frozen=True)
class And:
    """Two or more operands joined by ``&&``."""

    operands: tuple["Node", ...]


@dataclass(frozen=True)
class Or:
    """Two or more operands joined by ``||``."""

    operands: tuple["Node", ...]


Node = Union[Predicate, Not, And, Or]


@dataclass(frozen=True)
class Filter:
    """A checked filter: ``text`` is what the kernel gets, ``source`` what the user wrote,
    ``fields`` the fields it reads (in order of first use, without suffixes)."""

    text: str
    source: str
    fields: tuple[str, ...]
