"""Writing trace.dat files, versions 6 and 7 (uncompressed), from :class:`TraceMetadata` and the
per-CPU page files the recorder leaves; ``trace-cmd report`` reads what this writes."""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional, Sequence, Union

from ..errors import TraceFileError
from ..formats import for_libtraceevent
from ..outputfile import OutputFile
from .metadata import FILE_VERSIONS, MAGIC, OPTION_SAVED_TGIDS, V6_FLYRECORD, V6_OPTIONS, Option, TraceMetadata


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


def _format_text(text: str) -> bytes:
    """A format text as the file holds it: the kernel's, as trace-cmd needs it to print the kernel's
    values (arrays' lengths written in, ``%hd`` for an s16: :func:`probectl.formats.for_libtraceevent`)."""
    return for_libtraceevent(text).encode()


def _ftrace_events(o: _Out, meta: TraceMetadata) -> bytes:
    parts = [o.num("I", len(meta.ftrace_formats))]
    for text in meta.ftrace_formats:
        data = _format_text(text)
        parts += [o.num("Q", len(data)), data]
    return b"".join(parts)


def _event_formats(o: _Out, meta: TraceMetadata) -> bytes:
    parts = [o.num("I", len(meta.event_formats))]
    for system, texts in meta.event_formats:
        parts += [_cstr(system), o.num("I", len(texts))]
        for text in texts:
            data = _format_text(text)
            parts += [o.num("Q", len(data)), data]
    return b"".join(parts)


class CpuPages(NamedTuple):
    """One CPU's pages: the bytes of ``path`` from ``offset`` to its end. A file whose pages start a
    page or more in (``offset >= page_size``) has room for the head of a version 7 file: the
    writer then makes the trace.dat of that file, without copying its pages (see :func:`write_tracedat`)."""

    path: Path
    offset: int = 0


CpuFiles = Mapping[int, Optional[Union[Path, str, CpuPages]]]


def _pages(value: Optional[Union[Path, str, CpuPages]]) -> Optional[CpuPages]:
    if value is None or isinstance(value, CpuPages):
        return value
    return CpuPages(Path(value))


def _cpu_sizes(meta: TraceMetadata, cpu_files: Mapping[int, Optional[CpuPages]]) -> dict[int, int]:
    """Whole pages of each CPU's data (a torn last page of a crashed recorder is left out)."""
    sizes = {}
    for cpu, pages in cpu_files.items():
        if cpu < 0 or cpu >= meta.cpus:
            raise ValueError(f"cpu {cpu} is outside the {meta.cpus} CPUs of the metadata")
        size = max(0, os.path.getsize(pages.path) - pages.offset) if pages is not None else 0
        sizes[cpu] = size - size % meta.page_size
    return sizes


def _copy_data(o: _Out, pages: CpuPages, size: int) -> None:
    o.f.flush()
    out_fd = o.f.fileno()
    with open(pages.path, "rb") as src:
        in_fd = src.fileno()
        src.seek(pages.offset)
        left = size
        while left:
            try:
                n = os.copy_file_range(in_fd, out_fd, left)
            except OSError:
                n = 0
            if n <= 0:
                # copy_file_range is unsupported across these file systems: copy by hand
                src.seek(pages.offset + size - left)
                while left:
                    chunk = src.read(min(left, 1 << 20))
                    if not chunk:
                        raise TraceFileError(f"{pages.path} shrank while it was being copied")
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


def write_tracedat(path: OutputFile | Path | str, meta: TraceMetadata, cpu_files: CpuFiles, *,
                   version: int = 7) -> None:
    """Write a trace.dat file of ``version`` 6 or 7 (uncompressed) from metadata and per-CPU
    page files (``cpu -> path``, as :class:`~probectl.ringbuf.Recorder` leaves them, or
    :class:`CpuPages`).

    ``path`` is written whole or not at all, and a device or FIFO in place (:mod:`probectl.outputfile`);
    a recorder claims its :class:`~probectl.outputfile.OutputFile` before it records.

    A version 7 file written to a regular file is made of the largest CPU's :class:`CpuPages` with
    room for the head, when it is in the output's directory: the head is written in that room and
    the rest appended, and that file then replaces the output. The largest CPU's pages, most of a
    recording of one busy thread, are then not copied."""
    if version not in FILE_VERSIONS:
        raise ValueError(f"trace.dat version {version} is not one of {FILE_VERSIONS}")
    files = {cpu: _pages(value) for cpu, value in cpu_files.items()}
    sizes = _cpu_sizes(meta, files)
    output = path if isinstance(path, OutputFile) else OutputFile(path)
    base = _base(output, meta, files, sizes) if version == 7 else None
    if base is not None:
        pages = files[base]
        assert pages is not None
        output.write(lambda f: _write_file(f, meta, files, sizes, version, base), start_from=pages.path)
    else:
        # (seekable: the writer seeks back to fill in section sizes, which a pipe cannot)
        output.write(lambda f: _write_file(f, meta, files, sizes, version), seekable=True)


def _base(output: OutputFile, meta: TraceMetadata, files: Mapping[int, Optional[CpuPages]],
          sizes: dict[int, int]) -> Optional[int]:
    """The CPU whose page file the version 7 file is made of, if any (see :func:`write_tracedat`)."""
    fit = [cpu for cpu, pages in files.items() if pages is not None and sizes[cpu] and pages.offset == meta.page_size
           and output.can_start_from(pages.path)]
    return max(fit, key=lambda cpu: sizes[cpu], default=None)


def _write_file(f, meta: TraceMetadata, cpu_files: Mapping[int, Optional[CpuPages]], sizes: dict[int, int],
                version: int, base: Optional[int] = None) -> None:
    o = _Out(f, meta.big_endian)
    o.raw(MAGIC + _cstr(str(version)) + bytes([int(meta.big_endian), meta.long_size]))
    o.raw(o.num("I", meta.page_size))
    if version == 6:
        _write_v6(o, meta, cpu_files, sizes)
    else:
        _write_v7(o, meta, cpu_files, sizes, base)


def _write_v6(o: _Out, meta: TraceMetadata, cpu_files: Mapping[int, Optional[CpuPages]],
              sizes: dict[int, int]) -> None:
    o.raw(_header_info(o, meta))
    o.raw(_ftrace_events(o, meta))
    o.raw(_event_formats(o, meta))
    o.raw(o.num("I", len(meta.kallsyms)) + meta.kallsyms)
    o.raw(o.num("I", len(meta.printk_formats)) + meta.printk_formats)
    cmdlines = meta.cmdlines.encode("utf-8", "surrogateescape")
    o.raw(o.num("Q", len(cmdlines)) + cmdlines)
    o.raw(o.num("I", meta.cpus))
    o.raw(V6_OPTIONS + _options(o, meta) + o.num("H", Option.DONE))
    o.raw(V6_FLYRECORD)
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


def _write_v7(o: _Out, meta: TraceMetadata, cpu_files: Mapping[int, Optional[CpuPages]],
              sizes: dict[int, int], base: Optional[int]) -> None:
    """The head, the BUFFER section (each CPU's pages, page-aligned), the metadata sections, the
    options and the strings. ``base``: the CPU whose pages the file already holds, from its first
    page boundary (the head fits before it), and which are not copied."""
    strings = _Strings()
    o.raw(_cstr("none") + _cstr(""))
    options_ptr = o.tell()
    o.raw(o.num("Q", 0))  # patched: offset of the OPTIONS section

    def section(sid: int, desc: str, body: bytes) -> int:
        offset = o.tell()
        o.raw(o.num("HHiQ", sid, 0, strings.id(desc), len(body)) + body)
        return offset

    # BUFFER: the header, zeros up to a page boundary, then each CPU's pages, page-aligned (the base
    # CPU's first); the section size runs to the end of the last CPU's data (readers walk the
    # sections by size). Every CPU is listed, those without data with size 0: trace-cmd convert
    # (3.1) loses data when the list has gaps.
    buffer_offset = o.tell()
    pos = end = buffer_offset + 16
    places: dict[int, tuple[int, int]] = {}
    for cpu in sorted(range(meta.cpus), key=lambda c: c != base):
        size = sizes.get(cpu, 0)
        pos += -pos % meta.page_size
        places[cpu] = (pos, size)
        pos += size
        if size:
            end = pos
    o.raw(o.num("HHiQ", Option.BUFFER, 0, strings.id("buffer flyrecord"), end - (buffer_offset + 16)))
    for cpu, (offset, size) in sorted(places.items(), key=lambda item: item[1]):
        if not size:
            continue
        if cpu == base:
            assert offset == meta.page_size
            o.f.seek(offset + size)
            continue
        o.pad_to(meta.page_size)
        assert o.tell() == offset
        _copy_data(o, cpu_files[cpu], size)  # type: ignore[arg-type]
    o.f.truncate(o.tell())  # (a torn last page of the base CPU's file goes)
    table = [(cpu, *places[cpu]) for cpu in range(meta.cpus)]

    offsets = {
        Option.HEADER_INFO: section(Option.HEADER_INFO, "headers", _header_info(o, meta)),
        Option.FTRACE_EVENTS: section(Option.FTRACE_EVENTS, "ftrace events", _ftrace_events(o, meta)),
        Option.EVENT_FORMATS: section(Option.EVENT_FORMATS, "events format", _event_formats(o, meta)),
        Option.KALLSYMS: section(Option.KALLSYMS, "kallsyms",
                                 o.num("I", len(meta.kallsyms)) + meta.kallsyms),
        Option.PRINTK: section(Option.PRINTK, "printk",
                               o.num("I", len(meta.printk_formats)) + meta.printk_formats),
        Option.CMDLINES: section(Option.CMDLINES, "command lines",
                                 o.num("Q", len(meta.cmdlines.encode("utf-8", "surrogateescape")))
                                 + meta.cmdlines.encode("utf-8", "surrogateescape")),
    }

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
