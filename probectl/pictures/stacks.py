"""Weighted stacks, the input of a flame graph: folded text read back, or the stacks of a recording
(``record -g``) counted per event, weighted by a field, or by the time a thread spent off the CPU."""
from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

from ..dataclass import dataclass, field
from ..errors import ProbectlError, TraceFileError, did_you_mean
from ..script import FoldedStacks, stack_formatter
from ..script.stacks import Record, records_with_stacks


@dataclass
class StackCounts:
    """Folded stacks (``root;...;leaf``, kernel frames ending in ``_[k]``) and their weights; ``unit``
    says what a weight counts: ``samples`` (events), a field's name (``--weight bytes``), or ``ns``."""

    counts: Counter = field(default_factory=Counter)
    unit: str = "samples"
    events: int = 0  # the events (or blocked intervals) counted

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def folded_text(self) -> str:
        return "".join(f"{stack} {n}\n" for stack, n in sorted(self.counts.items()))


MAX_COUNT = (1 << 63) - 1  # a folded stack's count (as many as a 64-bit counter holds)


def parse_folded(lines: Iterable[str], where: str = "the input", unit: str = "samples") -> StackCounts:
    """Folded stacks (``a;b;c 12`` per line, as stackcollapse-*.pl and ``script --format folded`` write
    them); the same stack on several lines adds up. A line that is not ``STACK COUNT`` is an error
    naming its number: a flame graph of half the input would mislead."""
    out = StackCounts(unit=unit)
    counts = out.counts
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        try:
            n = int(count)
        except ValueError:
            try:  # (flamegraph.pl accepts fractional counts; they are rounded here)
                n = round(float(count))
            except (ValueError, OverflowError):  # (inf, -inf, 1e400)
                n = -1
        if not stack.strip() or not 0 <= n <= MAX_COUNT:
            shown = line if len(line) <= 60 else line[:57] + "..."
            raise ProbectlError(f"{where}, line {number}: not a folded stack: {shown!r}",
                                "each line is 'frame;frame;...;frame COUNT' (script --format folded writes them)")
        counts[stack.strip()] += n
        out.events += n
    if not counts:
        raise ProbectlError(f"{where} holds no stacks",
                            "give folded stacks ('frame;frame COUNT' lines), e.g. from probectl script --format folded")
    return out


class Selection:
    """Which records count: their event (``-e`` globs), process name (``--comm``) or pid/tid (``--pid``)."""

    def __init__(self, folded: FoldedStacks, comms: Sequence[str], pids: Sequence[int]):
        self.f = folded.formatter
        self.comms = set(comms)
        self.pids = set(pids)

    def __call__(self, rec: Record) -> bool:
        tid = rec.row[3]
        if self.comms and self.f.comms[tid] not in self.comms:
            return False
        return not self.pids or tid in self.pids or self.f.tgids[tid] in self.pids


def stack_folder(trace: Any, events: Sequence[str], need_stacks: bool = True,
                 demangle: bool = True) -> tuple[FoldedStacks, list]:
    """The folder of a recording's stacks (its formatter names frames, processes and threads) and the
    formats of the events it holds; ``events`` are ``-e`` globs, each of which must match one."""
    formatter, formats = stack_formatter(trace, events, demangle)
    if need_stacks and not formatter.has_stacks:
        raise ProbectlError(f"{trace.where} has no stacks",
                            "record with -g (probectl record -g ...) to get kernel and user stacks")
    return FoldedStacks(formatter, annotate_kernel=True), formats


def _weight_reader(folded: FoldedStacks, formats: list, name: str):
    """``--weight FIELD``: the value of FIELD in each selected event (every selected event must have it)."""
    f = folded.formatter
    index: dict[int, int] = {}
    for fmt in formats:
        if f.plan(fmt.id).skip:
            continue
        names = [x.name for x in fmt.event_fields]
        if name not in names:
            raise ProbectlError(f"event {fmt.full_name} has no field {name!r} to weigh its stacks by",
                                did_you_mean(name, names) or f"its fields: {', '.join(names) or '(none)'}; "
                                "pick the events with -e")
        index[fmt.id] = names.index(name)

    def weigh(rec: Record) -> int:
        values = rec.row[6]
        i = index.get(rec.row[2])
        v = values[i] if values is not None and i is not None and i < len(values) else None
        if not isinstance(v, int):
            raise TraceFileError(f"field {name!r} of an event is {v!r}, not a number to weigh a stack by")
        return max(v, 0)

    return weigh


def trace_stacks(trace: Any, events: Sequence[str] = (), comms: Sequence[str] = (), pids: Sequence[int] = (),
                 weight: Optional[str] = None, progress: Optional[Callable[[int], None]] = None) -> StackCounts:
    """The stacks of a recording made with ``-g``: each selected event's stack counted once, or by
    the value of its field ``weight``; ``progress(records read)`` as the file is read."""
    folded, formats = stack_folder(trace, events)
    folded.keep = Selection(folded, comms, pids)
    if weight is not None:
        folded.weigh = _weight_reader(folded, formats, weight)
        for rec in records_with_stacks(trace, formats, progress=progress):
            folded.add((rec,))
    else:  # (natively: the selection is by thread, asked once per thread and stacks)
        records = folded.count_natively(trace, formats)
        if progress is not None:
            progress(records)
    if not folded.counts:
        chosen = [g for g in events] + [f"comm {c}" for c in comms] + [f"pid {p}" for p in pids]
        raise ProbectlError(f"{trace.where} has no stacks" + (f" of {', '.join(chosen)}" if chosen else " with its events"),
                            "record with -g, and check the selection (-e, --comm, --pid) against "
                            "probectl script -i FILE")
    return StackCounts(folded.counts, weight or "samples", folded.events)
