"""Flame graphs: weighted stacks as one self-contained interactive SVG.

Each frame is a box as wide as the weight of the stacks that pass through it; a frame's children sit on
it (under it in an icicle graph, ``inverted``), sorted by name, as flamegraph.pl draws them. Frames
narrower than ``min_width`` pixels are left out with their subtrees (their weight stays in the parent's
width), which bounds the SVG: at most about ``width / min_width`` frames a level, however many distinct
stacks the input holds. Kernel frames (folded names ending in ``_[k]``) have their own colours.

The SVG carries its script: a tooltip (``<title>``) per frame with its name, weight and share; a click
zooms into a frame (its ancestors stay, faded, as the way back), "Reset Zoom" returns; "Search" (or
Ctrl-F, or ``?s=REGEX`` in the address) highlights the frames whose name matches and prints the share of
the total they cover (nested matches counted once). The script also exposes ``flamegraph.search(re)``,
``flamegraph.zoom(g)`` and ``flamegraph.unzoom()`` for tests and the console.
"""
from __future__ import annotations

import zlib
from html import escape
from typing import Optional

from ..dataclass import dataclass
from ..errors import ProbectlError
from ..script import KERNEL_MARK
from ..termtext import backslashed
from .stacks import StackCounts

FONT_SIZE = 12
FRAME_HEIGHT = 16
X_PAD = 10
# Width of an average Verdana character, in font sizes (to cut names to their box).
CHAR_WIDTH = 0.59


@dataclass(frozen=True)
class Palette:
    """Hue ranges (degrees) of user and kernel frames."""

    user: tuple[int, int]
    kernel: tuple[int, int]
    saturation: int = 75
    lightness: int = 58
    match: str = "rgb(230,0,230)"  # a search's highlight, apart from both ranges


# on-CPU: user frames red to yellow, kernel frames aqua; off-CPU: blue and purple; weights (bytes): greens.
PALETTES = {"hot": Palette((0, 55), (165, 195)), "io": Palette((205, 235), (255, 290), match="rgb(255,200,0)"),
            "mem": Palette((80, 135), (165, 195))}


@dataclass
class FlameGraphOptions:
    title: str = "Flame Graph"
    width: int = 1200
    min_width: float = 0.1  # pixels
    inverted: bool = False
    palette: str = "hot"
    count_name: Optional[str] = None  # what a weight counts, for the tooltips; None: from the stacks' unit


@dataclass
class Frame:
    """A drawn frame: its depth (0 is the root), its start and weight in weight units."""

    depth: int
    start: int
    value: int
    name: str


def layout(counts: dict, root_name: str, min_value: float) -> tuple[list[Frame], int, int]:
    """The frames to draw (those of weight ≥ ``min_value``), root first, then by depth and position;
    the total weight; the number of frames left out.

    One pass over the stacks sorted frame by frame (which puts siblings in name order, and a frame's
    stacks next to each other), as flamegraph.pl merges them: a frame opens where a stack first differs
    from the one before and closes where a later one differs, its weight the weights between (no tree
    of nodes: a million-sample profile of 100,000 distinct stacks would be a million of them)."""
    items = sorted((stack.split(";"), n) for stack, n in counts.items() if n > 0)
    frames: list[Frame] = []
    omitted = 0
    open_names: list[str] = []
    open_starts: list[int] = []
    x = 0

    def close(keep: int) -> None:
        nonlocal omitted
        while len(open_names) > keep:
            name, start = open_names.pop(), open_starts.pop()
            if x - start >= min_value:
                frames.append(Frame(len(open_names) + 1, start, x - start, name))
            else:
                omitted += 1

    for names, n in items:
        k, m = 0, min(len(open_names), len(names))
        while k < m and open_names[k] == names[k]:
            k += 1
        close(k)
        open_names.extend(names[k:])
        open_starts.extend([x] * (len(names) - k))
        x += n
    close(0)
    frames.append(Frame(0, 0, x, root_name))
    frames.sort(key=lambda f: (f.depth, f.start))
    return frames, x, omitted


def format_weight(value: float, unit: str) -> str:
    """A weight as the tooltips say it: ``1,234 samples``, ``12.5 ms`` (a time in ns)."""
    if unit == "ns":
        for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
            if value >= scale:
                return f"{value / scale:,.3g} {name}" if value / scale < 1000 else f"{value / scale:,.0f} {name}"
        return f"{value:,.0f} ns"
    return f"{value:,.0f} {unit}"


def _colour(name: str, kernel: bool, palette: Palette) -> str:
    lo, hi = palette.kernel if kernel else palette.user
    h = zlib.crc32(name.encode("utf-8", "surrogateescape"))
    hue = lo + (h & 0xFFFF) * (hi - lo) / 0xFFFF
    light = palette.lightness + ((h >> 16) & 0xFF) * 12 / 255 - 6
    return f"hsl({hue:.0f},{palette.saturation}%,{light:.0f}%)"


def _fit(name: str, width: float) -> str:
    chars = int((width - 6) / (FONT_SIZE * CHAR_WIDTH))
    if chars < 3:
        return ""
    return name if len(name) <= chars else name[:chars - 2] + ".."


def render_svg(stacks: StackCounts, options: FlameGraphOptions) -> str:
    """The flame graph of ``stacks`` as SVG text."""
    if options.width < 100:
        raise ProbectlError(f"a flame graph {options.width} pixels wide has no room for frames",
                            "give --width 100 or more (1200 is the default)")
    if options.min_width < 0:
        raise ProbectlError("--minwidth is a number of pixels, 0 or more")
    palette = PALETTES[options.palette]
    unit = options.count_name or stacks.unit
    total = sum(n for n in stacks.counts.values() if n > 0)
    if total <= 0:
        raise ProbectlError("the stacks weigh nothing (every count is 0)", "there is nothing to draw")
    draw_width = options.width - 2 * X_PAD
    scale = draw_width / total
    frames, total, omitted = layout(stacks.counts, "all", options.min_width / scale)
    depth = max(f.depth for f in frames) + 1
    top_pad = FONT_SIZE * 3 + 14
    bottom_pad = FONT_SIZE * 2 + 10
    height = depth * FRAME_HEIGHT + top_pad + bottom_pad

    out = [_HEAD.format(width=options.width, height=height, font=FONT_SIZE,
                        inverted="true" if options.inverted else "false", xpad=X_PAD, fontwidth=CHAR_WIDTH,
                        script=_SCRIPT, title=escape(options.title), mid=options.width / 2,
                        title_y=FONT_SIZE * 2, detail_y=height - bottom_pad / 2 + 4,
                        right=options.width - X_PAD, subtitle=escape(_subtitle(stacks, unit, total, omitted)),
                        subtitle_y=FONT_SIZE * 2 + 14, match=palette.match)]
    append = out.append
    kernel_class = ' class="k"'
    for f in frames:
        kernel = f.name.endswith(KERNEL_MARK)
        name = f.name[:-len(KERNEL_MARK)] if kernel else f.name
        x = X_PAD + f.start * scale
        w = f.value * scale
        y = (top_pad + f.depth * FRAME_HEIGHT if options.inverted
             else height - bottom_pad - (f.depth + 1) * FRAME_HEIGHT)
        fill = "rgb(160,160,160)" if f.depth == 0 else _colour(name, kernel, palette)
        label = escape(backslashed(name))
        share = 100 * f.value / total
        append(f'<g{kernel_class if kernel else ""}><title>{label} ({escape(format_weight(f.value, unit))}, '
               f'{share:.2f}%)</title><rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{FRAME_HEIGHT - 1}" '
               f'fill="{fill}" rx="2" ry="2"/><text x="{x + 3:.2f}" y="{y + FRAME_HEIGHT - 4.5}">'
               f'{escape(backslashed(_fit(name, w)))}</text></g>\n')
    out.append("</g>\n</svg>\n")
    return "".join(out)


def _subtitle(stacks: StackCounts, unit: str, total: int, omitted: int) -> str:
    what = format_weight(total, unit)
    if unit == "ns":
        what += " off-CPU"
    text = f"{what} in {len(stacks.counts):,} stacks"
    if omitted:
        text += f"; {omitted:,} frames narrower than the minimum width left out"
    return text


_HEAD = """<?xml version="1.0" standalone="no"?>
<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" \
viewBox="0 0 {width} {height}" onload="flamegraph.init(evt)" data-inverted="{inverted}" \
data-xpad="{xpad}" data-match="{match}" data-fontsize="{font}" data-fontwidth="{fontwidth}">
<style type="text/css">
text {{ font-family: Verdana, sans-serif; font-size: {font}px; fill: rgb(0,0,0); }}
#frames > g:hover > rect {{ stroke: black; stroke-width: 0.5; cursor: pointer; }}
#frames > g > text {{ pointer-events: none; }}
#title {{ text-anchor: middle; font-size: {title_font}px; }}
#subtitle {{ text-anchor: middle; fill: rgb(90,90,90); }}
#search, #matched, #unzoom {{ cursor: pointer; }}
#search, #matched {{ text-anchor: end; }}
.hide {{ display: none; }}
.parent {{ opacity: 0.5; }}
</style>
<script type="text/ecmascript"><![CDATA[
{script}
]]></script>
<rect x="0" y="0" width="100%" height="100%" fill="rgb(248,248,238)"/>
<text id="title" x="{mid}" y="{title_y}">{title}</text>
<text id="subtitle" x="{mid}" y="{subtitle_y}">{subtitle}</text>
<text id="details" x="{xpad}" y="{detail_y}"> </text>
<text id="unzoom" class="hide" x="{xpad}" y="{title_y}" onclick="flamegraph.unzoom()">Reset Zoom</text>
<text id="search" x="{right}" y="{title_y}" onclick="flamegraph.prompt()">Search</text>
<text id="matched" x="{right}" y="{detail_y}"> </text>
<g id="frames">
""".replace("{title_font}", str(FONT_SIZE + 5))

# The script of the SVG (no external resource: the file opens offline, in any browser).
_SCRIPT = r"""
"use strict";
var flamegraph = (function () {
  var frames, details, matched, unzoomBtn, searchBtn, xpad, width, fontSize, fontWidth, inverted;
  var all = [], current = null, total = 1, lastMatch = null;
  var MATCH;

  function fit(f) {
    var n = Math.floor((f.w - 6) / (fontSize * fontWidth));
    f.text.textContent = n < 3 ? "" : (f.name.length <= n ? f.name : f.name.slice(0, n - 2) + "..");
  }
  function place(f, x, w) {
    f.w = w;
    f.rect.setAttribute("x", x.toFixed(2));
    f.rect.setAttribute("width", w.toFixed(2));
    f.text.setAttribute("x", (x + 3).toFixed(2));
    fit(f);
  }
  function init(evt) {
    var svg = document.documentElement;
    frames = document.getElementById("frames");
    details = document.getElementById("details");
    matched = document.getElementById("matched");
    unzoomBtn = document.getElementById("unzoom");
    searchBtn = document.getElementById("search");
    xpad = +svg.getAttribute("data-xpad");
    MATCH = svg.getAttribute("data-match");
    width = +svg.getAttribute("width");
    fontSize = +svg.getAttribute("data-fontsize");
    fontWidth = +svg.getAttribute("data-fontwidth");
    inverted = svg.getAttribute("data-inverted") === "true";
    var gs = frames.children;
    for (var i = 0; i < gs.length; i++) {
      var g = gs[i], rect = g.querySelector("rect"), title = g.querySelector("title").textContent;
      var f = {g: g, rect: rect, text: g.querySelector("text"), title: title,
               name: title.replace(/ \([^()]*\)$/, ""), fill: rect.getAttribute("fill"),
               x: +rect.getAttribute("x"), w: +rect.getAttribute("width"), y: +rect.getAttribute("y")};
      f.x0 = f.x; f.w0 = f.w;
      g.frame = f;
      all.push(f);
    }
    if (all.length) total = all[0].w0;
    frames.addEventListener("click", function (e) {
      var g = e.target.closest("g");
      if (g && g.frame) zoom(g);
    });
    frames.addEventListener("mouseover", function (e) {
      var g = e.target.closest("g");
      if (g && g.frame) details.textContent = g.frame.title;
    });
    frames.addEventListener("mouseout", function () { details.textContent = " "; });
    window.addEventListener("keydown", function (e) {
      if (e.keyCode === 114 || ((e.ctrlKey || e.metaKey) && e.keyCode === 70)) { e.preventDefault(); prompt_(); }
      else if (e.key === "Escape") { resetSearch(); }
    });
    var term = new URLSearchParams(document.location.search).get("s");
    if (term) search(term);
  }
  function zoom(g) {
    var z = g.frame, eps = 1e-6, scale = (width - 2 * xpad) / z.w0;
    current = z;
    unzoomBtn.classList.remove("hide");
    for (var i = 0; i < all.length; i++) {
      var f = all[i], ancestor = inverted ? f.y < z.y : f.y > z.y;
      if (ancestor) {
        if (f.x0 <= z.x0 + eps && f.x0 + f.w0 >= z.x0 + z.w0 - eps) {
          f.g.classList.remove("hide"); f.g.classList.add("parent"); place(f, xpad, width - 2 * xpad);
        } else f.g.classList.add("hide");
      } else if (f.x0 >= z.x0 - eps && f.x0 + f.w0 <= z.x0 + z.w0 + eps) {
        f.g.classList.remove("hide", "parent");
        place(f, xpad + (f.x0 - z.x0) * scale, f.w0 * scale);
      } else f.g.classList.add("hide");
    }
    if (lastMatch !== null) search(lastMatch);
  }
  function unzoom() {
    current = null;
    unzoomBtn.classList.add("hide");
    for (var i = 0; i < all.length; i++) {
      var f = all[i];
      f.g.classList.remove("hide", "parent");
      place(f, f.x0, f.w0);
    }
    if (lastMatch !== null) search(lastMatch);
  }
  function search(term) {
    var re;
    try { re = new RegExp(term); } catch (err) { matched.textContent = "Bad regexp: " + term; return null; }
    lastMatch = term;
    var hits = [];
    for (var i = 0; i < all.length; i++) {
      var f = all[i];
      if (re.test(f.name)) { f.rect.setAttribute("fill", MATCH); hits.push(f); }
      else f.rect.setAttribute("fill", f.fill);
    }
    // the share of the total the matches cover: a match inside another counts once. Frames do not
    // overlap unless nested; positions are written to 0.01 px, so a neighbour may seem to start 0.01 px
    // inside the one before (frames are 0.1 px wide or more by default, nested ones start well inside)
    hits.sort(function (a, b) { return a.x0 - b.x0 || b.w0 - a.w0; });
    var sum = 0, end = -Infinity;
    for (var j = 0; j < hits.length; j++) {
      if (hits[j].x0 >= end - 0.025) { sum += hits[j].w0; end = hits[j].x0 + hits[j].w0; }
    }
    var pct = 100 * sum / total;
    searchBtn.textContent = "Reset Search";
    matched.textContent = "Matched: " + (hits.length ? pct.toFixed(1) : "0.0") + "%";
    return {frames: hits.length, percent: pct};
  }
  function resetSearch() {
    lastMatch = null;
    for (var i = 0; i < all.length; i++) all[i].rect.setAttribute("fill", all[i].fill);
    searchBtn.textContent = "Search";
    matched.textContent = " ";
  }
  function prompt_() {
    if (lastMatch !== null) { resetSearch(); return; }
    var term = window.prompt("Search for a frame name (a regular expression)", "");
    if (term) search(term);
  }
  return {init: init, zoom: zoom, unzoom: unzoom, search: search, resetSearch: resetSearch, prompt: prompt_,
          frames: function () { return all; }, zoomed: function () { return current; }};
})();
"""
