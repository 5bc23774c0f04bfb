"""The JIT maps of the traced processes (``/tmp/perf-PID.map``), read when a recording ends and kept in
its trace.dat (:mod:`probectl.tracedat.jitmaps`).

Who may name a process's code: perf reads ``/tmp/perf-PID.map`` only when the file (not a link to it:
``lstat``) is owned by root or by the user running perf, and says so otherwise; its documentation
(jit-interface.txt) says the file's owner must be the process's. probectl takes either: root, the
user running probectl, or the owner of the process while it still runs (a service user's JVM traced
by root writes its map as that user). Any other file is left out with a note, as is what is not a
regular file. A map grows without bound (``--perf-basic-prof``): the last :data:`MAX_MAP_BYTES` of
each are kept (the newest names; a runtime reusing code memory writes the new name later), at most
:data:`MAX_TOTAL_BYTES` of all, and lines that are no ``START SIZE name`` are counted and skipped.
"""
from __future__ import annotations

import os
import stat
from typing import Callable, Iterable, Optional

from ..tracedat.jitmaps import OPTION_JIT_MAPS, JitSymbol, encode_jit_maps, parse_perf_map

MAX_MAP_BYTES = 16 << 20
MAX_TOTAL_BYTES = 64 << 20
MAP_DIR = "/tmp"


def _process_owner(pid: int) -> Optional[int]:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def map_path(pid: int) -> Optional[str]:
    """Where process ``pid`` writes its JIT map: ``/tmp/perf-PID.map`` in its own ``/tmp`` under its own
    pid, which for a process of a container (another mount and PID namespace) are its root's ``/tmp``
    and its pid there (``/proc/PID/root/tmp/perf-1.map``); None when its ``/tmp`` cannot be reached."""
    from ..errors import ProbectlError
    from ..target.process import ProcessView  # (a container's processes only)
    from .processes import proc_ids

    try:
        view = ProcessView.of(pid)
    except ProbectlError:  # (ended: a map left behind is the host's file of that pid)
        return os.path.join(MAP_DIR, f"perf-{pid}.map")
    if view.is_own:
        return os.path.join(MAP_DIR, f"perf-{pid}.map")
    try:
        return os.path.join(view.find(MAP_DIR), f"perf-{proc_ids(pid)[1] or pid}.map")
    except ProbectlError:
        return None


def read_jit_map(pid: int, notice: Callable[[str], None], limit: int = MAX_MAP_BYTES,
                 directory: Optional[str] = None) -> Optional[list[JitSymbol]]:
    """The symbols of process ``pid``'s JIT map (``directory``: the ``perf-PID.map`` there instead) by
    the rules above; None when there is none to take."""
    path = os.path.join(directory, f"perf-{pid}.map") if directory is not None else map_path(pid)
    if path is None:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        notice(f"{path} is not a regular file: left out")
        return None
    owners = {0, os.geteuid(), _process_owner(pid)}
    if st.st_uid not in owners:
        notice(f"{path} is owned by uid {st.st_uid}, neither root, this user nor the process's owner: "
               "left out (perf's rule: a map names code only if its owner may)")
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        notice(f"{path} cannot be read: {exc.strerror}")
        return None
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(opened.st_mode):
            notice(f"{path} changed while it was opened: left out")
            return None
        size = opened.st_size
        start = max(0, size - limit)
        data = os.pread(fd, min(size, limit), start)
    except OSError as exc:
        notice(f"{path} cannot be read: {exc.strerror}")
        return None
    finally:
        os.close(fd)
    text = data.decode(errors="surrogateescape")
    if start:
        text = text.split("\n", 1)[1] if "\n" in text else ""  # (from the first whole line)
        notice(f"{path} has {size:,} bytes: its last {limit >> 20} MiB kept")
    symbols, bad = parse_perf_map(text)
    if bad:
        notice(f"{path}: {bad:,} line{'s' if bad != 1 else ''} that are no 'START SIZE name' left out")
    return symbols


def jit_maps_option(tgids: Iterable[int], notice: Callable[[str], None],
                    total: int = MAX_TOTAL_BYTES) -> Optional[tuple[int, bytes]]:
    """The trace.dat option holding the JIT maps of processes ``tgids``, or None when none has one."""
    maps: dict[int, list[JitSymbol]] = {}
    budget = total
    for tgid in sorted(set(tgids)):
        if budget <= 0:
            notice(f"the JIT maps of the recording reached {total >> 20} MiB: those of further processes "
                   "are left out")
            break
        symbols = read_jit_map(tgid, notice, limit=min(MAX_MAP_BYTES, budget))
        if symbols:
            maps[tgid] = symbols
            budget -= sum(len(s.name) + 20 for s in symbols)
    return (OPTION_JIT_MAPS, encode_jit_maps(maps)) if maps else None
