"""Variables at an address: which DIE a name means there, and where its value is.

``find_variable`` looks a name up from the innermost scope at the address outwards (C's rule;
perf searches depth-first from the function and can pick a shadowed outer variable), then in
functions inlined at the address, then among the CU's globals, then among all globals.
``variable_place`` evaluates the variable's location there (``location.evaluate``, with the
frame base and CFA of the address) into a ``Place``; where it is optimized out, the
VariableUnavailable it raises names the ranges and source lines where it can be fetched
(``fetchable_ranges``, ``ranges_to_lines``). ``best_scope`` is perf's ``find_best_scope``.

Turning a variable with a member chain into a fetch argument (``fetch_variable``) is in
:mod:`probectl.resolve.dwarf_fetch`.
"""
from __future__ import annotations

import bisect
import os
from typing import TYPE_CHECKING, Callable, Iterable, Optional


from ...dataclass import dataclass
from ...errors import LocationError, ResolveError, VariableNotFound, VariableUnavailable
from ..place import Computed, Memory, Place, Reg, Register, Symbol, Value
from . import types as T
from .die import die_attr, die_name, guarded
from .location import EvalContext, evaluate, expression_at, location_entries, single_expression
from .units import DIE

if TYPE_CHECKING:
    from . import DebugInfo

_VAR_TAGS = ("DW_TAG_variable", "DW_TAG_formal_parameter")
# How the caller tells which places probe events can read (resolve.render.check_readable): a place
# that evaluates but cannot be read does not count as "available" in the ranges and lines we list.
Readable = Callable[[Place], None]


@dataclass(frozen=True)
class FoundVariable:
    """A variable DIE found by name, with where it was found."""

    die: DIE
    name: str
    kind: str  # "param", "local", "global"


def _is_var(die: DIE) -> bool:
    return die.tag in _VAR_TAGS


def _has_storage(die: DIE) -> bool:
    # perf's __die_find_variable_cb condition.
    a = die.attributes
    return "DW_AT_location" in a or "DW_AT_const_value" in a or bool(die_attr(die, "DW_AT_external", False))


# --- scopes ---------------------------------------------------------------------------------------


def _own_scopes(debuginfo: "DebugInfo", address: int, scope: DIE) -> tuple[list[DIE], list[DIE]]:
    """(scopes of ``scope``'s own body containing the address, innermost first; scopes of
    functions inlined into it there, innermost first)."""
    chain = debuginfo.scope_chain(address, top=scope)
    own: list[DIE] = []
    inlined: list[DIE] = []
    for d in chain:
        if inlined or (d is not scope and d.tag == "DW_TAG_inlined_subroutine"):
            inlined.append(d)
        else:
            own.append(d)
    return own[::-1], inlined[::-1]


def best_scope(debuginfo: "DebugInfo", address: int, function: Optional[str] = None,
               file: Optional[str] = None, line: Optional[int] = None) -> Optional[DIE]:
    """perf's ``find_best_scope``: among the function and inline instances at ``address``
    (outermost first), the one named ``function``; else the one declared nearest before
    ``line``; else the innermost. ``file`` keeps only those declared in that file."""
    chain = [d for d in debuginfo.scope_chain(address) if d.tag != "DW_TAG_lexical_block"]
    if not chain:
        return None
    best = None
    diff = 1 << 62
    for d in chain:
        if file is not None and debuginfo.decl_file(d) != file:
            continue
        if function is not None:
            if function in (die_name(d), die_attr(d, "DW_AT_linkage_name")):
                return d
        elif line is not None:
            lno = die_attr(d, "DW_AT_decl_line") or 0
            if lno < line and diff > line - lno:
                diff = line - lno
                best = d
    return best if best is not None else chain[-1]


def _match(die: DIE, name: str) -> bool:
    return _is_var(die) and die_name(die) == name


@guarded
def find_variable(debuginfo: "DebugInfo", name: str, address: int, scope: Optional[DIE] = None
                  ) -> FoundVariable:
    """The variable ``name`` visible at ``address`` inside ``scope`` (a function or inline
    instance DIE; default: the function containing the address). Raises VariableNotFound."""
    if scope is None:
        fn = debuginfo.function_at(address)
        if fn is None:
            raise VariableNotFound(f"no function contains address 0x{address:x}")
        scope = fn.die
    own, inlined = _own_scopes(debuginfo, address, scope)
    nameless = None
    for group in (own, inlined):
        for s in group:
            for child in debuginfo.children(s):
                if _match(child, name):
                    kind = "param" if child.tag == "DW_TAG_formal_parameter" else "local"
                    if _has_storage(child):
                        return FoundVariable(child, name, kind)
                    nameless = nameless or FoundVariable(child, name, kind)
    cu = scope.cu
    for var in debuginfo.cu_variables(cu):
        if die_name(var) == name:
            return FoundVariable(var, name, "global")
    for cu_off, die_off in debuginfo.variable_refs(name):
        var = debuginfo.dwarf.get_DIE_from_refaddr(die_off)
        return FoundVariable(var, name, "global")
    if nameless is not None:
        return nameless
    where = die_name(scope) or f"0x{address:x}"
    raise VariableNotFound(f"no variable '{name}' in {where} at this address",
                           hint=f"list the variables there with 'probectl vars {where}'")


# --- places ---------------------------------------------------------------------------------------


def _frame_die(debuginfo: "DebugInfo", address: int) -> Optional[DIE]:
    fn = debuginfo.function_at(address)
    return fn.die if fn is not None else None


def _context(debuginfo: "DebugInfo", address: int, frame: Optional[DIE], var: Optional[DIE]) -> EvalContext:
    cfa_cache: dict[str, Value] = {}

    def cfa() -> Value:
        if "v" not in cfa_cache:
            rule = debuginfo.call_frames().cfa_at(address)
            if rule is None:
                raise LocationError(f"no call-frame information (CFI) describes address 0x{address:x}",
                                    "frame_base", hint="the binary's .eh_frame/.debug_frame lacks this code")
            cfa_cache["v"] = Value(Reg(rule.register), rule.offset)
        return cfa_cache["v"]

    def frame_base() -> Value:
        if frame is None:
            raise LocationError("no enclosing function gives a frame base", "frame_base")
        ops = expression_at(debuginfo, frame, address, "DW_AT_frame_base")
        if ops is None:
            raise LocationError("the function's frame base is unknown at this address", "frame_base")
        place = evaluate(ops, EvalContext(cfa=cfa, address_size=debuginfo.address_size))
        if isinstance(place, Register):
            return Value(Reg(place.regno))
        if isinstance(place, Memory):
            return place.address
        if isinstance(place, Computed):
            return place.value
        raise LocationError("the function's frame base is not an address", "frame_base")

    entry = debuginfo.die_entry(frame) if frame is not None else None
    size = T.byte_size(T.type_of(var)) if var is not None else None

    def addrx(index: int) -> int:
        within = var if var is not None else frame
        if within is None:
            raise LocationError("an indexed address (DW_OP_addrx) outside any unit", "unsupported")
        return debuginfo.dwarf.get_addr(within.cu, index)

    return EvalContext(frame_base=frame_base, cfa=cfa, at_entry=(entry == address), object_size=size,
                       address_index=addrx, symbol_name=die_name(var) if var is not None else None,
                       address_size=debuginfo.address_size)


def _const_value(die: DIE) -> Optional[int]:
    a = die.attributes.get("DW_AT_const_value")
    if a is None:
        return None
    v = a.value
    if isinstance(v, int):
        if a.form in ("DW_FORM_data1", "DW_FORM_data2", "DW_FORM_data4", "DW_FORM_data8") \
                and T.is_signed(T.type_of(die)):
            bits = {"DW_FORM_data1": 8, "DW_FORM_data2": 16, "DW_FORM_data4": 32, "DW_FORM_data8": 64}[a.form]
            if v >= 1 << (bits - 1):
                v -= 1 << bits
        return v
    if isinstance(v, (list, bytes)) and len(v) <= 8:
        return int.from_bytes(bytes(v), "little")
    return None


def _global_definition(debuginfo: "DebugInfo", var: DIE) -> Optional[DIE | Place]:
    """For a declaration (``extern int x;``) the DIE of its definition anywhere, if any.

    In a large file (a kernel) without its full name index at hand, finding the definition means
    searching the bytes of the units that mention the name (a global such as ``jiffies`` is declared
    in hundreds, so ``vars --externs tcp_sendmsg`` would search for dozens of them) or building the index:
    then, when the binary has exactly one global data symbol of that name, its address (where the
    definition's DW_OP_addr points) is the place given instead."""
    name = die_name(var) or ""
    refs = debuginfo.variable_refs_at_hand(name)
    if refs is None:
        # (the unit's other extern declarations are looked up in the same pass: `vars --externs`
        # asks for all of them)
        others = [die_name(v) or "" for v in debuginfo.cu_variables(var.cu) if _is_extern_declaration(v)]
        address = debuginfo.global_object_addresses([name] + others)[name]
        if address is not None:
            return Memory(Value(Symbol(address, name)))
        refs = debuginfo.variable_refs(name)
    for cu_off, die_off in refs:
        d = debuginfo.dwarf.get_CU_at(cu_off).get_DIE_from_refaddr(die_off)
        if "DW_AT_location" in d.attributes:
            return d
    return None


def _is_extern_declaration(var: DIE) -> bool:
    return bool(var.attributes.get("DW_AT_declaration") or die_attr(var, "DW_AT_external", False)) \
        and "DW_AT_location" not in var.attributes


@guarded
def variable_place(debuginfo: "DebugInfo", var: DIE, address: int, readable: Readable) -> Place:
    """Where variable ``var`` is at ``address``. Raises VariableUnavailable (optimized out
    here, with the ranges where ``readable`` accepts it) or LocationError."""
    name = die_name(var) or "?"
    frame = _frame_die(debuginfo, address)
    if "DW_AT_location" not in var.attributes:
        const = _const_value(var)
        if const is not None:
            return Computed(Value(None, const))
        if var.attributes.get("DW_AT_declaration") or die_attr(var, "DW_AT_external", False):
            definition = _global_definition(debuginfo, var)
            if isinstance(definition, Memory):
                return definition
            if definition is not None and definition is not var:
                return variable_place(debuginfo, definition, address, readable)
            if die_attr(var, "DW_AT_external", False):
                return Memory(Value(Symbol(None, name)))
        raise _unavailable(debuginfo, var, address, frame, readable, "optimized_out")
    ops = expression_at(debuginfo, var, address)
    if ops is None:
        raise _unavailable(debuginfo, var, address, frame, readable, "optimized_out")
    ctx = _context(debuginfo, address, frame, var)
    try:
        return evaluate(ops, ctx)
    except LocationError as exc:
        raise _unavailable(debuginfo, var, address, frame, readable, exc.reason, exc) from None


def fetchable_ranges(debuginfo: "DebugInfo", var: DIE, readable: Readable) -> list[tuple[int, int]]:
    """Address ranges where ``var``'s location can be read by a probe event: the location-list
    entries whose expressions evaluate (assuming a frame and CFA exist), or its scope's ranges
    for a single location expression."""
    entries = location_entries(debuginfo, var)
    if entries is None:
        if single_expression(var) is None and _const_value(var) is None:
            return []
        parent = debuginfo.parent_scope(var)
        return debuginfo.die_ranges(parent) if parent is not None else []
    out = []
    for e in entries:
        frame = _frame_die(debuginfo, e.low)
        ctx = _context(debuginfo, e.low, frame, var)
        try:
            place = evaluate(e.expr, ctx)
            readable(place)
        except (LocationError, ResolveError):
            continue
        out.append((e.low, max(e.high, e.low + 1)))
    return _merge(out)


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def ranges_to_lines(debuginfo: "DebugInfo", cu, ranges: Iterable[tuple[int, int]]) -> list[tuple[str, int]]:
    """The source lines whose statement addresses fall in ``ranges`` (and map back to them)."""
    from .lines import line_table, reverse_line

    table = line_table(debuginfo, cu)
    found: list[tuple[str, int]] = []
    for lo, hi in ranges:
        i = bisect.bisect_left(table.addresses, lo)
        while i < len(table.rows) and table.rows[i].address < hi:
            row = table.rows[i]
            i += 1
            if row.end_sequence or not row.is_stmt:
                continue
            fname = table.file_name(row.file)
            back = reverse_line(debuginfo, cu, row.address)
            if fname and back == (fname, row.line) and (fname, row.line) not in found:
                found.append((fname, row.line))
    return sorted(found)


def format_lines(lines: list[tuple[str, int]]) -> str:
    """``a.c:10-12, 15, b.c:3`` style: runs of consecutive lines joined, the file named once."""
    parts: list[str] = []
    shown_file = None
    i = 0
    while i < len(lines):
        fname, first = lines[i]
        last = first
        while i + 1 < len(lines) and lines[i + 1] == (fname, last + 1):
            i += 1
            last += 1
        run = str(first) if first == last else f"{first}-{last}"
        parts.append(run if fname == shown_file else f"{os.path.basename(fname)}:{run}")
        shown_file = fname
        i += 1
    return ", ".join(parts)


def _unavailable(debuginfo: "DebugInfo", var: DIE, address: int, frame: Optional[DIE], readable: Readable,
                 reason: str, exc: Optional[LocationError] = None) -> VariableUnavailable:
    name = die_name(var) or "?"
    ranges = fetchable_ranges(debuginfo, var, readable)
    lines = ranges_to_lines(debuginfo, var.cu, ranges) if ranges else []
    if exc is not None:
        why = f"'{name}' cannot be fetched at 0x{address:x}: {exc.message}"
    elif ranges or "DW_AT_location" in var.attributes:
        why = f"'{name}' is optimized out at 0x{address:x}"
    else:
        why = f"'{name}' is optimized out everywhere (it has no location)"
    if lines:
        hint = f"it can be fetched at {format_lines(lines)}"
    elif ranges:
        hint = "it can be fetched at " + ", ".join(f"0x{lo:x}-0x{hi:x}" for lo, hi in ranges)
    else:
        hint = exc.hint if exc is not None and exc.hint else "no address in the program holds it"
    return VariableUnavailable(why, hint, name, address, ranges, lines, reason)
