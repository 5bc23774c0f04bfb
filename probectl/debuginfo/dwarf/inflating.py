"""A zlib-compressed section inflated only as far as it is read.

pyelftools inflates every compressed DWARF section of a file when it opens it: for libc6-dbg
~45 ms at each run, ``.debug_info`` alone ~29 ms, although a warm ``add`` reads one unit, its
abbreviations and its lines. This stream inflates in steps, up to the furthest byte read so far;
a section that is never read is never inflated. zlib cannot start in the middle of a stream, so a
read near the end still inflates what is before it.
"""
from __future__ import annotations

import os
import zlib

from ...errors import DebugInfoError

# Inflate at least this much at a time: fewer calls into zlib for the many small reads of a parser.
STEP = 256 << 10


class InflatingSection:
    """The inflated bytes of one section, read like the in-memory streams pyelftools makes of
    sections (``seek``, ``tell``, ``read``, ``getvalue``)."""

    def __init__(self, payload: bytes, size: int, name: str, path: str):
        self.size = size
        self._name = name
        self._path = path
        self._tail = payload
        self._inflate = zlib.decompressobj()
        self._done = bytearray()
        self._pos = 0

    def _fill(self, end: int) -> None:
        end = min(end, self.size)
        while len(self._done) < end and self._tail:
            try:
                out = self._inflate.decompress(self._tail, max(end - len(self._done), STEP))
            except zlib.error as exc:
                raise DebugInfoError(f"{self._path}: section {self._name}: bad zlib data ({exc})") from None
            self._tail = self._inflate.unconsumed_tail
            if not out:
                break
            self._done += out
        if len(self._done) < end:
            raise DebugInfoError(f"{self._path}: section {self._name} inflates to {len(self._done)} bytes, "
                                 f"its header says {self.size}")

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_CUR:
            pos += self._pos
        elif whence == os.SEEK_END:
            pos += self.size
        self._pos = max(pos, 0)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self._pos + n, self.size)
        if end <= self._pos:
            return b""
        self._fill(end)
        out = bytes(self._done[self._pos:end])
        self._pos = end
        return out

    def getvalue(self) -> bytes:
        """The whole section, as bytes."""
        self._fill(self.size)
        return bytes(self._done)

    @property
    def inflated(self) -> int:
        """How many bytes were inflated so far."""
        return len(self._done)
