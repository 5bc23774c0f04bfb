"""probectl's trace.dat option for user-space symbols: the ``/proc/PID/maps`` of the traced processes,
written by a recording and read by ``script`` (trace-cmd skips options it does not know)."""
from __future__ import annotations

from typing import Optional

from ..dataclass import dataclass

# probectl's option in trace.dat: /proc/PID/maps of the traced processes (file-backed lines),
# as blocks "pid PID\n<maps lines>\n\n". trace-cmd skips options it does not know.
OPTION_PROC_MAPS = 0x7E02


@dataclass(frozen=True)
class Mapping:
    """One line of /proc/PID/maps: ``start``..``end`` maps ``path`` from file ``offset``."""

    start: int
    end: int
    offset: int
    path: str
    perms: str = "r-xp"


def encode_proc_maps(maps: dict[int, str]) -> bytes:
    """The option's bytes; a path's bytes that are not UTF-8 (surrogate-escaped in ``maps``) as they are."""
    return "".join(f"pid {pid}\n{text}\n\n" for pid, text in sorted(maps.items())).encode(errors="surrogateescape")


def decode_proc_maps(data: bytes) -> dict[int, list[Mapping]]:
    """The :data:`OPTION_PROC_MAPS` option → {tgid: [Mapping]} (bad lines are skipped). A path's bytes
    that are not UTF-8 are surrogate-escaped, so that the path opens the file (and shows with
    :func:`probectl.termtext.backslashed`)."""
    out: dict[int, list[Mapping]] = {}
    pid: Optional[int] = None
    for line in data.decode(errors="surrogateescape").split("\n"):
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
