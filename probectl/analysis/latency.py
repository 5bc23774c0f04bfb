"""Latency between a start and an end event: the pairs the aggregator matched, as percentiles, a
histogram in µs or ns (log2 or linear buckets) and the ``completion_time latency`` lines heat maps
read."""
from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Optional, Sequence

from ..dataclass import dataclass, field
from .keys import KeyPart
from .table import HistRow, HistTable, bucket_of

if TYPE_CHECKING:
    from .. import _native

PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class TimeUnit:
    """The unit latencies are measured in: its name in labels, its symbol, its length in ns, and the
    kernel's time stamp in it (hist trigger variables)."""

    name: str
    symbol: str
    ns: int
    kernel_timestamp: str


MICROSECONDS = TimeUnit("us", "µs", 1000, "common_timestamp.usecs")
NANOSECONDS = TimeUnit("ns", "ns", 1, "common_timestamp")


@dataclass
class LatencyResult:
    """Latencies in ``unit`` (``latencies[i]`` ended at ``ends[i]``, ns of the trace clock)."""

    start: str
    end: str
    ends: array
    latencies: array
    path: str
    unit: TimeUnit = MICROSECONDS
    unmatched: int = 0  # ends without a start
    replaced: int = 0  # starts that replaced a start of their key before its end (nested calls)
    pending: int = 0  # starts without an end when it stopped
    lost: int = 0
    counts: Optional[dict[int, int]] = None  # from the kernel: exact latency -> count
    command_exit: Optional[int] = None  # of a live run's command (TracedRun.command_exit)
    _sorted: Optional[list[int]] = field(default=None, repr=False)

    @property
    def count(self) -> int:
        return sum(self.counts.values()) if self.counts is not None else len(self.latencies)

    def sorted_values(self) -> list[int]:
        if self._sorted is None:
            if self.counts is not None:
                self._sorted = [v for v in sorted(self.counts) for _ in range(self.counts[v])]
            else:
                self._sorted = sorted(self.latencies)
        return self._sorted

    def percentile(self, p: float) -> Optional[int]:
        """The nearest-rank percentile: the smallest latency with at least p% at or below it."""
        values = self.sorted_values()
        if not values:
            return None
        rank = max(1, -(-len(values) * p // 100))
        return values[int(rank) - 1]

    def summary(self) -> dict:
        values = self.sorted_values()
        out: dict = {"count": len(values)}
        for p in PERCENTILES:
            out[f"p{p}"] = self.percentile(p)
        out["max"] = values[-1] if values else None
        out["min"] = values[0] if values else None
        out["mean"] = round(sum(values) / len(values), 3) if values else None
        return out

    def histogram(self, part: KeyPart) -> HistTable:
        """The latencies counted in ``part``'s buckets (see :func:`latency_part`)."""
        counts: dict[int, list[int]] = {}
        for v in self.sorted_values():
            b = bucket_of(part, v)
            c = counts.setdefault(b, [0, 0])
            c[0] += 1
            c[1] += v
        rows = [HistRow((b,), c[0], None) for b, c in sorted(counts.items())]
        return HistTable(f"{self.start} -> {self.end}", [part], None, rows, self.path, lost=self.lost)

    def pairs_text(self) -> str:
        """``completion_time latency`` lines: seconds of the trace clock to the nanosecond (as the
        recording has them, so a heat map of the pairs is the heat map of the recording), latency in
        the unit."""
        return "".join(f"{e // 1_000_000_000}.{e % 1_000_000_000:09d} {lat}\n"
                       for e, lat in zip(self.ends, self.latencies))


def latency_part(buckets: Optional[int], unit: TimeUnit = MICROSECONDS) -> KeyPart:
    """The histogram key of a latency: log2 buckets, or linear ones of ``buckets`` units."""
    name = f"latency_{unit.name}"
    return KeyPart(name, "buckets", buckets) if buckets else KeyPart(name, "log2")


def result_from_pairs(start: str, end: str, ends_bytes: bytes, lat_bytes: bytes, counters: _native._AggCounters,
                      path: str, lost: int = 0, unit: TimeUnit = MICROSECONDS) -> LatencyResult:
    ends, lats = array("Q"), array("Q")
    ends.frombytes(ends_bytes)
    lats.frombytes(lat_bytes)
    return LatencyResult(start, end, ends, lats, path, unit, unmatched=counters.get("unmatched", 0),
                         replaced=counters.get("replaced", 0), pending=counters.get("pending", 0), lost=lost)


def result_from_kernel(start: str, end: str, table: HistTable, unit: TimeUnit = MICROSECONDS) -> LatencyResult:
    """The kernel's histogram of the synthetic event's exact latencies (key ``lat``)."""
    counts: dict[int, int] = {}
    for r in table.rows:
        counts[r.key[0]] = counts.get(r.key[0], 0) + r.count
    return LatencyResult(start, end, array("Q"), array("Q"), "kernel", unit, counts=counts)


def render_summary(result: LatencyResult) -> str:
    s = result.summary()
    if not s["count"]:
        return ""
    u = result.unit.symbol
    return (f"{s['count']:,} pairs  min {s['min']} {u}  p50 {s['p50']} {u}  p90 {s['p90']} {u}  "
            f"p99 {s['p99']} {u}  max {s['max']} {u}\n")


def plan_parts(keys: Sequence[KeyPart]) -> list[tuple]:
    """Key parts of a latency plan: text keys all of one width, so that start and end keys match."""
    from .keys import SRC_FIELD, STRING_KEY_BYTES

    parts = []
    for k in keys:
        p = k.plan_part()
        if p[0] == SRC_FIELD and k.is_text:
            p = p[:4] + (STRING_KEY_BYTES,)
        parts.append(p)
    return parts
