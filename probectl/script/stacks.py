"""Stack records (``record -g``): the kernel's ``ftrace:kernel_stack``/``ftrace:user_stack`` records,
written right after the event they belong to on the same CPU, joined to that event."""
from __future__ import annotations

from collections import deque
from typing import Iterable, Iterator, Optional

from ..formats import EventFormat

STACK_EVENTS = {("ftrace", "kernel_stack"): "kernel", ("ftrace", "user_stack"): "user"}


class Record:
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
        self.queue: deque[Record] = deque()
        self.last: dict[int, Record] = {}
        self.orphans = 0

    def feed(self, rows: Iterable[tuple]) -> Iterator[Record]:
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
            rec = Record(row)
            last[cpu] = rec
            queue.append(rec)
            limit = row[0] - self.window
            while queue and (queue[0].done or queue[0].row[0] < limit):
                yield queue.popleft()

    def finish(self) -> Iterator[Record]:
        while self.queue:
            yield self.queue.popleft()
        self.last.clear()


def stack_ids(formats: Iterable[EventFormat]) -> dict[int, str]:
    """Format id → ``kernel`` or ``user`` for the stack record formats among ``formats``."""
    return {f.id: STACK_EVENTS[(f.system, f.name)] for f in formats if (f.system, f.name) in STACK_EVENTS}
