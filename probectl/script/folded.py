"""Folded stacks for flamegraph.pl: one line per unique stack with its count."""
from __future__ import annotations

import struct
from collections import Counter
from typing import Any, Callable, Iterable, Optional, Sequence

from ..formats import EventFormat
from ..ringbuf import field_spec, fold_stacks, format_specs
from .plan import Formatter, Plan
from .stacks import Record, probe_ip_fields, stack_ids

# flamegraph.pl's and stackcollapse-perf.pl's (--kernel) mark of a kernel frame in folded text.
KERNEL_MARK = "_[k]"


class FoldedStacks:
    """Counts of unique stacks, for flamegraph.pl: ``comm;outer;...;inner count`` per line.

    User frames come first (outermost first), then kernel frames; the process name is the root.
    With ``annotate_kernel`` kernel frames end in ``_[k]`` (stackcollapse-perf.pl's ``--kernel``), so that
    a flame graph can colour them apart. Each stack counts 1, or ``weigh(record)`` (a field's value: bytes
    for a memory flame graph); ``keep(record)`` False leaves a record out (a process selection).
    """

    def __init__(self, formatter: Formatter, include_comm: bool = True, annotate_kernel: bool = False,
                 weigh: Optional[Callable[[Record], int]] = None, keep: Optional[Callable[[Record], bool]] = None):
        self.formatter = formatter
        self.include_comm = include_comm
        self.annotate_kernel = annotate_kernel
        self.weigh = weigh
        self.keep = keep
        self.events = 0
        self._counts: Counter[str] = Counter()
        # (thread, its stacks) -> [one of its records, weight]: a stack is named once, not per event
        self._pending: dict[tuple, list] = {}

    @property
    def counts(self) -> Counter[str]:
        """Weight per folded stack (the stacks added so far named on first use)."""
        if self._pending:
            for rec, n in self._pending.values():
                self._counts[self.stack(rec)] += n
            self._pending.clear()
        return self._counts

    def stack(self, rec: Record) -> str:
        """The folded stack of one record (without its count)."""
        f = self.formatter
        frames = f.frames(rec)
        mark = KERNEL_MARK if self.annotate_kernel else ""
        user = [n for k, _a, n, _o, _d in frames if k == "user"]
        kernel = [n + mark for k, _a, n, _o, _d in frames if k == "kernel"]
        parts = ([f.comms[rec.row[3]]] if self.include_comm else []) + user[::-1] + kernel[::-1]
        return ";".join(p.replace(";", ":").replace(" ", "_") for p in parts)

    def add(self, records: Iterable[Record]) -> None:
        f, keep, weigh, pending = self.formatter, self.keep, self.weigh, self._pending
        for rec in records:
            if not rec.stacks or f.plan(rec.row[2]).skip or (keep is not None and not keep(rec)):
                continue
            n = 1 if weigh is None else weigh(rec)
            key = (rec.row[3], tuple(rec.stacks))
            entry = pending.get(key)
            if entry is None:
                pending[key] = [rec, n]
            else:
                entry[1] += n
            self.events += 1

    def count_natively(self, trace: Any, formats: Sequence[EventFormat]) -> int:
        """Count the stacks of a whole recording as :meth:`add` counts them, natively
        (``_native.fold_stacks``: no Python step per event, each distinct thread and stacks named
        once); the records read. Not with ``weigh``, which reads each event's values; ``keep`` is
        asked once per thread and stacks, of a record whose row holds only its thread (``row[3]``)."""
        assert self.weigh is None
        f = self.formatter
        long_size = trace.layout.long_size
        layouts = stack_ids(formats)
        stacks = []
        for fmt in formats:
            layout = layouts.get(fmt.id)
            if layout is None:
                continue
            specs = format_specs(fmt, long_size)[:len(fmt.event_fields)]  # (kernel_stack's array to the end)

            def spec(index: Optional[int]) -> Optional[tuple]:
                return specs[index] if index is not None and 0 <= index < len(specs) else None

            stacks.append((fmt.id, _KINDS[layout.kind], spec(layout.first), spec(layout.callers)))
        probes = [(fid, field_spec(next(fm for fm in formats if fm.id == fid).event_fields[index], long_size))
                  for fid, index in probe_ip_fields(formats).items()]
        selected = [fmt.id for fmt in formats if fmt.id not in layouts and not f.plan(fmt.id).skip]
        streams, page_layout = trace.page_streams()
        records, events, keys = fold_stacks(streams, page_layout, selected, stacks, probes, trace.where)
        for key, count in keys:
            pid, found = _decode_key(key)
            rec = Record((0, 0, 0, pid))
            rec.stacks = found
            if self.keep is not None and not self.keep(rec):
                events -= count
                continue
            entry = self._pending.setdefault((pid, tuple(found)), [rec, 0])
            entry[1] += count
        self.events += events
        return records

    def text(self) -> str:
        return "".join(f"{stack} {n}\n" for stack, n in sorted(self.counts.items()))


_KINDS = {"kernel": 0, "user": 1}  # native/fold.h's enum fold_kind
_KIND_NAMES = ("kernel", "user")


def _decode_key(key: bytes) -> tuple[int, list[tuple[str, int, tuple[int, ...]]]]:
    """(pid, stacks) of a key of ``_native.fold_stacks``."""
    (pid,) = struct.unpack_from("=I", key)
    pos, stacks = 4, []
    while pos + 12 <= len(key):
        kind, tgid, n = struct.unpack_from("=III", key, pos)
        pos += 12
        stacks.append((_KIND_NAMES[kind], tgid, struct.unpack_from(f"={n}Q", key, pos)))
        pos += 8 * n
    return pid, stacks


class FoldedPlanner(Formatter):
    """Only selects events (the folded output has no per-event line)."""

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> Plan:
        return Plan(fmt, "", [])
