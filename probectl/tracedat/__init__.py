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

The package: :mod:`.metadata` (what a file holds besides the pages), :mod:`.writer`, :mod:`.reader`
and :mod:`.compression`.
"""
from pathlib import Path

from .metadata import (FILE_VERSIONS, MAGIC, OPTION_SAVED_TGIDS, Option, TraceMetadata, clock_name, collect_metadata,
                       instance_cpus, kallsyms_addresses_shown, parse_cmdlines, parse_tgids, read_cpustats)
from .reader import BufferInfo, CpuData, TraceFile, open_trace

# What `probectl record` writes and `probectl script` reads when no file is named.
DEFAULT_FILE = Path("probectl.dat")

__all__ = [
    "BufferInfo",
    "DEFAULT_FILE",
    "CpuData",
    "FILE_VERSIONS",
    "MAGIC",
    "OPTION_SAVED_TGIDS",
    "Option",
    "TraceFile",
    "TraceMetadata",
    "clock_name",
    "collect_metadata",
    "kallsyms_addresses_shown",
    "instance_cpus",
    "open_trace",
    "parse_cmdlines",
    "parse_tgids",
    "read_cpustats",
    "write_tracedat",
]


def __getattr__(name: str):
    if name == "write_tracedat":  # (imported on first use: readers, like `probectl script`, never write)
        from .writer import write_tracedat

        return write_tracedat
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
