"""The answer of ``probectl hist``, whichever path computed it: rows of key values with a count and
a sum, sorted and cut to the top N, printed as bpftrace prints its maps (a bar per row) or as JSON.

Buckets, their labels and the bars are :mod:`.histogram`'s (the kernel's rules on every path)."""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..dataclass import dataclass, field
from .histogram import bar_lines
from .keys import KeyPart


@dataclass
class HistRow:
    key: tuple
    count: int
    sum: Optional[int] = None


@dataclass
class HistTable:
    """Rows keyed by ``keys`` (values in the same order); ``value`` names the summed field."""

    event: str
    keys: list[KeyPart]
    value: Optional[str]
    rows: list[HistRow]
    path: str  # "kernel" or "user space"
    dropped: int = 0  # events the kernel's table had no room for
    lost: int = 0  # events the ring buffer lost (user space)
    extra: dict = field(default_factory=dict)
    command_exit: Optional[int] = None  # of a live run's command (TracedRun.command_exit)

    counted: Optional[int] = None  # events counted, all rows (set when --top cuts rows)

    @property
    def total(self) -> int:
        """Events counted in all rows, those cut by ``top`` included."""
        return self.counted if self.counted is not None else sum(r.count for r in self.rows)

    def merge_by(self, names: Callable[[Any], str], index: int) -> None:
        """Replace the thread ids of key part ``index`` by ``names(tid)`` and add up equal keys (how
        ``comm`` is counted in user space: by thread, named once at the end; the kernel's execname
        keys are names already, and merged with ``names`` giving them back)."""
        merged: dict[tuple, HistRow] = {}
        for r in self.rows:
            key = r.key[:index] + (names(r.key[index]),) + r.key[index + 1:]
            m = merged.get(key)
            if m is None:
                merged[key] = HistRow(key, r.count, r.sum)
            else:
                m.count += r.count
                if r.sum is not None:
                    m.sum = (m.sum or 0) + r.sum
        self.rows = list(merged.values())

    def sort(self, by: Optional[str] = None, descending: Optional[bool] = None, top: Optional[int] = None) -> None:
        """Sort by ``count``, ``sum`` or ``key`` (default: key for one bucketed key, else count,
        biggest first), and keep the first ``top`` rows."""
        if by is None:
            by = "key" if self.is_histogram else ("sum" if self.value else "count")
        if descending is None:
            descending = by != "key"
        self.rows.sort(key=lambda r: tuple(_sortable(v) for v in r.key))  # ties in key order
        if by == "key":
            self.rows.sort(key=lambda r: tuple(_sortable(v) for v in r.key), reverse=descending)
        elif by == "sum":
            self.rows.sort(key=lambda r: (r.sum or 0, r.count), reverse=descending)
        else:
            self.rows.sort(key=lambda r: (r.count, r.sum or 0), reverse=descending)
        if top:
            self.counted = self.total
            self.rows = self.rows[:top]

    @property
    def is_histogram(self) -> bool:
        """One bucketed key: printed as ranges, empty buckets between included."""
        return len(self.keys) == 1 and self.keys[0].bucketed


def _sortable(v):
    return (0, v, "") if isinstance(v, int) else (1, 0, str(v))


def bucket_of(part: KeyPart, value: int) -> int:
    """The bucket of ``value`` under ``part``'s modifier (the value itself when it has none)."""
    return part.rule.of(value) if part.rule is not None else value


def bucket_range(part: KeyPart, value: int) -> tuple[int, int]:
    """``[lo, hi)`` of the integers in a bucket."""
    return part.rule.range(value) if part.rule is not None else (value, value + 1)


def _filled(table: HistTable) -> list[HistRow]:
    """A histogram's rows with the empty buckets between the first and last one."""
    rule = table.keys[0].rule
    have = {r.key[0]: r for r in table.rows}
    if rule is None:
        return [have[k] for k in sorted(have)]
    return [have.get(v, HistRow((v,), 0, None if table.value is None else 0)) for v in rule.filled(have)]


def stack_frames(value, display=None) -> list[str]:
    """A stack key's frames as text: the kernel gives them as 'f1;f2', user space as addresses
    (named by ``display``, one frame a line, else hex)."""
    part = KeyPart("stacktrace")
    if display is not None:
        shown = display(part, value)
        if shown is not None:
            return shown.splitlines()
    if isinstance(value, str):
        return [f for f in value.split(";") if f]
    return [hex(a) for a in value]


def key_text(part: KeyPart, value, display: Optional[Callable[[KeyPart, object], Optional[str]]] = None) -> str:
    """One key value as printed: hex for .hex, names for .sym/.syscall when ``display`` knows them."""
    if part.is_stack:
        return "".join(f"\n    {f}" for f in stack_frames(value, display)) + "\n"
    if display is not None:
        shown = display(part, value)
        if shown is not None:
            return shown
    if part.rule is not None and isinstance(value, int):
        return part.rule.label(value)
    if part.modifier in ("hex", "sym") and isinstance(value, int):
        return hex(value & (1 << 64) - 1)
    return str(value)


def render_text(table: HistTable, display=None) -> str:
    """The table as bpftrace prints a map: a histogram's ranges, or the keys, then count (and sum)
    and a bar of the count (of the sum when a value is summed)."""
    if not table.rows:
        return f"(no events of {table.event})\n"
    by_sum = table.value is not None
    if any(p.is_stack for p in table.keys):  # bpftrace's @[kstack, comm]: frames a line each
        out = []
        for r in table.rows:
            label = ", ".join(key_text(p, v, display) for p, v in zip(table.keys, r.key))
            out.append(f"@[{label}]: {r.count}" + (f", sum {r.sum or 0}" if by_sum else "") + "\n")
        return "\n".join(out) + "\n"
    lines = []
    if table.is_histogram:
        rows = _filled(table)
        part = table.keys[0]
        labels = [part.rule.label(r.key[0]) if part.rule is not None else key_text(part, r.key[0], display)
                  for r in rows]
        head = f"@{table.keys[0].label}" + (f" (sum of {table.value})" if by_sum else "") + ":"
        lines.append(head)
    else:
        rows = table.rows
        labels = [", ".join(key_text(p, v, display) for p, v in zip(table.keys, r.key)) for r in rows]
        labels = [f"@[{lab}]" for lab in labels]
        lines.append(f"@[{', '.join(p.label for p in table.keys)}]" + (f": count, sum of {table.value}"
                                                                       if by_sum else ": count"))
    cw = max(len(str(r.count)) for r in rows)
    sw = max(len(str(r.sum or 0)) for r in rows) if by_sum else 0
    lines += bar_lines([(lab, f"{r.count:>{cw}}" + (f" {r.sum or 0:>{sw}}" if by_sum else ""),
                         (r.sum or 0) if by_sum else r.count) for lab, r in zip(labels, rows)])
    lines.append("")
    return "\n".join(lines) + "\n"


def to_json(table: HistTable, display=None) -> dict:
    """The table as a JSON object: every row's key values by name (and range for buckets)."""
    rows = []
    for r in (_filled(table) if table.is_histogram else table.rows):
        key: dict = {}
        for p, v in zip(table.keys, r.key):
            key[p.label] = v
            if p.is_stack:
                key[p.label] = stack_frames(v, display)
            elif p.bucketed:
                key[p.label + ".range"] = list(bucket_range(p, v))
            elif display is not None and display(p, v) is not None:
                key[p.label + ".name"] = display(p, v)
        row: dict = {"key": key, "count": r.count}
        if table.value is not None:
            row["sum"] = r.sum or 0
        rows.append(row)
    out = {"event": table.event, "path": table.path, "keys": [p.label for p in table.keys],
           "value": table.value, "total": table.total, "rows": rows}
    if table.dropped:
        out["dropped"] = table.dropped
    if table.lost:
        out["lost"] = table.lost
    out.update(table.extra)
    return out


def rows_from_entries(entries: Sequence[tuple], keys: Sequence[KeyPart], summed: bool) -> list[HistRow]:
    """The native aggregator's entries as rows."""
    from .keys import decode_key

    return [HistRow(decode_key(k, keys), count, total if summed else None) for k, count, total, _lo, _hi in entries]
