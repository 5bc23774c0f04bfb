"""User stacks of code built without frame pointers (``record --call-graph dwarf``, and ``record -g``
on a program that keeps none): each sample of such an event's perf event carries the user registers
and a copy of the user stack from the stack pointer up (perf's PERF_SAMPLE_REGS_USER and
PERF_SAMPLE_STACK_USER, ``dwarf,SIZE`` bytes), and when the recording ends each copy is unwound from the
call-frame information of the files the process mapped (:mod:`probectl.debuginfo.dwarf.unwind`) into
the callchain its ``probectl:user_callchain`` record carries.

perf keeps the copies in perf.data and unwinds them at every ``perf script``; probectl unwinds once,
while the files the process ran are surely still there, and the recording keeps the frames: trace-cmd
and KernelShark show them, and the file holds a few words per stack instead of the copy's kilobytes.

A stack whose unwinding stops before its outermost frame (a copy too short for a deep stack, code
without call-frame information, an address in no mapped file) ends with the frames known and then
:data:`UNKNOWN_FRAME`, which every reader shows as ``[unknown]``: a frame it cannot know, never a guessed one.
"""
from __future__ import annotations

import array
import contextlib
import mmap
import re
import struct
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence

from .. import ringbuf
from ..tracedat.callchain import STACK, maps_lines, mapped
from ..tracedat.procmaps import decode_proc_maps, encode_proc_maps

if TYPE_CHECKING:
    from ..arch import Arch
    from ..debuginfo.dwarf.unwind import CallFrameFiles, Unwinder
    from ..events import EventDefinition
    from .selection import SelectedEvent

DEFAULT_STACK_COPY = 8192  # bytes: perf's ``--call-graph dwarf`` default
MAX_STACK_COPY = 65528  # the kernel takes less than 64 KiB, in 8-byte words
# Where an unwinding stopped: an address in the first page, which is never mapped (vm.mmap_min_addr), so
# that every reader names it [unknown] (not 0, which ends a user stack as the kernel's padding does).
UNKNOWN_FRAME = 1


def parse_call_graph(text: str) -> tuple[str, int]:
    """perf's ``--call-graph`` value: ``fp``, ``dwarf`` or ``dwarf,SIZE`` → (mode, stack copy bytes).
    Raises ValueError with what is wrong."""
    mode, _, size_text = text.partition(",")
    if mode == "fp" and not size_text:
        return "fp", 0
    if mode != "dwarf":
        raise ValueError(f"{text!r} is not a call-graph mode: fp, dwarf or dwarf,SIZE")
    if not size_text:
        return "dwarf", DEFAULT_STACK_COPY
    try:
        size = int(size_text, 0)
    except ValueError:
        raise ValueError(f"{size_text!r} is not a stack copy size in bytes") from None
    if not 8 <= size <= MAX_STACK_COPY:
        raise ValueError(f"a stack copy of {size} bytes: it must be 8 to {MAX_STACK_COPY} bytes")
    return "dwarf", (size + 7) // 8 * 8


class UnwindStats:
    """How the stacks of a recording's copies came out: how many were unwound to their outermost frame,
    and how many stopped, by reason (its addresses left out, so that alike reasons count together)."""

    def __init__(self) -> None:
        self.complete = 0
        self.stopped: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return self.complete + sum(self.stopped.values())


def unwind_stack_copies(perf_files: Mapping[int, Path], events: Sequence[tuple[int, int, int]],
                        proc_maps: Mapping[int, str], max_frames: int
                        ) -> tuple[dict[int, tuple[bytes, bytes]], UnwindStats]:
    """The callchains of the samples with stack copies in the per-CPU ``perf_files`` (``events`` as
    :func:`probectl.tracedat.callchain.write_with_callchains` takes them), per CPU in the form its
    ``chains`` takes; ``proc_maps``: /proc/PID/maps texts of the traced processes by process, with the
    executable mappings the perf records report added."""
    from ..debuginfo.dwarf.unwind import CallFrameFiles, host_arch

    nregs, ip, sp, bp = walk_registers(host_arch())
    stack_events = [e for e in events if e[2] & STACK]
    stats = UnwindStats()
    out: dict[int, tuple[bytes, bytes]] = {}
    with contextlib.ExitStack() as opened:
        views: dict[int, mmap.mmap] = {}
        reported: dict[int, list[str]] = {}
        for cpu, path in perf_files.items():
            data = mapped(opened, path) if path.exists() else None
            if data is None:
                continue
            views[cpu] = data
            for pid, lines in maps_lines(ringbuf.perf_names(data)[1]).items():
                reported.setdefault(pid, []).extend(lines)
        maps = _process_maps(proc_maps, reported)
        files = CallFrameFiles()
        opened.callback(files.close)
        unwinders: dict[int, "Unwinder"] = {}

        def rule_of(pid: int, address: int) -> Optional[tuple[int, int, int, int, int, int]]:
            return _unwinder(pid, unwinders, maps, files, max_frames).simple_rule(address)

        for cpu, view in views.items():
            # (natively, by the rules most frames have; the other stacks here, which say why they stop)
            index_bytes, pool_bytes, others = ringbuf.unwind_copies(view, stack_events, nregs, ip, sp, bp,
                                                                    max_frames, rule_of)
            index, pool = array.array("Q", index_bytes), array.array("Q", pool_bytes)
            stats.complete += len(index) // 3 - len(others)
            for i, sample in others:
                chain = _unwound(sample, view, _unwinder(sample.pid, unwinders, maps, files, max_frames), stats)
                index[3 * i + 1:3 * i + 3] = array.array("Q", (len(pool), len(chain)))
                pool.extend(chain)
            if index:
                out[cpu] = (index.tobytes(), pool.tobytes())
    return out, stats


def walk_registers(arch: "Arch") -> tuple[int, int, int, int]:
    """(the count of a sample's user registers, and the indices among them of the instruction, stack
    and frame pointers) of ``arch``'s copies, as the native walk (native/unwind.h) reads them; the
    frame pointer -1 but on x86-64, the one machine whose stacks it walks."""
    from ..arch import x86_64

    order = [arch.perf_regs_dwarf[bit] for bit in range(64) if arch.perf_regs_unwind_mask >> bit & 1]
    bp = order.index(x86_64.FRAME_POINTER) if arch is x86_64.ARCH else -1
    return len(order), order.index(arch.instruction_pointer), order.index(arch.stack_pointer), bp


def _unwinder(pid: int, unwinders: dict[int, "Unwinder"], maps: Mapping[int, str], files: "CallFrameFiles",
              max_frames: int) -> "Unwinder":
    from ..debuginfo.dwarf.unwind import Unwinder

    unwinder = unwinders.get(pid)
    if unwinder is None:
        parsed = decode_proc_maps(encode_proc_maps({pid: maps.get(pid, "")}))
        unwinder = unwinders[pid] = Unwinder(parsed.get(pid, []), files, max_frames)
    return unwinder


def _unwound(sample: ringbuf.StackSample, view: mmap.mmap, unwinder: "Unwinder", stats: UnwindStats) -> list[int]:
    from ..debuginfo.dwarf.unwind import StackCopy, host_arch, registers_from_perf

    values = struct.unpack(f"<{len(sample.registers) // 8}Q", sample.registers)
    arch = host_arch()
    regs = registers_from_perf(arch.perf_regs_unwind_mask, values, arch)
    copy = StackCopy(regs.get(arch.stack_pointer, 0),
                     view[sample.stack_offset:sample.stack_offset + sample.stack_len])
    frames = unwinder.unwind(regs, copy)
    chain = [f.address for f in frames if f.kind != "unknown"]
    if frames and frames[-1].kind == "unknown":
        stats.stopped[_reason_kind(frames[-1].reason)] += 1
        chain.append(UNKNOWN_FRAME)
    else:
        stats.complete += 1
    return chain


def _reason_kind(reason: str) -> str:
    """A stop's reason without the addresses that make each one different."""
    return re.sub(r"\b0x[0-9a-f]+(?:\.\.0x[0-9a-f]+)?", "0x…", reason)


def _process_maps(proc_maps: Mapping[int, str], reported: Mapping[int, list[str]]) -> dict[int, str]:
    """Per process, its /proc/PID/maps text with the mappings perf reported added (those of files it
    had not mapped when its maps were read, or of a process that ended first)."""
    out = dict(proc_maps)
    for pid, lines in reported.items():
        have = out.get(pid, "")
        known = set(have.splitlines())
        new = [line for line in dict.fromkeys(lines) if line not in known]
        if new:
            out[pid] = "\n".join(([have] if have else []) + new)
    return out


RING_DATA_PAGES = 2048  # per CPU without -m when samples copy stacks (8 MiB with 4 KiB pages)


def copied_events(mode: str, definitions: Sequence["EventDefinition"], events: Sequence["SelectedEvent"],
                  notice: Callable[[str], None], programs: Sequence[str] = ()) -> list[int]:
    """The format ids of the ``events`` whose samples copy the user stack: every one with ``dwarf``,
    none with ``fp``; with ``auto`` (``-g`` alone) the uprobes in files that keep no frame pointers,
    and the other events (tracepoints, kprobes) when one of ``programs`` (the files of the processes
    a run is scoped to) keeps none, each such file named in a notice. A uprobe event of several places
    is copied if any of its files keeps none; a run of every process keeps the frame-pointer walk for
    tracepoints and kprobes (no one program decides)."""
    if mode == "dwarf":
        return [ev.format.id for ev in events]
    if mode != "auto":
        return []
    from ..debuginfo.elf import ElfFile
    from ..debuginfo.framepointers import keeps_frame_pointers
    from ..errors import ProbectlError

    paths: dict[tuple[str, str], set[str]] = {}
    for d in definitions:
        if d.is_uprobe and d.uprobe_path:
            paths.setdefault((d.group, d.event), set()).add(d.uprobe_path)
    keeps: dict[str, bool] = {}

    def keeping(path: str) -> bool:
        if path not in keeps:
            try:
                with ElfFile(path) as elf:
                    keeps[path] = keeps_frame_pointers(elf)
            except (ProbectlError, OSError):
                keeps[path] = True  # (unreadable: the kernel's walk is all there is)
        return keeps[path]

    scoped_without = [p for p in dict.fromkeys(programs) if not keeping(p)]
    out = []
    for ev in events:
        files = paths.get((ev.group, ev.event))
        without = [p for p in sorted(files) if not keeping(p)] if files else scoped_without
        if without:
            out.append(ev.format.id)
            notice(f"probectl: {', '.join(without)} keep{'s' * (len(without) == 1)} no frame pointers: the user "
                   f"stacks of {ev.name} are unwound from call-frame information (--call-graph fp: the "
                   "frame-pointer walk)")
    return out
