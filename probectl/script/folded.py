"""Folded stacks for flamegraph.pl: one line per unique stack with its count."""
from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable, Optional

from ..formats import EventFormat
from .plan import Formatter, Plan
from .stacks import Record

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

    def text(self) -> str:
        return "".join(f"{stack} {n}\n" for stack, n in sorted(self.counts.items()))


class FoldedPlanner(Formatter):
    """Only selects events (the folded output has no per-event line)."""

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> Plan:
        return Plan(fmt, "", [])
