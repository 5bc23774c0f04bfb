"""A reader of what the unwinder's tests and bench need of a ``perf.data`` file written by ``perf record
--call-graph dwarf``: each sample's user registers and stack copy, and the processes' file mappings
(PERF_RECORD_MMAP/MMAP2). It is the tests' oracle side, written from the layouts of
``linux/perf_event.h`` and perf's file header (tools/perf/util/header.h): one event attribute's samples,
in the order the kernel writes a sample's fields."""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probectl.tracedat.procmaps import Mapping

# sample_type bits, in the order the kernel writes their fields (perf_output_sample)
_IDENTIFIER, _IP, _TID, _TIME, _ADDR, _READ, _CALLCHAIN, _ID, _CPU, _PERIOD, _STREAM_ID, _RAW = \
    1 << 16, 1 << 0, 1 << 1, 1 << 2, 1 << 3, 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10
_BRANCH_STACK, _REGS_USER, _STACK_USER = 1 << 11, 1 << 12, 1 << 13
_RECORD_MMAP, _RECORD_SAMPLE, _RECORD_MMAP2 = 1, 9, 10
_READ_FORMAT_SIZES = {1 << 0: 8, 1 << 1: 8, 1 << 2: 8}  # TOTAL_TIME_ENABLED/RUNNING, ID (+ LOST below)
_READ_GROUP, _READ_LOST = 1 << 3, 1 << 4


@dataclass
class Sample:
    pid: int
    tid: int
    time: int
    ip: int
    regs_mask: int
    regs: list[int]
    stack: bytes  # the copy from the user sp, as long as the kernel could copy (dyn_size)


@dataclass
class PerfData:
    """The samples, in time order (the file has each CPU's in turn), and each process's mappings."""

    samples: list[Sample] = field(default_factory=list)
    mappings: dict[int, list[Mapping]] = field(default_factory=dict)


def read_perf_data(path: Path) -> PerfData:
    data = Path(path).read_bytes()
    if data[:8] != b"PERFILE2":
        raise ValueError(f"{path} is not a perf.data file")
    _hsize, attr_size, attrs_off, attrs_size, data_off, data_size = struct.unpack_from("<6Q", data, 8)
    if attrs_size // attr_size != 1:
        raise ValueError("the reader takes a perf.data of one event attribute")
    (sample_type, read_format, flags) = struct.unpack_from("<3Q", data, attrs_off + 24)
    (regs_mask,) = struct.unpack_from("<Q", data, attrs_off + 80)
    sample_id_all = bool(flags >> 18 & 1)
    del sample_id_all  # (the trailing sample id of other records is not read: records are walked by size)
    out = PerfData()
    pos, end = data_off, data_off + data_size
    while pos + 8 <= end:
        rtype, misc, size = struct.unpack_from("<IHH", data, pos)
        if size < 8:
            raise ValueError(f"a record of size {size} at {pos}")
        body = pos + 8
        if rtype == _RECORD_SAMPLE:
            out.samples.append(_sample(data, body, sample_type, read_format, regs_mask))
        elif rtype in (_RECORD_MMAP, _RECORD_MMAP2):
            pid, _tid, addr, length, pgoff = struct.unpack_from("<IIQQQ", data, body)
            at = body + 32 + (24 + 8 if rtype == _RECORD_MMAP2 else 0)
            name = data[at:data.index(b"\0", at)].decode(errors="replace")
            if rtype == _RECORD_MMAP2:
                prot = struct.unpack_from("<I", data, body + 32 + 24)[0]
                perms = ("r" if prot & 1 else "-") + ("w" if prot & 2 else "-") + ("x" if prot & 4 else "-") + "p"
            else:
                perms = "r-xp"
            _add_mapping(out.mappings.setdefault(pid, []), Mapping(addr, addr + length, pgoff, name, perms))
        pos += size
    out.samples.sort(key=lambda sample: sample.time)  # (in time order, as perf script prints them)
    return out


def _add_mapping(maps: list[Mapping], new: Mapping) -> None:
    """``new`` over what it overlaps of earlier mappings, as a later mmap() replaces them (ld.so maps a
    library whole, then each segment over it)."""
    kept = []
    for m in maps:
        if m.end <= new.start or m.start >= new.end:
            kept.append(m)
            continue
        if m.start < new.start:
            kept.append(Mapping(m.start, new.start, m.offset, m.path, m.perms))
        if m.end > new.end:
            kept.append(Mapping(new.end, m.end, m.offset + (new.end - m.start), m.path, m.perms))
    kept.append(new)
    maps[:] = kept


def _sample(data: bytes, pos: int, sample_type: int, read_format: int, regs_mask: int) -> Sample:
    def u64() -> int:
        nonlocal pos
        (v,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        return v

    ip = pid = tid = when = 0
    if sample_type & _IDENTIFIER:
        u64()
    if sample_type & _IP:
        ip = u64()
    if sample_type & _TID:
        pid, tid = struct.unpack_from("<II", data, pos)
        pos += 8
    if sample_type & _TIME:
        when = u64()
    for bit in (_ADDR, _ID, _STREAM_ID, _CPU, _PERIOD):
        if sample_type & bit:
            u64()
    if sample_type & _READ:
        if read_format & _READ_GROUP:
            raise ValueError("group read formats are not read here")
        pos += 8 + sum(n for bit, n in _READ_FORMAT_SIZES.items() if read_format & bit)
        pos += 8 if read_format & _READ_LOST else 0
    if sample_type & _CALLCHAIN:
        count = u64()
        pos += 8 * count
    if sample_type & _RAW:
        (raw,) = struct.unpack_from("<I", data, pos)
        pos += 4 + raw
    if sample_type & _BRANCH_STACK:
        raise ValueError("branch stacks are not read here")
    regs: list[int] = []
    if sample_type & _REGS_USER and u64():
        regs = [u64() for _ in range(bin(regs_mask).count("1"))]
    stack = b""
    if sample_type & _STACK_USER:
        size = u64()
        if size:
            copy = data[pos:pos + size]
            pos += size
            valid = u64()
            stack = copy[:valid]
    return Sample(pid, tid, when, ip, regs_mask, regs, stack)


def perf_script_stacks(text: str) -> list[list[int]]:
    """Each sample's user frames from ``perf script --no-inline -F ip`` output, after perf's own
    unwinding: addresses in their file (a return address as its call instruction's, one less), one
    line a frame (``--no-inline``: no lines for the functions inlined at a frame's address), kernel
    frames left out."""
    out = []
    for block in text.strip("\n").split("\n\n"):
        addresses = [int(line.split()[0], 16) for line in block.split("\n") if line.strip()]
        out.append([a for a in addresses if a < 0xFFFF800000000000])
    return out


def file_addresses(unwinder: Any, frames: list, elves: dict[str, Any]) -> tuple[list[int], bool]:
    """Unwound frames (probectl.debuginfo.dwarf.unwind) as ``perf script --no-inline -F ip`` prints them, up to
    one in a mapping that is no file ([vdso], or [uprobes] where a uretprobe of another tool replaced
    a return address), and whether no such frame cut them short."""
    from probectl.debuginfo.elf import ElfFile

    out: list[int] = []
    for f in frames:
        if f.kind == "unknown":
            continue
        m = unwinder.mapping(f.address)
        if m is None or not m.path.startswith("/"):
            return out, False
        if m.path not in elves:
            elves[m.path] = ElfFile(m.path)
        out.append(elves[m.path].offset_to_vaddr(f.address - m.start + m.offset) - (f.kind == "return"))
    return out, True


def same_frames(ours: tuple[list[int], bool], theirs: list[int]) -> bool:
    """Whether probectl's frames of a sample are perf script's: all of them, or as far as ours go when a
    frame in no file cut them short (see file_addresses); a sample perf gives no user frame of (it
    could not unwind its first one) is no answer to compare."""
    addresses, complete = ours
    if not theirs:
        return True
    return addresses == theirs if complete else addresses == theirs[:len(addresses)]
