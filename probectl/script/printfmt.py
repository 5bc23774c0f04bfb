"""The kernel's print formats as line templates: a ``%`` template and, per slot, the field it reads
and the conversion printf would apply, so that a column of values is formatted at once; and the
``name=value`` rendering of fields where the print format cannot be used."""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Optional

from ..dataclass import dataclass
from ..formats import EventFormat, Field
from ..ringbuf import KIND_INT, KIND_INT_ARRAY, KIND_STR, KIND_STR_ARRAY, field_spec

_CONV_RE = re.compile(r"%(?P<flags>[-+ #0]*)(?P<width>\d+)?(?:\.(?P<prec>\d+))?"
                      r"(?P<len>hh|h|ll|l|L|z|j|t)?(?P<conv>[diouxXcsp%])")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r", "0": "\0"}


def split_print_fmt(text: str) -> Optional[tuple[str, list[str]]]:
    """``"a=%d s=\\"%s\\"", REC->a, __get_str(s)`` → ('a=%d s="%s"', ['REC->a', '__get_str(s)']).

    Adjacent string literals are joined, as C does. None when the text is not of that shape.
    """
    i, n = 0, len(text)
    parts: list[str] = []
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n or text[i] != '"':
            break
        i += 1
        buf = []
        while i < n and text[i] != '"':
            if text[i] == "\\" and i + 1 < n:
                buf.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                i += 2
            else:
                buf.append(text[i])
                i += 1
        if i >= n:
            return None
        i += 1
        parts.append("".join(buf))
    if not parts:
        return None
    rest = text[i:].strip()
    if not rest:
        return "".join(parts), []
    if not rest.startswith(","):
        return None
    args: list[str] = []
    cur: list[str] = []
    depth, quote = 0, False
    for ch in rest[1:]:
        if ch == '"':
            quote = not quote
        if not quote and ch in "([":
            depth += 1
        elif not quote and ch in ")]":
            depth -= 1
        if ch == "," and depth == 0 and not quote:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    args.append("".join(cur).strip())
    return "".join(parts), args


_ARG_FIELD = re.compile(r"REC->(\w+)(?:\[(\d+)\])?$")
PY_CONV = re.compile(r"%%|%[-+ #0]*\d*(?:\.\d+)?[sdiouxXc]")
_ARG_STR = re.compile(r"__get_str\((\w+)\)$")


def native(*what: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Tag a value conversion with what the native formatter does instead (a tuple such as
    ``("fit", 4, True)``; :mod:`.nativeplan` reads it), so each conversion is written once, here."""
    def tag(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.native = what  # type: ignore[attr-defined]
        return fn
    return tag


def _fit(value: Optional[int], size: int, signed: bool) -> Optional[int]:
    """``value`` as a C integer of ``size`` bytes and that signedness (what a printf cast does)."""
    if value is None:
        return None
    value &= (1 << (8 * size)) - 1
    if signed and value >> (8 * size - 1):
        value -= 1 << (8 * size)
    return value


def _fitter(size: int, signed: bool) -> Callable[[Any], Any]:
    """The conversion of a value to a C integer of ``size`` bytes and that signedness."""
    return native("fit", size, signed)(lambda v: _fit(v, size, signed))


@native("char")
def _char(value: Optional[int]) -> str:
    """``%c``: the character of the value's low byte."""
    return chr((value or 0) & 0xFF)


def _element(index: int) -> Callable[[Any], Any]:
    @native("elem", index)
    def get(values: Optional[tuple]) -> Any:
        return values[index] if values is not None and index < len(values) else 0
    return get


def _compose(first: Callable[[Any], Any], then: Optional[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    if then is None:
        return first
    return native("then", first, then)(lambda v: then(first(v)))


_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\x7f"\\]')
_TEXT_ESCAPES = {**{c: f"\\x{c:02x}" for c in range(32)}, 0x7F: "\\x7f", ord('"'): '\\"', ord("\\"): "\\\\",
                 ord("\n"): "\\n", ord("\t"): "\\t"}


def convert_column(col: Iterable[Any], convert: Callable[[Any], Any]) -> Iterable[Any]:
    """``map(convert, col)``, except that a column of strings that need no escaping is kept as it
    is (one regular-expression search over the joined column instead of a call per value)."""
    if convert is escape_text:
        col = col if isinstance(col, list) else list(col)
        try:
            joined = "".join(col)
        except TypeError:  # (None for a string that could not be read)
            return map(escape_text, col)
        return col if _NEEDS_ESCAPE.search(joined) is None else map(escape_text, col)
    return map(convert, col)


@native("str")
def escape_text(value: Optional[str]) -> str:
    """A string for a quoted text value: as it is, unless it holds quotes, backslashes or controls."""
    if value is None:
        return ""
    if _NEEDS_ESCAPE.search(value) is None:
        return value
    return value.translate(_TEXT_ESCAPES)


def literal(text: str) -> str:
    return text.replace("%", "%%")


@dataclass
class Slot:
    """One ``%`` slot of a line template: where its value comes from and how it is converted.

    ``source`` is an index into the event's fields (``values``), a header key ('comm', 'tid',
    'secs'...), or ``("const", value)``. With ``with_pid`` the conversion also gets the event's
    thread group id (for symbols of user addresses).
    """

    source: Any
    convert: Optional[Callable[..., Any]] = None
    with_pid: bool = False
    spec: str = "%s"  # the conversion in a text line, without quotes ("0x%x", "%d", "%s")


def _print_fmt_slots(fmt: EventFormat, text: str, args: list[str], long_size: int) -> Optional[tuple[str, list[Slot]]]:
    """A template and its slots from a simple print format (every argument a field or one element
    of an array field, every conversion one Python's ``%`` can do); None otherwise."""
    fields = fmt.event_fields
    names = {f.name: i for i, f in enumerate(fields)}
    out: list[str] = []
    slots: list[Slot] = []
    pos = 0
    pending = list(args)
    for m in _CONV_RE.finditer(text):
        out.append(literal(text[pos:m.start()]))
        pos = m.end()
        conv = m.group("conv")
        if conv == "%":
            out.append("%%")
            continue
        if conv == "p" or not pending:
            return None
        arg = pending.pop(0)
        spec = "%" + (m.group("flags") or "") + (m.group("width") or "")
        ms = _ARG_STR.match(arg)
        if ms:
            if conv != "s" or ms.group(1) not in names:
                return None
            slots.append(Slot(names[ms.group(1)], escape_text, spec=spec + "s"))
            out.append(spec + "s")
            continue
        mf = _ARG_FIELD.match(arg)
        if not mf or mf.group(1) not in names:
            return None
        j = names[mf.group(1)]
        f = fields[j]
        if f.is_composed:  # (an enum's variant, a slice of structs: text)
            return None
        kind = field_spec(f, long_size)[3]
        if mf.group(2) is not None:
            if kind != KIND_INT_ARRAY or conv == "s":
                return None
            get: Optional[Callable[[Any], Any]] = _element(int(mf.group(2)))
            value_signed = f.signed
        elif kind == KIND_STR and conv == "s":
            slots.append(Slot(j, escape_text, spec=spec + "s"))
            out.append(spec + "s")
            continue
        elif kind != KIND_INT or conv == "s":
            return None
        else:
            get, value_signed = None, f.signed
        size = {"hh": 1, "h": 2, None: 4, "l": long_size, "z": long_size, "t": long_size,
                "ll": 8, "L": 8, "j": 8}[m.group("len")]
        if conv == "c":
            cast: Optional[Callable[[Any], Any]] = _char
            spec += "s"
        else:
            signed = conv in "di"
            # the cast printf applies, when it can change the decoded value
            needs = (value_signed != signed) or f.size > size or get is not None
            cast = _fitter(size, signed) if needs else None
            if m.group("prec"):
                spec += "." + m.group("prec")
            spec += "d" if conv in "diu" else conv
        out.append(spec)
        prefix = "0x" if text[:m.start()].endswith("0x") else ""
        slots.append(Slot(j, _compose(get, cast) if get else cast, spec=prefix + spec))
    if pending:
        return None
    out.append(literal(text[pos:]))
    return "".join(out), slots


def probe_ip(fmt: Optional[EventFormat]) -> Optional[tuple[str, ...]]:
    """The ip fields of a kprobe/uprobe event: (__probe_ip,) or (__probe_func, __probe_ret_ip)."""
    if fmt is None:
        return None
    names = [f.name for f in fmt.event_fields[:2]]
    if names[:1] == ["__probe_ip"]:
        return ("__probe_ip",)
    if names == ["__probe_func", "__probe_ret_ip"]:
        return ("__probe_func", "__probe_ret_ip")
    return None


_CAST_FIELD = re.compile(r"(?:\([^()]*\)\s*)?REC->(\w+)$")


def symbol_fields(fmt: EventFormat) -> list[str]:
    """The fields the print format prints as kernel symbols (``%pS``, ``%ps``, ``%pB``: code
    addresses, such as kmem:kmalloc's ``call_site`` or ftrace:print's ``ip``), in order."""
    split = split_print_fmt(fmt.print_fmt)
    if split is None:
        return []
    text, args = split
    out = []
    pending = list(args)
    for m in _CONV_RE.finditer(text):
        if m.group("conv") == "%":
            continue
        if not pending:
            break
        arg = pending.pop(0).strip()
        mf = _CAST_FIELD.match(arg)
        if m.group("conv") == "p" and text[m.end():m.end() + 1] in ("s", "S", "B") and mf \
                and fmt.field(mf.group(1)) is not None:
            out.append(mf.group(1))
    return out


_ADDRESS_NAMES = re.compile(r"(ip|call_site|.*_ip|.*addr.*|caller)$")


def _is_pointer(f: Field) -> bool:
    """Pointers, and longs named like code or data addresses (ip, call_site, *_ip, *addr*):
    printed in hex."""
    if f.element_type.replace(" ", "").endswith("*"):
        return True
    return f.size in (4, 8) and not f.signed and bool(_ADDRESS_NAMES.fullmatch(f.name))


def _conversion_hints(fmt: EventFormat) -> dict[str, tuple[str, str]]:
    """field → (conversion letter, text before it) from the print format, for ``REC->field`` and
    ``REC->field[i]`` arguments (the others are left out)."""
    split = split_print_fmt(fmt.print_fmt)
    if split is None:
        return {}
    text, args = split
    hints: dict[str, tuple[str, str]] = {}
    pending = list(args)
    pos = 0
    for m in _CONV_RE.finditer(text):
        before, pos = text[pos:m.start()], m.end()
        if m.group("conv") == "%":
            continue
        if not pending:
            break
        mf = _ARG_FIELD.match(pending.pop(0))
        if mf:
            hints.setdefault(mf.group(1), (m.group("conv"), before))
    return hints


def _value_text(f: Field, long_size: int, hint: Optional[tuple[str, str]] = None) -> tuple[str, Optional[Callable[[Any], Any]]]:
    """How a field prints as ``name=value`` when the whole print format cannot be used: by the
    print format's conversion for it when there is one (``hint``), else by its type."""
    if f.is_composed:  # an enum's variant, a slice of structs: text (probectl.formats)
        return "%s", None
    kind = field_spec(f, long_size)[3]
    conv, before = hint if hint else ("", "")
    if kind == KIND_STR:
        return '"%s"', escape_text
    if kind == KIND_STR_ARRAY:
        return "%s", str_list
    if kind == KIND_INT:
        if conv in ("x", "X") or (not conv and _is_pointer(f)):
            return "0x%x", _fitter(f.size, False) if f.signed else None
        if conv == "c":
            return "'%s'", _char
        if conv == "u" and f.signed:
            return "%d", _fitter(f.size, False)
        return "%d", None
    if kind == KIND_INT_ARRAY:
        return "{%s}", _hex_list if conv in ("x", "X") or (not conv and _is_pointer(f)) else _dec_list
    return "%s", _hex_bytes


def whole_value_slot(fmt: EventFormat, j: int, long_size: int = 8) -> Slot:
    """The slot of field ``j`` as one value, the way ``name=value`` prints it (an array whole, as
    ``{1,2,3}``, with the print format's conversion), for a column of its own (CSV), where the
    print format's slots give an array element by element."""
    ips = probe_ip(fmt)
    f = fmt.event_fields[j]
    conv, convert = _value_text(f, long_size, _conversion_hints(fmt).get(f.name) if ips is not None else None)
    return Slot(j, convert, spec=conv.strip('"\'') or "%s")


def trace_template(fmt: EventFormat, long_size: int = 8) -> tuple[str, list[Slot]]:
    """The ``trace`` part of a text line: the kernel's print format for probe events (without the
    ip prefix, which is the ``ip`` field), ``name=value`` pairs otherwise."""
    ips = probe_ip(fmt)
    hints: dict[str, tuple[str, str]] = {}
    if ips is not None:
        split = split_print_fmt(fmt.print_fmt)
        prefix = "(%lx) " if len(ips) == 1 else "(%lx <- %lx) "
        if split is not None:
            text, args = split
            if (text == prefix.rstrip() or text.startswith(prefix)) and args[:len(ips)] == [f"REC->{n}" for n in ips]:
                got = _print_fmt_slots(fmt, text[len(prefix):], args[len(ips):], long_size)
                if got is not None:
                    return got
        hints = _conversion_hints(fmt)
    parts, slots = [], []
    for j, f in enumerate(fmt.event_fields):
        if ips is not None and f.name in ips:
            continue
        conv, convert = _value_text(f, long_size, hints.get(f.name))
        parts.append(f"{literal(f.name)}={conv}")
        slots.append(Slot(j, convert, spec=conv.strip('"{}\'') or "%s"))
    return " ".join(parts), slots


def str_list(values: Optional[tuple]) -> str:
    """A ``:string[N]`` value as the kernel prints it: ``{"a","b",""}``, ``(fault)`` for a string
    it could not read."""
    if values is None:
        return ""
    return "{" + ",".join("(fault)" if v is None else f'"{escape_text(v)}"' for v in values) + "}"


@native("hex_list")
def _hex_list(values: Optional[tuple]) -> str:
    return "" if values is None else ",".join(map(hex, values))


@native("dec_list")
def _dec_list(values: Optional[tuple]) -> str:
    return "" if values is None else ",".join(map(str, values))


@native("hex_bytes")
def _hex_bytes(value: Optional[bytes]) -> str:
    return "" if value is None else bytes(value).hex()
