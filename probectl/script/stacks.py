"""Stack records (``record -g``): the kernel's ``ftrace:kernel_stack``/``ftrace:user_stack`` records and
probectl's ``probectl:user_callchain`` (perf's user callchain, :mod:`probectl.tracedat.callchain`),
written right after the event they belong to on the same CPU, joined to that event.

A uprobe event's kernel stack is the probe's machinery (the breakpoint exception up to the function that
wrote the event), not the program's: it is left out. A uprobe is told by its ``__probe_ip`` (or a return
probe's ``__probe_func``), an address in user space; a kprobe's is a kernel address, and its kernel
stack stays."""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

from ..dataclass import dataclass
from ..formats import EventFormat

STACK_EVENTS = {("ftrace", "kernel_stack"): "kernel", ("ftrace", "user_stack"): "user",
                ("probectl", "user_callchain"): "user"}
PROBE_IP_FIELDS = ("__probe_ip", "__probe_func")
_USER_TOP = 1 << 63  # (64-bit: user addresses have the top bit clear, kernel ones set)


class Record:
    """One event of the row path, with the stacks recorded after it: [(kind, tgid, addresses)]."""

    __slots__ = ("row", "stacks", "done")

    def __init__(self, row: tuple):
        self.row = row
        self.stacks: list[tuple[str, int, tuple[int, ...]]] = []
        self.done = False


@dataclass(frozen=True)
class StackLayout:
    """Where a stack record's values are, found by name in its format (the file carries the format,
    and a kernel or a damaged file may order, name or type the fields otherwise): ``kind`` (kernel
    or user), and the index among the record's values of its first field (kernel_stack's ``size``,
    user_stack's ``tgid``) and of its ``caller`` array; None for a field the format lacks."""

    kind: str
    first: Optional[int] = 0
    callers: Optional[int] = 1

    @classmethod
    def of(cls, fmt: EventFormat) -> "StackLayout":
        kind = STACK_EVENTS[(fmt.system, fmt.name)]
        names = [f.name for f in fmt.event_fields]
        first = "size" if kind == "kernel" else "tgid"
        callers = (names.index("caller") if "caller" in names
                   else next((i for i, f in enumerate(fmt.event_fields) if f.is_array), None))
        return cls(kind, names.index(first) if first in names else None, callers)


_WORD = 0xFFFFFFFFFFFFFFFF


def _value(values: tuple, index: Optional[int]) -> Any:
    return values[index] if index is not None and 0 <= index < len(values) else None


def _plain_addresses(array: Any) -> bool:
    """Whether a stack record's array is user addresses only, as probectl's callchains are: a
    non-empty tuple of ints in 1..2**64-2 (the quick way through :func:`stack_addresses`)."""
    return type(array) is tuple and bool(array) and 0 not in array and _WORD not in array \
        and set(map(type, array)) == {int} and min(array) > 0 and max(array) < _WORD


def stack_addresses(kind: str, values: Optional[tuple], first: Optional[int] = 0,
                    callers: Optional[int] = 1) -> tuple[int, tuple[int, ...]]:
    """(tgid or 0, addresses innermost first) of a kernel_stack / user_stack record's values, the
    count (or tgid) at index ``first`` and the caller array at ``callers``. Values of another shape
    than the kernel's (a missing field, a scalar or text for the array, a negative count) give what
    can be read from them, never an exception: a stack record must not stop a whole script."""
    if not values:
        return 0, ()
    head, array = _value(values, first), _value(values, callers)
    count = head if isinstance(head, int) else None
    if isinstance(array, int):
        array = (array,)
    elif not isinstance(array, (tuple, list)):
        array = ()
    tgid = 0
    if kind == "user" and count is not None and count > 0 and _plain_addresses(array):
        return count, array
    if kind == "kernel":
        if count is not None and count >= 0:
            array = array[:count]
    elif count is not None and count > 0:
        tgid = count
    out = []
    for a in array:
        if not isinstance(a, int):
            continue
        a &= _WORD  # (a signed caller type)
        if a == 0:
            if kind == "user":
                break
            continue
        if a == _WORD:
            break
        out.append(a)
    return tgid, tuple(out)


class StackJoiner:
    """Attach stack records to the event they follow on the same CPU, keeping time order.

    An event is complete when the next event of its CPU arrives, or when any event is more than
    ``window_ns`` later (stack records are written microseconds after their event).
    """

    def __init__(self, stack_ids: "Mapping[int, StackLayout | str]", window_ns: int = 50_000_000,
                 probe_ips: Optional[dict[int, int]] = None):
        """``probe_ips``: format id → index among its values of the probe address (see
        :func:`probe_ip_fields`), whose kernel stacks are dropped when the address is a user one."""
        # (a kind alone: the kernel's field order)
        self.stack_ids = {i: layout if isinstance(layout, StackLayout) else StackLayout(layout)
                          for i, layout in stack_ids.items()}
        self.window = window_ns
        self.queue: deque[Record] = deque()
        self.last: dict[int, Record] = {}
        self.orphans = 0
        self.probe_ips = probe_ips or {}

    def feed(self, rows: Iterable[tuple]) -> Iterator[Record]:
        stack_ids, queue, last = self.stack_ids, self.queue, self.last
        for row in rows:
            layout = stack_ids.get(row[2])
            cpu = row[1]
            if layout is not None:
                owner = last.get(cpu)
                if owner is not None and owner.row[3] == row[3] and not owner.done:
                    if layout.kind == "kernel" and self._user_probe(owner.row):
                        continue
                    tgid, addrs = stack_addresses(layout.kind, row[6], layout.first, layout.callers)
                    owner.stacks.append((layout.kind, tgid or 0, addrs))
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

    def _user_probe(self, row: tuple) -> bool:
        index = self.probe_ips.get(row[2])
        if index is None:
            return False
        ip = _value(row[6], index)
        return isinstance(ip, int) and 0 < ip < _USER_TOP

    @classmethod
    def of(cls, formats: Iterable[EventFormat]) -> "StackJoiner":
        """A joiner of the stack records among ``formats`` to the other events."""
        formats = list(formats)
        return cls(stack_ids(formats), probe_ips=probe_ip_fields(formats))

    def finish(self) -> Iterator[Record]:
        while self.queue:
            yield self.queue.popleft()
        self.last.clear()


def stack_ids(formats: Iterable[EventFormat]) -> dict[int, StackLayout]:
    """Format id → the :class:`StackLayout` (kernel or user) of the stack record formats among ``formats``."""
    return {f.id: StackLayout.of(f) for f in formats if (f.system, f.name) in STACK_EVENTS}


def probe_ip_fields(formats: Iterable[EventFormat]) -> dict[int, int]:
    """Format id → the index among its values of its probe address (``__probe_ip``, or a return
    probe's ``__probe_func``), for the probe events among ``formats``."""
    out = {}
    for f in formats:
        names = [x.name for x in f.event_fields]
        for name in PROBE_IP_FIELDS:
            if name in names:
                out[f.id] = names.index(name)
                break
    return out


def records_with_stacks(trace: Any, formats: list, batch: int = 1 << 16,
                        progress: Optional[Callable[[int], None]] = None) -> Iterator[Record]:
    """The events of a trace with their stacks attached, in time order; ``progress(events read)``
    after each batch."""
    joiner = StackJoiner.of(formats)
    reader = trace.reader(formats=formats)
    read = 0
    try:
        for rows, _lost in reader.rows(batch):
            read += len(rows)
            yield from joiner.feed(rows)
            if progress is not None:
                progress(read)
        yield from joiner.finish()
    finally:
        reader.close()
