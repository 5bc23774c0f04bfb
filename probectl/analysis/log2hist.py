"""Power-of-two histograms as bpftrace prints them: ``[lo, hi)  count |@@@@@    |``.

One bucket rule for every probectl histogram (``report --hist`` here; meant for ``hist`` and
``latency`` too): bucket 0 holds 0, bucket 1 holds 1, bucket k >= 2 holds [2^(k-1), 2^k);
negative values share bucket -1. Ranges are written with bpftrace's K/M/G/T/P/E suffixes (powers
of 1024). The bucket of a value is computed where the values are (SQL, see :func:`sql_bucket`, or
:func:`bucket` in Python); this module labels and draws the counts.

In SQL, the exact bucket (:func:`sql_bucket`) costs four times what ``floor(log2(x))`` does
(:func:`sql_bucket_fast`), which is exact except next to large powers of two (above 2^53 a double
rounds). :func:`exact_groups` tells from each fast bucket's minimum and maximum whether every value
fell where it belongs; only when one did not is the exact expression needed.
"""
from __future__ import annotations

from typing import Iterable, Mapping

BAR_WIDTH = 52
_SUFFIXES = ("", "K", "M", "G", "T", "P", "E")


def bucket(value: int) -> int:
    """The bucket of an integer value."""
    if value < 0:
        return -1
    return value.bit_length()


def sql_bucket(expr: str) -> str:
    """The SQL (DuckDB) expression of the bucket of integer ``expr``: the same rule as :func:`bucket`.
    (log2 of a double is off by one next to large powers of two: the bucket is corrected by
    comparing with its bounds, exactly, as HUGEINT.)"""
    v = f"CAST({expr} AS HUGEINT)"
    b = f"(CAST(floor(log2({v})) AS INTEGER) + 1)"
    return (f"CASE WHEN {v} < 0 THEN -1 WHEN {v} = 0 THEN 0 ELSE {b} + CAST({v} >= (1::HUGEINT << {b}) AS INTEGER) "
            f"- CAST({v} < (1::HUGEINT << ({b} - 1)) AS INTEGER) END")


def sql_bucket_fast(expr: str) -> str:
    """``floor(log2(expr)) + 1`` for positive values (0 and -1 as :func:`bucket` for the others):
    exact but for values above 2^53 next to a power of two (see :func:`exact_groups`)."""
    return f"CASE WHEN {expr} > 0 THEN CAST(floor(log2({expr})) AS INTEGER) + 1 WHEN {expr} = 0 THEN 0 ELSE -1 END"


def exact_groups(groups: Iterable[tuple[int, int, int]]) -> bool:
    """Whether every (fast bucket, minimum, maximum) has its minimum and maximum in that bucket
    (then so are the values between them)."""
    return all(bucket(lo) == k and bucket(hi) == k for k, lo, hi in groups)


def size_text(n: int) -> str:
    """``n`` with bpftrace's suffix when it is a multiple of a power of 1024 (1024 -> 1K)."""
    i = 0
    while i + 1 < len(_SUFFIXES) and n and n % 1024 == 0:
        n //= 1024
        i += 1
    return f"{n}{_SUFFIXES[i]}"


def bucket_label(k: int) -> str:
    if k < 0:
        return "(..., 0)"
    if k <= 1:
        return f"[{k}]"
    return f"[{size_text(1 << (k - 1))}, {size_text(1 << k)})"


def render(counts: Mapping[int, int], width: int = BAR_WIDTH) -> str:
    """The histogram of ``counts`` (bucket -> count): every bucket from the lowest to the highest
    that has a count, each with its range, count and a bar scaled to the largest count."""
    if not counts:
        return ""
    lo, hi = min(counts), max(counts)
    top = max(counts.values()) or 1
    rows = [(bucket_label(k), counts.get(k, 0)) for k in range(lo, hi + 1)]
    label_width = max(len(label) for label, _ in rows)
    count_width = max(len(str(c)) for _, c in rows)
    lines = []
    for label, count in rows:
        bar = "@" * (count * width // top)
        lines.append(f"{label:<{label_width}} {count:>{count_width + 4}} |{bar:<{width}}|")
    return "\n".join(lines) + "\n"
