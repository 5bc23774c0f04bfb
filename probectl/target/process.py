"""The files as a process sees them: its root directory and mount namespace, reached from the host.

A program in a container runs a file that the host may not see at all (a tmpfs or an overlay mounted
in the container's mount namespace only), or sees at another path. ``/proc/PID/root`` is the kernel's
door into that view: a path under it is walked in the process's root, and the kernel takes such a
path in ``uprobe_events`` too (it looks the path up in the writer's namespace, where the magic link
leads into the process's), so a uprobe written as ``/proc/PID/root/srv/app/svc:0x1169`` is on the
file the process runs. perf's ``--target-ns=PID`` enters the mount namespace instead; probectl keeps
its own, so its tracefs and its files stay where they are.

What must not happen is what ``Path.resolve`` does to ``/proc/PID/root/srv/app/svc``: it reads the
magic link as text (``/``, the process's root as the host names it) and goes on in the host's tree,
where ``/srv/app/svc`` does not exist. :meth:`ProcessView.find` walks the path's symbolic links inside
the process's root instead, an absolute link target starting again at that root, as the process's own
lookups would.
"""
from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path
from typing import Optional

from ..dataclass import dataclass
from ..errors import TargetError

PROC = Path("/proc")
MAX_SYMLINKS = 40  # the kernel's MAXSYMLINKS
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_PROC_ROOT = re.compile(r"^/proc/(\d+)/root(/.*)?$")


def root_of(path: Path) -> Optional[Path]:
    """``/proc/PID/root`` when ``path`` is a file under it (a file of another mount namespace), else None."""
    found = split_proc_root(str(path))
    return PROC / str(found[0]) / "root" if found is not None else None


def split_proc_root(text: str) -> Optional[tuple[int, str]]:
    """(PID, the path inside its root) of ``/proc/PID/root/PATH``; None for any other path."""
    m = _PROC_ROOT.match(os.path.normpath(text) if text.startswith("/proc/") else text)
    if m is None:
        return None
    return int(m.group(1)), m.group(2) or "/"


@dataclass(frozen=True)
class ProcessView:
    """Process ``pid``'s view of the files: ``root`` is ``/proc/PID/root`` when the process has another
    mount namespace or root directory than probectl, and ``/`` when it sees the files probectl sees."""

    pid: int
    root: Path

    @classmethod
    def of(cls, pid: int, proc: Path = PROC) -> "ProcessView":
        """The view of a running process; TargetError when there is none or it cannot be looked into."""
        where = proc / str(pid)
        try:
            mine = (os.stat(proc / "self" / "ns" / "mnt"), os.stat("/"))
            theirs = (os.stat(where / "ns" / "mnt"), os.stat(where / "root"))
        except FileNotFoundError:
            raise TargetError(f"there is no process {pid}", hint="check the PID (ps, pgrep)") from None
        except OSError as err:
            raise TargetError(f"cannot look into the files of process {pid}: {err.strerror}",
                              hint="run as root: another process's root directory and namespaces are root's "
                                   "to read") from None
        same = all((a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) for a, b in zip(mine, theirs))
        return cls(pid, Path("/") if same else where / "root")

    @property
    def is_own(self) -> bool:
        """Whether the process sees the files as probectl does (its paths can be used as they are)."""
        return self.root == Path("/")

    def host_path(self, inner: str) -> Path:
        """The path probectl opens for the process's ``inner`` path (not resolved)."""
        return Path(inner) if self.is_own else self.root / inner.lstrip("/")

    def inner_path(self, path: Path) -> str:
        """The process's own name of a path :meth:`host_path` or :meth:`find` gave."""
        if self.is_own:
            return str(path)
        try:
            inside = str(path.relative_to(self.root))
        except ValueError:
            return str(path)
        return "/" if inside == "." else "/" + inside

    def find(self, inner: str, name: Optional[str] = None) -> Path:
        """The path probectl and the kernel open for the process's file ``inner``, its symbolic links
        followed inside the process's root (see the module's documentation); TargetError when the
        process has no such file."""
        name = f"{name or inner} (in process {self.pid})"
        if not inner.startswith("/"):
            inner = self._cwd() + "/" + inner
        if self.is_own:
            path = Path(inner)
            if not path.exists():
                raise TargetError(f"{name}: no such file", hint="check the path, or give a program or library name")
            return path.resolve()
        return self.root / resolve_in_root(self.root, inner, name).lstrip("/")

    def _cwd(self) -> str:
        """The process's working directory as it names it (a relative -x is relative to it)."""
        try:
            link = os.readlink(PROC / str(self.pid) / "cwd")
        except OSError as err:
            raise TargetError(f"cannot read the working directory of process {self.pid}: {err.strerror}",
                              hint="give an absolute path") from None
        # (the link reads as the host names the directory: below the process's root it is that root's path)
        root = os.readlink(PROC / str(self.pid) / "root")
        if root != "/" and (link == root or link.startswith(root + "/")):
            link = link[len(root):] or "/"
        return link

    def path_dirs(self) -> list[str]:
        """The process's ``$PATH`` (from its environment; the usual one when it has none)."""
        try:
            env = (PROC / str(self.pid) / "environ").read_bytes().split(b"\0")
        except OSError:
            env = []
        for entry in env:
            if entry.startswith(b"PATH="):
                return [d for d in entry[5:].decode("utf-8", "surrogateescape").split(":") if d.startswith("/")]
        return DEFAULT_PATH.split(":")


def resolve_in_root(root: Path, inner: str, name: str) -> str:
    """``inner`` (absolute) with every symbolic link followed as the kernel follows it for a process whose
    root is ``root``: an absolute target starts again at ``root``, ``..`` never leaves it. The result is
    a path inside ``root`` (``/usr/lib/...``); TargetError when a part is missing, or links loop."""
    parts = [p for p in inner.split("/") if p]
    done: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == ".":
            continue
        if part == "..":
            if done:
                done.pop()
            continue
        here = root.joinpath(*done, part)
        try:
            st = os.lstat(here)
        except OSError as err:
            if err.errno in (errno.ENOENT, errno.ENOTDIR):
                raise TargetError(f"{name}: no such file", hint="check the path as the process sees it "
                                  "(ls /proc/PID/root/...)") from None
            raise TargetError(f"{name}: {err.strerror}") from None
        if not stat.S_ISLNK(st.st_mode):
            done.append(part)
            continue
        links += 1
        if links > MAX_SYMLINKS:
            raise TargetError(f"{name}: too many levels of symbolic links")
        target = os.readlink(here)
        if target.startswith("/"):
            done = []
        parts = [p for p in target.split("/") if p] + parts
    return "/" + "/".join(done)


@dataclass(frozen=True)
class Mount:
    """A line of a mount table (``/proc/PID/mountinfo``)."""

    root: str  # the mounted directory inside its filesystem ("/": all of it)
    point: str  # where it is mounted, as the namespace's processes name it
    fstype: str
    options: tuple[str, ...]  # the filesystem's own ("super") options


def mount_table(table: Path = PROC / "self" / "mountinfo") -> list[Mount]:
    """The mounts of a namespace, in the kernel's order (a later mount on a point hides an earlier);
    none when the table cannot be read."""
    try:
        lines = table.read_text(errors="surrogateescape").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        fields, _, rest = line.partition(" - ")
        parts, tail = fields.split(), rest.split()
        if len(parts) >= 5 and len(tail) >= 3:
            out.append(Mount(_unescape(parts[3]), _unescape(parts[4]), tail[0], tuple(tail[2].split(","))))
    return out


def filesystem_type(path: Path) -> Optional[str]:
    """The type of the filesystem ``path`` is on (``overlay``, ``ext4``...), from the mount table of the
    namespace it is in (a path under ``/proc/PID/root``: the process's); None when it cannot be read."""
    found = split_proc_root(str(path))
    table = PROC / str(found[0]) / "mountinfo" if found is not None else PROC / "self" / "mountinfo"
    inner = found[1] if found is not None else str(path)
    best: tuple[int, Optional[str]] = (-1, None)
    for mount in mount_table(table):
        if inner == mount.point or inner.startswith(mount.point.rstrip("/") + "/"):
            if len(mount.point) >= best[0]:  # (a later mount on the same point hides the earlier)
                best = (len(mount.point), mount.fstype)
    return best[1]


def _unescape(text: str) -> str:
    """A mountinfo field: the kernel writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)
