"""A recording scoped to a cgroup (``record --cgroup PATH``, ``--cgroup-of PID``): the processes of a
container, including those that enter it after the recording began, from their first event.

ftrace has no cgroup filter: ``set_event_pid`` holds pids, and a list read from ``cgroup.procs``
misses a process that enters the cgroup later (``podman exec``: the runtime moves the new process in
after it forked it) until the list is read again, so its first events would be lost. perf's events
have one: an event opened per CPU with ``PERF_FLAG_PID_CGROUP`` on a cgroup's directory counts only
the tasks of that cgroup or its descendants, checked by the kernel at each hit. So a recording scoped
to a cgroup takes all its events from perf, as ``record -g`` takes uprobe events
(:mod:`probectl.record.callchains`): each sample carries the event's record (``PERF_SAMPLE_RAW``: for
a tracepoint too, the bytes ftrace would write), written into the CPU's pages in time order, and no
event is enabled in the run's ftrace instance. Without ``-g`` the samples carry no user stack
(``exclude_callchain_user``) and no callchain record follows them; with ``-g`` they do, but the
kernel stacks of tracepoints (ftrace's ``stacktrace``) are not recorded.

The cgroup is the perf_event controller's: of its cgroup v1 hierarchy when one is mounted, else of
the unified (v2) hierarchy, as ``/proc/PID/cgroup`` names it there.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from ..errors import ProbectlError
from ..ringbuf import PageLayout
from .callchains import Callchains, entry_uprobes
from .selection import SelectedEvent

if TYPE_CHECKING:
    from .session import TracedRun

PROC = Path("/proc")
MAX_CGROUPS = 256  # cgroups below --cgroup whose processes are looked at while recording


class CgroupError(ProbectlError):
    """What --cgroup or --cgroup-of names is no cgroup of the perf_event hierarchy."""


def perf_event_hierarchy() -> tuple[Path, str, bool]:
    """(mount point, root inside the hierarchy, whether it is a v1 hierarchy) of the hierarchy the
    perf_event controller is on: a cgroup v1 mount with ``perf_event`` among its options, else the
    cgroup2 mount (where the controller is when no v1 hierarchy has it)."""
    from ..target.process import mount_table  # (a recording scoped to a cgroup alone reads the mounts)

    mounts = mount_table()
    v1 = [m for m in mounts if m.fstype == "cgroup" and "perf_event" in m.options]
    v2 = [m for m in mounts if m.fstype == "cgroup2"]
    if not v1 and not v2:
        raise CgroupError("no cgroup hierarchy with the perf_event controller is mounted",
                          hint="mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup), or record with -p PID")
    found = (v1 or v2)[0]
    return Path(found.point), found.root, bool(v1)


def find_cgroup(text: str) -> Path:
    """The cgroup directory ``text`` names: its path (``/sys/fs/cgroup/...``), or its name in the
    hierarchy as ``/proc/PID/cgroup`` shows it (``/system.slice/x.scope``, as perf's ``-G`` takes it)."""
    mount, root, _v1 = perf_event_hierarchy()
    if not text.strip():
        raise CgroupError("--cgroup was given an empty path", hint=f"give a cgroup's directory under {mount}")
    given = Path(text)
    inside = given.is_absolute() and (given == mount or given.is_relative_to(mount))
    path = given if inside else _in_hierarchy(mount, root, text)
    if not path.is_dir() or not (path / "cgroup.procs").exists():
        raise CgroupError(f"{text} is not a cgroup of the perf_event hierarchy (mounted at {mount})",
                          hint=f"give a directory under {mount}, or its name as /proc/PID/cgroup shows it; "
                               "--cgroup-of PID takes the cgroup of a process")
    return Path(os.path.realpath(path))


def cgroup_of(pid: int, proc: Path = PROC) -> Path:
    """The perf_event cgroup of process ``pid`` (a container's: its processes are in it)."""
    mount, root, v1 = perf_event_hierarchy()
    try:
        lines = (proc / str(pid) / "cgroup").read_text(errors="surrogateescape").splitlines()
    except FileNotFoundError:
        raise CgroupError(f"there is no process {pid}", hint="check the PID (ps, pgrep)") from None
    except OSError as err:
        raise CgroupError(f"cannot read the cgroups of process {pid}: {err.strerror}") from None
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if ("perf_event" in controllers.split(",")) if v1 else (number == "0" and controllers == ""):
            found = _in_hierarchy(mount, root, path)
            if found.is_dir():
                return Path(os.path.realpath(found))
    raise CgroupError(f"process {pid} is in no cgroup of the perf_event hierarchy (mounted at {mount})",
                      hint="give the cgroup's directory with --cgroup PATH")


def scope_cgroup(path: Optional[str], pid: Optional[int]) -> Optional[Path]:
    """The cgroup of ``--cgroup PATH`` or ``--cgroup-of PID`` (None when neither is given)."""
    if path is not None and pid is not None:
        raise CgroupError("--cgroup and --cgroup-of both name a cgroup", hint="give one of them")
    if path is not None:
        return find_cgroup(path)
    return cgroup_of(pid) if pid is not None else None


def cgroup_events(run: "TracedRun", selected: Sequence[SelectedEvent], tmp: Path, cgroup: Path, stacks: bool,
                  data_pages: int, stack_events: Sequence[int] = (), stack_copy: int = 0,
                  layout: Optional[PageLayout] = None) -> Callchains:
    """The perf events of a recording scoped to ``cgroup``: every selected event, on each CPU of the
    run, counting the cgroup's tasks only, its samples carrying the event's record (and with
    ``stacks`` the user stack: uprobes at a function's entry also the word at the stack pointer, and
    ``stack_events`` a copy of ``stack_copy`` bytes of it, unwound when the recording ends); ``layout``
    the instance's page layout (see :class:`.callchains.Callchains`)."""
    try:
        fd = os.open(cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise CgroupError(f"cannot open the cgroup {cgroup}: {err.strerror}") from None
    try:
        entry = entry_uprobes(run.tfs.definitions(), selected) if stacks else []
        return Callchains(selected, run.cpus, tmp, entry, [e.format.id for e in selected], data_pages=data_pages,
                          stack_events=stack_events, stack_copy=stack_copy, cgroup=fd, stacks=stacks, layout=layout)
    finally:
        os.close(fd)  # (each event holds the cgroup)


def cgroup_pids(cgroup: Path) -> list[int]:
    """The processes in ``cgroup`` and the cgroups below it now (whose names and maps a recording
    keeps while they live)."""
    out: list[int] = []
    for count, (directory, _dirs, _files) in enumerate(os.walk(cgroup)):
        if count == MAX_CGROUPS:
            break
        try:
            out += [int(p) for p in (Path(directory) / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pass
    return out


def _in_hierarchy(mount: Path, root: str, name: str) -> Path:
    """The directory of the cgroup ``name`` (as /proc/PID/cgroup writes it) under the hierarchy's mount."""
    if root != "/" and (name == root or name.startswith(root.rstrip("/") + "/")):
        name = name[len(root):]
    return mount / name.lstrip("/")

