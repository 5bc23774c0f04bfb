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
CPU's pages are written anew, natively (native/chainmerge.c: records copied verbatim, time deltas
recomputed, lost-event counts kept on the page that follows the loss): a second buffer would keep the
kernel's pages untouched, but probectl's reader would then have to join two streams, and a v6 file
has no place for one.
"""
from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from .. import ringbuf
from ..ringbuf import PageLayout

if TYPE_CHECKING:
    from . import writer

SYSTEM = "probectl"
USER_CALLCHAIN = "user_callchain"

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
    """An id for probectl's event that none of ``used`` has: the highest (common_type is 16 bits),
    because the kernel gives an event made later the lowest id free."""
    taken = set(used)
    return next(i for i in range(0xFFFF, 0, -1) if i not in taken)


RAW, ENTRY, STACK = 1, 2, 4  # how a perf event's samples are (native/chainmerge.h: CM_RAW, CM_ENTRY, CM_STACK)
BARE = 8  # (CM_BARE) a RAW event's record written alone, without a callchain record (--cgroup without -g)


def write_with_callchains(src: "Optional[Path | writer.CpuPages]", perf: Path, dst: Path, layout: PageLayout, event_id: int,
                          events: Sequence[tuple[int, int, int]], *, pids: Optional[Iterable[int]] = None,
                          window_ns: int = 1_000_000, chains: Optional[tuple[bytes, bytes]] = None
                          ) -> tuple[int, int, list[tuple[int, int, str]], dict[int, list[str]]]:
    """Write the pages of ``src`` (one CPU's data, or None; :class:`~probectl.tracedat.writer.CpuPages`
    for pages that start into their file) to ``dst`` with the samples of ``perf`` (the
    records copied from that CPU's perf ring) in them. ``events``: (perf id, ftrace event id, RAW |
    ENTRY) of each perf event. A sample of a RAW event adds its event's record in time order, then a
    ``probectl:user_callchain`` record; any other joins the event of ``src`` of the same thread and
    type nearest in time, within ``window_ns``, and its callchain record follows that event. An
    ENTRY event's samples get the caller from the word at the stack pointer (see
    :mod:`probectl.record.callchains`); a STACK event's samples get their callchain from ``chains``
    where it has one (the stacks unwound from their copies: (u64 triples (record offset in ``perf``,
    start, count), u64 addresses)). ``pids``: only the samples of these threads or processes.
    Returns (callchains written, samples left over, (pid, tid, command name) of each exec ``perf``
    reports, and per process the ``/proc/PID/maps`` lines of the executable mappings it reports). A
    page that cannot be decoded ends the copy of ``src``; a perf record cut short ends the samples."""
    from .writer import CpuPages  # (the writer: readers of this module's format need none of it)

    pages = src if isinstance(src, CpuPages) or src is None else CpuPages(src)
    with contextlib.ExitStack() as stack:
        src_map: Any = mapped(stack, pages.path) if pages is not None else None
        if src_map is not None and pages is not None and pages.offset:  # (pages a page into their file)
            src_map = memoryview(src_map)[pages.offset:]
            stack.callback(src_map.release)
        perf_map = mapped(stack, perf) or b""
        out = stack.enter_context(open(dst, "wb"))
        written, left, _pages, comms, mmaps = ringbuf.write_callchains(
            src_map, perf_map, out.fileno(), layout, event_id, window_ns, events,
            sorted(set(pids)) if pids is not None else None, chains)
    return (written, left, [(pid, tid, name.decode("utf-8", "backslashreplace")) for pid, tid, name in comms],
            maps_lines(mmaps))


def perf_names(perf: Path) -> tuple[list[tuple[int, int, str]], dict[int, list[str]]]:
    """The (pid, tid, command name) of each exec, and per process the ``/proc/PID/maps`` lines of the
    executable mappings, that the perf records of ``perf`` report (as :func:`write_with_callchains`
    returns them)."""
    with contextlib.ExitStack() as stack:
        comms, mmaps = ringbuf.perf_names(mapped(stack, perf) or b"") if perf.exists() else ([], [])
        return [(pid, tid, name.decode("utf-8", "backslashreplace")) for pid, tid, name in comms], maps_lines(mmaps)


def maps_lines(mmaps: Iterable[ringbuf.PerfMmap]) -> dict[int, list[str]]:
    """Per process, the ``/proc/PID/maps`` lines of the executable mappings perf reported (of files:
    an anonymous mapping has no file to name frames from, and JIT code has its perf map)."""
    maps: dict[int, list[str]] = {}
    for pid, addr, length, pgoff, major, minor, inode, prot, flags, path in mmaps:
        if not (path.startswith(b"/") and not path.startswith(b"//")) and path not in (b"[vdso]", b"[uprobes]"):
            continue  # (//anon, [heap])
        perms = ("r" if prot & 1 else "-") + ("w" if prot & 2 else "-") + ("x" if prot & 4 else "-") + \
            ("s" if flags & 1 else "p")  # (PROT_READ, PROT_WRITE, PROT_EXEC; MAP_SHARED)
        line = f"{addr:x}-{addr + length:x} {perms} {pgoff:08x} {major:02x}:{minor:02x} {inode} "
        maps.setdefault(pid, []).append(line + path.decode("utf-8", "surrogateescape"))
    return maps


def mapped(stack: contextlib.ExitStack, path: Path) -> Optional[mmap.mmap]:
    """The file's bytes, mapped for as long as ``stack`` is open (None for an empty file)."""
    f = stack.enter_context(open(path, "rb"))
    if not os.fstat(f.fileno()).st_size:
        return None
    return stack.enter_context(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))


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


