"""The processes a recording traces: whether they live, their names, thread groups and memory maps
(read while they run, or placed from a uprobe's address once they are gone), and the trace.dat
option that keeps the maps for user-space symbols."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from ..errors import ProbectlError

# probectl's option in trace.dat: /proc/PID/maps of the traced processes (file-backed lines),
# as blocks "pid PID\n<maps lines>\n\n". trace-cmd skips options it does not know.
OPTION_PROC_MAPS = 0x7E02
MAX_MAPS_PIDS = 4096  # processes whose maps a recording keeps


@dataclass(frozen=True)
class Mapping:
    """One line of /proc/PID/maps: ``start``..``end`` maps ``path`` from file ``offset``."""

    start: int
    end: int
    offset: int
    path: str
    perms: str = "r-xp"


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
        return Path(f"/proc/{pid}/comm").read_text().rstrip("\n")
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
        text = Path(f"/proc/{pid}/maps").read_text()
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


def encode_proc_maps(maps: dict[int, str]) -> bytes:
    return "".join(f"pid {pid}\n{text}\n\n" for pid, text in sorted(maps.items())).encode()


def decode_proc_maps(data: bytes) -> dict[int, list[Mapping]]:
    """The :data:`OPTION_PROC_MAPS` option → {tgid: [Mapping]} (bad lines are skipped)."""
    out: dict[int, list[Mapping]] = {}
    pid: Optional[int] = None
    for line in data.decode(errors="replace").split("\n"):
        if line.startswith("pid "):
            try:
                pid = int(line.split()[1])
            except (ValueError, IndexError):
                pid = None
            if pid is not None:
                out.setdefault(pid, [])
            continue
        parts = line.split(None, 5)
        if pid is None or len(parts) < 6:
            continue
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            offset = int(parts[2], 16)
        except ValueError:
            continue
        out[pid].append(Mapping(lo, hi, offset, parts[5], parts[1]))
    return out


class ProcessWatch:
    """Names, thread groups and maps of traced processes, read while they are alive."""

    def __init__(self) -> None:
        self.comms: dict[int, str] = {}
        self.tgids: dict[int, int] = {}
        self.maps: dict[int, str] = {}

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
