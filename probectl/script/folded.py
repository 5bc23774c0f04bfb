"""Folded stacks for flamegraph.pl: one line per unique stack with its count."""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Optional

from ..formats import EventFormat
from .plan import Formatter, Plan
from .stacks import Record


class FoldedStacks:
    """Counts of unique stacks, for flamegraph.pl: ``comm;outer;...;inner count`` per line.

    User frames come first (outermost first), then kernel frames; the process name is the root.
    """

    def __init__(self, formatter: Formatter, include_comm: bool = True):
        self.formatter = formatter
        self.include_comm = include_comm
        self.counts: Counter[str] = Counter()
        self.events = 0

    def add(self, records: Iterable[Record]) -> None:
        f = self.formatter
        for rec in records:
            if not rec.stacks or f.plan(rec.row[2]).skip:
                continue
            frames = f.frames(rec)
            user = [n for k, _a, n, _o, _d in frames if k == "user"]
            kernel = [n for k, _a, n, _o, _d in frames if k == "kernel"]
            parts = ([f.comms[rec.row[3]]] if self.include_comm else []) + user[::-1] + kernel[::-1]
            self.counts[";".join(p.replace(";", ":").replace(" ", "_") for p in parts)] += 1
            self.events += 1

    def text(self) -> str:
        return "".join(f"{stack} {n}\n" for stack, n in sorted(self.counts.items()))


class FoldedPlanner(Formatter):
    """Only selects events (the folded output has no per-event line)."""

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> Plan:
        return Plan(fmt, "", [])
