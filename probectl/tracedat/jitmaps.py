"""probectl's trace.dat option for JIT code names: the ``/tmp/perf-PID.map`` files of the traced
processes (what Node's ``--perf-basic-prof``, Java's perf-map-agent or ``jcmd Compiler.perfmap`` and
Python's ``-X perf`` write: one ``START SIZE name`` line, hex, a symbol), copied into the recording
when it ends (``record/jitmaps.py``), so that ``script`` and ``flamegraph`` name JIT frames later and on
another machine. perf reads the map when it reports, after the process is gone and often its map too.
"""
from __future__ import annotations

import bisect
from typing import NamedTuple, Optional

# probectl's option in trace.dat: blocks "pid PID\n<START SIZE name lines>\n\n" (trace-cmd skips it).
OPTION_JIT_MAPS = 0x7E03


class JitSymbol(NamedTuple):
    start: int
    size: int
    name: str


def parse_perf_map(text: str) -> tuple[list[JitSymbol], int]:
    """The symbols of a perf map's lines (``START SIZE name``: hex numbers, with or without ``0x``,
    the name the rest of the line), and the number of lines that are not such a line (skipped)."""
    out: list[JitSymbol] = []
    bad = 0
    for line in text.split("\n"):
        if not line.strip():
            continue
        parts = line.split(None, 2)
        try:
            start, size = int(parts[0], 16), int(parts[1], 16)
            name = parts[2].strip()
        except (ValueError, IndexError):
            bad += 1
            continue
        if not name or size <= 0 or start < 0 or start + size > 1 << 64:
            bad += 1
            continue
        out.append(JitSymbol(start, size, name))
    return out, bad


def encode_jit_maps(maps: dict[int, list[JitSymbol]]) -> bytes:
    return "".join(f"pid {pid}\n" + "".join(f"{s.start:x} {s.size:x} {s.name}\n" for s in symbols) + "\n"
                   for pid, symbols in sorted(maps.items())).encode(errors="surrogateescape")


def decode_jit_maps(data: bytes) -> dict[int, "JitSymbols"]:
    """The :data:`OPTION_JIT_MAPS` option → {tgid: JitSymbols} (lines that are not symbols skipped)."""
    blocks: dict[int, list[str]] = {}
    lines: Optional[list[str]] = None
    for line in data.decode(errors="replace").split("\n"):
        if line.startswith("pid "):
            try:
                lines = blocks.setdefault(int(line.split()[1]), [])
            except (ValueError, IndexError):
                lines = None
        elif lines is not None:
            lines.append(line)
    return {pid: JitSymbols(parse_perf_map("\n".join(text))[0]) for pid, text in blocks.items()}


class JitSymbols:
    """One process's JIT symbols by address; where entries overlap, the later line of the map wins
    (a runtime that reuses code memory writes the new name after the old)."""

    def __init__(self, symbols: list[JitSymbol]):
        latest: dict[int, JitSymbol] = {}
        for s in symbols:
            latest[s.start] = s
        self.symbols = sorted(latest.values())
        self._starts = [s.start for s in self.symbols]
        self._order = {s: i for i, s in enumerate(symbols)}

    def __len__(self) -> int:
        return len(self.symbols)

    def lookup(self, addr: int) -> Optional[tuple[str, int]]:
        """(name, offset) of the symbol holding ``addr``, or None."""
        i = bisect.bisect_right(self._starts, addr) - 1
        found: Optional[JitSymbol] = None
        # (a few back: an earlier, longer entry may hold the address too; the later line wins)
        for j in range(i, max(i - 8, -1), -1):
            s = self.symbols[j]
            if s.start <= addr < s.start + s.size and (found is None or self._order[s] > self._order[found]):
                found = s
        return (found.name, addr - found.start) if found is not None else None
