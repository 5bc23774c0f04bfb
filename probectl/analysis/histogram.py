"""Every histogram probectl shows (``hist``, ``latency``, ``report --hist``): the bucket rules, the
labels that say them, the SQL that computes them over recordings, and the bars.

There is one log2 rule, the kernel's ``.log2`` (``ilog2(roundup_pow_of_two(v))``), because the
in-kernel path can only count with it and every path must give the same answer: bucket 0 holds 0
and 1, bucket ``k >= 1`` holds ``(2^(k-1), 2^k]``, labelled so: ``[0, 1]``, ``(1, 2]``, ``(2, 4]``,
``(512, 1K]``. Values are unsigned 64-bit numbers, as the kernel reads them: a negative value of a
signed field is counted as its two's complement (-1 is in ``(8E, 16E]``, bucket 64). A linear
bucket of ``.buckets=N`` starting at ``lo`` holds ``[lo, lo + N)``. Sizes in labels take bpftrace's
K/M/G/T/P/E suffixes (powers of 1024) when they are exact multiples.

In SQL the exact log2 bucket (:func:`sql_log2_bucket`) costs several times what ``floor(log2(x))``
does (:func:`sql_log2_bucket_fast`), which is exact except next to large powers of two (above 2^53 a
double rounds); :func:`exact_groups` tells from each fast bucket's minimum and maximum whether every
value fell where it belongs, so that the exact expression is needed only when one did not.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from ..dataclass import dataclass

BAR_WIDTH = 52
U64 = 1 << 64
_SUFFIXES = ("", "K", "M", "G", "T", "P", "E")
_MAX_FILLED = 4096  # empty buckets drawn between two counted ones, at most


def log2_bucket(value: int) -> int:
    """The kernel's ``.log2`` bucket of ``value`` (read as an unsigned 64-bit number)."""
    value %= U64
    return 0 if value <= 1 else (value - 1).bit_length()


@dataclass(frozen=True)
class Buckets:
    """A bucket rule: log2 (``step`` 0) or linear buckets of ``step``."""

    step: int = 0

    @property
    def is_log2(self) -> bool:
        return not self.step

    def of(self, value: int) -> int:
        """The bucket of ``value`` (what native/aggregate.c and the kernel compute per event)."""
        if self.is_log2:
            return log2_bucket(value)
        return value // self.step * self.step

    def range(self, bucket: int) -> tuple[int, int]:
        """``[lo, hi)``: the integers in ``bucket``."""
        if self.is_log2:
            return (0, 2) if bucket <= 0 else ((1 << (bucket - 1)) + 1, (1 << bucket) + 1)
        return bucket, bucket + self.step

    def label(self, bucket: int) -> str:
        """The bucket as printed: ``[0, 1]``, ``(2, 4]`` (log2) or ``[100, 200)`` (linear)."""
        if self.is_log2:
            return "[0, 1]" if bucket <= 0 else f"({size_text(1 << (bucket - 1))}, {size_text(1 << bucket)}]"
        return f"[{size_text(bucket)}, {size_text(bucket + self.step)})"

    def filled(self, buckets: Iterable[int]) -> list[int]:
        """``buckets`` sorted, with the empty ones between the first and the last (a histogram's
        rows); as they are when that would be more than a few thousand rows."""
        have = sorted(set(buckets))
        step = self.step or 1
        if not have or (have[-1] - have[0]) // step > _MAX_FILLED:
            return have
        return list(range(have[0], have[-1] + 1, step))


LOG2 = Buckets()


def size_text(n: int) -> str:
    """``n`` with bpftrace's suffix when it is a multiple of a power of 1024 (1024 -> 1K)."""
    i = 0
    while i + 1 < len(_SUFFIXES) and n and n % 1024 == 0:
        n //= 1024
        i += 1
    return f"{n}{_SUFFIXES[i]}"


def sql_log2_bucket(expr: str) -> str:
    """The DuckDB expression of :func:`log2_bucket` of integer ``expr``, exact: ``bit_length(u - 1)``
    of the unsigned value ``u``, from ``log2`` of a double corrected by comparing with the bucket's
    bounds as HUGEINT."""
    v = f"CAST({expr} AS HUGEINT)"
    w = f"(CASE WHEN {v} < 0 THEN {v} + {U64} ELSE {v} END - 1)"  # u - 1
    b = f"(CAST(floor(log2({w})) AS INTEGER) + 1)"
    return (f"CASE WHEN {v} BETWEEN 0 AND 1 THEN 0 ELSE {b} + CAST({w} >= (1::HUGEINT << {b}) AS INTEGER) "
            f"- CAST({w} < (1::HUGEINT << ({b} - 1)) AS INTEGER) END")


def sql_log2_bucket_fast(expr: str) -> str:
    """``floor(log2(u - 1)) + 1`` of the unsigned value ``u`` of ``expr`` (0 for 0 and 1): exact but
    next to a power of two above 2^53 (see :func:`exact_groups`)."""
    return (f"CASE WHEN {expr} > 1 THEN CAST(floor(log2({expr} - 1)) AS INTEGER) + 1 WHEN {expr} >= 0 THEN 0 "
            f"ELSE CAST(floor(log2(CAST({expr} AS DOUBLE) + {float(U64)} - 1)) AS INTEGER) + 1 END")


def exact_groups(groups: Iterable[tuple[int, int, int]]) -> bool:
    """Whether every (fast bucket, minimum, maximum) has its minimum and maximum in that bucket
    (then so are the values between them: the rule is monotonic within each sign)."""
    return all(log2_bucket(lo) == k and log2_bucket(hi) == k for k, lo, hi in groups)


def bar_lines(rows: Sequence[tuple[str, str, int]], width: int = BAR_WIDTH) -> list[str]:
    """``label  numbers |@@@@   |`` for every (label, numbers as text, amount) row, labels and
    numbers aligned, the bar of each amount scaled to the largest (bpftrace's look)."""
    if not rows:
        return []
    lw = max(len(label) for label, _, _ in rows)
    nw = max(len(numbers) for _, numbers, _ in rows)
    top = max(amount for _, _, amount in rows) or 1
    lines = []
    for label, numbers, amount in rows:
        bar = "@" * (width * max(amount, 0) // top)
        lines.append(f"{label:<{lw}} {numbers:>{nw}} |{bar:<{width}}|")
    return lines


def histogram_lines(rule: Buckets, counts: dict[int, int]) -> list[str]:
    """A histogram of ``counts`` (bucket -> count) under ``rule``: every bucket from the lowest to the
    highest counted, with its label, count and bar."""
    return bar_lines([(rule.label(b), str(counts.get(b, 0)), counts.get(b, 0)) for b in rule.filled(counts)])
