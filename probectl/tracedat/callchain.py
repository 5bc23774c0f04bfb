"""probectl's own event type in a recording: ``probectl:user_callchain``, the user stack of the
event it follows (perf's callchain of that event, see :mod:`probectl.record.callchains`), and its
writing into the per-CPU pages of a recording.

The record is an ordinary ring-buffer record whose format the file carries, so that trace-cmd (and
KernelShark) show it and probectl's readers decode it like any event::

    field:int tgid;                  the process of the thread (common_pid)
    field:__data_loc u64[] caller;   user addresses, innermost first (up to perf_event_max_stack)

Each callchain is written right after its event, in the same CPU's data, with the event's time
stamp: every reader that walks a CPU's records in order (probectl's stack joiner, trace-cmd) finds
it where it finds the kernel's ``ftrace:kernel_stack``/``user_stack`` records. To put it there the
CPU's pages are written anew (records copied verbatim, time deltas recomputed, lost-event counts
kept on the page that follows the loss): a second buffer would keep the kernel's pages untouched,
but probectl's reader would then have to join two streams, and a v6 file has no place for one.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Optional, Sequence

from ..errors import TraceFileError
from ..ringbuf import PageLayout, parse_page

SYSTEM = "probectl"
USER_CALLCHAIN = "user_callchain"
_HEADER = 16  # common fields (8), tgid (4), the caller's data_loc word (4)

_RB_MISSED_EVENTS, _RB_MISSED_STORED = 1 << 31, 1 << 30
_TYPE_DATA_MAX, _TYPE_TIME_EXTEND, _TYPE_TIME_STAMP = 28, 30, 31
_DELTA_MAX = (1 << 27) - 1
_STAMP_MAX = (1 << 59) - 1


def user_callchain_format(event_id: int) -> str:
    """The format text of ``probectl:user_callchain`` with id ``event_id`` (as the kernel writes formats)."""
    return (f"name: {USER_CALLCHAIN}\nID: {event_id}\nformat:\n"
            "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
            "\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n"
            "\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n"
            "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
            "\tfield:int tgid;\toffset:8;\tsize:4;\tsigned:1;\n"
            "\tfield:__data_loc u64[] caller;\toffset:12;\tsize:4;\tsigned:0;\n\n"
            'print fmt: "tgid=%d caller=%s", REC->tgid, '
            "__print_array(__get_dynamic_array(caller), __get_dynamic_array_len(caller) / 8, 8)\n")


def free_event_id(used: Iterable[int]) -> int:
    """An id for probectl's event that no format of the file has (common_type is 16 bits)."""
    taken = set(used)
    candidate = max(taken, default=0) + 1
    if candidate <= 0xFFFF:
        return candidate
    return next(i for i in range(0xFFFF, 0, -1) if i not in taken)


class _Sample:
    __slots__ = ("ts", "tid", "tgid", "event", "addrs", "raw")

    def __init__(self, ts: int, tid: int, tgid: int, event: int, addrs: Sequence[int], raw: Optional[bytes]):
        self.ts, self.tid, self.tgid, self.event, self.addrs, self.raw = ts, tid, tgid, event, addrs, raw


def _pages(path: Path, layout: PageLayout) -> Iterator[tuple[int, object]]:
    size = path.stat().st_size
    size -= size % layout.page_size
    with open(path, "rb") as f:
        for off in range(0, size, layout.page_size):
            yield off, f.read(layout.page_size)


def _pairs(events: list[tuple[int, int]], samples: list[_Sample], window: int) -> Iterator[tuple[int, _Sample]]:
    """(event index, sample) of one thread and event type, both in time order: each sample with the
    nearest event within ``window`` ns that has none yet."""
    i, n = 0, len(events)
    for s in samples:
        while i < n and events[i][0] < s.ts - window:
            i += 1
        if i == n or events[i][0] > s.ts + window:
            continue
        if i + 1 < n and abs(events[i + 1][0] - s.ts) < abs(events[i][0] - s.ts):
            i += 1
        yield events[i][1], s
        i += 1


class _PageWriter:
    """Ring-buffer pages of one CPU, filled record by record."""

    def __init__(self, out, layout: PageLayout):
        self.out = out
        self.layout = layout
        self.e = ">" if layout.big_endian else "<"
        self.long = "Q" if layout.long_size == 8 else "I"
        self.data_off = 8 + layout.long_size
        self.room = layout.page_size - self.data_off - layout.long_size  # (a lost count may follow)
        self.buf = bytearray()
        self.base = 0
        self.last = 0
        self.missed = 0
        self.pages = 0

    def _header(self, type_len: int, delta: int) -> bytes:
        word = type_len << 27 | delta if self.layout.big_endian else delta << 5 | type_len
        return struct.pack(self.e + "I", word)

    def lost(self, missed: int) -> None:
        """Events were lost before the next record (``missed`` -1: not counted)."""
        self.flush()
        self.missed = missed

    def add(self, ts: int, payload: bytes) -> None:
        if len(payload) % 4:
            payload += bytes(4 - len(payload) % 4)
        n = len(payload)
        small = n <= 4 * _TYPE_DATA_MAX
        size = (4 if small else 8) + n + 8  # (and room for a time record before it)
        if size > self.room:
            raise TraceFileError(f"a record of {n} bytes does not fit a page of {self.layout.page_size}")
        if self.buf and len(self.buf) + size > self.room:
            self.flush()
        if not self.buf:
            self.base = self.last = ts
        delta = ts - self.last
        if not 0 <= delta <= _DELTA_MAX:
            if 0 < delta <= _STAMP_MAX:
                self.buf += self._header(_TYPE_TIME_EXTEND, delta & _DELTA_MAX) + self._word(delta >> 27)
            else:  # (backwards: an absolute stamp)
                self.buf += self._header(_TYPE_TIME_STAMP, ts & _DELTA_MAX) + self._word((ts & _STAMP_MAX) >> 27)
            delta = 0
        if small:
            self.buf += self._header(n // 4, delta)
        else:
            self.buf += self._header(0, delta) + self._word(n + 4)
        self.buf += payload
        self.last = ts

    def _word(self, value: int) -> bytes:
        return struct.pack(self.e + "I", value)

    def flush(self) -> None:
        if not self.buf and not self.missed:
            return
        commit = len(self.buf)
        tail = b""
        if self.missed > 0:
            commit |= _RB_MISSED_EVENTS | _RB_MISSED_STORED
            tail = struct.pack(self.e + self.long, self.missed)
        elif self.missed < 0:
            commit |= _RB_MISSED_EVENTS
        page = struct.pack(self.e + "Q" + self.long, self.base, commit) + bytes(self.buf) + tail
        self.out.write(page + bytes(self.layout.page_size - len(page)))
        self.pages += 1
        self.buf = bytearray()
        self.missed = 0


def write_with_callchains(src: Optional[Path], dst: Path, layout: PageLayout, event_id: int,
                          samples: Iterable[tuple[int, int, int, int, Sequence[int], Optional[bytes]]], *,
                          window_ns: int = 1_000_000) -> tuple[int, int]:
    """Write the pages of ``src`` (one CPU's data, or None) to ``dst`` with the samples (time, tid,
    tgid, event id, addresses, record) in them: a sample with its event's record adds that record in
    time order, then a ``probectl:user_callchain`` record; one without joins the event of ``src`` of
    the same thread and type nearest in time, within ``window_ns``, and its callchain record follows
    that event. Returns (callchains written, samples left over). A page that cannot be decoded ends
    the copy of ``src`` (the pages before it are kept)."""
    by_key: dict[tuple[int, int], list[_Sample]] = {}
    own: list[_Sample] = []
    count = 0
    for ts, tid, tgid, ev, addrs, raw in samples:
        sample = _Sample(ts, tid, tgid, ev, addrs, raw)
        if raw is not None:
            own.append(sample)
        else:
            by_key.setdefault((tid, ev), []).append(sample)
        count += 1
    own.sort(key=lambda s: s.ts)
    e = ">" if layout.big_endian else "<"
    pages = []
    events: dict[tuple[int, int], list[tuple[int, int]]] = {}
    if src is not None:
        head = struct.Struct(e + "HxxI")
        index = 0
        for off, data in _pages(src, layout):
            try:
                page = parse_page(data, layout)
            except TraceFileError:
                break
            pages.append(off)
            for ts, payload in page.events:
                if by_key and len(payload) >= 8:
                    etype, tid = head.unpack_from(payload)
                    key = (tid, etype)
                    if key in by_key:
                        events.setdefault(key, []).append((ts, index))
                index += 1
    chains: dict[int, _Sample] = {}
    for key, group in by_key.items():
        group.sort(key=lambda s: s.ts)
        for i, s in _pairs(events.get(key, []), group, window_ns):
            chains[i] = s
    record = struct.Struct(e + "HBBiiI")

    def callchain(w: _PageWriter, ts: int, s: _Sample) -> None:
        addrs = s.addrs
        w.add(ts, record.pack(event_id, 0, 0, s.tid, s.tgid, 8 * len(addrs) << 16 | _HEADER)
              + struct.pack(f"{e}{len(addrs)}Q", *addrs))

    written = 0
    next_own = 0
    with open(dst, "wb") as out:
        w = _PageWriter(out, layout)

        def own_until(ts: Optional[int]) -> None:
            nonlocal next_own, written
            while next_own < len(own) and (ts is None or own[next_own].ts <= ts):
                s = own[next_own]
                next_own += 1
                if s.raw is None or len(s.raw) < 8:
                    continue
                w.add(s.ts, s.raw)
                callchain(w, s.ts, s)
                written += 1

        if src is not None:
            index = 0
            with open(src, "rb") as f:
                for off in pages:
                    f.seek(off)
                    page = parse_page(f.read(layout.page_size), layout)
                    if page.missed:
                        w.lost(page.missed)
                    for ts, payload in page.events:
                        own_until(ts - 1)
                        w.add(ts, payload)
                        s = chains.get(index)
                        if s is not None:
                            callchain(w, ts, s)
                        index += 1
        own_until(None)
        w.flush()
    return written + len(chains), count - written - len(chains)


def callchain_formats(meta_formats: Sequence[tuple[str, list[str]]], event_id: int) -> list[tuple[str, list[str]]]:
    """The metadata's event formats with probectl's system added."""
    return [*meta_formats, (SYSTEM, [user_callchain_format(event_id)])]


def format_ids(texts: Iterable[str]) -> list[int]:
    """The ``ID:`` of format texts."""
    out = []
    for text in texts:
        for line in text.splitlines():
            if line.startswith("ID:"):
                try:
                    out.append(int(line[3:].strip()))
                except ValueError:
                    pass
                break
    return out


def all_format_ids(ftrace_formats: Sequence[str], event_formats: Mapping[str, list[str]] | Sequence) -> list[int]:
    texts: list[str] = list(ftrace_formats)
    items = event_formats.items() if isinstance(event_formats, Mapping) else event_formats
    for _system, group in items:
        texts.extend(group)
    return format_ids(texts)


