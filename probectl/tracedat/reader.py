"""Reading trace.dat files, versions 6 and 7, compressed or not, written by probectl or trace-cmd.

The metadata is read and checked at once; the pages are decoded by the native
:class:`~probectl.ringbuf.EventReader` on demand.
"""
from __future__ import annotations

import mmap
import os
import struct
import weakref
import zlib
from pathlib import Path
from typing import Any, BinaryIO, Iterator, Mapping, Optional, Sequence

from .. import _native
from ..dataclass import dataclass
from ..errors import TraceFileError
from ..formats import EventFormat
from ..regularfile import open_regular
from ..ringbuf import Buffer, Event, EventReader, PageLayout
from .compression import MAX_CHUNK, decompress
from .formattable import FormatTable
from .metadata import (FILE_VERSIONS, MAGIC, OPTION_SAVED_TGIDS, SECTION_COMPRESSED, V6_FLYRECORD, V6_LATENCY,
                       V6_OPTIONS, Option, clock_name, parse_cmdlines, parse_tgids)

# A sanity bound for the size of a text read from a file.
_MAX_TEXT = 1 << 31


class _Cursor:
    """Bounded reads from part of a file; running past the end is a TraceFileError."""

    def __init__(self, data: Buffer, pos: int, end: int, big_endian: bool, where: str):
        self.data = data
        self.pos = pos
        self.end = end
        self.e = ">" if big_endian else "<"
        self.where = where

    def _need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.end:
            raise TraceFileError(f"{self.where}: truncated or corrupt: {what} at offset {self.pos:#x} "
                                 f"needs {n} bytes, {max(self.end - self.pos, 0)} left")

    def take(self, n: int, what: str) -> bytes:
        self._need(n, what)
        out = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return out

    def num(self, fmt: str, what: str) -> int:
        size = struct.calcsize(fmt)
        self._need(size, what)
        (value,) = struct.unpack_from(self.e + fmt, self.data, self.pos)
        self.pos += size
        return value

    def u16(self, what: str) -> int:
        return self.num("H", what)

    def u32(self, what: str) -> int:
        return self.num("I", what)

    def u64(self, what: str) -> int:
        return self.num("Q", what)

    def cstr(self, what: str, limit: int = 4096) -> str:
        end = min(self.end, self.pos + limit)
        data = self.data[self.pos:end]
        nul = data.find(b"\0") if isinstance(data, bytes) else bytes(data).find(b"\0")
        if nul < 0:
            raise TraceFileError(f"{self.where}: truncated or corrupt: {what} at offset {self.pos:#x} "
                                 "is not a terminated string")
        text = bytes(data[:nul]).decode(errors="replace")
        self.pos += nul + 1
        return text

    def expect(self, magic: bytes, what: str) -> None:
        at = self.pos
        if self.take(len(magic), what) != magic:
            raise TraceFileError(f"{self.where}: corrupt: expected {what} at offset {at:#x}")

    def sized_text(self, size_fmt: str, what: str) -> bytes:
        size = self.num(size_fmt, f"size of {what}")
        if size > _MAX_TEXT:
            raise TraceFileError(f"{self.where}: corrupt: {what} claims {size} bytes")
        return self.take(size, what)


@dataclass(frozen=True)
class CpuData:
    """Where one CPU's pages are: ``size`` bytes at ``offset`` (of the file, or of the
    decompressed data for a compressed file)."""

    cpu: int
    offset: int
    size: int


@dataclass
class BufferInfo:
    """One recorded buffer (the top one has the name ''): its clock, page size and CPU data."""

    name: str
    clock: str
    page_size: int
    cpus: list[CpuData]
    compressed: bool = False
    section_offset: int = 0


class TraceFile:
    """A trace.dat file opened for reading (see :func:`open_trace`).

    The metadata is read at once; the event formats are parsed when first needed
    (:meth:`format`, or all of them by :attr:`formats`); the pages are mapped and decoded on
    demand by :meth:`reader` / :meth:`events`. Formats that do not parse are listed in
    ``unparsed_formats`` and their events come out with ``format`` None.
    """

    def __init__(self, path: Path | str | os.PathLike[str]):
        self.path = Path(path)
        self.where = str(self.path)
        self.version = 0
        self.big_endian = False
        self.long_size = 8
        self.page_size = 0
        self.compression = "none"
        self.compression_version = ""
        self.header_page = ""
        self.header_event = ""
        self.layout = PageLayout()
        self.format_texts: list[tuple[str, str]] = []  # (system, text) as stored
        self.format_table = FormatTable(self.format_texts)
        self.kallsyms = b""
        self.printk_formats = b""
        self.cmdlines: dict[int, str] = {}
        self.tgids: dict[int, int] = {}  # from probectl's saved_tgids option, when recorded
        self.cpus = 0
        self.options: list[tuple[int, bytes]] = []
        self.trace_clock = "local"
        self.uname = ""
        self.recorder_version = ""
        self.trace_id: Optional[int] = None
        self.cpustats: dict[int, dict[str, str]] = {}
        self.buffers: list[BufferInfo] = []
        self.latency_text: Optional[str] = None
        self._decompressed: dict[tuple[str, int], bytes] = {}
        self._event_ids: dict[str, frozenset[int]] = {}
        self._readers: weakref.WeakSet[EventReader] = weakref.WeakSet()  # closed with the file
        try:
            self._file: Optional[BinaryIO] = open_regular(self.path)
        except OSError as err:
            raise TraceFileError(f"cannot open {self.path}: {err.strerror}") from None
        try:
            size = os.fstat(self._file.fileno()).st_size
            if size == 0:
                raise TraceFileError(f"{self.path} is empty", "was the recording interrupted?")
            self._map: Any = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            self.size = size
            self._parse()
        except BaseException:
            self.close()
            raise

    # -- the public view ---------------------------------------------------------------------

    @property
    def formats(self) -> dict[int, EventFormat]:
        """Every parsed format (ftrace's and the events') by id (every text of the file parsed;
        :meth:`format` parses only the one asked for)."""
        return {f.id: f for f in (*self.ftrace_formats, *self.event_formats)}

    @property
    def ftrace_formats(self) -> list[EventFormat]:
        return self.format_table.parse_all()[0]

    @property
    def event_formats(self) -> list[EventFormat]:
        return self.format_table.parse_all()[1]

    @property
    def unparsed_formats(self) -> list[tuple[str, str]]:
        """(system, error message) of every format text that does not parse."""
        return self.format_table.parse_all()[2]

    def format_failures(self) -> list[tuple[str, str]]:
        """(system, error message) of the format texts parsed so far (by :meth:`format`) that did
        not parse: those of the events read, without parsing the others."""
        return self.format_table.failures()

    def format(self, event_id: int) -> Optional[EventFormat]:
        """The format of one event id (None when the file has none that parses), parsed now."""
        return self.format_table.get(event_id)

    def event_ids(self, buffer: str = "") -> frozenset[int]:
        """The ids of the records of a buffer, found by walking its pages without decoding them
        (corrupt pages are skipped here: a reader reports them)."""
        got = self._event_ids.get(buffer)
        if got is None:
            info = self.buffer(buffer)
            got = self._event_ids[buffer] = frozenset(_native.event_ids(
                self._streams(info), long_size=self.layout.long_size, big_endian=self.big_endian,
                page_size=info.page_size))
        return got

    def present_formats(self, buffer: str = "") -> list[EventFormat]:
        """The formats of the events a buffer holds (see :meth:`event_ids`), by id."""
        return [f for f in map(self.format, sorted(self.event_ids(buffer))) if f is not None]

    def buffer(self, name: str = "") -> BufferInfo:
        for b in self.buffers:
            if b.name == name:
                return b
        known = ", ".join(repr(b.name) for b in self.buffers) or "none"
        raise TraceFileError(f"{self.where} has no buffer {name!r} (buffers: {known})")

    def reader(self, *, buffer: str = "", strict: bool = True, raw: bool = False,
               formats: Optional[Sequence[EventFormat]] = None,
               fields: Optional[Mapping[int, Sequence[int]]] = None) -> EventReader:
        """An :class:`~probectl.ringbuf.EventReader` over one buffer's pages, merged by time (of
        the fields ``fields`` names per format id, when given)."""
        info = self.buffer(buffer)
        streams = self._streams(info)
        layout = PageLayout(self.layout.long_size, self.big_endian, info.page_size)
        reader = EventReader(streams, list(self.formats.values()) if formats is None else formats,
                             layout, strict=strict, raw=raw, source=self.where, fields=fields)
        self._readers.add(reader)
        return reader

    def page_streams(self, buffer: str = "") -> tuple[list[tuple[int, Any, int, int]], PageLayout]:
        """The undecoded ``(cpu, buffer, offset, size)`` pages of a buffer and their layout, for a
        native consumer (the aggregator of ``hist``/``latency``)."""
        info = self.buffer(buffer)
        return self._streams(info), PageLayout(self.layout.long_size, self.big_endian, info.page_size)

    def _streams(self, info: BufferInfo) -> list[tuple[int, Any, int, int]]:
        streams = []
        for c in info.cpus:
            if not c.size:
                continue  # an empty CPU's offset may point anywhere, even past the end
            if info.compressed:
                data = self._cpu_decompressed(info, c)
                streams.append((c.cpu, data, 0, len(data)))
            else:
                streams.append((c.cpu, self._map, c.offset, c.size))
        return streams

    def events(self, *, buffer: str = "", strict: bool = True) -> Iterator[Event]:
        """Every event of a buffer, in time order."""
        reader = self.reader(buffer=buffer, strict=strict)
        try:
            yield from reader.events()
        finally:
            reader.close()

    def comm(self, pid: int) -> str:
        """The command name of ``pid`` from the saved cmdlines ('<...>' when unknown, as trace-cmd)."""
        if pid == 0:
            return "<idle>"
        return self.cmdlines.get(pid, "<...>")

    def close(self) -> None:
        for r in list(self._readers):
            r.close()
        self._readers.clear()
        m = getattr(self, "_map", None)
        if m is not None:
            m.close()
            self._map = None
        f = getattr(self, "_file", None)
        if f is not None:
            f.close()
            self._file = None

    def __enter__(self) -> "TraceFile":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- parsing -----------------------------------------------------------------------------

    def _cursor(self, pos: int = 0, end: Optional[int] = None) -> _Cursor:
        return _Cursor(self._map, pos, self.size if end is None else end, self.big_endian, self.where)

    def _parse(self) -> None:
        c = self._cursor()
        if self.size < 3 or self._map[:3] != MAGIC[:3]:
            raise TraceFileError(f"{self.where} is not a trace.dat file (bad magic)",
                                 "record one with 'probectl record' or 'trace-cmd record'")
        c.expect(MAGIC, "the 'tracing' magic")
        version = c.cstr("the version", limit=16)
        if not version.isdigit() or int(version) not in FILE_VERSIONS:
            raise TraceFileError(f"{self.where}: trace.dat version {version!r} is not supported "
                                 f"(probectl reads versions {FILE_VERSIONS[0]} and {FILE_VERSIONS[-1]})")
        self.version = int(version)
        endian = c.take(1, "the byte order")[0]
        if endian > 1:
            raise TraceFileError(f"{self.where}: corrupt: byte order flag {endian}")
        self.big_endian = bool(endian)
        c.e = ">" if self.big_endian else "<"
        self.long_size = c.take(1, "the long size")[0]
        self.page_size = c.u32("the page size")
        if self.long_size not in (4, 8):
            raise TraceFileError(f"{self.where}: corrupt: long size {self.long_size}")
        if self.page_size < 32 or self.page_size > (1 << 27) or self.page_size & (self.page_size - 1):
            raise TraceFileError(f"{self.where}: corrupt: page size {self.page_size}")
        if self.version == 6:
            self._parse_v6(c)
        else:
            self._parse_v7(c)
        self.format_table = FormatTable(self.format_texts)

    def _parse_header_info(self, c: _Cursor) -> None:
        c.expect(b"header_page\0", "'header_page'")
        self.header_page = c.sized_text("Q", "header_page").decode(errors="replace")
        c.expect(b"header_event\0", "'header_event'")
        self.header_event = c.sized_text("Q", "header_event").decode(errors="replace")
        layout = PageLayout.from_header_page(self.header_page, self.big_endian) if self.header_page else None
        long_size = layout.long_size if layout else self.long_size
        self.layout = PageLayout(long_size, self.big_endian, self.page_size)

    def _parse_ftrace_events(self, c: _Cursor) -> None:
        count = c.u32("the number of ftrace formats")
        for _ in range(count):
            text = c.sized_text("Q", "an ftrace format").decode(errors="replace")
            self.format_texts.append(("ftrace", text))

    def _parse_event_formats(self, c: _Cursor) -> None:
        systems = c.u32("the number of event systems")
        for _ in range(systems):
            system = c.cstr("an event system name")
            count = c.u32(f"the number of {system} formats")
            for _ in range(count):
                text = c.sized_text("Q", f"a {system} format").decode(errors="replace")
                self.format_texts.append((system, text))

    def _parse_cmdlines(self, data: bytes) -> None:
        self.cmdlines.update(parse_cmdlines(data.decode(errors="replace")))

    def _check_cpu_data(self, cpu: int, offset: int, size: int) -> None:
        if size and offset + size > self.size:
            raise TraceFileError(f"{self.where}: truncated: cpu {cpu} data ends at {offset + size:#x} "
                                 f"but the file has {self.size:#x} bytes",
                                 "the recording was cut short; the file cannot be read as a whole")

    def _option(self, oid: int, data: bytes, in_v7: bool) -> None:
        self.options.append((oid, data))
        text = data.split(b"\0", 1)[0].decode(errors="replace")
        e = ">" if self.big_endian else "<"
        if oid == Option.TRACECLOCK:
            self.trace_clock = clock_name(text)
        elif oid == Option.UNAME:
            self.uname = text
        elif oid == Option.VERSION:
            self.recorder_version = text
        elif oid == Option.TRACEID and len(data) >= 8:
            self.trace_id = struct.unpack_from(e + "Q", data)[0]
        elif oid == Option.CPUCOUNT and len(data) >= 4:
            self.cpus = struct.unpack_from(e + "I", data)[0]
        elif oid == Option.CPUSTAT:
            self._cpustat(text)
        elif oid == Option.BUFFER and in_v7:
            self._buffer_option(data)
        elif oid == OPTION_SAVED_TGIDS:
            self.tgids.update(parse_tgids(text))

    def _cpustat(self, text: str) -> None:
        lines = text.splitlines()
        if not lines or not lines[0].startswith("CPU:"):
            return
        try:
            cpu = int(lines[0].split(":", 1)[1])
        except ValueError:
            return
        stats = {}
        for line in lines[1:]:
            key, sep, value = line.partition(":")
            if sep:
                stats[key.strip()] = value.strip()
        self.cpustats[cpu] = stats

    def _buffer_option(self, data: bytes) -> None:
        c = _Cursor(data, 0, len(data), self.big_endian, f"{self.where}: BUFFER option")
        section = c.u64("the buffer section offset")
        name = c.cstr("the buffer name")
        clock = c.cstr("the buffer clock")
        page_size = c.u32("the buffer page size")
        count = c.u32("the buffer CPU count")
        if page_size < 32 or page_size > (1 << 27):
            raise TraceFileError(f"{self.where}: corrupt: buffer {name!r} page size {page_size}")
        cpus = []
        for _ in range(count):
            cpu = c.u32("a buffer CPU")
            offset = c.u64("a buffer CPU offset")
            size = c.u64("a buffer CPU size")
            cpus.append(CpuData(cpu, offset, size))
        sid, flags, _size = self._section_header(section, "the buffer section")
        if sid != Option.BUFFER:
            raise TraceFileError(f"{self.where}: corrupt: buffer {name!r} points at a section of id {sid}")
        compressed = bool(flags & SECTION_COMPRESSED)
        if not compressed:
            for cd in cpus:
                self._check_cpu_data(cd.cpu, cd.offset, cd.size)
        self.buffers.append(BufferInfo(name, clock, page_size, cpus, compressed, section))
        if name == "":
            self.trace_clock = clock or self.trace_clock

    # v6: everything in a row.
    def _parse_v6(self, c: _Cursor) -> None:
        self._parse_header_info(c)
        self._parse_ftrace_events(c)
        self._parse_event_formats(c)
        self.kallsyms = c.sized_text("I", "kallsyms")
        self.printk_formats = c.sized_text("I", "printk formats")
        self._parse_cmdlines(c.sized_text("Q", "saved cmdlines"))
        self.cpus = c.u32("the CPU count")
        cpus = self.cpus
        kind = c.take(10, "the data kind")
        has_clock = False
        if kind == V6_OPTIONS:
            while True:
                oid = c.u16("an option id")
                if oid == Option.DONE:
                    break
                data = c.sized_text("I", f"option {oid}")
                has_clock |= oid == Option.TRACECLOCK
                self._option(oid, data, in_v7=False)
            kind = c.take(10, "the data kind")
        if kind == V6_LATENCY:
            self.latency_text = bytes(self._map[c.pos:self.size]).decode(errors="replace")
            return
        if kind != V6_FLYRECORD:
            raise TraceFileError(f"{self.where}: corrupt: unknown data kind {kind!r} at offset {c.pos - 10:#x}")
        if cpus > (self.size - c.pos) // 16:
            raise TraceFileError(f"{self.where}: corrupt or truncated: {cpus} CPUs do not fit the file")
        table = []
        for cpu in range(cpus):
            offset = c.u64(f"cpu {cpu} data offset")
            size = c.u64(f"cpu {cpu} data size")
            self._check_cpu_data(cpu, offset, size)
            if size:
                table.append(CpuData(cpu, offset, size))
        if has_clock:
            text = c.sized_text("Q", "the trace clock").decode(errors="replace")
            self.trace_clock = clock_name(text)
        self.buffers.append(BufferInfo("", self.trace_clock, self.page_size, table))

    # v7: sections found through the options.
    def _section_header(self, offset: int, what: str) -> tuple[int, int, int]:
        c = self._cursor(offset)
        sid = c.u16(f"{what} header")
        flags = c.u16(f"{what} header")
        c.num("i", f"{what} header")
        size = c.u64(f"{what} header")
        return sid, flags, size

    def _section(self, offset: int, sid: int, what: str) -> _Cursor:
        got, flags, size = self._section_header(offset, what)
        if got != sid:
            raise TraceFileError(f"{self.where}: corrupt: {what} at offset {offset:#x} has id {got}, not {sid}")
        body = offset + 16
        if size > self.size - body:
            raise TraceFileError(f"{self.where}: truncated: {what} at offset {offset:#x} claims {size} bytes")
        if not flags & SECTION_COMPRESSED:
            return self._cursor(body, body + size)
        c = self._cursor(body, body + size)
        csize = c.u32(f"{what} compressed size")
        usize = c.u32(f"{what} size")
        data = c.take(csize, f"{what} compressed data")
        if usize > _MAX_TEXT:
            raise TraceFileError(f"{self.where}: corrupt: {what} claims {usize} bytes")
        plain = self._decompress(data, usize, f"compressed {what} at offset {offset:#x}")
        return _Cursor(plain, 0, len(plain), self.big_endian, f"{self.where}: {what}")

    def _parse_v7(self, c: _Cursor) -> None:
        self.compression = c.cstr("the compression name", limit=64)
        self.compression_version = c.cstr("the compression version", limit=64)
        if self.compression not in ("none", "zstd", "zlib"):
            raise TraceFileError(f"{self.where}: compression {self.compression!r} is not supported",
                                 "convert it: 'trace-cmd convert --compression none -i IN -o OUT'")
        offset = c.u64("the options offset")
        sections: dict[int, int] = {}
        seen: set[int] = set()
        while offset:
            if offset in seen:
                raise TraceFileError(f"{self.where}: corrupt: the options sections form a loop")
            seen.add(offset)
            oc = self._section(offset, Option.DONE, "an options section")
            offset = 0
            while oc.pos < oc.end:
                oid = oc.u16("an option id")
                data = oc.sized_text("I", f"option {oid}")
                if oid == Option.DONE:
                    if len(data) < 8:
                        raise TraceFileError(f"{self.where}: corrupt: short DONE option")
                    offset = struct.unpack_from(oc.e + "Q", data)[0]
                    break
                if Option.HEADER_INFO <= oid <= Option.CMDLINES and len(data) >= 8:
                    sections[oid] = struct.unpack_from(oc.e + "Q", data)[0]
                self._option(oid, data, in_v7=True)
        if Option.HEADER_INFO not in sections:
            raise TraceFileError(f"{self.where}: corrupt: no header section")
        self._parse_header_info(self._section(sections[Option.HEADER_INFO], Option.HEADER_INFO, "the header section"))
        if Option.FTRACE_EVENTS in sections:
            self._parse_ftrace_events(self._section(sections[Option.FTRACE_EVENTS], Option.FTRACE_EVENTS,
                                                    "the ftrace events section"))
        if Option.EVENT_FORMATS in sections:
            self._parse_event_formats(self._section(sections[Option.EVENT_FORMATS], Option.EVENT_FORMATS,
                                                    "the event formats section"))
        if Option.KALLSYMS in sections:
            self.kallsyms = self._section(sections[Option.KALLSYMS], Option.KALLSYMS,
                                          "the kallsyms section").sized_text("I", "kallsyms")
        if Option.PRINTK in sections:
            self.printk_formats = self._section(sections[Option.PRINTK], Option.PRINTK,
                                                "the printk section").sized_text("I", "printk formats")
        if Option.CMDLINES in sections:
            self._parse_cmdlines(self._section(sections[Option.CMDLINES], Option.CMDLINES,
                                               "the cmdlines section").sized_text("Q", "saved cmdlines"))
        if not self.buffers:
            self.buffers.append(BufferInfo("", self.trace_clock, self.page_size, []))

    def _decompress(self, data: bytes, size: int, what: str) -> bytes:
        """``data`` decompressed to ``size`` bytes; bad data is a TraceFileError naming ``what``."""
        try:
            return decompress(self.compression, data, size)
        except TraceFileError:
            raise
        except (ValueError, zlib.error) as err:
            raise TraceFileError(f"{self.where}: corrupt {what}: {err}") from None

    def _cpu_decompressed(self, info: BufferInfo, cd: CpuData) -> bytes:
        key = (info.name, cd.cpu)
        if key in self._decompressed:
            return self._decompressed[key]
        what = f"cpu {cd.cpu} compressed data"
        c = self._cursor(cd.offset)
        count = c.u32(f"{what} chunk count")
        if count > (self.size - c.pos) // 8:
            raise TraceFileError(f"{self.where}: corrupt: {what} claims {count} chunks")
        parts = []
        for _ in range(count):
            csize = c.u32(f"{what} chunk size")
            usize = c.u32(f"{what} chunk size")
            if usize > MAX_CHUNK:
                raise TraceFileError(f"{self.where}: corrupt: {what} chunk of {usize} bytes")
            data = c.take(csize, what)
            parts.append(self._decompress(data, usize, f"{what} at offset {c.pos:#x}"))
        plain = b"".join(parts)
        self._decompressed[key] = plain
        return plain


def open_trace(path: Path | str | os.PathLike[str]) -> TraceFile:
    """Open a trace.dat file (version 6 or 7, written by probectl or trace-cmd)."""
    return TraceFile(path)
