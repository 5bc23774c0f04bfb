"""A zlib-compressed section inflated only as far as it is read.

pyelftools inflates every compressed DWARF section of a file when it opens it, at each run,
although a warm ``add`` reads one unit, its abbreviations and its lines. This stream inflates in
steps, up to the furthest byte read so far; a section that is never read is never inflated. zlib
cannot start in the middle of a stream, so a read near the end still inflates what is before it.

What a run read is kept for the next one (:func:`open_sections`): the pages read, inflated, in the
index cache under the file's build-id. A warm ``add`` on libc6-dbg reads a small part of ``.debug_info``
but would have to inflate the megabytes before its unit; from the kept pages it inflates nothing.
Windows are whole pages (``PAGE``), so a read inside a kept window is inside kept bytes. They are
kept as the index cache's parts: the windows of every function probed so far add up (to
``MAX_KEPT``), and a run reads (and checks) only the windows it uses.

What must be inflated is inflated by ISA-L (the ``isal`` package), faster than zlib on the same
stream (docs/ledger.md; ``bench/bench_ledger.py --case inflate`` measures both); it is imported at
the first inflation, which a warm run seldom makes. Without it, zlib does the same.
"""
from __future__ import annotations

import bisect
import os
import zlib
from functools import partial
from typing import Callable, Iterable, Literal, NamedTuple, Optional, overload

from ...errors import DebugInfoError

def _inflater():
    """The zlib-compatible module that inflates: ISA-L's when it is installed, else zlib."""
    global _INFLATER
    if _INFLATER is None:
        try:
            from isal import isal_zlib
        except ImportError:
            _INFLATER = zlib
        else:
            _INFLATER = isal_zlib
    return _INFLATER


_INFLATER = None

# Inflate at least this much at a time: fewer calls into zlib for the many small reads of a parser.
STEP = 256 << 10
# Give zlib this much of the stream at a time: what it leaves unused is copied (``unconsumed_tail``),
# so it must be small, not the rest of the stream.
FEED = 64 << 10
# Reads are remembered, and kept windows stored, in pages of this size.
PAGE = 4 << 10
# Kept windows are cut at multiples of this size: a read loads (and checks) the windows it is in, not
# a megabyte of abbreviation tables that the units probed so far happen to have next to each other.
WINDOW = 64 << 10


class KeptWindow(NamedTuple):
    """A page-aligned window of a section that an earlier run inflated: where it starts, its length,
    and how to read its bytes (None when they cannot be: then they are inflated again)."""

    offset: int
    length: int
    load: Callable[[], Optional[bytes]]

    @classmethod
    def holding(cls, offset: int, data: bytes) -> "KeptWindow":
        """A window whose bytes are at hand."""
        return cls(offset, len(data), lambda: data)


class InflatingSection:
    """The inflated bytes of one section, read like the in-memory streams pyelftools makes of
    sections (``seek``, ``tell``, ``read``, ``getvalue``). ``payload`` is the zlib stream, any
    bytes-like object (a view of the mapped file: it is read, never copied)."""

    def __init__(self, payload, size: int, name: str, path: str | os.PathLike[str],
                 kept: Iterable[KeptWindow] = ()):
        self.size = size
        self._name = name
        self._path = path
        self._payload = memoryview(payload)
        self._fed = 0  # how much of the payload zlib was given
        self._pending = b""  # what zlib left of it (unconsumed_tail)
        self._inflate: Optional[zlib._Decompress] = None  # the decompressor, made at the first inflation
        self._done = bytearray()
        self._whole: Optional[bytes] = None  # all of it, once getvalue() was asked (then _done is empty)
        self._pos = 0
        # Page-aligned windows inflated by an earlier run, in offset order, and the bytes of those read
        # so far (None: unreadable).
        self._kept = sorted((w for w in kept if w.offset % PAGE == 0 and 0 < w.length and w.offset + w.length <= size),
                            key=lambda w: w.offset)
        self._kept_starts = [w.offset for w in self._kept]
        self._kept_data: dict[int, Optional[bytes]] = {}
        self._pages: set[int] = set()  # the pages read by this run

    def _bad_data(self, exc: Exception) -> DebugInfoError:
        return DebugInfoError(f"{self._path}: section {self._name}: bad zlib data ({exc})")

    def _short(self, inflated: int) -> DebugInfoError:
        return DebugInfoError(f"{self._path}: section {self._name} inflates to {inflated} bytes, "
                              f"its header says {self.size}")

    def _fill(self, end: int) -> None:
        end = min(end, self.size)
        done, payload = self._done, self._payload
        if self._inflate is None:
            self._inflate = _inflater().decompressobj()
        inflate, error = self._inflate, _inflater().error
        while len(done) < end:
            data: bytes | memoryview = self._pending
            if not data:
                if self._fed >= len(payload) or inflate.eof:
                    break
                data = payload[self._fed:self._fed + FEED]
                self._fed += len(data)
            try:
                done += inflate.decompress(data, max(end - len(done), STEP))
            except error as exc:
                raise self._bad_data(exc) from None
            self._pending = inflate.unconsumed_tail
        if len(done) < end:
            raise self._short(len(done))

    def _inflate_whole(self) -> bytes:
        """The whole section inflated in one call (faster than in steps, and no copy of
        it is made), at most the size the header says."""
        if self.size == 0:
            return b""
        inflater = _inflater()
        try:
            whole = inflater.decompressobj().decompress(self._payload, self.size)
        except inflater.error as exc:
            raise self._bad_data(exc) from None
        if len(whole) < self.size:
            raise self._short(len(whole))
        return whole

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
        start = self._pos
        end = self.size if n is None or n < 0 else min(start + n, self.size)
        if end <= start:
            return b""
        self._pos = end
        self._pages.update(range(start // PAGE, (end - 1) // PAGE + 1))
        if self._whole is not None:
            return self._whole[start:end]
        if end > len(self._done):
            kept = self._kept_bytes(start, end)
            if kept is not None:
                return kept
            self._fill(end)
        return bytes(self._done[start:end])

    def _kept_bytes(self, start: int, end: int) -> Optional[bytes]:
        """Bytes ``start:end`` from the kept windows that hold them (adjacent ones), or None."""
        i = bisect.bisect_right(self._kept_starts, start) - 1
        pieces = []
        at = start
        while 0 <= i < len(self._kept):
            window = self._kept[i]
            if not window.offset <= at < window.offset + window.length:
                return None
            data = self._kept_window(i)
            if data is None:
                return None
            pieces.append(data[at - window.offset:min(end, window.offset + window.length) - window.offset])
            at = min(end, window.offset + window.length)
            if at >= end:
                return pieces[0] if len(pieces) == 1 else b"".join(pieces)
            i += 1
        return None

    def _kept_window(self, i: int) -> Optional[bytes]:
        if i not in self._kept_data:
            data = self._kept[i].load()
            self._kept_data[i] = data if data is not None and len(data) == self._kept[i].length else None
        return self._kept_data[i]

    def _inflated_bytes(self, start: int, end: int) -> bytes:
        """Bytes ``start:end``, inflated if they are not yet."""
        if self._whole is not None:
            return self._whole[start:end]
        self._fill(end)
        return bytes(self._done[start:end])

    @overload
    def windows(self) -> Optional[list[tuple[int, bytes]]]: ...
    @overload
    def windows(self, always: Literal[True]) -> list[tuple[int, bytes]]: ...

    def windows(self, always: bool = False) -> Optional[list[tuple[int, bytes]]]:
        """The kept windows with the pages this run read added, as (offset, bytes) in offset order;
        None when this run read nothing the kept windows did not hold (unless ``always``). A kept
        window that could not be read counts as not kept (it is inflated, and kept anew)."""
        kept_pages = {page for i, w in enumerate(self._kept) if self._kept_data.get(i, b"") is not None
                      for page in range(w.offset // PAGE, (w.offset + w.length - 1) // PAGE + 1)}
        if self._pages <= kept_pages and not always:
            return None
        pages = sorted(self._pages | kept_pages)
        if not pages:
            return []
        out = []
        first = prev = pages[0]
        for page in pages[1:] + [None]:
            if page is not None and page == prev + 1 and page * PAGE % WINDOW:
                prev = page
                continue
            start, end = first * PAGE, min((prev + 1) * PAGE, self.size)
            data = self._kept_bytes(start, end)
            if data is None:
                data = self._inflated_bytes(start, end)
            out.append((start, data))
            if page is not None:
                first = prev = page
        return out

    def getvalue(self) -> bytes:
        """The whole section, as bytes (inflated once; every later read is a slice of it)."""
        if self._whole is None:
            if self._fed == 0:  # nothing inflated yet: all of it in one call
                self._whole = self._inflate_whole()
            else:
                self._fill(self.size)
                self._whole = bytes(self._done[:self.size])
            self._done = bytearray()
        return self._whole

    @property
    def inflated(self) -> int:
        """How many bytes were inflated so far."""
        return len(self._whole) if self._whole is not None else len(self._done)


# The index cache's kind for kept windows; the fingerprint also names every compressed section with
# its compressed and inflated sizes, so windows of other contents are never used.
CACHE_KIND = "dwarf-inflated"
# A run that read more than this (a whole-file scan) keeps nothing: reading it back would cost more
# than inflating.
MAX_KEPT = 16 << 20


def open_sections(compressed: dict[str, tuple[bytes | memoryview, int]], path: str | os.PathLike[str],
                  key: Optional[str]) -> tuple[dict[str, InflatingSection], Optional[Callable[[], None]]]:
    """An InflatingSection for each of ``compressed`` (section name → zlib payload and inflated
    size), with the windows kept under ``key`` (None: no cache) by an earlier run, and what keeps what
    this run reads (None: no cache), for the caller to run when what reads the sections is collected
    or at exit (``weakref.finalize``: the sections, and the file mapping they view, then live no
    longer than their reader, in a long-lived process too)."""
    from .. import indexcache

    if indexcache.cache_dir() is None:
        key = None
    fingerprint = tuple(sorted((name, len(payload), size) for name, (payload, size) in compressed.items()))
    stored = indexcache.load_parts(CACHE_KIND, key, fingerprint) if key else None
    kept: dict[str, list[KeptWindow]] = {}
    if stored is not None:
        try:  # the table: (section name, ((offset, length) of each window...)) in the parts' order
            part = 0
            for name, windows in stored.table:
                for offset, length in windows:
                    if part >= len(stored) or stored.length(part) != length:
                        raise ValueError  # (the table and the parts disagree: none is used)
                    kept.setdefault(name, []).append(KeptWindow(int(offset), int(length), partial(stored.part, part)))
                    part += 1
            if part != len(stored):
                kept = {}
        except (TypeError, ValueError):  # (a table of another shape: not used)
            kept = {}
    sections = {name: InflatingSection(payload, size, name, path, kept.get(name, ()))
                for name, (payload, size) in compressed.items()}
    return sections, (partial(_keep, sections, key, fingerprint) if key else None)


def _keep(sections: dict[str, InflatingSection], key: str, fingerprint: tuple) -> None:
    """Store the windows of ``sections`` if this run read pages that were not kept."""
    from .. import indexcache

    try:
        windows = {name: section.windows() for name, section in sections.items()}
        if all(found is None for found in windows.values()):
            return
        every = {name: found if found is not None else sections[name].windows(always=True)
                 for name, found in windows.items()}
    except DebugInfoError:  # (damaged data: nothing is kept)
        return
    parts = [data for found in every.values() for _offset, data in found]
    if sum(map(len, parts)) <= MAX_KEPT:
        table = tuple((name, tuple((offset, len(data)) for offset, data in found)) for name, found in every.items())
        indexcache.store_parts(CACHE_KIND, key, fingerprint, table, parts)
