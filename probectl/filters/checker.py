"""Checking a filter's predicates against an event's fields and rendering the kernel's text.

Fields are looked up (with a did-you-mean), operators and values checked against the field's kind
and size, and probectl's extensions (symbolic names, size units, IPv4 addresses, bare strings,
``.ustring`` on syscall strings) rendered to plain kernel syntax.
"""
from __future__ import annotations

import re
import struct
import sys
from typing import Callable, Optional

from ..dataclass import dataclass
from ..errors import ProbectlError, did_you_mean
from ..formats import EventFormat
from ..grammars import caret_line
from .fields import CPUMASK, GENERIC_FIELDS, NUMBER, PTR_STRING, STRING, FieldInfo, field_info
from .symbols import print_fmt_symbols
from .tree import And, CpuList, Node, Not, Or, Predicate, StringValue, Term, Terms

MAX_STRING_BYTES = 255    # MAX_FILTER_STR_VAL (256) with the NUL: "Operand too long"

_LONG_SIZE = struct.calcsize("l")
_NUMERIC_OPS = ("==", "!=", "<", "<=", ">", ">=", "&")
_STRING_OPS = ("==", "!=", "~")
_CPUS_OPS = ("&", "==", "!=")
_SUFFIXES = ("function", "ustring")

Enums = Callable[[str], Optional[dict[str, int]]]


class FilterError(ProbectlError):
    """A filter that parses but does not fit the event: unknown field, wrong operator or value.

    ``text`` and ``column`` (0-based) place a caret under the offending part, as for syntax errors.
    """

    def __init__(self, message: str, text: str = "", column: Optional[int] = None, hint: str = ""):
        super().__init__(message, hint)
        self.text = text
        self.column = column

    def __str__(self) -> str:
        if self.column is None:
            return self.message
        return f"{self.message}\n  {self.text}\n  {' ' * self.column}^"


_PRECEDENCE = {Or: 1, And: 2}
_INT_RE = re.compile(r"(?P<neg>-)?(?:0[xX](?P<hex>[0-9a-fA-F]+)|(?P<oct>0[0-7]*)|(?P<dec>[1-9][0-9]*))")
_UNIT_RE = re.compile(r"(?P<neg>-)?(?P<number>[0-9]+(?:\.[0-9]+)?)(?P<unit>[A-Za-z]+)")
_IPV4_RE = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")
_UNITS = {"B": 0}
for _power, _letter in enumerate("KMGT", 1):
    for _spelling in (_letter, _letter + "i", _letter + "iB"):
        _UNITS[_spelling] = _power
_UNITS["k"] = _UNITS["ki"] = _UNITS["kiB"] = 1
_AMBIGUOUS_UNITS = {"KB", "kB", "MB", "GB", "TB"}
_CPULIST_ITEM_RE = re.compile(r"(?P<first>[0-9]+|N)(?:-(?P<last>[0-9]+|N)(?::(?P<used>[0-9]+)/(?P<group>[0-9]+))?)?")
_SYMBOL_RE = re.compile(r"[A-Za-z_.$][A-Za-z0-9_.$]*")


@dataclass(frozen=True)
class _Number:
    value: int
    style: str  # "dec", "hex", "oct": how to write it for the kernel


class Checker:
    """Checks the predicates of one filter against one event's format and renders the kernel's text;
    ``fields`` lists the fields it read."""

    def __init__(self, text: str, fmt: EventFormat, enums: Optional[Enums]):
        self.text = text
        self.shown = caret_line(text)
        self.fmt = fmt
        self.enums = enums
        self.fields: list[str] = []
        self._symbols: Optional[dict[str, dict[str, int]]] = None
        self._names_cache: dict[str, dict[str, int]] = {}

    def error(self, message: str, column: Optional[int], hint: str = "") -> FilterError:
        return FilterError(message, self.shown, column, hint)

    # ---- structure --------------------------------------------------------------------------

    def render(self, node: Node, parent: int = 0) -> str:
        if isinstance(node, Predicate):
            return self.predicate(node)
        if isinstance(node, Not):
            return f"!({self.render(node.operand)})"
        join = " || " if isinstance(node, Or) else " && "
        own = _PRECEDENCE[type(node)]
        text = join.join(self.render(child, own) for child in node.operands)
        return f"({text})" if parent > own else text

    # ---- fields -----------------------------------------------------------------------------

    def lookup(self, pred: Predicate) -> FieldInfo:
        field = self.fmt.field(pred.field)
        info = field_info(field) if field is not None else GENERIC_FIELDS.get(pred.field)
        if info is None:
            raise self.unknown_field(pred)
        if not info.kind:
            raise self.error(f"cannot filter on {pred.field} ({info.type}): {info.reason}", pred.column)
        if field is not None and field.head is not None:
            # (a Go or Rust string: probectl.formats; a std::string's text ends at a NUL, and compares)
            raise self.error(f"cannot filter on {pred.field}, a string counted by a length: the kernel compares the "
                             "text it read to a NUL, which runs on past the string's end (and is empty where no NUL "
                             "came within 4 KiB)", pred.column,
                             hint=f"filter on its length ({pred.field}__len), or record it and select with "
                                  "'probectl query'")
        if field is not None and field.element_size:
            # (probectl.formats: the decoders divide the two pointers; the kernel would compare the first)
            raise self.error(f"cannot filter on {pred.field}, a C++ vector's length worked out from its two pointers "
                             "when the events are read: the kernel would compare its first pointer", pred.column,
                             hint="record it and select with 'probectl query', or filter on another field")
        if pred.field not in self.fields:
            self.fields.append(pred.field)
        return info

    def unknown_field(self, pred: Predicate) -> FilterError:
        event = self.fmt.full_name
        own = [f.name for f in self.fmt.event_fields]
        common = [f.name for f in self.fmt.common_fields]
        generic = ["CPU", "COMM"]
        candidates = own + common + list(GENERIC_FIELDS)
        guess = did_you_mean(pred.field, candidates)
        if not guess:  # PREV_PID for prev_pid: a different case is far in difflib's ratio
            folded = [name for name in candidates if name.lower() == pred.field.lower()]
            guess = did_you_mean(pred.field, folded[:1], cutoff=0.0)
        lists = []
        if own:
            lists.append(f"{event} has {', '.join(own)}")
        else:
            lists.append(f"{event} has no fields of its own")
        lists.append(f"every event has {', '.join(common + generic)}")
        hint = "; ".join(lists)
        if guess:
            hint = f"{guess} " + hint
        return self.error(f"{event} has no field {pred.field!r}", pred.column, hint)

    # ---- predicates -------------------------------------------------------------------------

    def predicate(self, pred: Predicate) -> str:
        info = self.lookup(pred)
        suffix = pred.suffix
        if suffix and suffix not in _SUFFIXES:
            raise self.error(f"unknown field suffix '.{suffix}'", pred.column + len(pred.field),
                             hint=".function compares a kernel address with a function name, "
                                  ".ustring reads a string from user memory")
        if suffix == "function":
            value = self.function_value(pred, info)
        elif info.kind in (STRING, PTR_STRING):
            value = self.string_value(pred, info)
        elif suffix == "ustring":
            raise self.error(f".ustring reads a string, and {pred.field} is not one ({info.describe()})",
                             pred.column + len(pred.field),
                             hint=".ustring applies to string fields, such as 'const char *' arguments")
        elif info.kind == CPUMASK:
            value = self.cpumask_value(pred, info)
        else:
            value = self.number_value(pred, info)
        if (not suffix and info.kind == PTR_STRING and self.fmt.system == "syscalls"
                and self.fmt.name.startswith("sys_enter_")):
            # A syscall's string argument points to user memory: without .ustring the kernel reads
            # it as a kernel address, fails, and the predicate never matches.
            suffix = "ustring"
        name = f"{pred.field}.{suffix}" if suffix else pred.field
        return f"{name} {pred.op} {value}"

    def function_value(self, pred: Predicate, info: FieldInfo) -> str:
        column = pred.column + len(pred.field)
        if info.kind != NUMBER or info.size != _LONG_SIZE:
            raise self.error(f".function needs an address field of {_LONG_SIZE} bytes; "
                             f"{pred.field} is {info.describe()}", column)
        if pred.op not in ("==", "!="):
            raise self.error(f"'{pred.op}' does not apply to .function: use == or !=", pred.op_column)
        value = pred.value
        if isinstance(value, StringValue):
            name, where = value.value, value.column
        elif isinstance(value, Terms) and len(value.terms) == 1:
            name, where = value.terms[0].text, value.column
        else:
            raise self.error(".function compares with one function name", value.column)
        if not _SYMBOL_RE.fullmatch(name):
            raise self.error(f"{name!r} is not a function name", where,
                             hint="write the name of a kernel function, as in /proc/kallsyms")
        return name

    def string_value(self, pred: Predicate, info: FieldInfo) -> str:
        if pred.op not in _STRING_OPS:
            raise self.error(f"'{pred.op}' does not apply to the string {pred.field} ({info.describe()})",
                             pred.op_column, hint="strings take == and != (exact) and ~ (glob: *, ?, [...])")
        value = pred.value
        if isinstance(value, CpuList):
            raise self.error(f"CPUS{{...}} needs a number or cpumask field; {pred.field} is a string",
                             value.column)
        if isinstance(value, Terms):
            if len(value.terms) > 1:
                raise self.error("'|' joins numbers, not strings", value.terms[1].column - 1,
                                 hint="quote the string if it contains '|'")
            string, quote, column = value.terms[0].text, '"', value.column
        else:
            string, quote, column = value.value, value.quote, value.column
        size = len(string.encode())
        if size > MAX_STRING_BYTES:
            raise self.error(f"the string is too long for the kernel ({size} bytes, at most {MAX_STRING_BYTES})",
                             column)
        return f"{quote}{string}{quote}"

    def cpumask_value(self, pred: Predicate, info: FieldInfo) -> str:
        if not isinstance(pred.value, CpuList):
            raise self.error(f"{pred.field} is a CPU mask: compare it with CPUS{{LIST}}", pred.value.column,
                             hint=f"e.g. '{pred.field} & CPUS{{0-3}}' (any of CPUs 0 to 3)")
        return self.cpus(pred)

    def cpus(self, pred: Predicate) -> str:
        value = pred.value
        assert isinstance(value, CpuList)
        if pred.op not in _CPUS_OPS:
            raise self.error(f"'{pred.op}' does not apply to CPUS{{...}}: use &, == or !=", pred.op_column)
        items = [item.strip() for item in value.text.split(",")]
        if items and not items[-1]:
            items.pop()  # the kernel accepts a trailing comma
        if not items:
            raise self.error("empty CPU list", value.column, hint="e.g. CPUS{0-3,8}")
        column = value.column + len("CPUS{")
        for item in items:
            if item == "all":
                continue
            m = _CPULIST_ITEM_RE.fullmatch(item)
            if not m:
                raise self.error(f"invalid CPU list item {item!r}", column,
                                 hint="a CPU list is N, N-M or N-M:USED/GROUP items separated by commas")
            first, last = m.group("first"), m.group("last")
            if last is not None and first != "N" and last != "N" and int(first) > int(last):
                raise self.error(f"the CPU range {item} goes backwards", column)
            if m.group("group") is not None:
                used, group = int(m.group("used")), int(m.group("group"))
                if group == 0 or used == 0 or used > group:
                    raise self.error(f"invalid CPU stride {item}: USED/GROUP needs 0 < USED <= GROUP", column)
        return "CPUS{" + ",".join(items) + "}"

    # ---- numbers ----------------------------------------------------------------------------

    def number_value(self, pred: Predicate, info: FieldInfo) -> str:
        value = pred.value
        if pred.op == "~":
            raise self.error(f"'~' matches strings, and {pred.field} is a number ({info.describe()})",
                             pred.op_column, hint="numbers take ==, !=, <, <=, >, >= and & (bit test)")
        if pred.op not in _NUMERIC_OPS:  # pragma: no cover - the grammar lexes only known operators
            raise self.error(f"unknown operator {pred.op!r}", pred.op_column)
        if isinstance(value, CpuList):
            return self.cpus(pred)
        if isinstance(value, StringValue):
            raise self.error(f"{pred.field} is a number ({info.describe()}), not a string", value.column,
                             hint="write a number (42, 0x2a) or, for enums and flags, a name without quotes")
        numbers = [self.term_number(term, info) for term in value.terms]
        if len(numbers) == 1:
            number = numbers[0]
        else:
            combined = 0
            for term, num in zip(value.terms, numbers):
                if num.value < 0:
                    raise self.error(f"cannot or a negative value ({term.text}) into flags", term.column)
                combined |= num.value
            number = _Number(combined, "hex")
        return self.fit(number, info, value)

    def fit(self, number: _Number, info: FieldInfo, value: Terms) -> str:
        bits = 8 * info.size
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if info.signed else (0, (1 << bits) - 1)
        n = number.value
        if info.signed and number.style != "dec" and high < n < (1 << bits):
            n -= 1 << bits  # a bit pattern (0xffffffff on an int): the kernel wants the signed value
            number = _Number(n, "dec")
        if not low <= n <= high:
            written = "|".join(term.text for term in value.terms)
            shown = written if str(n) == written else f"{written} (= {n})"
            raise self.error(f"{shown} is out of range for {info.name} ({info.describe()}: {low}..{high})",
                             value.column, hint=self.range_hint(info, n))
        if number.style == "hex":
            return f"0x{n:x}" if n >= 0 else f"-0x{-n:x}"
        if number.style == "oct":
            return f"0{n:o}" if n > 0 else ("-0" + f"{-n:o}" if n < 0 else "0")
        return str(n)

    @staticmethod
    def range_hint(info: FieldInfo, n: int) -> str:
        if n < 0 and not info.signed:
            c_type = info.type.replace("const ", "").strip()
            natural = {"int": 4, "short": 2, "long": 8, "s32": 4, "s16": 2, "s8": 1, "pid_t": 4,
                       "signed char": 1}.get(c_type)
            if natural and natural < info.size and n >= -(1 << (8 * natural - 1)):
                pattern = n & ((1 << (8 * natural)) - 1)
                return (f"the kernel records {info.name} ({c_type}) as an unsigned {info.size}-byte value, "
                        f"so a negative {c_type} usually appears as 0x{pattern:x}")
            return f"{info.name} is unsigned in the event's format"
        return ""

    def term_number(self, term: Term, info: FieldInfo) -> _Number:
        text = term.text
        if text[:1].isdigit() or text[:1] == "-":
            if _IPV4_RE.fullmatch(text):
                return self.ipv4(term, info)
            return self.literal(term)
        return self.symbol(term, info)

    def literal(self, term: Term) -> _Number:
        text = term.text
        m = _INT_RE.fullmatch(text)
        if m:
            sign = -1 if m.group("neg") else 1
            if m.group("hex") is not None:
                return _Number(sign * int(m.group("hex"), 16), "hex")
            if m.group("oct") is not None:
                return _Number(sign * int(m.group("oct"), 8), "oct")
            return _Number(sign * int(m.group("dec")), "dec")
        m = None if re.match(r"-?0[xX]", text) else _UNIT_RE.fullmatch(text)
        if m:
            unit = m.group("unit")
            unit_column = term.column + m.start("unit")
            if unit in _AMBIGUOUS_UNITS:
                number = m.group("number")
                raise self.error(f"ambiguous unit {unit!r}", unit_column,
                                 hint=f"write {number}{unit[0].upper()}iB for {number}×1024 bytes, "
                                      f"or the number of bytes itself")
            if unit not in _UNITS:
                raise self.error(f"invalid number {text}: {unit!r} is not a size unit", unit_column,
                                 hint="numbers are decimal, 0x hex or 0 octal; sizes may end in "
                                      "k/K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024) or B")
            from fractions import Fraction  # (exact sizes: only a size with a unit needs it)

            exact = Fraction(m.group("number")) * (1024 ** _UNITS[unit])
            if exact.denominator != 1:
                raise self.error(f"{text} is not a whole number ({float(exact):g})", term.column)
            return _Number(-int(exact) if m.group("neg") else int(exact), "dec")
        if re.fullmatch(r"-?0[0-9]+", text):
            bad = next(i for i, ch in enumerate(text) if ch in "89")
            raise self.error(f"{text} is not a valid number: a leading 0 means octal, and "
                             f"{text[bad]} is not an octal digit", term.column + bad,
                             hint=f"write {int(text)} without the leading 0")
        if re.fullmatch(r"-?[0-9]+\.[0-9]+", text):
            raise self.error(f"{text} is not an integer", term.column,
                             hint="filters compare integers; units such as 1.5M are whole numbers of bytes")
        return self.bad_number(term)

    def bad_number(self, term: Term) -> _Number:
        text = term.text
        body = text.lstrip("-")
        prefix = len(text) - len(body)
        if body[:2].lower() == "0x":
            bad = next((i for i, ch in enumerate(body[2:], 2) if ch not in "0123456789abcdefABCDEF"), 2)
            raise self.error(f"invalid hexadecimal number {text}", term.column + prefix + bad)
        bad = next((i for i, ch in enumerate(body) if not ch.isdigit()), 0)
        raise self.error(f"invalid number {text}", term.column + prefix + bad,
                         hint="numbers are decimal, 0x hex or 0 octal, optionally with a size unit (4k, 2MiB)")

    def ipv4(self, term: Term, info: FieldInfo) -> _Number:
        field = info.field
        if field is None or not field.is_array or field.size != 4:
            raise self.error(f"an IPv4 address needs a 4-byte address field; {info.name} is {info.describe()}",
                             term.column)
        parts = [int(part) for part in term.text.split(".")]
        if any(part > 255 for part in parts):
            raise self.error(f"{term.text} is not an IPv4 address", term.column)
        return _Number(int.from_bytes(bytes(parts), sys.byteorder), "hex")

    def symbol(self, term: Term, info: FieldInfo) -> _Number:
        name = term.text
        element = info.field.element_type if info.field is not None else info.type
        if element in ("bool", "_Bool") and name in ("true", "false"):
            return _Number(int(name == "true"), "dec")
        names = self.names(info.name)
        if name in names:
            value = names[name]
            if value < 0 and not info.signed:
                value &= (1 << (8 * info.size)) - 1
            return _Number(value, "sym")
        if self.fmt.field(name) is not None or name in GENERIC_FIELDS:
            raise self.error(f"{name} is a field: the kernel compares a field only with a constant",
                             term.column)
        if names:
            shown = sorted(names, key=names.__getitem__)
            hint = (did_you_mean(name, names)
                    or f"{info.name} knows {', '.join(shown[:12])}{', ...' if len(shown) > 12 else ''}")
        else:
            hint = (f"{info.name} has no symbolic names (they come from the enum type of a probed "
                    "variable or from the event's print format); write a number")
        raise self.error(f"{name!r} is neither a number nor a known name for {info.name} ({info.describe()})",
                         term.column, hint=hint)

    def names(self, field: str) -> dict[str, int]:
        cached = self._names_cache.get(field)
        if cached is not None:
            return cached
        names: dict[str, int] = {}
        if self._symbols is None:
            self._symbols = print_fmt_symbols(self.fmt.print_fmt)
        names.update(self._symbols.get(field, {}))
        if self.enums is not None:
            names.update(self.enums(field) or {})
        self._names_cache[field] = names
        return names
