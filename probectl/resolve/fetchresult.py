"""What resolving a C expression gives, whichever debug information answered it (DWARF through
:mod:`.dwarf_fetch`, or BTF through :mod:`.btf_fetch`): the fetch result, a variable listing line,
and perf's default argument name. Kept apart from the DWARF code so that BTF resolution does not
import the DWARF readers."""
from __future__ import annotations

from typing import Optional

from .. import spec as S
from ..dataclass import dataclass


@dataclass(frozen=True)
class FetchResult:
    """How to read one C expression at a probe address.

    ``fetch``: the kernel fetch text (``-20(%bp)``, ``+16(+0(%di))``, ``%si``, ``@counter+0``);
    ``type``: the kernel type (``s32``, ``x64``, ``string``, ``b3@5/32``; "" when perf gives none);
    ``default_name``: the argument name perf would give; ``c_type``: the C type as perf ``-V``
    writes it. ``signed``: the C type is signed (bitfield types read unsigned: sign-extend
    ``bits`` bits when decoding); ``enumerators``: (name, value) of an enum type, for symbolic
    filters; ``size``: bytes of the C type when known. ``parts``: what else a string counted by a
    length rather than ended by a NUL (a Go string, a Rust ``&str``, a ``std::string``), a slice, a
    C++ vector or an enum is read with, each written as an argument of its own (see
    :mod:`probectl.formats`)."""

    fetch: str
    type: str
    default_name: str
    c_type: str
    signed: bool = False
    bits: int = 0
    enumerators: tuple[tuple[str, int], ...] = ()
    size: Optional[int] = None
    variable: str = ""
    parts: tuple["StringPart", ...] = ()


@dataclass(frozen=True)
class StringPart:
    """A hidden argument of a counted string: its ``length`` (which ends its text), or its ``head``
    (its first bytes read as an array, the text when the kernel's string fetch, which reads to a NUL,
    found none within its limit: a Go string in the middle of the program's string data); or of an
    enum shown by variant: a ``variant`` (a marker byte that names it), the ``payload`` scalar the
    variant holds (followed by a ``name`` marker for each value of it that has one, when it is a C-like
    enum), or a ``member``, one of the several scalars it holds; or of a slice or vector of structs: an
    ``element``'s member (``variant`` its name, ``value`` the element's index); or of a C++ vector: its
    ``begin`` and ``end`` pointers (``value`` of the end: its element's size, where the event's format
    gives it nowhere else)."""

    # "length", "head", "begin", "end" (probectl.formats.STRING_PART_SUFFIXES), "variant", "payload",
    # "name", "member", "element"
    role: str
    fetch: str
    type: str
    # An enum's variant: its name and the discriminant's value selecting it (None: every other value)
    variant: str = ""
    value: Optional[int] = None
    # a "member": one of the scalars a variant holds several of, by its path (``w``; ``0__1``)
    member: str = ""


@dataclass(frozen=True)
class ListedVariable:
    """One line of a variable listing."""

    c_type: str
    name: str
    kind: str  # "param", "local", "global"
    ranges: tuple[tuple[int, int], ...] = ()


def default_name(variable: S.Variable, cast: Optional[S.TypeSpec] = None) -> str:
    """The argument name perf gives a C expression: the last member of a chain (indices do not
    count), else the variable, with ``_<cast>`` appended when there is no member chain. A method's
    value is named ``<that>_<method>`` (``v_size`` for ``v.size()``, ``items_size`` for
    ``this->items.size()``): one argument per container, as ``<name>_<cast>`` is one per cast."""
    members = [a.name for a in variable.accessors if isinstance(a, S.Member)]
    if variable.method is not None:
        return f"{members[-1] if members else variable.name}_{variable.method.name}"
    if members:
        return members[-1]
    if variable.accessors:
        return variable.name
    if cast is not None:
        return f"{variable.name}_{cast.text.replace(':', '_')}"
    return variable.name
