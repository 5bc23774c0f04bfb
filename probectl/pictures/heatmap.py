"""Latency heat maps: when requests completed (x) against how long they took (y), the colour of a cell
the number of requests in it, as trace2heatmap.pl draws ``completion_time latency`` pairs.

The pairs are what ``probectl latency --pairs`` prints (seconds of the trace clock, µs); the time
columns and latency rows are steps of 1, 2 or 5 times a power of ten chosen from the data, and the
latency unit (ns, µs, ms, s) from the largest latency. Every pair is in exactly one cell: latencies above
``max_latency`` are counted in the top row, whose label says so.
"""
from __future__ import annotations

import math
from array import array
from html import escape
from typing import Any, Iterable, Optional

from ..dataclass import dataclass, field
from ..errors import ProbectlError

_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 80, 30, 60, 50


@dataclass
class Pairs:
    """Completion times (s) and latencies (µs), in the order read."""

    times: array = field(default_factory=lambda: array("d"))
    latencies: array = field(default_factory=lambda: array("d"))

    def __len__(self) -> int:
        return len(self.times)


def parse_pairs(lines: Iterable[str], where: str = "the input", ns: bool = False) -> Pairs:
    """``completion_time latency`` lines (``#`` comments and blank lines skipped), latencies in µs (in ns
    with ``ns``: ``latency --ns --pairs``); any other line is an error naming its number."""
    pairs = Pairs()
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split()
        try:
            if len(parts) != 2:
                raise ValueError
            t, lat = float(parts[0]), float(parts[1])
            if not (math.isfinite(t) and math.isfinite(lat)) or lat < 0:
                raise ValueError
        except ValueError:
            shown = text if len(text) <= 60 else text[:57] + "..."
            raise ProbectlError(f"{where}, line {number}: not a 'completion_time latency' pair: {shown!r}",
                                "each line is 'SECONDS MICROSECONDS', as probectl latency --pairs prints them") from None
        pairs.times.append(t)
        pairs.latencies.append(lat / 1000 if ns else lat)
    if not pairs.times:
        raise ProbectlError(f"{where} holds no latency pairs",
                            "give 'completion_time latency' lines, e.g. from probectl latency --pairs")
    return pairs


def latency_pairs(result: Any) -> Pairs:
    """The pairs of an :class:`~probectl.analysis.latency.LatencyResult` (analysis' pairing of a start
    and an end event): end times in s, latencies in µs."""
    to_us = result.unit.ns / 1000
    return Pairs(array("d", (e / 1e9 for e in result.ends)), array("d", (v * to_us for v in result.latencies)))


def nice_step(span: float, parts: int) -> float:
    """The smallest 1, 2 or 5 × 10^k that cuts ``span`` into at most ``parts`` steps (a value at
    ``span`` itself starts one more)."""
    if span <= 0:
        return 1.0 if parts else span
    raw = span / parts
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * power >= raw * (1 - 1e-12):
            return m * power
    return 10 * power


# (µs per unit, name), largest first
_UNITS = ((1e6, "s"), (1e3, "ms"), (1.0, "µs"), (1e-3, "ns"))


def latency_unit(max_us: float) -> tuple[float, str]:
    for scale, name in _UNITS:
        if max_us >= scale:
            return scale, name
    return _UNITS[-1]


def _num(value: float) -> str:
    return f"{value:.6g}"


@dataclass
class HeatMap:
    """The binned pairs: ``counts[column][row]`` pairs completed in column ``column`` (``t0 +
    column*step`` s onwards) with a latency in row ``row`` (``row*bucket`` µs onwards)."""

    t0: float
    step: float
    bucket: float
    columns: int
    rows: int
    counts: list[list[int]]
    clipped: int  # latencies at or above rows*bucket, counted in the top row
    unit: tuple[float, str]

    @property
    def total(self) -> int:
        return sum(map(sum, self.counts))


MAX_COLUMNS = 5000  # time columns of a heat map (--columns, or the pairs' time span / --step)


def bin_pairs(pairs: Pairs, columns: int = 100, rows: int = 50, step: Optional[float] = None,
              max_latency: Optional[float] = None) -> HeatMap:
    """Count the pairs in cells: ``columns`` time steps (or steps of ``step`` s) and ``rows`` latency
    buckets up to ``max_latency`` µs (default: the largest latency)."""
    if columns < 1 or rows < 1:
        raise ProbectlError("a heat map needs at least one row and one column")
    for flag, value in (("--step", step), ("--max-latency", max_latency)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ProbectlError(f"{flag} {value}: not a size a heat map can be cut in", f"give {flag} a positive number")
    t_first, t_last = min(pairs.times), max(pairs.times)
    if not math.isfinite(t_last - t_first):
        raise ProbectlError(f"the pairs' times run from {t_first:g} s to {t_last:g} s: more than a float holds",
                            "give completion times of one recording (seconds since boot, as latency --pairs has them)")
    top = max_latency if max_latency is not None else max(pairs.latencies)
    if top <= 0:
        top = 1.0
    bucket = nice_step(top, rows)
    # the largest latency gets a row of its own (one more than asked, when it is a bucket's bottom);
    # a --max-latency is the top of the last row
    rows = max(1, math.ceil(top / bucket) if max_latency is not None else math.floor(top / bucket) + 1)
    if step is None:
        step = nice_step(max(t_last - t_first, 1e-6), columns)
    t0 = math.floor(t_first / step) * step if math.isfinite(t_first / step) else t_first
    span = t_last - t0
    # (a --step is bounded as --columns is: the grid is a list per column)
    if not (math.isfinite(span) and math.isfinite(span / step)) or span / step >= MAX_COLUMNS:
        raise ProbectlError(f"a step of {step:g} s over the pairs' {span:g} s is more than {MAX_COLUMNS:,} columns",
                            f"give --step {span / (MAX_COLUMNS - 1):.3g} or more, or --columns N")
    columns = max(1, math.floor(span / step) + 1)
    counts = [[0] * rows for _ in range(columns)]
    clipped = 0
    for t, lat in zip(pairs.times, pairs.latencies):
        c = min(columns - 1, max(0, int((t - t0) // step)))
        r = int(lat // bucket)
        if r >= rows:
            r = rows - 1
            clipped += 1
        counts[c][r] += 1
    return HeatMap(t0, step, bucket, columns, rows, counts, clipped, latency_unit(rows * bucket))


def _colour(count: int, most: int) -> str:
    share = count / most
    return f"hsl({28 - 28 * share:.0f},95%,{88 - 58 * share:.0f}%)"


def render_heatmap_svg(grid: HeatMap, title: str = "Latency Heat Map", width: int = 1200, height: int = 600) -> str:
    """The heat map as SVG: a cell per non-empty bucket with a tooltip of its ranges and count."""
    if width < 300 or height < 200:
        raise ProbectlError(f"a {width}x{height} heat map has no room for its cells",
                            "give --width 300 or more and --height 200 or more")
    plot_w = width - _MARGIN_LEFT - _MARGIN_RIGHT
    plot_h = height - _MARGIN_TOP - _MARGIN_BOTTOM
    cell_w = plot_w / grid.columns
    cell_h = plot_h / grid.rows
    scale, unit = grid.unit
    most = max(max(col) for col in grid.counts) or 1
    bottom = _MARGIN_TOP + plot_h
    out = [f'<?xml version="1.0" standalone="no"?>\n'
           f'<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}">\n'
           '<style type="text/css">text { font-family: Verdana, sans-serif; font-size: 12px; } '
           '#title { font-size: 17px; text-anchor: middle; } .cell:hover { stroke: black; stroke-width: 1; } '
           '.y { text-anchor: end; } .x { text-anchor: middle; }</style>\n'
           f'<rect x="0" y="0" width="100%" height="100%" fill="rgb(248,248,238)"/>\n'
           f'<text id="title" x="{width / 2}" y="24">{escape(title)}</text>\n'
           f'<text x="{width / 2}" y="44" class="x" fill="rgb(90,90,90)">{grid.total:,} pairs; darkest cell '
           f'{most:,}; columns {_num(grid.step)} s, rows {_num(grid.bucket / scale)} {unit}</text>\n'
           f'<rect x="{_MARGIN_LEFT}" y="{_MARGIN_TOP}" width="{plot_w}" height="{plot_h}" fill="white" '
           'stroke="rgb(200,200,200)"/>\n<g id="cells">\n']
    append = out.append
    for c, column in enumerate(grid.counts):
        x = _MARGIN_LEFT + c * cell_w
        t_lo = c * grid.step
        for r, n in enumerate(column):
            if not n:
                continue
            y = bottom - (r + 1) * cell_h
            lo, hi = r * grid.bucket / scale, (r + 1) * grid.bucket / scale
            rng = (f"≥ {_num(lo)} {unit}" if r == grid.rows - 1 and grid.clipped
                   else f"{_num(lo)}–{_num(hi)} {unit}")
            append(f'<rect class="cell" x="{x:.2f}" y="{y:.2f}" width="{cell_w:.2f}" height="{cell_h:.2f}" '
                   f'fill="{_colour(n, most)}"><title>{_num(t_lo)}–{_num(t_lo + grid.step)} s, {rng}: '
                   f'{n:,} pairs</title></rect>\n')
    append("</g>\n")
    # axes: about ten ticks each way
    every_col = max(1, math.ceil(grid.columns / 10))
    for c in range(0, grid.columns + 1, every_col):
        x = _MARGIN_LEFT + c * cell_w
        append(f'<text class="x" x="{x:.1f}" y="{bottom + 16}">{_num(c * grid.step)}</text>\n')
    append(f'<text class="x" x="{_MARGIN_LEFT + plot_w / 2}" y="{bottom + 36}">time (s) since '
           f'{_num(grid.t0)} s</text>\n')
    every_row = max(1, math.ceil(grid.rows / 10))
    for r in range(0, grid.rows + 1, every_row):
        y = bottom - r * cell_h
        append(f'<text class="y" x="{_MARGIN_LEFT - 6}" y="{y + 4:.1f}">{_num(r * grid.bucket / scale)}</text>\n')
    append(f'<text class="x" transform="translate(18,{_MARGIN_TOP + plot_h / 2}) rotate(-90)">latency '
           f'({unit})</text>\n</svg>\n')
    return "".join(out)
