"""The formatter base: each event format compiled once into a :class:`Plan` (a line template and its
slots), run over columnar batches (the batch path) or over records with stacks (the row path)."""
from __future__ import annotations

from collections import Counter
from itertools import compress, repeat
from operator import add, eq, floordiv, mod, mul
from typing import Any, Callable, Iterable, Optional, Sequence

from ..dataclass import dataclass
from ..errors import ProbectlError
from ..formats import EventFormat, event_matches
from ..ringbuf import Columns
from .printfmt import PY_CONV, Slot, convert_column
from .stacks import STACK_EVENTS, Record
from .symbols import Source, Symbolizer, is_kernel_address

FIELDS = ("comm", "pid", "tid", "nspid", "cpu", "time", "event", "ip", "sym", "trace")
DEFAULT_FIELDS = ("comm", "tid", "cpu", "time", "event", "ip", "trace")
_NS = 1_000_000_000


def parse_fields(text: str) -> tuple[str, ...]:
    """``-F comm,tid,time`` → ('comm', 'tid', 'time'), checked against :data:`FIELDS`."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in FIELDS]
    if bad or not names:
        raise ProbectlError(f"unknown output field{'s' if len(bad) > 1 else ''}: {', '.join(bad) or '(none)'}",
                            f"choose from {','.join(FIELDS)}")
    return names


class _Cache(dict):
    """A dict that fills itself: ``cache[key]`` computes ``fn(key)`` once (C-speed hits in ``map``)."""

    def __init__(self, fn: Callable[[Any], Any]):
        super().__init__()
        self.fn = fn

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.fn(key)
        return value


@dataclass
class Plan:
    """How the events of one format become output items (lines, or CSV rows)."""

    fmt: Optional[EventFormat]
    template: Optional[str]  # None: the items are tuples (CSV)
    slots: list[Slot]
    skip: bool = False


class Header:
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
        self.nspids = _Cache(source.nspid)
        self.symbolizer = Symbolizer(source)
        self.sym_names = _Cache(self._sym_name)
        self.formats: dict[int, EventFormat] = {}
        self._plans: dict[int, Plan] = {}
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
        return any(event_matches(fmt, g) for g in self.events)

    def plan(self, event_id: int) -> Plan:
        p = self._plans.get(event_id)
        if p is None:
            fmt = self.formats.get(event_id)
            if not self.selected(fmt):
                p = Plan(fmt, "", [], skip=True)
            else:
                p = self.make_plan(fmt, event_id)
            self._plans[event_id] = p
        return p

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> Plan:
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

    def header_column(self, key: str, hdr: Header) -> list[Any]:
        b = hdr.batch
        if key == "tid":
            return b.pid.tolist()
        if key == "cpu":
            return b.cpu.tolist()
        if key == "comm":
            return list(map(self.comms.__getitem__, hdr.column("tid")))
        if key == "pid":
            return list(map(self.tgids.__getitem__, hdr.column("tid")))
        if key == "nspid":
            return list(map(self.nspids.__getitem__, hdr.column("tid")))
        if key == "secs":
            return list(map(floordiv, b.ts, repeat(_NS)))
        if key == "usecs":
            return list(map(floordiv, map(mod, b.ts, repeat(_NS)), repeat(1000)))
        if key == "nsecs":
            return list(map(mod, b.ts, repeat(_NS)))
        if key == "stacks":
            return [""] * len(b)
        raise KeyError(key)

    def row_header(self, rec: Record) -> dict[str, Any]:
        ts, cpu, _id, tid = rec.row[:4]
        return {"tid": tid, "cpu": cpu, "comm": self.comms[tid], "pid": self.tgids[tid], "nspid": self.nspids[tid],
                "secs": ts // _NS, "usecs": ts % _NS // 1000, "nsecs": ts % _NS,
                "stacks": self.stack_item(rec)}

    def stack_item(self, rec: Record) -> Any:
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
        hdr = Header(self, batch)
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

    _PER_THREAD = ("comm", "tid", "pid", "nspid", "cpu")

    def _head_items(self, batch: Columns, hdr: Header, head_t: Optional[str], head_slots: list[Slot]) -> Iterable[Any]:
        """The shared line starts of a batch. What depends only on the thread and the CPU (comm,
        tid, pid, cpu) is formatted once per (thread, CPU) and looked up per event."""
        k = 0
        while k < len(head_slots) and head_slots[k].source in self._PER_THREAD:
            k += 1
        if head_t is None or k == 0:
            cols = [self._header_column(hdr, s) for s in head_slots]
            if head_t is None:
                return zip(*cols) if cols else repeat(())  # (rows that start with no header cell)
            return map(head_t.__mod__, zip(*cols)) if cols else repeat(head_t % ())
        convs = [m for m in PY_CONV.finditer(head_t) if m.group() != "%%"]
        pre_t, rest_t = head_t[:convs[k - 1].end()], head_t[convs[k - 1].end():]
        pre_slots, rest_slots = head_slots[:k], head_slots[k:]
        comms, tgids, nspids = self.comms, self.tgids, self.nspids

        def prefix(key: int) -> str:
            tid, cpu = key >> 16, key & 0xFFFF
            values = {"tid": tid, "cpu": cpu, "comm": comms[tid], "pid": tgids[tid], "nspid": nspids[tid]}
            return pre_t % tuple(s.convert(values[s.source]) if s.convert else values[s.source] for s in pre_slots)

        cache = self._prefixes.setdefault(pre_t, _Cache(prefix))
        pre = map(cache.__getitem__, map(add, map(mul, batch.pid, repeat(0x10000)), batch.cpu))
        if not rest_slots:
            return map(add, pre, repeat(rest_t)) if rest_t else pre
        rest = map(rest_t.__mod__, zip(*[self._header_column(hdr, s) for s in rest_slots]))
        return map(add, pre, rest)

    def _split(self, event_id: int) -> Optional[tuple[Optional[str], list[Slot], Plan]]:
        """A plan cut after its leading header slots: (header template, header slots, the rest),
        or None when header values come later in the line too."""
        got = self._splits.get(event_id, False)
        if got is not False:
            return got
        plan = self.plan(event_id)
        k = 0
        for sl in plan.slots:
            if not isinstance(sl.source, str) or sl.with_pid:
                break
            k += 1
        rest = plan.slots[k:]
        result: Optional[tuple[Optional[str], list[Slot], Plan]] = None
        if not any(isinstance(sl.source, str) or sl.with_pid for sl in rest):
            if plan.template is None:
                result = (None, plan.slots[:k], Plan(plan.fmt, None, rest))
            else:
                convs = [m for m in PY_CONV.finditer(plan.template) if m.group() != "%%"]
                pos = convs[k - 1].end() if k else 0
                result = (plan.template[:pos], plan.slots[:k], Plan(plan.fmt, plan.template[pos:], rest))
        self._splits[event_id] = result
        return result

    def _header_column(self, hdr: Header, s: Slot) -> Iterable[Any]:
        col: Iterable[Any] = hdr.column(s.source)
        return convert_column(col, s.convert) if s.convert is not None else col

    @staticmethod
    def _field_column(batch: Columns, plan: Plan, s: Slot) -> Iterable[Any]:
        assert plan.fmt is not None
        col = batch.column(plan.fmt, plan.fmt.event_fields[s.source].name)
        return convert_column(col, s.convert) if s.convert is not None else col

    def _format_masked(self, batch: Columns, present: set[int], plans: dict[int, Plan]) -> str:
        ids = batch.id
        hdr = Header(self, batch)
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
                    assert s.convert is not None  # (a slot that takes the pid has a conversion by making)
                    if pids is None:
                        pids = hdr.column("pid") if mask is None else list(compress(hdr.column("pid"), mask))
                    col = map(s.convert, pids, col)
                elif s.convert is not None:
                    col = convert_column(col, s.convert)
                cols.append(col)
            items: list[Any]  # (value tuples, or lines from the template)
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
    def format_record(self, rec: Record) -> Any:
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
                assert s.convert is not None
                v = s.convert(header["pid"], v)
            elif s.convert is not None:
                v = s.convert(v)
            args.append(v)
        if plan.template is None:
            return tuple(args)
        return plan.template % tuple(args) + self.after_record(rec)

    def after_record(self, rec: Record) -> str:
        return ""

    def format_records(self, records: Iterable[Record]) -> str:
        return self.emit([x for x in map(self.format_record, records) if x is not None])

    def frames(self, rec: Record) -> list[tuple[str, int, str, int, str]]:
        """(kind, address, symbol, offset, dso) of every frame of a record, innermost first,
        kernel frames before user frames."""
        out = []
        for kind, tgid, addrs in sorted(rec.stacks, key=lambda s: s[0] != "kernel"):
            owner = tgid or self.tgids[rec.row[3]]
            for addr in addrs:
                name, off, dso = self.symbolizer.resolve(owner, addr, kind == "kernel")
                out.append((kind, addr, name, off, dso))
        return out
