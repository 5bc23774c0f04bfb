"""DWARF location expressions → where a value is, in terms the kernel's fetch arguments can read.

A location expression is evaluated *symbolically*: registers stay registers, memory reads stay
reads, so ``DW_OP_breg5 8; DW_OP_deref`` becomes "the 8-byte value at (the value at %di+8)",
which renders as the kernel fetch text ``+0(+8(%di))``. The result is a
:data:`~probectl.debuginfo.place.Place` (``Memory``, ``Register``, ``Computed``).

Anything the kernel cannot read (arithmetic on registers, values that exist only in the caller
``DW_OP_entry_value``, objects split in ``DW_OP_piece``s, ``DW_OP_implicit_pointer``, TLS) raises
``LocationError`` saying so. perf reads only the first operation of an expression, so it turns
``breg5 0; deref`` into ``+0(%di)`` and ``breg3 0; shl 32; shra 32; stack_value`` into ``+0(%bx)``,
silently fetching wrong values; we are exact or refuse.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

from ...dataclass import dataclass, replace
from ...errors import LocationError
from ..place import Computed, Deref, Memory, Pieces, Place, Reg, Register, Symbol, Value
from .leb128 import read_sleb128, read_uleb128
from .names import OP
from .units import ByteOrder, DwarfFormatError

# --- evaluation -----------------------------------------------------------------------------------


@dataclass
class EvalContext:
    """What an expression may refer to outside itself."""

    frame_base: Optional[Callable[[], Value]] = None
    cfa: Optional[Callable[[], Value]] = None
    at_entry: bool = False
    object_size: Optional[int] = None
    address_index: Optional[Callable[[int], int]] = None
    symbol_name: Optional[str] = None
    address_size: int = 8


_CONST_OPS = {"DW_OP_const1u", "DW_OP_const1s", "DW_OP_const2u", "DW_OP_const2s", "DW_OP_const4u",
              "DW_OP_const4s", "DW_OP_const8u", "DW_OP_const8s", "DW_OP_constu", "DW_OP_consts"}
_MASK64 = (1 << 64) - 1


# --- decoding -------------------------------------------------------------------------------------


class Operation(NamedTuple("Operation", [("op", int), ("op_name", str), ("args", list), ("offset", int)])):
    """One operation of an expression: its number, name, operands and offset in the expression.
    The operand of DW_OP_entry_value is the decoded sub-expression; DW_OP_implicit_value's are
    (length, bytes). (Fields as a list: see units.Section.)"""

    __slots__ = ()


# Operands by operation: 1/2/4/8 fixed unsigned, x/y/z/w fixed signed (1/2/4/8), "u" ULEB128, "s" SLEB128,
# "a" an address, "o" an offset (the size of a DW_FORM_ref_addr), "b" a ULEB128-counted block,
# "e" a ULEB128-counted expression, "B" a 1-byte-counted block.
_OPERANDS: dict[int, str] = {
    0x03: "a", 0x08: "1", 0x09: "x", 0x0A: "2", 0x0B: "y", 0x0C: "4", 0x0D: "z", 0x0E: "8", 0x0F: "w",
    0x10: "u", 0x11: "s", 0x15: "1", 0x23: "u", 0x28: "y", 0x2F: "y", 0x90: "u", 0x91: "s", 0x92: "us",
    0x93: "u", 0x94: "1", 0x95: "1", 0x98: "2", 0x99: "4", 0x9A: "o", 0x9D: "uu", 0x9E: "b", 0xA0: "os",
    0xA1: "u", 0xA2: "u", 0xA3: "e", 0xA4: "uB", 0xA5: "uu", 0xA6: "1u", 0xA7: "1u", 0xA8: "u", 0xA9: "u",
    0xF2: "os", 0xF3: "e", 0xF4: "uB", 0xF5: "uu", 0xF6: "1u", 0xF7: "u", 0xF9: "u", 0xFA: "4", 0xFB: "u",
    0xFC: "u", 0xFD: "o",
}
_OPERANDS.update({0x70 + n: "s" for n in range(32)})  # DW_OP_breg0..31
_SIGNED = {"x": 1, "y": 2, "z": 4, "w": 8}


def parse_expression(expr, unit) -> list[Operation]:
    """The operations of an expression's bytes (or list of byte values), in a unit of ``unit``'s
    address and offset sizes (anything with ``address_size``, ``offset_size``, ``version``);
    DwarfFormatError where the bytes do not decode."""
    data = bytes(expr)
    order: ByteOrder = "little" if getattr(unit, "dwarfinfo", None) is None else unit.dwarfinfo.byteorder
    address_size = unit.address_size
    offset_size = address_size if unit.version == 2 else unit.offset_size
    return _decode(data, order, address_size, offset_size)


def _decode(data: bytes, order: ByteOrder, address_size: int, offset_size: int) -> list[Operation]:
    ops = []
    value: object  # (a number, a list of byte values, or the operations of a nested expression)
    pos = 0
    n = len(data)
    while pos < n:
        start = pos
        op = data[pos]
        pos += 1
        name = OP.get(op)
        if name is None:
            raise DwarfFormatError(f"unknown expression operation 0x{op:02x}")
        args: list = []
        for kind in _OPERANDS.get(op, ""):
            if kind == "u":
                value, pos = read_uleb128(data, pos)
            elif kind == "s":
                value, pos = read_sleb128(data, pos)
            elif kind in "ao":
                size = address_size if kind == "a" else offset_size
                if pos + size > n:
                    raise DwarfFormatError(f"{name} runs past the end of its expression")
                value = int.from_bytes(data[pos:pos + size], order)
                pos += size
            elif kind in "beB":
                if kind == "B":
                    if pos >= n:
                        raise DwarfFormatError(f"{name} runs past the end of its expression")
                    length, pos = data[pos], pos + 1
                else:
                    length, pos = read_uleb128(data, pos)
                if pos + length > n:
                    raise DwarfFormatError(f"{name} runs past the end of its expression")
                block = data[pos:pos + length]
                pos += length
                if kind == "e":
                    value = _decode(block, order, address_size, offset_size)
                else:
                    if kind == "b":
                        args.append(length)
                    value = list(block)
            else:  # a fixed size
                width = _SIGNED.get(kind) or int(kind)
                if pos + width > n:
                    raise DwarfFormatError(f"{name} runs past the end of its expression")
                value = int.from_bytes(data[pos:pos + width], order, signed=kind in _SIGNED)
                pos += width
            args.append(value)
        ops.append(Operation(op, name, args, start))
    return ops


def _fold(op: str, a: int, b: int) -> int:
    if op == "DW_OP_and":
        return a & b
    if op == "DW_OP_or":
        return a | b
    if op == "DW_OP_xor":
        return a ^ b
    if op == "DW_OP_mul":
        return (a * b) & _MASK64
    if op == "DW_OP_div":
        if b == 0:
            raise LocationError("the expression divides by zero", "computed")
        return int(a / b)
    if op == "DW_OP_mod":
        if b == 0:
            raise LocationError("the expression divides by zero", "computed")
        return a % b
    if op == "DW_OP_shl":
        return (a << b) & _MASK64
    if op == "DW_OP_shr":
        return (a & _MASK64) >> b
    if op == "DW_OP_shra":
        return a >> b
    raise LocationError(f"unsupported operation {op}", "unsupported")


def evaluate(ops: list, ctx: EvalContext) -> Place:
    """Evaluate parsed location-expression operations into a Place (see the module docstring)."""
    pieces = [i for i, op in enumerate(ops) if op.op_name in ("DW_OP_piece", "DW_OP_bit_piece")]
    if len(pieces) > 1:
        return _evaluate_pieces(ops, pieces, ctx)
    stack: list[Value] = []
    register: Optional[int] = None

    def pop(op: str) -> Value:
        if not stack:
            raise LocationError(f"malformed location expression ({op} on an empty stack)", "unsupported")
        return stack.pop()

    n = len(ops)
    for i, op in enumerate(ops):
        name = op.op_name
        args = op.args
        if register is not None and name not in ("DW_OP_piece", "DW_OP_bit_piece"):
            raise LocationError(f"malformed location expression ({name} after a register location)",
                                "unsupported")
        if name.startswith("DW_OP_lit"):
            stack.append(Value(None, op.op - 0x30))
        elif name in _CONST_OPS:
            stack.append(Value(None, args[0]))
        elif name == "DW_OP_addr":
            stack.append(Value(Symbol(args[0], ctx.symbol_name)))
        elif name in ("DW_OP_addrx", "DW_OP_GNU_addr_index", "DW_OP_constx", "DW_OP_GNU_const_index"):
            if ctx.address_index is None:
                raise LocationError(f"{name} without an address table", "unsupported")
            addr = ctx.address_index(args[0])
            stack.append(Value(Symbol(addr, ctx.symbol_name)) if "addr" in name else Value(None, addr))
        elif name.startswith("DW_OP_breg"):
            stack.append(Value(Reg(op.op - 0x70), args[0]))
        elif name == "DW_OP_bregx":
            stack.append(Value(Reg(args[0]), args[1]))
        elif name.startswith("DW_OP_reg") and name != "DW_OP_regx" and name != "DW_OP_regval_type":
            register = op.op - 0x50
        elif name == "DW_OP_regx":
            register = args[0]
        elif name == "DW_OP_fbreg":
            if ctx.frame_base is None:
                raise LocationError("DW_OP_fbreg outside a function with a frame base", "frame_base")
            stack.append(ctx.frame_base().plus(args[0]))
        elif name == "DW_OP_call_frame_cfa":
            if ctx.cfa is None:
                raise LocationError("the frame address (CFA) is unknown here", "frame_base")
            stack.append(ctx.cfa())
        elif name in ("DW_OP_deref", "DW_OP_deref_size", "DW_OP_GNU_deref_type", "DW_OP_deref_type"):
            if name in ("DW_OP_GNU_deref_type", "DW_OP_deref_type"):
                raise LocationError(f"the value is read with a typed dereference ({name})", "unsupported")
            size = args[0] if name == "DW_OP_deref_size" else ctx.address_size
            pointer = pop(name)
            if pointer.is_const:
                raise LocationError(f"the value is read from the fixed address 0x{pointer.offset:x}", "unsupported")
            stack.append(Value(Deref(pointer, size), bits=size * 8 if size < 8 else 64))
        elif name == "DW_OP_plus_uconst":
            stack.append(pop(name).plus(args[0]))
        elif name in ("DW_OP_plus", "DW_OP_minus"):
            b = pop(name)
            a = pop(name)
            if b.is_const:
                stack.append(a.plus(b.offset if name == "DW_OP_plus" else -b.offset))
            elif a.is_const and name == "DW_OP_plus":
                stack.append(b.plus(a.offset))
            else:
                raise LocationError(f"the value is computed from two registers or memory values ({name})",
                                    "computed")
        elif name in ("DW_OP_neg", "DW_OP_not", "DW_OP_abs"):
            a = pop(name)
            if not a.is_const:
                raise LocationError(f"the value is computed with {name}", "computed")
            v = -a.offset if name == "DW_OP_neg" else (~a.offset if name == "DW_OP_not" else abs(a.offset))
            stack.append(Value(None, v))
        elif name in ("DW_OP_and", "DW_OP_or", "DW_OP_xor", "DW_OP_mul", "DW_OP_div", "DW_OP_mod",
                      "DW_OP_shl", "DW_OP_shr", "DW_OP_shra"):
            b = pop(name)
            a = pop(name)
            if a.is_const and b.is_const:
                stack.append(Value(None, _fold(name, a.offset, b.offset)))
            elif b.is_const and name == "DW_OP_shl" and a.offset == 0 and not a.shl and 0 < b.offset < 64:
                stack.append(replace(a, shl=b.offset))
            elif b.is_const and name in ("DW_OP_shr", "DW_OP_shra") and a.shl and a.shl == b.offset:
                # (x << k) >> k: the low 64-k bits of x, zero- or sign-extended.
                bits = min(a.bits, 64 - a.shl)
                stack.append(replace(a, shl=0, bits=bits, signed=(name == "DW_OP_shra")))
            elif (b.is_const and name == "DW_OP_and" and a.offset == 0 and not a.shl
                  and b.offset > 0 and (b.offset & (b.offset + 1)) == 0):
                # x & (2^k - 1): the low k bits of x.
                stack.append(replace(a, bits=min(a.bits, b.offset.bit_length()), signed=False))
            else:
                raise LocationError(f"the value is computed with {name}", "computed",
                                    hint="probe events can read registers and memory but cannot compute")
        elif name == "DW_OP_dup":
            top = pop(name)
            stack += [top, top]
        elif name == "DW_OP_drop":
            pop(name)
        elif name == "DW_OP_swap":
            b = pop(name)
            a = pop(name)
            stack += [b, a]
        elif name == "DW_OP_over":
            if len(stack) < 2:
                raise LocationError("malformed location expression (DW_OP_over)", "unsupported")
            stack.append(stack[-2])
        elif name == "DW_OP_nop":
            pass
        elif name == "DW_OP_stack_value":
            if i != n - 1 and ops[i + 1].op_name not in ("DW_OP_piece", "DW_OP_bit_piece"):
                raise LocationError("malformed location expression (operations after DW_OP_stack_value)",
                                    "unsupported")
            value = pop(name)
            if value.shl:
                raise LocationError("the value is computed with DW_OP_shl", "computed")
            if _single_piece_rest(ops, i + 1, ctx):
                return Computed(value)
            raise _piece_error()
        elif name in ("DW_OP_implicit_value",):
            blob = bytes(args[1]) if len(args) > 1 else bytes(args[0])
            if len(blob) > 8:
                raise LocationError(f"the value is a {len(blob)}-byte constant, too large to fetch", "computed")
            if not _single_piece_rest(ops, i + 1, ctx):
                raise _piece_error()
            return Computed(Value(None, int.from_bytes(blob, "little")))
        elif name in ("DW_OP_piece", "DW_OP_bit_piece"):
            if _single_piece_rest(ops, i, ctx) and (register is not None or stack):
                break
            raise _piece_error()
        elif name in ("DW_OP_entry_value", "DW_OP_GNU_entry_value"):
            sub = args[0] if args else []
            if (ctx.at_entry and len(sub) == 1 and sub[0].op_name.startswith("DW_OP_reg")
                    and sub[0].op_name not in ("DW_OP_regval_type",)):
                regno = sub[0].args[0] if sub[0].op_name == "DW_OP_regx" else sub[0].op - 0x50
                stack.append(Value(Reg(regno)))
            else:
                raise LocationError("its value here is only known as the value it had when the function "
                                    "was entered (DW_OP_entry_value)", "entry_value",
                                    hint="probe the function entry, or a line where it is still live")
        elif name in ("DW_OP_implicit_pointer", "DW_OP_GNU_implicit_pointer"):
            raise LocationError("it is a pointer to an object that was optimized out (DW_OP_implicit_pointer)",
                                "implicit_pointer")
        elif name in ("DW_OP_form_tls_address", "DW_OP_GNU_push_tls_address"):
            raise LocationError("it is a thread-local variable, which probe events cannot address", "tls")
        elif name in ("DW_OP_GNU_parameter_ref",):
            raise LocationError("its value is only known in the caller (DW_OP_GNU_parameter_ref)", "entry_value")
        else:
            raise LocationError(f"its location uses {name}, which probe events cannot express", "unsupported")
    if register is not None:
        return Register(register)
    if not stack:
        raise LocationError("it has an empty location here (optimized out)", "empty")
    return Memory(stack[-1])


def _evaluate_pieces(ops: list, ends: list[int], ctx: EvalContext) -> Place:
    """An object split into whole 8-byte pieces, each in a register or in memory (a Go string's
    pointer and length in two registers, a slice's three, a small C struct passed in two): the
    ``Pieces`` whose members the member walker reads one by one. Pieces of other sizes, bit pieces and
    pieces with no location (optimized out) are refused."""
    values = []
    start = 0
    for end in ends:
        piece = ops[end]
        if piece.op_name != "DW_OP_piece" or piece.args[0] != 8 or end == start:
            raise _piece_error()
        place = evaluate(ops[start:end], replace(ctx, object_size=8))
        if isinstance(place, Register):
            values.append(place.value)
        elif isinstance(place, Memory):
            values.append(Value(Deref(place.address, user=place.user)))
        elif isinstance(place, Computed) and place.value.bits == 64:
            values.append(place.value)
        else:
            raise _piece_error()
        start = end + 1
    if start != len(ops):
        raise _piece_error()
    return Pieces(tuple(values))


def _single_piece_rest(ops: list, start: int, ctx: EvalContext) -> bool:
    """True if ops[start:] is nothing, or one DW_OP_piece that covers the whole object."""
    rest = ops[start:]
    if not rest:
        return True
    if len(rest) == 1 and rest[0].op_name == "DW_OP_piece":
        size = ctx.object_size
        return size is not None and rest[0].args[0] >= size
    return False


def _piece_error() -> LocationError:
    return LocationError("it is split into pieces held in different places (DW_OP_piece)", "piece",
                         hint="fetch its members separately where they are in memory")


# --- location attributes -------------------------------------------------------------------------


@dataclass(frozen=True)
class LocationRange:
    """One entry of a location list: ``expr`` holds in [low, high)."""

    low: int
    high: int
    expr: list


def location_entries(debuginfo, die, attr_name: str = "DW_AT_location") -> Optional[list[LocationRange]]:
    """The location list of a DIE attribute as absolute ranges, or None if the attribute is a
    single expression (or absent: see ``single_expression``). Cached per DIE."""
    key = (die.cu.cu_offset, die.offset, attr_name)
    cache = debuginfo.location_lists
    if key in cache:
        return cache[key]
    attr = die.attributes.get(attr_name)
    result = None
    if attr is not None and not _is_exprloc(attr):
        from .lists import location_list  # (optimised code's: a variable of -O0 code has one expression)

        cu = die.cu
        result = [LocationRange(lo, hi, parse_expression(expr, cu))
                  for lo, hi, expr in location_list(cu, attr.value, debuginfo.cu_base(cu))]
    cache[key] = result
    return result


def single_expression(die, attr_name: str = "DW_AT_location") -> Optional[list]:
    """The parsed operations of an exprloc/block attribute, or None."""
    attr = die.attributes.get(attr_name)
    if attr is None or not _is_exprloc(attr):
        return None
    return parse_expression(attr.value, die.cu)


def _is_exprloc(attr) -> bool:
    # DWARF 2/3 location-list offsets are data4/data8; blocks and exprloc are single expressions.
    return attr.form in ("DW_FORM_exprloc", "DW_FORM_block1", "DW_FORM_block2", "DW_FORM_block4", "DW_FORM_block")


def expression_at(debuginfo, die, address: int, attr_name: str = "DW_AT_location") -> Optional[list]:
    """The operations describing ``die``'s location at ``address`` (the first location-list
    entry covering it, as elfutils' ``dwarf_getlocation_addr``), or None if none covers it."""
    ops = single_expression(die, attr_name)
    if ops is not None:
        return ops
    entries = location_entries(debuginfo, die, attr_name)
    if not entries:
        return None
    for e in entries:
        if e.low <= address < e.high:
            return e.expr
    # gcc's location views give some entries an empty address range: the location holds at that
    # address between two views (e.g. an inlined parameter at the inline entry), which is what a
    # probe there sees.
    for e in entries:
        if e.low == e.high == address:
            return e.expr
    return None
