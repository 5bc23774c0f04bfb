"""Where a value lives, symbolically: the one model of places that the DWARF location evaluator
(:mod:`.dwarf.location`) and the BTF calling-convention rules (:mod:`probectl.resolve.btf_fetch`)
produce, and that the member-chain walker (:mod:`probectl.resolve.fetch`) and the renderer of kernel
fetch text (:mod:`probectl.resolve.render`) read.

Values stay symbolic: registers stay registers and memory reads stay reads, so "the 8-byte value at
(the value at %di+8)" is ``Value(Deref(Value(Reg(5), 8)))``, which renders as ``+0(+8(%di))``. A
``Place`` is one of:

- ``Memory(address)``: the object is in memory at ``address`` (a ``Value``);
- ``Register(regno)``: the object is held in a register;
- ``Computed(value)``: the object's value is computed (``DW_OP_stack_value``, ``DW_OP_implicit_value``,
  ``DW_AT_const_value``, ``$argN``);
- ``Slice(value, bit_offset)``: part of a register-held aggregate (a struct passed in a register);
- ``Pieces(values)``: an aggregate passed in several registers.
"""
from __future__ import annotations

from typing import Optional, Union

from ..dataclass import dataclass, replace
from ..errors import LocationError


@dataclass(frozen=True)
class Reg:
    """The contents of a register."""

    regno: int


@dataclass(frozen=True)
class Var:
    """A value the kernel's fetch syntax names itself: ``$arg1`` at a return probe."""

    name: str


@dataclass(frozen=True)
class Symbol:
    """The link-time address of a global object (``address`` None when only the name is known)."""

    address: Optional[int]
    name: Optional[str]


@dataclass(frozen=True)
class Deref:
    """The ``size``-byte value in memory at ``address`` (user-space memory when ``user``)."""

    address: "Value"
    size: int = 8
    user: bool = False


@dataclass(frozen=True)
class Value:
    """``base + offset``, of which only the low ``bits`` bits are meaningful (sign-extended
    when ``signed``); ``base`` None makes it the constant ``offset``. ``shl`` is a pending
    left shift (the first half of gcc's sign-extension idiom)."""

    base: Union[Reg, Var, Deref, Symbol, None]
    offset: int = 0
    bits: int = 64
    signed: bool = False
    shl: int = 0

    @property
    def is_const(self) -> bool:
        return self.base is None

    def plus(self, k: int) -> "Value":
        if self.bits != 64 or self.shl:
            raise LocationError("the address is computed from a truncated value", "computed")
        return replace(self, offset=self.offset + k)


@dataclass(frozen=True)
class Memory:
    """The object is in memory at ``address`` (user-space memory when ``user``)."""

    address: Value
    user: bool = False


@dataclass(frozen=True)
class Register:
    """The object is held in register ``regno`` (DWARF numbering)."""

    regno: int

    @property
    def value(self) -> Value:
        return Value(Reg(self.regno))


@dataclass(frozen=True)
class Computed:
    """The object's value is computed (``DW_OP_stack_value``, a constant, ``$argN``)."""

    value: Value


@dataclass(frozen=True)
class Pieces:
    """An object split over several 8-byte values: a small struct passed in two registers."""

    values: tuple[Value, ...]


@dataclass(frozen=True)
class Slice:
    """Bits ``bit_offset``.. of an aggregate held in a register (or computed into one)."""

    value: Value
    bit_offset: int


Place = Union[Memory, Register, Computed, Slice, Pieces]
