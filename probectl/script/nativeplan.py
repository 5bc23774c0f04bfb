"""Plans for the native formatter: each :class:`~.plan.Plan` (a ``%`` template and its slots, or the
cells of a CSV row) compiled into the operations of ``native/textfmt.c``, which then formats
whole batches in C, straight from the decoder's columns, with the same bytes as the Python path.

An operation is a literal (bytes) or a value slot: where the value comes from (a field, an element
of an array field, or a header value: comm, thread group id, tid, cpu, time), its conversion (the
``native`` tag of the slot's Python conversion, see :func:`.printfmt.native`) and the ``%`` spec
it is printed with. A plan this module cannot express (a conversion without a tag, a ``%c`` of a
header...) is printed by the Python row path one event at a time, so every plan prints the same.

The names a plan needs are asked for when an event first needs them: the plan of an event id,
the name and thread group of a thread, the symbol of an address (see :func:`native_formatter`).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from .. import _native
from ..formats import EventFormat
from ..ringbuf import KIND_BYTES, KIND_INT, KIND_INT_ARRAY, KIND_STR, ComposedValues, format_specs
from .printfmt import PY_CONV, Slot
from .stacks import Record

if TYPE_CHECKING:
    from .plan import Formatter, Plan

Op = Union[bytes, tuple]

_HEADER = {
    "comm": _native.TF_SRC_COMM,
    "pid": _native.TF_SRC_TGID,
    "tid": _native.TF_SRC_TID,
    "nspid": _native.TF_SRC_NSPID,
    "cpu": _native.TF_SRC_CPU,
    "secs": _native.TF_SRC_SECS,
    "usecs": _native.TF_SRC_USECS,
    "nsecs": _native.TF_SRC_NSECS,
}
_FLAGS = {"-": _native.TF_F_LEFT, "+": _native.TF_F_PLUS, " ": _native.TF_F_SPACE, "#": _native.TF_F_ALT,
          "0": _native.TF_F_ZERO}
_SPEC = re.compile(r"%([-+ #0]*)(\d*)(?:\.(\d+))?([sdiouxXc])")
_KIND_COMM = -1  # (the kind of the comm header value: text that needs no decoding)

# string conversions: tag -> (native conversion, the field kinds it takes)
_TEXT_CONVS = {
    "str": (_native.TF_CONV_STR, (KIND_STR, _KIND_COMM)),
    "json_str": (_native.TF_CONV_JSON_STR, (KIND_STR, _KIND_COMM)),
    "hex_list": (_native.TF_CONV_HEX_LIST, (KIND_INT_ARRAY,)),
    "dec_list": (_native.TF_CONV_DEC_LIST, (KIND_INT_ARRAY,)),
    "json_list": (_native.TF_CONV_JSON_LIST, (KIND_INT_ARRAY,)),
    "hex_bytes": (_native.TF_CONV_HEX_BYTES, (KIND_BYTES,)),
    "json_bytes": (_native.TF_CONV_JSON_BYTES, (KIND_BYTES,)),
}


class NotNative(Exception):
    """A plan (or a part of it) the native formatter cannot print exactly like Python."""


class _Spec:
    """A ``%`` conversion: flags, width, precision (-1: none) and letter (d o x X s)."""

    __slots__ = ("flags", "width", "prec", "letter")

    def __init__(self, token: str):
        m = _SPEC.fullmatch(token)
        if m is None or m.group(4) == "c":
            raise NotNative(token)
        self.flags = 0
        for ch in m.group(1):
            self.flags |= _FLAGS[ch]
        self.width = int(m.group(2) or 0)
        self.prec = int(m.group(3)) if m.group(3) is not None else -1
        if self.width > _native.TF_MAX_WIDTH or self.prec > _native.TF_MAX_WIDTH:
            raise NotNative(token)
        self.letter = "d" if m.group(4) in "iu" else m.group(4)


def _op(src: int, conv: int, spec: _Spec, field: int = 0, index: int = 0,
        cast: Optional[tuple[int, bool]] = None) -> tuple:
    size, signed = cast or (0, False)
    return (src, conv, spec.flags, ord(spec.letter), size, int(signed), spec.width, spec.prec, field, index)


def _mark(src: int) -> tuple:
    return (src, 0, 0, ord("s"), 0, 0, 0, -1, 0, 0)


def _quoted(op: Op) -> list[Op]:
    """``op`` as a quoted cell of the CSV writer."""
    return [_mark(_native.TF_SRC_CELL_BEGIN), op, _mark(_native.TF_SRC_CELL_END)]


def _encode(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise NotNative("a literal that is not UTF-8") from None


def _tag(convert: Optional[Callable[..., Any]]) -> Optional[tuple]:
    if convert is None:
        return None
    tag = getattr(convert, "native", None)
    if tag is None:
        raise NotNative(f"conversion {convert!r}")
    return tag


def csv_text(text: str) -> str:
    """One cell as Python's csv writer (QUOTE_MINIMAL, ``\\n`` lines) writes it."""
    if "," in text or '"' in text or "\n" in text:
        return '"' + text.replace('"', '""') + '"'
    return text


class PlanCompiler:
    """Compiles the plans of one formatter (text and JSON templates, CSV rows)."""

    def __init__(self, formatter: "Formatter"):
        self.formatter = formatter
        self._kinds: dict[int, list[int]] = {}

    def ops(self, plan: "Plan") -> list[Op]:
        """The operations of ``plan``; raises :class:`NotNative` when they cannot be exact."""
        ops = self._csv(plan) if plan.template is None else self._template(plan)
        out: list[Op] = []
        for op in ops:  # (adjacent literals joined)
            if isinstance(op, bytes) and out and isinstance(out[-1], bytes):
                out[-1] += op
            elif op != b"":
                out.append(op)
        return out

    def _kind(self, fmt: Optional[EventFormat], index: int) -> int:
        if fmt is None:
            raise NotNative("a field slot of an event without a format")
        kinds = self._kinds.get(fmt.id)
        if kinds is None:
            kinds = self._kinds[fmt.id] = [s[3] for s in format_specs(fmt, self.formatter.long_size)]
        return kinds[index]

    # -- templates (text, JSON)
    def _template(self, plan: "Plan") -> list[Op]:
        template = plan.template
        assert template is not None
        slots = iter(plan.slots)
        ops: list[Op] = []
        pos = 0
        for m in PY_CONV.finditer(template):
            ops.append(_encode(template[pos:m.start()]))
            pos = m.end()
            if m.group() == "%%":
                ops.append(b"%")
                continue
            slot = next(slots, None)
            if slot is None:
                raise NotNative("more conversions than slots")
            ops.append(self._slot(plan, slot, m.group()))
        ops.append(_encode(template[pos:]))
        if next(slots, None) is not None:
            raise NotNative("more slots than conversions")
        return ops

    def _slot(self, plan: "Plan", slot: Slot, token: str) -> Op:
        """One ``%`` conversion of a template and the slot it prints."""
        spec = _Spec(token)
        src = slot.source
        if isinstance(src, tuple):  # a constant: formatted now
            value = src[1]
            return _encode(token % ((slot.convert(value) if slot.convert else value),))
        if slot.with_pid:
            if slot.convert != self.formatter.sym:
                raise NotNative("a conversion with the thread group")
            code, field, kind = self._source(plan, src)
            if kind != KIND_INT:
                raise NotNative("a symbol of a value that is not an integer")
            return self._string(_op(code, _native.TF_CONV_SYM, spec, field), spec)
        return self._convert(plan, src, _tag(slot.convert), spec)

    def _source(self, plan: "Plan", src: Any) -> tuple[int, int, int]:
        """(native source, field index, value kind) of a slot's source."""
        if isinstance(src, str):
            if src not in _HEADER:
                raise NotNative(f"header value {src!r}")
            return _HEADER[src], 0, _KIND_COMM if src == "comm" else KIND_INT
        if plan.fmt is not None and plan.fmt.event_fields[src].is_composed:
            raise NotNative("a composed field (an enum's variant, a slice of structs), made from several")
        return _native.TF_SRC_FIELD, src, self._kind(plan.fmt, src)

    def _convert(self, plan: "Plan", src: Any, tag: Optional[tuple], spec: _Spec) -> Op:
        code, field, kind = self._source(plan, src)
        if tag is None:
            if kind == KIND_INT:
                return _op(code, _native.TF_CONV_INT, spec, field)
            if kind in (KIND_STR, _KIND_COMM):
                return self._string(_op(code, _native.TF_CONV_RAW, spec, field), spec)
            raise NotNative("an array or bytes printed as a Python object")
        name = tag[0]
        if name in _TEXT_CONVS:
            conv, kinds = _TEXT_CONVS[name]
            if kind not in kinds:
                raise NotNative(f"{name} of a field of kind {kind}")
            return self._string(_op(code, conv, spec, field), spec)
        cast: Optional[tuple[int, bool]] = None
        index: Optional[int] = None
        if name == "then":  # an array element, then a cast or a character
            first, then = _tag(tag[1]), _tag(tag[2])
            if first is None or first[0] != "elem" or then is None:
                raise NotNative(f"conversion {tag!r}")
            index, name, tag = first[1], then[0], then
        elif name == "elem":
            index = tag[1]
            name = "int"
        if index is not None:
            if kind != KIND_INT_ARRAY or code != _native.TF_SRC_FIELD:
                raise NotNative("an element of a field that is not an integer array")
            code, kind = _native.TF_SRC_ELEM, KIND_INT
        if kind != KIND_INT:
            raise NotNative(f"{name} of a value that is not an integer")
        if name == "fit":
            cast = (tag[1], tag[2])
        elif name == "char":
            return self._string(_op(code, _native.TF_CONV_CHAR, spec, field, index or 0), spec)
        elif name == "hex":  # f"{value:x}", printed by "%s"
            if spec.letter != "s" or spec.flags or spec.width or spec.prec >= 0:
                raise NotNative("hex in a wider spec")
            spec = _Spec("%x")
        elif name != "int":
            raise NotNative(f"conversion {tag!r}")
        return _op(code, _native.TF_CONV_INT, spec, field, index or 0, cast)

    @staticmethod
    def _string(op: tuple, spec: _Spec) -> tuple:
        if spec.letter != "s":
            raise NotNative("text in a number conversion")
        return op

    # -- CSV rows
    def _csv(self, plan: "Plan") -> list[Op]:
        ops: list[Op] = []
        for k, slot in enumerate(plan.slots):
            if k:
                ops.append(b",")
            ops += self._cell(plan, slot)
        if len(plan.slots) == 1:
            ops.append(_mark(_native.TF_SRC_EMPTY_QUOTE))  # (the writer's "" for a lone empty cell)
        ops.append(b"\n")
        return ops

    def _cell(self, plan: "Plan", slot: Slot) -> list[Op]:
        src = slot.source
        if isinstance(src, tuple):
            value = src[1] if slot.convert is None else slot.convert(src[1])
            if value is None:
                value = ""
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise NotNative(f"constant {value!r}")
            return [_encode(csv_text(str(value)))]
        if src == "time9":
            return [_op(_native.TF_SRC_SECS, _native.TF_CONV_INT, _Spec("%d")), b".",
                    _op(_native.TF_SRC_NSECS, _native.TF_CONV_INT, _Spec("%09d"))]
        if slot.with_pid:
            return _quoted(self._slot(plan, slot, "%s"))
        tag = _tag(slot.convert)
        if tag is None or tag[0] == "csv_plain":
            op = self._convert(plan, src, None, _Spec("%s"))
        elif tag[0] == "csv_cell":
            return self._spec_cell(plan, src, tag[1], tag[2])
        else:
            op = self._convert(plan, src, tag, _Spec("%s"))
        if op[1] == _native.TF_CONV_INT:
            return [op]  # (digits need no quotes)
        return _quoted(op)

    def _spec_cell(self, plan: "Plan", src: Any, spec: str, convert: Optional[Callable[..., Any]]) -> list[Op]:
        """A cell that is ``spec % convert(value)`` ("" for a missing value)."""
        convs = [m for m in PY_CONV.finditer(spec)]
        if len(convs) != 1 or convs[0].group() == "%%":
            raise NotNative(f"cell spec {spec!r}")
        m = convs[0]
        before, after = spec[:m.start()], spec[m.end():]
        if "%" in before + after:
            raise NotNative(f"cell spec {spec!r}")
        op = self._convert(plan, src, _tag(convert), _Spec(m.group()))
        if isinstance(op, tuple) and op[0] in (_native.TF_SRC_FIELD, _native.TF_SRC_ELEM):  # (missing: an empty cell)
            op = (op[0], op[1], op[2] | _native.TF_F_EMPTY_CELL) + op[3:]
        return [_mark(_native.TF_SRC_CELL_BEGIN), _encode(before), op, _encode(after),
                _mark(_native.TF_SRC_CELL_END)]


def native_formatter(formatter: "Formatter") -> _native.TextFormatter:
    """A native formatter that prints like ``formatter``: its plans, compiled when an event id
    first occurs, and its names of threads and symbols, asked for when first needed."""
    compiler = PlanCompiler(formatter)
    comms, tgids, nspids = formatter.comms, formatter.tgids, formatter.nspids

    def plan(event_id: int) -> Any:
        p = formatter.plan(event_id)
        if p.skip:
            return None
        try:
            return compiler.ops(p)
        except NotNative:
            return True  # (each event through line())

    def thread(tid: int) -> tuple[bytes, int, int]:
        return comms[tid].encode(errors="surrogateescape"), tgids[tid], nspids[tid]

    def symbol(tgid: int, addr: int) -> bytes:
        return formatter.sym(tgid, addr).encode(errors="surrogateescape")

    composed: dict[int, Optional[ComposedValues]] = {}

    def line(row: tuple) -> str:
        if row[2] not in composed:
            fmt = formatter.plan(row[2]).fmt
            composed[row[2]] = ComposedValues.of(fmt) if fmt is not None else None
        fmt_composed = composed[row[2]]
        if fmt_composed is not None:  # (the decoder's row: a composed field's number, its parts after)
            row = row[:6] + (fmt_composed.row(row[6]),) + row[7:]
        item = formatter.format_record(Record(row))
        return "" if item is None else formatter.emit([item])

    return _native.TextFormatter(plan, thread, symbol, line)
