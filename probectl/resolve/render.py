"""Places as the kernel's fetch-argument text: ``+8(%di)``, ``+0(+16(%sp))``, ``@counter+0``,
``@+0x4010`` (uprobe globals), ``\\42``, ``$arg2`` -- or a LocationError saying why a place cannot be
written (arithmetic on registers, a truncated address, a constant on a kernel without immediates).

This is the last step of perf's ``convert_variable_location``; the places come from
:mod:`probectl.debuginfo.place`.
"""
from __future__ import annotations

from typing import Optional

from ..arch import Arch
from ..arch.x86_64 import ARCH as X86_64
from ..dataclass import dataclass
from ..debuginfo.place import Computed, Deref, Memory, Place, Reg, Symbol, Value, Var
from ..errors import LocationError


def register_name(regno: int, arch: Arch = X86_64) -> str:
    """The fetch-argument name of DWARF register ``regno`` of ``arch``'s numbering."""
    name = arch.register_name(regno)
    if name is not None:
        return name
    what = arch.vector_kind if regno in arch.vector_registers else "a register"
    raise LocationError(f"the value is in DWARF register {regno} ({what}), which probe events cannot read",
                        "register")


@dataclass(frozen=True)
class RenderOptions:
    """How to write what cannot be written one way only.

    ``arch``: the machine whose DWARF register numbers the places use (the probed file's).
    ``symbol_base``: None writes globals as perf does, ``@name+off`` (kprobe syntax); an integer
    writes uprobe syntax ``@+FILEOFFSET`` where FILEOFFSET = address - symbol_base (the probed
    binary's text-segment ``vaddr - offset``).
    """

    arch: Arch = X86_64
    symbol_base: Optional[int] = None
    immediates: bool = True
    user_access: bool = False


# The kernel keeps a dereference offset (+OFF(...)) in an int (struct fetch_insn): a larger one, which a
# C index can compute (w->values[536870912]), would wrap silently and read some other member. The
# parser bounds the offsets a user writes the same way.
DEREF_OFFSET_MIN, DEREF_OFFSET_MAX = -(2**31), 2**31 - 1


def _offset_text(off: int) -> str:
    return f"+{off}" if off >= 0 else f"-{-off}"


def render_memory(address: Value, opts: RenderOptions, user: bool = False) -> str:
    """The fetch text reading the memory at ``address`` (``+u`` user-memory syntax if ``user``)."""
    if address.bits != 64 or address.shl:
        raise LocationError("the address is computed from a truncated value", "computed")
    base = address.base
    if isinstance(base, Symbol):
        if opts.symbol_base is not None:
            if base.address is None:
                raise LocationError(f"the address of '{base.name}' is unknown", "unsupported")
            file_offset = base.address + address.offset - opts.symbol_base
            if file_offset < 0:
                raise LocationError(f"the address lies {-file_offset} bytes before the start of the probed file",
                                    "offset")
            return f"@+0x{file_offset:x}"
        if base.name:
            return f"@{base.name}{_offset_text(address.offset)}"
        if base.address is None:
            raise LocationError("a global object without name or address", "unsupported")
        return f"@0x{base.address + address.offset:x}"
    if base is None:
        raise LocationError(f"the object is at the fixed address 0x{address.offset:x}, which a probe "
                            f"cannot read portably", "unsupported")
    if not DEREF_OFFSET_MIN <= address.offset <= DEREF_OFFSET_MAX:
        raise LocationError(f"its offset, {address.offset}, does not fit the kernel's 32-bit dereference offsets "
                            f"({DEREF_OFFSET_MIN}..{DEREF_OFFSET_MAX})", "offset",
                            hint="an index or offset this large reads some other object; check the expression")
    off = _offset_text(address.offset)
    if user:
        off = off[0] + "u" + off[1:]
    return f"{off}({render_value(Value(base), opts)})"


def render_value(value: Value, opts: RenderOptions) -> str:
    """The fetch text producing ``value`` itself."""
    if value.shl:
        raise LocationError("the value is computed with DW_OP_shl", "computed")
    base = value.base
    if base is None:
        if not opts.immediates:
            raise LocationError("the value is a constant, and this kernel has no immediate fetch "
                                "arguments", "computed")
        return f"\\{value.offset}"
    if value.offset:
        raise LocationError(f"the value is computed (a register or memory value plus {value.offset})",
                            "computed", hint="probe events can read registers and memory but cannot add")
    if isinstance(base, Reg):
        return register_name(base.regno, opts.arch)
    if isinstance(base, Var):
        return base.name
    if isinstance(base, Deref):
        return render_memory(base.address, opts, base.user)
    raise LocationError(f"the value is the address of '{base.name}', which a probe event cannot produce",
                        "computed", hint="fetch the object itself instead of its address")


def check_readable(place: Place, opts: RenderOptions = RenderOptions()) -> None:
    """Raise LocationError unless probe events can read ``place`` on ``opts.arch`` (globals and fixed
    addresses aside, whose text depends on the target): what the DWARF side asks when it lists where
    a variable can be fetched."""
    if isinstance(place, Memory):
        if place.address.base is not None and not isinstance(place.address.base, Symbol):
            render_memory(place.address, opts)
    elif isinstance(place, Computed):
        render_value(place.value, opts)
