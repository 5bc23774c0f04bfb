"""The processes a recording traces: whether they live, their names, thread groups and memory maps
(read while they run, or placed from a uprobe's address once they are gone). The maps are kept in
the trace.dat file by :mod:`probectl.tracedat.procmaps`."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

from ..errors import ProbectlError

MAX_MAPS_PIDS = 4096  # processes whose maps a recording keeps


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def proc_comm(pid: int) -> Optional[str]:
    try:
        return Path(f"/proc/{pid}/comm").read_text(errors="backslashreplace").rstrip("\n")
    except OSError:
        return None


def proc_tgid(pid: int) -> Optional[int]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def read_maps(pid: int) -> Optional[str]:
    """The file-backed lines of /proc/PID/maps (what user-space symbols need), or None."""
    try:
        text = Path(f"/proc/{pid}/maps").read_text(errors="surrogateescape")  # (a path is bytes)
    except OSError:
        return None
    lines = [l for l in text.splitlines() if len(l.split(None, 5)) == 6 and
             (l.split(None, 5)[5].startswith("/") or l.split(None, 5)[5] in ("[vdso]", "[uprobes]"))]
    return "\n".join(lines) if lines else None


def synthesize_maps(path: str, file_offset: int, address: int) -> Optional[str]:
    """Maps lines for ``path`` in a process where file offset ``file_offset`` is at ``address``
    (a uprobe's place and its ``__probe_ip``): every PT_LOAD segment at the same load bias.
    For processes that ended before their maps could be read."""
    from ..debuginfo.elf import ElfFile

    try:
        with ElfFile(path) as elf:
            bias = address - elf.offset_to_vaddr(file_offset)
            lines = []
            for seg in elf.segments:
                if not seg.filesz:
                    continue
                start = (bias + seg.vaddr) & ~0xFFF
                end = (bias + seg.vaddr + seg.filesz + 0xFFF) & ~0xFFF
                perms = "r" + ("w" if seg.flags & 2 else "-") + ("x" if seg.flags & 1 else "-") + "p"
                lines.append(f"{start:x}-{end:x} {perms} {seg.offset & ~0xFFF:08x} 00:00 0 {path}")
    except (ProbectlError, OSError, ValueError):
        return None
    return "\n".join(lines) if lines else None


class ProcessWatch:
    """Names, thread groups and maps of traced processes, read while they are alive."""

    def __init__(self) -> None:
        self.comms: dict[int, str] = {}
        self.tgids: dict[int, int] = {}
        self.maps: dict[int, str] = {}

    def add_maps(self, maps: dict[int, list[str]], limit: int) -> None:
        """Maps lines from elsewhere (perf's mmap records) for processes whose maps lack their paths
        (ended before they were read, or read before the mapping was made); up to ``limit`` processes."""
        for tgid, lines in maps.items():
            if tgid not in self.maps and len(self.maps) >= limit:
                continue
            have = self.maps.get(tgid, "")
            known = {parts[5] for parts in (l.split(None, 5) for l in have.splitlines()) if len(parts) == 6}
            new = [l for l in dict.fromkeys(lines) if l.split(None, 5)[-1] not in known]
            if new:
                self.maps[tgid] = "\n".join(([have] if have else []) + new)

    def look(self, pids: Sequence[int], maps: bool = True) -> None:
        done: set[int] = set()
        for pid in pids:
            comm = proc_comm(pid)
            if comm is None:
                continue
            self.comms[pid] = comm
            tgid = proc_tgid(pid) or pid
            self.tgids[pid] = tgid
            if maps and tgid not in done and (tgid in self.maps or len(self.maps) < MAX_MAPS_PIDS):
                done.add(tgid)
                text = read_maps(tgid)
                if text:
                    self.maps[tgid] = text


def traced_tids(pids: Sequence[int], command: Optional[int] = None) -> list[int]:
    """What ``set_event_pid`` gets: every thread of the ``-p`` processes, and the command's pid."""
    tids: list[int] = []
    for p in pids:
        try:
            tids += [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except OSError:
            tids.append(p)
    if command is not None:
        tids.append(command)
    return sorted(set(tids))
