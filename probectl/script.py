"""Formatters for recorded events: perf-script-like text, CSV, JSON lines and folded stacks.

The events come from the native decoder in columnar batches (:meth:`EventReader.batches`); a
formatter never makes a Python call per event field on its hot path. Each event format is compiled
once into a :class:`_Plan`: a ``%`` template for a whole output line plus, for each ``%`` slot, the
column it reads and an optional value conversion. A batch is then formatted format by format with
``map(template.__mod__, zip(*columns))`` and the lines of several formats are put back in time order
with one iterator per format (the decoder numbers the rows of a format in event order).

Text lines follow perf script::

    uprobe_target  4242 [001]  1641.301826: probe_uprobe_target:add_ints: (55d5e51cf1a9) a=1 b=-3

Probe events are printed with the kernel's own print format (``0x`` for hex types, strings between
double quotes), with their ``(__probe_ip)`` or ``(__probe_func <- __probe_ret_ip)`` as the ``ip``
field; tracepoints print their fields as ``name=value`` (numbers in decimal, pointers in hex,
strings quoted).

Stacks (``record -g``) are the kernel's ``ftrace:kernel_stack`` and ``ftrace:user_stack`` records,
written right after the event they belong to on the same CPU. They are attached to that event
(:class:`_StackJoiner`) and symbolized from the file: kernel addresses with the kallsyms section,
user addresses with the process maps probectl stores in the file (see
:data:`probectl.record.OPTION_PROC_MAPS`) and the symbol tables of the mapped binaries.
"""
from __future__ import annotations

import bisect
import csv
import fnmatch
import io
import json
import re
from collections import Counter, deque
from dataclasses import dataclass, field
from itertools import compress, repeat
from json.encoder import encode_basestring  # the C version when available
from operator import add, eq, floordiv, mod, mul
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, TextIO

from .errors import DebugInfoError, ProbectlError
from .formats import EventFormat, Field
from .ringbuf import KIND_INT, KIND_INT_ARRAY, KIND_STR, Columns, field_spec

FIELDS = ("comm", "pid", "tid", "cpu", "time", "event", "ip", "sym", "trace")
DEFAULT_FIELDS = ("comm", "tid", "cpu", "time", "event", "ip", "trace")
OUTPUT_FORMATS = ("text", "csv", "json", "folded")
STACK_EVENTS = {("ftrace", "kernel_stack"): "kernel", ("ftrace", "user_stack"): "user"}
UNKNOWN_SYMBOL = "[unknown]"
_NS = 1_000_000_000


def parse_fields(text: str) -> tuple[str, ...]:
    """``-F comm,tid,time`` → ('comm', 'tid', 'time'), checked against :data:`FIELDS`."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in FIELDS]
    if bad or not names:
        raise ProbectlError(f"unknown output field{'s' if len(bad) > 1 else ''}: {', '.join(bad) or '(none)'}",
                            f"choose from {','.join(FIELDS)}")
    return names


# ---- where the names come from ------------------------------------------------------------------


class Source:
    """What formatting needs besides the events: names of processes, thread groups, symbols.

    :class:`TraceSource` answers from a trace.dat file; the ``trace`` command gives a live one.
    """

    def comm(self, tid: int) -> str:
        raise NotImplementedError

    def tgid(self, tid: int) -> int:
        return tid

    def kernel_symbols(self) -> "KernelSymbols":
        return KernelSymbols(b"")

    def user_symbols(self) -> "UserSymbols":
        return UserSymbols({})


class TraceSource(Source):
    """Names from a trace.dat file: saved cmdlines and tgids, kallsyms, probectl's process maps."""

    def __init__(self, trace: Any):
        from .record import decode_proc_maps, OPTION_PROC_MAPS

        self.trace = trace
        self._ksyms: Optional[KernelSymbols] = None
        self._usyms: Optional[UserSymbols] = None
        self._maps_option = [data for oid, data in trace.options if oid == OPTION_PROC_MAPS]
        self._decode_maps = decode_proc_maps

    def comm(self, tid: int) -> str:
        return self.trace.comm(tid)

    def tgid(self, tid: int) -> int:
        return self.trace.tgids.get(tid, tid)

    def kernel_symbols(self) -> "KernelSymbols":
        if self._ksyms is None:
            self._ksyms = KernelSymbols(self.trace.kallsyms)
        return self._ksyms

    def user_symbols(self) -> "UserSymbols":
        if self._usyms is None:
            maps: dict[int, list[Mapping]] = {}
            for data in self._maps_option:
                maps.update(self._decode_maps(data))
            self._usyms = UserSymbols(maps)
        return self._usyms


class _Cache(dict):
    """A dict that fills itself: ``cache[key]`` computes ``fn(key)`` once (C-speed hits in ``map``)."""

    def __init__(self, fn: Callable[[Any], Any]):
        super().__init__()
        self.fn = fn

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.fn(key)
        return value


# ---- symbols ------------------------------------------------------------------------------------


class KernelSymbols:
    """Kernel text symbols from a kallsyms text (the file's copy), looked up by address."""

    def __init__(self, kallsyms: bytes):
        self._text = kallsyms
        self._addrs: Optional[list[int]] = None
        self._names: list[str] = []

    def _load(self) -> None:
        pairs = []
        for line in self._text.split(b"\n"):
            parts = line.split()
            if len(parts) < 3 or parts[1] not in (b"t", b"T", b"w", b"W"):
                continue
            try:
                addr = int(parts[0], 16)
            except ValueError:
                continue
            name = parts[2].decode(errors="replace")
            if len(parts) > 3:
                name += " " + parts[3].decode(errors="replace")
            pairs.append((addr, name))
        pairs.sort()
        self._addrs = [a for a, _ in pairs]
        self._names = [n for _, n in pairs]

    def lookup(self, addr: int) -> Optional[tuple[str, int]]:
        """(name, offset) of the symbol at or before ``addr``, or None."""
        if self._addrs is None:
            self._load()
        assert self._addrs is not None
        i = bisect.bisect_right(self._addrs, addr) - 1
        if i < 0 or not self._addrs[i]:
            return None
        return self._names[i], addr - self._addrs[i]


@dataclass(frozen=True)
class Mapping:
    """One line of /proc/PID/maps: ``start``..``end`` maps ``path`` from file ``offset``."""

    start: int
    end: int
    offset: int
    path: str
    perms: str = "r-xp"


class UserSymbols:
    """User addresses of a process → function names, through its maps and the mapped ELF files."""

    def __init__(self, maps: dict[int, list[Mapping]]):
        self.maps = {tgid: sorted(ms, key=lambda m: m.start) for tgid, ms in maps.items()}
        self._starts = {tgid: [m.start for m in ms] for tgid, ms in self.maps.items()}
        self._elves: dict[str, Any] = {}

    def mapping(self, tgid: int, addr: int) -> Optional[Mapping]:
        starts = self._starts.get(tgid)
        if not starts:
            return None
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0:
            m = self.maps[tgid][i]
            if m.start <= addr < m.end:
                return m
        return None

    def _elf(self, path: str) -> Any:
        if path not in self._elves:
            from .debuginfo.elf import ElfFile

            try:
                self._elves[path] = ElfFile(path) if path.startswith("/") else None
            except (ProbectlError, OSError):
                self._elves[path] = None
        return self._elves[path]

    def lookup(self, tgid: int, addr: int) -> Optional[tuple[str, int, str]]:
        """(function, offset, path) for ``addr`` in process ``tgid``; (None-named) when unknown."""
        m = self.mapping(tgid, addr)
        if m is None:
            return None
        if m.path.startswith("["):  # [vdso], [uprobes] (a uretprobe's trampoline)
            return m.path, addr - m.start, m.path
        elf = self._elf(m.path)
        if elf is None:
            return None
        try:
            vaddr = elf.offset_to_vaddr(addr - m.start + m.offset)
            sym = elf.symbol_at(vaddr)
        except (DebugInfoError, ProbectlError, OSError, ValueError):
            return None
        if sym is None:
            return None
        return sym.name, vaddr - sym.value, m.path


class Symbolizer:
    """Cached address → name for both spaces (``tgid`` None or 0 for the kernel)."""

    def __init__(self, source: Source):
        self.source = source
        self._cache: dict[tuple[int, int], tuple[str, int, str]] = {}

    def resolve(self, tgid: int, addr: int, kernel: bool) -> tuple[str, int, str]:
        """(name, offset, dso); name is ``[unknown]`` when nothing knows the address."""
        key = (0 if kernel else tgid, addr)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if kernel:
            found = self.source.kernel_symbols().lookup(addr)
            out = (found[0], found[1], "[kernel.kallsyms]") if found else (UNKNOWN_SYMBOL, 0, "[kernel.kallsyms]")
        else:
            ufound = self.source.user_symbols().lookup(tgid, addr)
            if ufound:
                out = ufound
            else:
                m = self.source.user_symbols().mapping(tgid, addr)
                out = (UNKNOWN_SYMBOL, 0, m.path if m else UNKNOWN_SYMBOL)
        self._cache[key] = out
        return out

    def name(self, tgid: int, addr: int, kernel: bool) -> str:
        """``func+0x1c`` (or ``func``, or ``[unknown]``)."""
        n, off, _ = self.resolve(tgid, addr, kernel)
        return f"{n}+0x{off:x}" if off and n != UNKNOWN_SYMBOL else n


def is_kernel_address(addr: int) -> bool:
    return addr >= 0xFFFF800000000000


# ---- print formats ------------------------------------------------------------------------------

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
    args, depth, cur, quote = [], 0, [], False
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
_PY_CONV = re.compile(r"%%|%[-+ #0]*\d*(?:\.\d+)?[sdiouxXc]")
_ARG_STR = re.compile(r"__get_str\((\w+)\)$")


def _fit(value: Optional[int], size: int, signed: bool) -> Optional[int]:
    """``value`` as a C integer of ``size`` bytes and that signedness (what a printf cast does)."""
    if value is None:
        return None
    value &= (1 << (8 * size)) - 1
    if signed and value >> (8 * size - 1):
        value -= 1 << (8 * size)
    return value


def _element(index: int) -> Callable[[Any], Any]:
    def get(values: Optional[tuple]) -> Any:
        return values[index] if values is not None and index < len(values) else 0
    return get


def _compose(first: Callable[[Any], Any], then: Optional[Callable[[Any], Any]]) -> Callable[[Any], Any]:
    if then is None:
        return first
    return lambda v: then(first(v))


_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\x7f"\\]')
_TEXT_ESCAPES = {**{c: f"\\x{c:02x}" for c in range(32)}, 0x7F: "\\x7f", ord('"'): '\\"', ord("\\"): "\\\\",
                 ord("\n"): "\\n", ord("\t"): "\\t"}


def _convert_column(col: Iterable[Any], convert: Callable[[Any], Any]) -> Iterable[Any]:
    """``map(convert, col)``, except that a column of strings that need no escaping is kept as it
    is (one regular-expression search over the joined column instead of a call per value)."""
    if convert is _escape_text:
        col = col if isinstance(col, list) else list(col)
        try:
            joined = "".join(col)
        except TypeError:  # (None for a string that could not be read)
            return map(_escape_text, col)
        return col if _NEEDS_ESCAPE.search(joined) is None else map(_escape_text, col)
    return map(convert, col)


def _escape_text(value: Optional[str]) -> str:
    """A string for a quoted text value: as it is, unless it holds quotes, backslashes or controls."""
    if value is None:
        return ""
    if _NEEDS_ESCAPE.search(value) is None:
        return value
    return value.translate(_TEXT_ESCAPES)


def _literal(text: str) -> str:
    return text.replace("%", "%%")


@dataclass
class _Slot:
    """One ``%`` slot of a line template: where its value comes from and how it is converted.

    ``source`` is an index into the event's fields (``values``), a header key ('comm', 'tid',
    'secs'...), or ``("const", value)``. With ``with_pid`` the conversion also gets the event's
    thread group id (for symbols of user addresses).
    """

    source: Any
    convert: Optional[Callable[..., Any]] = None
    with_pid: bool = False
    spec: str = "%s"  # the conversion in a text line, without quotes ("0x%x", "%d", "%s")


def _print_fmt_slots(fmt: EventFormat, text: str, args: list[str], long_size: int) -> Optional[tuple[str, list[_Slot]]]:
    """A template and its slots from a simple print format (every argument a field or one element
    of an array field, every conversion one Python's ``%`` can do); None otherwise."""
    fields = fmt.event_fields
    names = {f.name: i for i, f in enumerate(fields)}
    out: list[str] = []
    slots: list[_Slot] = []
    pos = 0
    pending = list(args)
    for m in _CONV_RE.finditer(text):
        out.append(_literal(text[pos:m.start()]))
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
            slots.append(_Slot(names[ms.group(1)], _escape_text, spec=spec + "s"))
            out.append(spec + "s")
            continue
        mf = _ARG_FIELD.match(arg)
        if not mf or mf.group(1) not in names:
            return None
        j = names[mf.group(1)]
        f = fields[j]
        kind = field_spec(f, long_size)[3]
        if mf.group(2) is not None:
            if kind != KIND_INT_ARRAY or conv == "s":
                return None
            get: Optional[Callable[[Any], Any]] = _element(int(mf.group(2)))
            value_signed = f.signed
        elif kind == KIND_STR and conv == "s":
            slots.append(_Slot(j, _escape_text, spec=spec + "s"))
            out.append(spec + "s")
            continue
        elif kind != KIND_INT or conv == "s":
            return None
        else:
            get, value_signed = None, f.signed
        size = {"hh": 1, "h": 2, None: 4, "l": long_size, "z": long_size, "t": long_size,
                "ll": 8, "L": 8, "j": 8}[m.group("len")]
        if conv == "c":
            cast: Optional[Callable[[Any], Any]] = lambda v: chr((v or 0) & 0xFF)
            spec += "s"
        else:
            signed = conv in "di"
            # the cast printf applies, when it can change the decoded value
            needs = (value_signed != signed) or f.size > size or get is not None
            cast = (lambda v, s=size, g=signed: _fit(v, s, g)) if needs else None
            if m.group("prec"):
                spec += "." + m.group("prec")
            spec += "d" if conv in "diu" else conv
        out.append(spec)
        prefix = "0x" if text[:m.start()].endswith("0x") else ""
        slots.append(_Slot(j, _compose(get, cast) if get else cast, spec=prefix + spec))
    if pending:
        return None
    out.append(_literal(text[pos:]))
    return "".join(out), slots


def _probe_ip(fmt: Optional[EventFormat]) -> Optional[tuple[str, ...]]:
    """The ip fields of a kprobe/uprobe event: (__probe_ip,) or (__probe_func, __probe_ret_ip)."""
    if fmt is None:
        return None
    names = [f.name for f in fmt.event_fields[:2]]
    if names[:1] == ["__probe_ip"]:
        return ("__probe_ip",)
    if names == ["__probe_func", "__probe_ret_ip"]:
        return ("__probe_func", "__probe_ret_ip")
    return None


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
    kind = field_spec(f, long_size)[3]
    conv, before = hint if hint else ("", "")
    if kind == KIND_STR:
        return '"%s"', _escape_text
    if kind == KIND_INT:
        if conv in ("x", "X") or (not conv and _is_pointer(f)):
            return "0x%x", (lambda v, s=f.size: _fit(v, s, False)) if f.signed else None
        if conv == "c":
            return "'%s'", lambda v: chr((v or 0) & 0xFF)
        if conv == "u" and f.signed:
            return "%d", lambda v, s=f.size: _fit(v, s, False)
        return "%d", None
    if kind == KIND_INT_ARRAY:
        return "{%s}", _hex_list if conv in ("x", "X") or (not conv and _is_pointer(f)) else _dec_list
    return "%s", _hex_bytes


def trace_template(fmt: EventFormat, long_size: int = 8) -> tuple[str, list[_Slot]]:
    """The ``trace`` part of a text line: the kernel's print format for probe events (without the
    ip prefix, which is the ``ip`` field), ``name=value`` pairs otherwise."""
    ips = _probe_ip(fmt)
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
        parts.append(f"{_literal(f.name)}={conv}")
        slots.append(_Slot(j, convert, spec=conv.strip('"{}\'') or "%s"))
    return " ".join(parts), slots


def _hex_list(values: Optional[tuple]) -> str:
    return "" if values is None else ",".join(map(hex, values))


def _dec_list(values: Optional[tuple]) -> str:
    return "" if values is None else ",".join(map(str, values))


def _hex_bytes(value: Optional[bytes]) -> str:
    return "" if value is None else bytes(value).hex()


# ---- stacks -------------------------------------------------------------------------------------


class _Record:
    """One event of the row path, with the stacks recorded after it: [(kind, tgid, addresses)]."""

    __slots__ = ("row", "stacks", "done")

    def __init__(self, row: tuple):
        self.row = row
        self.stacks: list[tuple[str, int, tuple[int, ...]]] = []
        self.done = False


def stack_addresses(kind: str, values: Optional[tuple]) -> tuple[int, tuple[int, ...]]:
    """(tgid or 0, addresses innermost first) of a kernel_stack / user_stack record's values."""
    if not values:
        return 0, ()
    first, callers = values[0], values[1] or ()
    if kind == "kernel":
        callers = callers[:max(first or 0, 0)]
        tgid = 0
    else:
        tgid = first or 0
    out = []
    for a in callers:
        if a == 0:
            if kind == "user":
                break
            continue
        if a == 0xFFFFFFFFFFFFFFFF:
            break
        out.append(a)
    return tgid, tuple(out)


class StackJoiner:
    """Attach stack records to the event they follow on the same CPU, keeping time order.

    An event is complete when the next event of its CPU arrives, or when any event is more than
    ``window_ns`` later (stack records are written microseconds after their event).
    """

    def __init__(self, stack_ids: dict[int, str], window_ns: int = 50_000_000):
        self.stack_ids = stack_ids
        self.window = window_ns
        self.queue: deque[_Record] = deque()
        self.last: dict[int, _Record] = {}
        self.orphans = 0

    def feed(self, rows: Iterable[tuple]) -> Iterator[_Record]:
        stack_ids, queue, last = self.stack_ids, self.queue, self.last
        for row in rows:
            kind = stack_ids.get(row[2])
            cpu = row[1]
            if kind is not None:
                owner = last.get(cpu)
                if owner is not None and owner.row[3] == row[3] and not owner.done:
                    tgid, addrs = stack_addresses(kind, row[6])
                    owner.stacks.append((kind, tgid or 0, addrs))
                else:
                    self.orphans += 1
                continue
            prev = last.get(cpu)
            if prev is not None:
                prev.done = True
            rec = _Record(row)
            last[cpu] = rec
            queue.append(rec)
            limit = row[0] - self.window
            while queue and (queue[0].done or queue[0].row[0] < limit):
                yield queue.popleft()

    def finish(self) -> Iterator[_Record]:
        while self.queue:
            yield self.queue.popleft()
        self.last.clear()


# ---- plans and formatters -------------------------------------------------------------------------


@dataclass
class _Plan:
    """How the events of one format become output items (lines, or CSV rows)."""

    fmt: Optional[EventFormat]
    template: Optional[str]  # None: the items are tuples (CSV)
    slots: list[_Slot]
    skip: bool = False


class _Header:
    """The per-event columns shared by every format of a batch (comm, tgid, time...), made once."""

    def __init__(self, formatter: "Formatter", batch: Columns):
        self.f = formatter
        self.batch = batch
        self.cols: dict[str, list[Any]] = {}

    def column(self, key: str) -> list[Any]:
        col = self.cols.get(key)
        if col is None:
            col = self.cols[key] = self.f.header_column(key, self)
        return col


class Formatter:
    """Turns decoded events into output text; subclasses make the per-format plans.

    ``events`` are globs on ``system:event`` (or the event name) selecting what is printed.
    """

    def __init__(self, source: Source, fields: Sequence[str] = DEFAULT_FIELDS, *, long_size: int = 8,
                 events: Sequence[str] = ()):
        self.source = source
        self.fields = tuple(fields)
        self.long_size = long_size
        self.events = tuple(events)
        self.comms = _Cache(source.comm)
        self.tgids = _Cache(source.tgid)
        self.symbolizer = Symbolizer(source)
        self.sym_names = _Cache(self._sym_name)
        self.formats: dict[int, EventFormat] = {}
        self._plans: dict[int, _Plan] = {}
        self._splits: dict[int, Any] = {}
        self._prefixes: dict[str, _Cache] = {}
        self.has_stacks = False

    def set_formats(self, formats: Iterable[EventFormat]) -> None:
        self.formats = {f.id: f for f in formats}
        self._plans.clear()
        self._splits.clear()

    def selected(self, fmt: Optional[EventFormat]) -> bool:
        if fmt is not None and (fmt.system, fmt.name) in STACK_EVENTS:
            return False
        if not self.events:
            return True
        if fmt is None:
            return False
        return any(fnmatch.fnmatchcase(fmt.full_name, g) if ":" in g else fnmatch.fnmatchcase(fmt.name, g)
                   for g in self.events)

    def plan(self, event_id: int) -> _Plan:
        p = self._plans.get(event_id)
        if p is None:
            fmt = self.formats.get(event_id)
            if not self.selected(fmt):
                p = _Plan(fmt, "", [], skip=True)
            else:
                p = self.make_plan(fmt, event_id)
            self._plans[event_id] = p
        return p

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> _Plan:
        raise NotImplementedError

    def begin(self) -> str:
        return ""

    def end(self) -> str:
        return ""

    # -- header values
    def _sym_name(self, key: tuple[int, int]) -> str:
        tgid, addr = key
        return self.symbolizer.name(tgid, addr, is_kernel_address(addr))

    def sym(self, tgid: int, addr: int) -> str:
        return self.sym_names[(tgid, addr)]

    def header_column(self, key: str, hdr: _Header) -> list[Any]:
        b = hdr.batch
        if key == "tid":
            return b.pid.tolist()
        if key == "cpu":
            return b.cpu.tolist()
        if key == "comm":
            return list(map(self.comms.__getitem__, hdr.column("tid")))
        if key == "pid":
            return list(map(self.tgids.__getitem__, hdr.column("tid")))
        if key == "secs":
            return list(map(floordiv, b.ts, repeat(_NS)))
        if key == "usecs":
            return list(map(floordiv, map(mod, b.ts, repeat(_NS)), repeat(1000)))
        if key == "nsecs":
            return list(map(mod, b.ts, repeat(_NS)))
        if key == "stacks":
            return [""] * len(b)
        raise KeyError(key)

    def row_header(self, rec: _Record) -> dict[str, Any]:
        ts, cpu, _id, tid = rec.row[:4]
        return {"tid": tid, "cpu": cpu, "comm": self.comms[tid], "pid": self.tgids[tid],
                "secs": ts // _NS, "usecs": ts % _NS // 1000, "nsecs": ts % _NS,
                "stacks": self.stack_item(rec)}

    def stack_item(self, rec: _Record) -> Any:
        return ""

    # -- the batch path
    def format_batch(self, batch: Columns) -> str:
        """Every event of a columnar batch, in time order.

        When every format's line starts with the same header (comm, tid, cpu, time...), the header
        is formatted once for all events and each format formats only its own field columns;
        otherwise each format takes its share of the header columns (:meth:`_format_masked`).
        """
        ids = batch.id
        present = set(ids)
        plans = {i: self.plan(i) for i in present}
        live = [i for i in present if not plans[i].skip]
        if not live:
            return ""
        splits = {i: self._split(i) for i in live}
        heads = {(sp[0], tuple(s.source for s in sp[1])) if sp else None for sp in splits.values()}
        if None in heads or len(heads) != 1:
            return self._format_masked(batch, present, plans)
        hdr = _Header(self, batch)
        head_t, head_slots, _ = splits[live[0]]  # type: ignore[misc]
        counts: Optional[Counter[int]] = None
        bodies: dict[int, list[Any]] = {}
        for i in live:
            body = splits[i][2]  # type: ignore[index]
            fields = [s for s in body.slots if not isinstance(s.source, tuple)]
            if not fields:  # constants only: as many as the format has events
                if counts is None:
                    counts = Counter(ids)
                consts = tuple(s.source[1] for s in body.slots)
                bodies[i] = [consts if body.template is None else body.template % consts] * counts[i]
                continue
            # (constants repeat as long as the field columns last)
            cols = [repeat(s.source[1]) if isinstance(s.source, tuple) else self._field_column(batch, body, s)
                    for s in body.slots]
            if body.template is None:
                bodies[i] = list(zip(*cols))
            else:
                bodies[i] = list(map(body.template.__mod__, zip(*cols)))
        head_items = self._head_items(batch, hdr, head_t, head_slots)
        if len(live) == len(present) == 1:
            return self.emit(list(map(add, head_items, bodies[live[0]])))
        order: Iterable[int] = ids
        if len(live) < len(present):
            keep = list(map(bodies.__contains__, ids))
            order = compress(ids, keep)
            head_items = compress(head_items, keep)
        iters = {k: iter(v) for k, v in bodies.items()}
        return self.emit(list(map(add, head_items, map(next, map(iters.__getitem__, order)))))

    _PER_THREAD = ("comm", "tid", "pid", "cpu")

    def _head_items(self, batch: Columns, hdr: _Header, head_t: Optional[str], head_slots: list[_Slot]) -> Iterable[Any]:
        """The shared line starts of a batch. What depends only on the thread and the CPU (comm,
        tid, pid, cpu) is formatted once per (thread, CPU) and looked up per event."""
        k = 0
        while k < len(head_slots) and head_slots[k].source in self._PER_THREAD:
            k += 1
        if head_t is None or k == 0:
            cols = [self._header_column(hdr, s) for s in head_slots]
            if head_t is None:
                return zip(*cols)
            return map(head_t.__mod__, zip(*cols)) if cols else repeat(head_t % ())
        convs = [m for m in _PY_CONV.finditer(head_t) if m.group() != "%%"]
        pre_t, rest_t = head_t[:convs[k - 1].end()], head_t[convs[k - 1].end():]
        pre_slots, rest_slots = head_slots[:k], head_slots[k:]
        comms, tgids = self.comms, self.tgids

        def prefix(key: int) -> str:
            tid, cpu = key >> 16, key & 0xFFFF
            values = {"tid": tid, "cpu": cpu, "comm": comms[tid], "pid": tgids[tid]}
            return pre_t % tuple(s.convert(values[s.source]) if s.convert else values[s.source] for s in pre_slots)

        cache = self._prefixes.setdefault(pre_t, _Cache(prefix))
        pre = map(cache.__getitem__, map(add, map(mul, batch.pid, repeat(0x10000)), batch.cpu))
        if not rest_slots:
            return map(add, pre, repeat(rest_t)) if rest_t else pre
        rest = map(rest_t.__mod__, zip(*[self._header_column(hdr, s) for s in rest_slots]))
        return map(add, pre, rest)

    def _split(self, event_id: int) -> Optional[tuple[Optional[str], list[_Slot], _Plan]]:
        """A plan cut after its leading header slots: (header template, header slots, the rest),
        or None when header values come later in the line too."""
        got = self._splits.get(event_id, False)
        if got is not False:
            return got  # type: ignore[return-value]
        plan = self.plan(event_id)
        k = 0
        for sl in plan.slots:
            if not isinstance(sl.source, str) or sl.with_pid:
                break
            k += 1
        rest = plan.slots[k:]
        result: Optional[tuple[Optional[str], list[_Slot], _Plan]] = None
        if not any(isinstance(sl.source, str) or sl.with_pid for sl in rest):
            if plan.template is None:
                result = (None, plan.slots[:k], _Plan(plan.fmt, None, rest))
            else:
                convs = [m for m in _PY_CONV.finditer(plan.template) if m.group() != "%%"]
                pos = convs[k - 1].end() if k else 0
                result = (plan.template[:pos], plan.slots[:k], _Plan(plan.fmt, plan.template[pos:], rest))
        self._splits[event_id] = result
        return result

    def _header_column(self, hdr: _Header, s: _Slot) -> Iterable[Any]:
        col: Iterable[Any] = hdr.column(s.source)
        return _convert_column(col, s.convert) if s.convert is not None else col

    @staticmethod
    def _field_column(batch: Columns, plan: _Plan, s: _Slot) -> Iterable[Any]:
        assert plan.fmt is not None
        col = batch.column(plan.fmt, plan.fmt.event_fields[s.source].name)
        return _convert_column(col, s.convert) if s.convert is not None else col

    def _format_masked(self, batch: Columns, present: set[int], plans: dict[int, _Plan]) -> str:
        ids = batch.id
        hdr = _Header(self, batch)
        single = len(present) == 1
        per_format: dict[int, list[Any]] = {}
        for event_id in present:
            plan = plans[event_id]
            if plan.skip:
                continue
            mask = None if single else list(map(eq, ids, repeat(event_id)))
            count = len(batch) if mask is None else sum(mask)
            cols: list[Iterable[Any]] = []
            pids: Optional[list[Any]] = None
            for s in plan.slots:
                if isinstance(s.source, tuple):
                    cols.append(repeat(s.source[1], count))
                    continue
                if isinstance(s.source, str):
                    col: Iterable[Any] = hdr.column(s.source)
                    if mask is not None:
                        col = list(compress(col, mask))
                else:
                    assert plan.fmt is not None
                    col = batch.column(plan.fmt, plan.fmt.event_fields[s.source].name)
                if s.with_pid:
                    if pids is None:
                        pids = hdr.column("pid") if mask is None else list(compress(hdr.column("pid"), mask))
                    col = map(s.convert, pids, col)
                elif s.convert is not None:
                    col = _convert_column(col, s.convert)
                cols.append(col)
            if plan.template is None:
                items = list(zip(*cols)) if cols else [()] * count
            elif cols:
                items = list(map(plan.template.__mod__, zip(*cols)))
            else:
                items = [plan.template % ()] * count
            per_format[event_id] = items
        if single:
            return self.emit(per_format.get(next(iter(present)), []))
        order: Iterable[int] = ids
        if len(per_format) < len(present):
            order = compress(ids, map(per_format.__contains__, ids))
        iters = {k: iter(v) for k, v in per_format.items()}
        return self.emit(list(map(next, map(iters.__getitem__, order))))

    def emit(self, items: list[Any]) -> str:
        return "".join(items)

    # -- the row path (files with stacks)
    def format_record(self, rec: _Record) -> Any:
        plan = self.plan(rec.row[2])
        if plan.skip:
            return None
        header = self.row_header(rec)
        values = rec.row[6]
        args = []
        for s in plan.slots:
            if isinstance(s.source, tuple):
                v = s.source[1]
            elif isinstance(s.source, str):
                v = header[s.source]
            else:
                v = values[s.source] if values is not None and s.source < len(values) else None
            if s.with_pid:
                v = s.convert(header["pid"], v)
            elif s.convert is not None:
                v = s.convert(v)
            args.append(v)
        if plan.template is None:
            return tuple(args)
        return plan.template % tuple(args) + self.after_record(rec)

    def after_record(self, rec: _Record) -> str:
        return ""

    def format_records(self, records: Iterable[_Record]) -> str:
        return self.emit([x for x in map(self.format_record, records) if x is not None])


def _frames(formatter: Formatter, rec: _Record) -> list[tuple[str, int, str, int, str]]:
    """(kind, address, symbol, offset, dso) of every frame of a record, innermost first,
    kernel frames before user frames."""
    out = []
    for kind, tgid, addrs in sorted(rec.stacks, key=lambda s: s[0] != "kernel"):
        owner = tgid or formatter.tgids[rec.row[3]]
        for addr in addrs:
            name, off, dso = formatter.symbolizer.resolve(owner, addr, kind == "kernel")
            out.append((kind, addr, name, off, dso))
    return out


class TextFormatter(Formatter):
    """perf-script-like lines: ``COMM TID [CPU] SECS.USECS: GROUP:EVENT: (IP) name=value ...``,
    with the stack frames below each event (``ADDR SYMBOL (DSO)``) when the file has stacks."""

    _HEADER = {
        "comm": ("%16s", ("comm",)),
        "pid": ("%6d", ("pid",)),
        "tid": ("%6d", ("tid",)),
        "cpu": ("[%03d]", ("cpu",)),
        "time": ("%5d.%06d:", ("secs", "usecs")),
    }

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> _Plan:
        parts: list[str] = []
        slots: list[_Slot] = []
        ips = _probe_ip(fmt)
        names = {f.name: i for i, f in enumerate(fmt.event_fields)} if fmt else {}
        for key in self.fields:
            if key == "pid" and "tid" in self.fields:
                parts.append("%6d/%-6d")
                slots += [_Slot("pid"), _Slot("tid")]
            elif key == "tid" and "pid" in self.fields:
                continue  # printed as pid/tid
            elif key in self._HEADER:
                text, keys = self._HEADER[key]
                parts.append(text)
                slots += [_Slot(k) for k in keys]
            elif key == "event":
                parts.append(_literal(fmt.full_name if fmt else f"unknown:{event_id}") + ":")
            elif key == "ip" and ips:
                parts.append("(%x)" if len(ips) == 1 else "(%x <- %x)")
                slots += [_Slot(names[n]) for n in ips]
            elif key == "sym" and ips:
                parts.append("%s")
                slots.append(_Slot(names[ips[0]], self.sym, with_pid=True))
            elif key == "trace" and fmt is not None:
                text, tslots = trace_template(fmt, self.long_size)
                if text:
                    parts.append(text)
                    slots += tslots
        return _Plan(fmt, " ".join(parts) + "\n", slots)

    def after_record(self, rec: _Record) -> str:
        if not rec.stacks or not ({"ip", "sym"} & set(self.fields)):
            return ""
        lines = []
        for _kind, addr, name, off, dso in _frames(self, rec):
            sym = f"{name}+0x{off:x}" if off and name != UNKNOWN_SYMBOL else name
            lines.append(f"\t{addr:16x} {sym} ({dso})\n")
        return "".join(lines) + "\n"


class JsonFormatter(Formatter):
    """One JSON object per line: time (seconds, to the nanosecond), cpu, pid, tid, comm, event,
    fields (numbers as numbers, strings as strings, arrays as lists), and with stacks
    ``kernel_stack``/``user_stack`` (symbol names, innermost first)."""

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> _Plan:
        name = fmt.full_name if fmt else f"unknown:{event_id}"
        head = ('{"time": %d.%09d, "cpu": %d, "pid": %d, "tid": %d, "comm": %s, "event": '
                + _literal(json.dumps(name)) + ', "fields": {')
        slots = [_Slot("secs"), _Slot("nsecs"), _Slot("cpu"), _Slot("pid"), _Slot("tid"),
                 _Slot("comm", _json_str)]
        parts = []
        for j, f in enumerate(fmt.event_fields if fmt else ()):
            kind = field_spec(f, self.long_size)[3]
            parts.append(_literal(json.dumps(f.name)) + ": %s")
            if kind == KIND_INT:
                slots.append(_Slot(j, None))
                parts[-1] = parts[-1][:-1] + "d"
            elif kind == KIND_STR:
                slots.append(_Slot(j, _json_str))
            elif kind == KIND_INT_ARRAY:
                slots.append(_Slot(j, _json_list))
            else:
                slots.append(_Slot(j, _json_bytes))
        if not self.has_stacks:
            return _Plan(fmt, head + ", ".join(parts) + "}}\n", slots)
        slots.append(_Slot("stacks"))
        return _Plan(fmt, head + ", ".join(parts) + "}%s}\n", slots)

    def stack_item(self, rec: _Record) -> str:
        if not rec.stacks:
            return ""
        frames = _frames(self, rec)
        out = []
        for kind in ("kernel", "user"):
            names = [n if not off or n == UNKNOWN_SYMBOL else f"{n}+0x{off:x}"
                     for k, _a, n, off, _d in frames if k == kind]
            if any(k == kind for k, _t, _a in rec.stacks):
                out.append(f', "{kind}_stack": {json.dumps(names)}')
        return "".join(out)


def _json_str(value: Any) -> str:
    return "null" if value is None else encode_basestring(value)


def _json_list(values: Optional[tuple]) -> str:
    return "null" if values is None else "[" + ", ".join(map(str, values)) + "]"


def _json_bytes(value: Optional[bytes]) -> str:
    return "null" if value is None else '"' + bytes(value).hex() + '"'


class CsvFormatter(Formatter):
    """A header row, then one row per event: the selected fields, ``trace`` expanded to one column
    per event field (the union over the events in the file; empty where an event lacks one), and
    with stacks ``kernel_stack``/``user_stack`` (symbols joined by ``;``, outermost first)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.columns: list[str] = []
        self._trace_columns: list[str] = []

    def set_present(self, formats: Iterable[EventFormat]) -> None:
        """Fix the columns from the formats that occur in the data (call before :meth:`begin`)."""
        names: dict[str, None] = {}
        for fmt in formats:
            if self.selected(fmt):
                for f in fmt.event_fields:
                    names.setdefault(f.name, None)
        self._trace_columns = list(names)
        cols: list[str] = []
        header = set(self.fields) | {"kernel_stack", "user_stack"}
        for key in self.fields:
            if key == "time":
                cols.append("time")
            elif key == "trace":
                # (an event field named like a header column, e.g. sched_process_exec's pid)
                cols += [f"trace.{n}" if n in header else n for n in self._trace_columns]
            else:
                cols.append(key)
        if self.has_stacks:
            cols += ["kernel_stack", "user_stack"]
        self.columns = cols

    def begin(self) -> str:
        return self.emit([tuple(self.columns)])

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> _Plan:
        slots: list[_Slot] = []
        ips = _probe_ip(fmt)
        names = {f.name: i for i, f in enumerate(fmt.event_fields)} if fmt else {}
        convs: dict[str, Callable[[Any], Any]] = {}
        if fmt is not None:
            for s in trace_template(fmt, self.long_size)[1]:
                if isinstance(s.source, int):
                    convs.setdefault(fmt.event_fields[s.source].name, _csv_cell(s))
            for name in ips or ():
                convs[name] = _csv_cell(_Slot(names[name], None, spec="0x%x"))
        for key in self.fields:
            if key == "time":
                slots.append(_Slot("time9"))
            elif key == "event":
                slots.append(_Slot(("const", fmt.full_name if fmt else f"unknown:{event_id}")))
            elif key == "ip":
                slots.append(_Slot(names[ips[0]], _hex) if ips else _Slot(("const", "")))
                if ips and len(ips) == 2:
                    slots[-1] = _Slot(names[ips[0]], _hex)
            elif key == "sym":
                slots.append(_Slot(names[ips[0]], self.sym, with_pid=True) if ips else _Slot(("const", "")))
            elif key == "trace":
                for col in self._trace_columns:
                    if col in names:
                        slots.append(_Slot(names[col], convs.get(col, _csv_plain)))
                    else:
                        slots.append(_Slot(("const", "")))
            else:
                slots.append(_Slot(key))
        if self.has_stacks:
            slots += [_Slot("kstack"), _Slot("ustack")]
        return _Plan(fmt, None, slots)

    def header_column(self, key: str, hdr: _Header) -> list[Any]:
        if key == "time9":
            return list(map("%d.%09d".__mod__, zip(hdr.column("secs"), hdr.column("nsecs"))))
        if key in ("kstack", "ustack"):
            return [""] * len(hdr.batch)
        return super().header_column(key, hdr)

    def row_header(self, rec: _Record) -> dict[str, Any]:
        h = super().row_header(rec)
        h["time9"] = "%d.%09d" % (h["secs"], h["nsecs"])
        frames = _frames(self, rec)
        for kind, key in (("kernel", "kstack"), ("user", "ustack")):
            h[key] = ";".join(reversed([n for k, _a, n, _o, _d in frames if k == kind]))
        return h

    def emit(self, items: list[Any]) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(items)
        return buf.getvalue()


def _hex(value: Optional[int]) -> str:
    return "" if value is None else f"{value:x}"


def _csv_plain(value: Any) -> Any:
    return "" if value is None else value


def _csv_cell(slot: _Slot) -> Callable[[Any], Any]:
    """A field's CSV cell: its text rendering (hex stays hex, with 0x), without quotes."""
    convert, spec = slot.convert, slot.spec
    if convert is _escape_text:
        convert = None  # (the CSV writer quotes what needs it)
    if spec in ("%s", "%d") and convert is None:
        return _csv_plain

    def cell(value: Any) -> Any:
        if value is None:
            return ""
        return spec % (convert(value) if convert else value)
    return cell


# ---- folded stacks ------------------------------------------------------------------------------


class FoldedStacks:
    """Counts of unique stacks, for flamegraph.pl: ``comm;outer;...;inner count`` per line.

    User frames come first (outermost first), then kernel frames; the process name is the root.
    """

    def __init__(self, formatter: Formatter, include_comm: bool = True):
        self.formatter = formatter
        self.include_comm = include_comm
        self.counts: Counter[str] = Counter()
        self.events = 0

    def add(self, records: Iterable[_Record]) -> None:
        f = self.formatter
        for rec in records:
            if not rec.stacks or f.plan(rec.row[2]).skip:
                continue
            frames = _frames(f, rec)
            user = [n for k, _a, n, _o, _d in frames if k == "user"]
            kernel = [n for k, _a, n, _o, _d in frames if k == "kernel"]
            parts = ([f.comms[rec.row[3]]] if self.include_comm else []) + user[::-1] + kernel[::-1]
            self.counts[";".join(p.replace(";", ":").replace(" ", "_") for p in parts)] += 1
            self.events += 1

    def text(self) -> str:
        return "".join(f"{stack} {n}\n" for stack, n in sorted(self.counts.items()))


class _FoldedPlanner(Formatter):
    """Only selects events (the folded output has no per-event line)."""

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> _Plan:
        return _Plan(fmt, "", [])


# ---- driving a file -----------------------------------------------------------------------------


def make_formatter(kind: str, source: Source, fields: Sequence[str] = DEFAULT_FIELDS, *,
                   long_size: int = 8, events: Sequence[str] = ()) -> Formatter:
    classes = {"text": TextFormatter, "json": JsonFormatter, "csv": CsvFormatter, "folded": _FoldedPlanner}
    if kind not in classes:
        raise ProbectlError(f"unknown output format {kind!r}", f"choose one of {', '.join(OUTPUT_FORMATS)}")
    return classes[kind](source, fields, long_size=long_size, events=events)


def stack_ids(formats: Iterable[EventFormat]) -> dict[int, str]:
    return {f.id: STACK_EVENTS[(f.system, f.name)] for f in formats if (f.system, f.name) in STACK_EVENTS}


@dataclass
class ScriptResult:
    events: int = 0  # events decoded (stack records included)
    printed: int = 0  # lines/objects/rows, or stacks counted for folded
    has_stacks: bool = False
    unknown_ids: set[int] = field(default_factory=set)


def write_script(trace: Any, out: TextIO, kind: str = "text", fields: Sequence[str] = DEFAULT_FIELDS, *,
                 events: Sequence[str] = (), batch_events: int = 1 << 18) -> ScriptResult:
    """Print every event of an open :class:`~probectl.tracedat.TraceFile` to ``out``.

    ``kind`` is text, csv, json or folded; ``fields`` the ``-F`` selection; ``events`` globs
    limiting what is printed. Files without stacks go through the columnar batch path; files with
    stacks (recorded with ``-g``) through the row path that attaches stacks to their events.
    """
    source = TraceSource(trace)
    formatter = make_formatter(kind, source, fields, long_size=trace.layout.long_size, events=events)
    formats = list(trace.formats.values())
    formatter.set_formats(formats)
    sids = stack_ids(formats)
    result = ScriptResult()

    # Does the data hold stacks, and (for CSV) which formats occur? One look at the ids.
    present: set[int] = set()
    scan = kind == "csv"
    reader = trace.reader()
    try:
        for batch in reader.batches(batch_events):
            present |= set(batch.id)
            if not scan:
                break  # (a recording with -g has stacks from its first event on)
    finally:
        reader.close()
    result.has_stacks = bool(present & set(sids))
    formatter.has_stacks = result.has_stacks
    if kind == "folded" and not result.has_stacks:
        raise ProbectlError(f"{trace.where} has no stacks to fold",
                            "record with -g (probectl record -g ...) to get kernel and user stacks")
    if isinstance(formatter, CsvFormatter):
        formatter.set_present(trace.formats[i] for i in sorted(present) if i in trace.formats)
    out.write(formatter.begin())

    reader = trace.reader()
    try:
        if result.has_stacks:
            joiner = StackJoiner(sids)
            folded = FoldedStacks(formatter) if kind == "folded" else None
            for rows, _lost in reader.rows(batch_events):
                result.events += len(rows)
                recs = list(joiner.feed(rows))
                if folded is not None:
                    folded.add(recs)
                else:
                    out.write(formatter.format_records(recs))
            recs = list(joiner.finish())
            if folded is not None:
                folded.add(recs)
                out.write(folded.text())
                result.printed = folded.events
            else:
                out.write(formatter.format_records(recs))
        else:
            for batch in reader.batches(batch_events):
                result.events += len(batch)
                out.write(formatter.format_batch(batch))
    finally:
        reader.close()
    out.write(formatter.end())
    return result


def lost_events(trace: Any) -> int:
    """Events the kernel lost while recording, from the file's per-CPU statistics."""
    total = 0
    for stats in trace.cpustats.values():
        for key in ("overrun", "dropped events"):
            try:
                total += int(str(stats.get(key, "0")).split()[0])
            except (ValueError, IndexError):
                continue
    return total
