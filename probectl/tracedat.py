"""trace.dat files, trace-cmd's format: metadata sections written and read here, pages in C.

A trace.dat file holds what a reader needs to decode the raw ring-buffer pages without the
recording machine: the page and record headers (``header_page``/``header_event``), the format of
every event that may appear, ``/proc/kallsyms``, ``printk_formats``, the pid -> comm map, the
CPU count and options (trace clock, per-CPU statistics...), then each CPU's pages verbatim.

Version 6 lays these out one after the other; version 7 puts each in a section with a 16-byte
header and finds them through a chain of OPTIONS sections, and may compress sections with zstd
or zlib. See trace-cmd.dat.v6(5) and trace-cmd.dat.v7(5). Both versions are written
(uncompressed) and read (compressed too: zlib from the standard library, zstd through the
system's libzstd). ``trace-cmd report`` reads what :func:`write_tracedat` writes.

Everything read is checked against the file: a truncated or corrupt file raises
:class:`~probectl.errors.TraceFileError` saying where, never another exception.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import random
import re
import struct
import weakref
import zlib
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from . import __version__
from .errors import TraceFileError
from .formats import EventFormat, FormatError
from .ringbuf import Buffer, Event, EventReader, PageLayout

MAGIC = b"\x17\x08\x44tracing"
FILE_VERSIONS = (6, 7)
_SECTION_COMPRESSED = 1
_V6_OPTIONS = b"options  \0"
_V6_FLYRECORD = b"flyrecord\0"
_V6_LATENCY = b"latency  \0"
# probectl's own option: the content of ``saved_tgids`` (pid -> thread group id), which trace-cmd
# has no place for. Readers skip options they do not know (trace-cmd 3.1 silently), and the id is
# far above trace-cmd's (25 in 3.4).
OPTION_SAVED_TGIDS = 0x7E01
# Sanity bounds for sizes read from a file (a corrupt size must not make us allocate gigabytes).
_MAX_CHUNK = 256 << 20
_MAX_TEXT = 1 << 31


class Option(IntEnum):
    """Option (and v7 section) ids of trace-cmd's files."""

    DONE = 0
    DATE = 1
    CPUSTAT = 2
    BUFFER = 3
    TRACECLOCK = 4
    UNAME = 5
    HOOK = 6
    OFFSET = 7
    CPUCOUNT = 8
    VERSION = 9
    PROCMAPS = 10
    TRACEID = 11
    TIME_SHIFT = 12
    GUEST = 13
    TSC2NSEC = 14
    STRINGS = 15
    HEADER_INFO = 16
    FTRACE_EVENTS = 17
    EVENT_FORMATS = 18
    KALLSYMS = 19
    PRINTK = 20
    CMDLINES = 21
    BUFFER_TEXT = 22


# ---- metadata ---------------------------------------------------------------------------------


@dataclass
class TraceMetadata:
    """Everything of a trace.dat file but the pages.

    ``event_formats`` is a list of (system, [format text, ...]); texts are kept as the kernel
    wrote them so that other readers can parse them their way. ``trace_clock`` is the content of
    the ``trace_clock`` file (``[local] global ...``); ``cpustats`` maps a CPU to the content of
    its ``per_cpu/cpuN/stats``.
    """

    header_page: str
    header_event: str
    page_size: int
    cpus: int
    long_size: int = 8  # user-space long of the recording machine (the kernel's is in header_page)
    big_endian: bool = False
    ftrace_formats: list[str] = field(default_factory=list)
    event_formats: list[tuple[str, list[str]]] = field(default_factory=list)
    kallsyms: bytes = b""
    printk_formats: bytes = b""
    cmdlines: str = ""
    tgids: str = ""
    trace_clock: str = "[local]"
    uname: str = ""
    version: str = f"probectl {__version__}"
    trace_id: int = 0
    cpustats: dict[int, str] = field(default_factory=dict)
    extra_options: list[tuple[int, bytes]] = field(default_factory=list)  # e.g. PROCMAPS, DATE

    @property
    def clock(self) -> str:
        """The clock in use: the bracketed name of ``trace_clock`` (``local`` by default)."""
        return clock_name(self.trace_clock)


def clock_name(trace_clock: str) -> str:
    m = re.search(r"\[([^\]]+)\]", trace_clock)
    if m:
        return m.group(1)
    words = trace_clock.split()
    return words[0] if len(words) == 1 else "local"


def _read_text(path: Path) -> str:
    return path.read_text(errors="replace")


def _format_texts(events_dir: Path) -> list[str]:
    texts = []
    try:
        names = sorted(os.listdir(events_dir))
    except OSError:
        return texts
    for name in names:
        try:
            texts.append(_read_text(events_dir / name / "format"))
        except (NotADirectoryError, FileNotFoundError):
            continue
    return texts


def _readable_kallsyms() -> bytes:
    """/proc/kallsyms, or b'' when its addresses are hidden (all zero without privileges)."""
    try:
        data = Path("/proc/kallsyms").read_bytes()
    except OSError:
        return b""
    first = data.split(b" ", 1)[0]
    if not first.strip(b"0"):
        return b""
    return data


def read_cpustats(instance: Path | str, cpus: Iterable[int]) -> dict[int, str]:
    """``per_cpu/cpuN/stats`` of an instance, for the CPUSTAT options (read them at stop time)."""
    stats = {}
    for cpu in cpus:
        try:
            stats[cpu] = _read_text(Path(instance) / "per_cpu" / f"cpu{cpu}" / "stats")
        except OSError:
            continue
    return stats


def collect_metadata(instance: Path | str, systems: Iterable[str], *, root: Path | str | None = None,
                     kallsyms: bool = True, cpus: Optional[int] = None) -> TraceMetadata:
    """Gather the metadata of a recording from tracefs.

    ``instance`` is the recording instance's directory (or the tracefs root), ``systems`` the
    event systems recorded (every format of each is stored, as trace-cmd does), ``root`` the
    tracefs root (default: two levels above an instance), which has ``saved_cmdlines`` and
    ``printk_formats``. ``cpus`` defaults to the instance's ``per_cpu`` entries.
    """
    instance = Path(instance)
    if root is None:
        root = instance.parent.parent if instance.parent.name == "instances" else instance
    root = Path(root)
    events = instance / "events"
    header_page = _read_text(events / "header_page")
    layout = PageLayout.from_header_page(header_page)
    if cpus is None:
        try:
            cpus = sum(1 for n in os.listdir(instance / "per_cpu") if re.fullmatch(r"cpu\d+", n))
        except OSError:
            cpus = os.cpu_count() or 1
    event_formats = []
    for system in sorted(set(systems)):
        if system == "ftrace":
            continue
        texts = _format_texts(events / system)
        if texts:
            event_formats.append((system, texts))

    def optional(path: Path) -> str:
        try:
            return _read_text(path)
        except OSError:
            return ""

    u = os.uname()
    return TraceMetadata(
        header_page=header_page,
        header_event=_read_text(events / "header_event"),
        page_size=layout.page_size,
        cpus=cpus,
        long_size=struct.calcsize("l"),
        big_endian=struct.pack("=H", 1) == b"\0\1",
        ftrace_formats=_format_texts(events / "ftrace"),
        event_formats=event_formats,
        kallsyms=_readable_kallsyms() if kallsyms else b"",
        printk_formats=optional(root / "printk_formats").encode(),
        cmdlines=optional(root / "saved_cmdlines"),
        tgids=optional(root / "saved_tgids"),
        trace_clock=optional(instance / "trace_clock").strip() or "[local]",
        uname=f"{u.sysname} {u.nodename} {u.release} {u.version} {u.machine}",
        trace_id=random.getrandbits(64),
    )


# ---- writing ------------------------------------------------------------------------------------


class _Out:
    """A file being written, with numbers in the file's byte order."""

    def __init__(self, f: Any, big_endian: bool):
        self.f = f
        self.e = ">" if big_endian else "<"

    def tell(self) -> int:
        return self.f.tell()

    def raw(self, data: bytes) -> None:
        self.f.write(data)

    def num(self, fmt: str, *values: int) -> bytes:
        return struct.pack(self.e + fmt, *values)

    def pad_to(self, alignment: int) -> None:
        pos = self.tell()
        pad = -pos % alignment
        if pad:
            self.f.write(b"\0" * pad)


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def _header_info(o: _Out, meta: TraceMetadata) -> bytes:
    hp, he = meta.header_page.encode(), meta.header_event.encode()
    return (b"header_page\0" + o.num("Q", len(hp)) + hp + b"header_event\0" + o.num("Q", len(he)) + he)


def _ftrace_events(o: _Out, meta: TraceMetadata) -> bytes:
    parts = [o.num("I", len(meta.ftrace_formats))]
    for text in meta.ftrace_formats:
        data = text.encode()
        parts += [o.num("Q", len(data)), data]
    return b"".join(parts)


def _event_formats(o: _Out, meta: TraceMetadata) -> bytes:
    parts = [o.num("I", len(meta.event_formats))]
    for system, texts in meta.event_formats:
        parts += [_cstr(system), o.num("I", len(texts))]
        for text in texts:
            data = text.encode()
            parts += [o.num("Q", len(data)), data]
    return b"".join(parts)


def _cpu_sizes(meta: TraceMetadata, cpu_files: Mapping[int, Optional[Path | str]]) -> dict[int, int]:
    """Whole pages of each CPU's data (a torn last page of a crashed recorder is left out)."""
    sizes = {}
    for cpu, path in cpu_files.items():
        if cpu < 0 or cpu >= meta.cpus:
            raise ValueError(f"cpu {cpu} is outside the {meta.cpus} CPUs of the metadata")
        size = os.path.getsize(path) if path is not None else 0
        sizes[cpu] = size - size % meta.page_size
    return sizes


def _copy_data(o: _Out, path: Path | str, size: int) -> None:
    o.f.flush()
    out_fd = o.f.fileno()
    with open(path, "rb") as src:
        in_fd = src.fileno()
        left = size
        while left:
            try:
                n = os.copy_file_range(in_fd, out_fd, left)
            except OSError:
                n = 0
            if n <= 0:
                # copy_file_range is unsupported across these file systems: copy by hand
                src.seek(size - left)
                while left:
                    chunk = src.read(min(left, 1 << 20))
                    if not chunk:
                        raise TraceFileError(f"{path} shrank while it was being copied")
                    os.write(out_fd, chunk)
                    left -= len(chunk)
                break
            left -= n
    o.f.seek(0, os.SEEK_END)


def _options(o: _Out, meta: TraceMetadata, extra: Sequence[tuple[int, bytes]] = ()) -> bytes:
    """The options both versions write: trace clock, uname, version, trace id, CPU stats."""
    opts: list[tuple[int, bytes]] = list(extra)
    opts.append((Option.TRACECLOCK, _cstr(meta.trace_clock)))
    if meta.uname:
        opts.append((Option.UNAME, _cstr(meta.uname)))
    if meta.version:
        opts.append((Option.VERSION, _cstr(meta.version)))
    opts.append((Option.TRACEID, o.num("Q", meta.trace_id & (2**64 - 1))))
    for cpu in sorted(meta.cpustats):
        opts.append((Option.CPUSTAT, _cstr(f"CPU: {cpu}\n{meta.cpustats[cpu]}")))
    if meta.tgids:
        opts.append((OPTION_SAVED_TGIDS, _cstr(meta.tgids)))
    opts.extend(meta.extra_options)
    return b"".join(o.num("HI", oid, len(data)) + data for oid, data in opts)


def write_tracedat(path: Path | str, meta: TraceMetadata, cpu_files: Mapping[int, Optional[Path | str]],
                   *, version: int = 7) -> None:
    """Write a trace.dat file of ``version`` 6 or 7 (uncompressed) from metadata and per-CPU
    page files (``cpu -> path``, as :class:`~probectl.ringbuf.Recorder` leaves them).

    The file is written next to ``path`` and renamed into place when complete.
    """
    if version not in FILE_VERSIONS:
        raise ValueError(f"trace.dat version {version} is not one of {FILE_VERSIONS}")
    path = Path(path)
    sizes = _cpu_sizes(meta, cpu_files)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            o = _Out(f, meta.big_endian)
            o.raw(MAGIC + _cstr(str(version)) + bytes([int(meta.big_endian), meta.long_size]))
            o.raw(o.num("I", meta.page_size))
            if version == 6:
                _write_v6(o, meta, cpu_files, sizes)
            else:
                _write_v7(o, meta, cpu_files, sizes)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_v6(o: _Out, meta: TraceMetadata, cpu_files: Mapping[int, Optional[Path | str]],
              sizes: dict[int, int]) -> None:
    o.raw(_header_info(o, meta))
    o.raw(_ftrace_events(o, meta))
    o.raw(_event_formats(o, meta))
    o.raw(o.num("I", len(meta.kallsyms)) + meta.kallsyms)
    o.raw(o.num("I", len(meta.printk_formats)) + meta.printk_formats)
    cmdlines = meta.cmdlines.encode()
    o.raw(o.num("Q", len(cmdlines)) + cmdlines)
    o.raw(o.num("I", meta.cpus))
    o.raw(_V6_OPTIONS + _options(o, meta) + o.num("H", Option.DONE))
    o.raw(_V6_FLYRECORD)
    # The CPU table comes before the data, so place the data first: after the table and the
    # trace_clock text that a TRACECLOCK option makes readers expect here, page-aligned.
    clock = meta.trace_clock.encode()
    pos = o.tell() + 16 * meta.cpus + 8 + len(clock)
    table = []
    for cpu in range(meta.cpus):
        size = sizes.get(cpu, 0)
        pos += -pos % meta.page_size
        table.append((pos if size else 0, size))
        pos += size
    for offset, size in table:
        o.raw(o.num("QQ", offset, size))
    o.raw(o.num("Q", len(clock)) + clock)
    for cpu, (offset, size) in enumerate(table):
        if size:
            o.pad_to(meta.page_size)
            assert o.tell() == offset
            _copy_data(o, cpu_files[cpu], size)  # type: ignore[arg-type]


class _Strings:
    """The STRINGS section of v7: section descriptions, referenced by offset."""

    def __init__(self) -> None:
        self.blob = b""
        self.ids: dict[str, int] = {}

    def id(self, text: str) -> int:
        if text not in self.ids:
            self.ids[text] = len(self.blob)
            self.blob += _cstr(text)
        return self.ids[text]


def _write_v7(o: _Out, meta: TraceMetadata, cpu_files: Mapping[int, Optional[Path | str]],
              sizes: dict[int, int]) -> None:
    strings = _Strings()
    o.raw(_cstr("none") + _cstr(""))
    options_ptr = o.tell()
    o.raw(o.num("Q", 0))  # patched: offset of the OPTIONS section

    def section(sid: int, desc: str, body: bytes) -> int:
        offset = o.tell()
        o.raw(o.num("HHiQ", sid, 0, strings.id(desc), len(body)) + body)
        return offset

    offsets = {
        Option.HEADER_INFO: section(Option.HEADER_INFO, "headers", _header_info(o, meta)),
        Option.FTRACE_EVENTS: section(Option.FTRACE_EVENTS, "ftrace events", _ftrace_events(o, meta)),
        Option.EVENT_FORMATS: section(Option.EVENT_FORMATS, "events format", _event_formats(o, meta)),
        Option.KALLSYMS: section(Option.KALLSYMS, "kallsyms",
                                 o.num("I", len(meta.kallsyms)) + meta.kallsyms),
        Option.PRINTK: section(Option.PRINTK, "printk",
                               o.num("I", len(meta.printk_formats)) + meta.printk_formats),
        Option.CMDLINES: section(Option.CMDLINES, "command lines",
                                 o.num("Q", len(meta.cmdlines.encode())) + meta.cmdlines.encode()),
    }

    # BUFFER: the header, zeros up to a page boundary, then each CPU's pages, page-aligned; the
    # section size runs to the end of the last CPU's data (readers walk the sections by size).
    # Every CPU is listed, those without data with size 0: trace-cmd convert (3.1) loses data
    # when the list has gaps.
    buffer_offset = o.tell()
    pos = end = buffer_offset + 16
    table = []
    for cpu in range(meta.cpus):
        size = sizes.get(cpu, 0)
        pos += -pos % meta.page_size
        table.append((cpu, pos, size))
        pos += size
        if size:
            end = pos
    o.raw(o.num("HHiQ", Option.BUFFER, 0, strings.id("buffer flyrecord"), end - (buffer_offset + 16)))
    for cpu, offset, size in table:
        if size:
            o.pad_to(meta.page_size)
            assert o.tell() == offset
            _copy_data(o, cpu_files[cpu], size)  # type: ignore[arg-type]

    buffer_opt = (o.num("Q", buffer_offset) + _cstr("") + _cstr(meta.clock)
                  + o.num("II", meta.page_size, len(table))
                  + b"".join(o.num("IQQ", cpu, offset, size) for cpu, offset, size in table))
    extra: list[tuple[int, bytes]] = [(oid, o.num("Q", off)) for oid, off in offsets.items()]
    extra.append((Option.CPUCOUNT, o.num("I", meta.cpus)))
    extra.append((Option.BUFFER, buffer_opt))
    body = _options(o, meta, extra) + o.num("HIQ", Option.DONE, 8, 0)
    options_offset = section(Option.DONE, "options", body)
    strings_id = strings.id("strings")  # the last description: the blob is complete after it
    o.raw(o.num("HHiQ", Option.STRINGS, 0, strings_id, len(strings.blob)) + strings.blob)
    o.f.seek(options_ptr)
    o.raw(o.num("Q", options_offset))
    o.f.seek(0, os.SEEK_END)


# ---- reading ------------------------------------------------------------------------------------


class _Zstd:
    """zstd decompression through the system's libzstd (no Python binding is needed)."""

    _lib: Any = None

    @classmethod
    def decompress(cls, data: bytes, size: int) -> bytes:
        lib = cls._load()
        # Check the size the frame declares before allocating what the file claims: a corrupt
        # size must not cost gigabytes.
        declared = lib.ZSTD_getFrameContentSize(data, len(data))
        if declared < (1 << 63) and declared != size:
            raise ValueError(f"the data holds {declared} bytes, not {size}")
        if declared >= (1 << 63) and size > _MAX_CHUNK:
            raise ValueError(f"{size} bytes is too big for a chunk of unknown size")
        out = ctypes.create_string_buffer(max(size, 1))
        n = lib.ZSTD_decompress(out, size, data, len(data))
        if lib.ZSTD_isError(n):
            raise ValueError(lib.ZSTD_getErrorName(n).decode(errors="replace"))
        if n != size:
            raise ValueError(f"{n} bytes instead of {size}")
        return out.raw[:size]

    @classmethod
    def _load(cls) -> Any:
        if cls._lib is None:
            name = ctypes.util.find_library("zstd") or "libzstd.so.1"
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                raise TraceFileError("the file is zstd-compressed and libzstd is not installed",
                                     "install it ('apt install libzstd1'), or convert the file: "
                                     "'trace-cmd convert --compression none -i IN -o OUT'") from None
            lib.ZSTD_decompress.restype = ctypes.c_size_t
            lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
            lib.ZSTD_isError.restype = ctypes.c_uint
            lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
            lib.ZSTD_getErrorName.restype = ctypes.c_char_p
            lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
            lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong  # -1 unknown, -2 error
            lib.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            cls._lib = lib
        return cls._lib


def _decompress(algorithm: str, data: bytes, size: int) -> bytes:
    if algorithm == "zstd":
        return _Zstd.decompress(data, size)
    if algorithm == "zlib":
        out = zlib.decompressobj().decompress(data, size + 1)  # bounded by the expected size
        if len(out) != size:
            raise ValueError(f"{len(out)} bytes instead of {size}")
        return out
    raise TraceFileError(f"the file is compressed with {algorithm!r}, which probectl cannot read",
                         "convert it: 'trace-cmd convert --compression none -i IN -o OUT'")


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

    The metadata is read at once; the pages are mapped and decoded on demand by
    :meth:`reader` / :meth:`events`. Formats that do not parse are listed in
    ``unparsed_formats`` and their events come out with ``format`` None.
    """

    def __init__(self, path: Path | str):
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
        self.ftrace_formats: list[EventFormat] = []
        self.event_formats: list[EventFormat] = []
        self.unparsed_formats: list[tuple[str, str]] = []  # (system, error message)
        self.format_texts: list[tuple[str, str]] = []  # (system, text) as stored
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
        self._readers: weakref.WeakSet[EventReader] = weakref.WeakSet()  # closed with the file
        try:
            self._file = open(self.path, "rb")
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
        """Every parsed format (ftrace's and the events') by id."""
        return {f.id: f for f in (*self.ftrace_formats, *self.event_formats)}

    def buffer(self, name: str = "") -> BufferInfo:
        for b in self.buffers:
            if b.name == name:
                return b
        known = ", ".join(repr(b.name) for b in self.buffers) or "none"
        raise TraceFileError(f"{self.where} has no buffer {name!r} (buffers: {known})")

    def reader(self, *, buffer: str = "", strict: bool = True, raw: bool = False,
               formats: Optional[Sequence[EventFormat]] = None) -> EventReader:
        """An :class:`~probectl.ringbuf.EventReader` over one buffer's pages, merged by time."""
        info = self.buffer(buffer)
        streams = []
        for c in info.cpus:
            if not c.size:
                continue  # an empty CPU's offset may point anywhere, even past the end
            if info.compressed:
                data = self._cpu_decompressed(info, c)
                streams.append((c.cpu, data, 0, len(data)))
            else:
                streams.append((c.cpu, self._map, c.offset, c.size))
        layout = PageLayout(self.layout.long_size, self.big_endian, info.page_size)
        reader = EventReader(streams, list(self.formats.values()) if formats is None else formats,
                             layout, strict=strict, raw=raw, source=self.where)
        self._readers.add(reader)
        return reader

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
        self._parse_formats()

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

    def _parse_formats(self) -> None:
        seen: set[int] = set()
        for system, text in self.format_texts:
            try:
                fmt = EventFormat.parse(text, system)
            except FormatError as err:
                self.unparsed_formats.append((system, err.message))
                continue
            if fmt.id in seen:
                self.unparsed_formats.append((system, f"{fmt.name}: id {fmt.id} used twice"))
                continue
            seen.add(fmt.id)
            (self.ftrace_formats if system == "ftrace" else self.event_formats).append(fmt)

    def _parse_cmdlines(self, data: bytes) -> None:
        for line in data.decode(errors="replace").splitlines():
            pid, _, comm = line.strip().partition(" ")
            if pid.isdigit() and comm:
                self.cmdlines[int(pid)] = comm

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
            for line in text.splitlines():
                pid, _, tgid = line.partition(" ")
                if pid.strip().isdigit() and tgid.strip().isdigit():
                    self.tgids[int(pid)] = int(tgid)

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
        compressed = bool(flags & _SECTION_COMPRESSED)
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
        if kind == _V6_OPTIONS:
            while True:
                oid = c.u16("an option id")
                if oid == Option.DONE:
                    break
                data = c.sized_text("I", f"option {oid}")
                has_clock |= oid == Option.TRACECLOCK
                self._option(oid, data, in_v7=False)
            kind = c.take(10, "the data kind")
        if kind == _V6_LATENCY:
            self.latency_text = bytes(self._map[c.pos:self.size]).decode(errors="replace")
            return
        if kind != _V6_FLYRECORD:
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
        if not flags & _SECTION_COMPRESSED:
            return self._cursor(body, body + size)
        c = self._cursor(body, body + size)
        csize = c.u32(f"{what} compressed size")
        usize = c.u32(f"{what} size")
        data = c.take(csize, f"{what} compressed data")
        if usize > _MAX_TEXT:
            raise TraceFileError(f"{self.where}: corrupt: {what} claims {usize} bytes")
        try:
            plain = _decompress(self.compression, data, usize)
        except TraceFileError:
            raise
        except (ValueError, zlib.error) as err:
            raise TraceFileError(f"{self.where}: corrupt compressed {what} at offset {offset:#x}: {err}") from None
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
            if usize > _MAX_CHUNK:
                raise TraceFileError(f"{self.where}: corrupt: {what} chunk of {usize} bytes")
            data = c.take(csize, what)
            try:
                parts.append(_decompress(self.compression, data, usize))
            except TraceFileError:
                raise
            except (ValueError, zlib.error) as err:
                raise TraceFileError(f"{self.where}: corrupt {what} at offset {c.pos:#x}: {err}") from None
        plain = b"".join(parts)
        self._decompressed[key] = plain
        return plain


def open_trace(path: Path | str) -> TraceFile:
    """Open a trace.dat file (version 6 or 7, written by probectl or trace-cmd)."""
    return TraceFile(path)
