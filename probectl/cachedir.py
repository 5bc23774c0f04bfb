"""Where probectl keeps what it can rebuild: ``$XDG_CACHE_HOME/probectl`` (default ``~/.cache/probectl``).

Everything kept there is an optimisation only (indexes of large files, analysed grammars, unpacked
modules); ``PROBECTL_NO_CACHE=1`` turns caching off.

probectl runs as root, often with another user's environment (``sudo -E``), and some of what it
keeps is decoded with ``pickle`` (the analysed grammars): a file another user could write would run
code as root. So the cache is trusted only where no other user can write, and every check is here:

- :func:`cache_dir` gives the directory only if it is a directory (not a symbolic link) owned by the
  effective user and not writable by group or others, in a parent that no other user can change
  (owned by the effective user or root, not writable by group or others unless sticky, as ``/tmp``).
  It makes the directory (mode 0700) when missing. Otherwise caching is off for the run: with
  ``sudo -E`` and a user's ``XDG_CACHE_HOME``, root does not cache.
- :func:`read_file` reads a cache file only if it is a regular file (never through a symbolic
  link, never a FIFO or a device: nothing that can block or never end) owned by the effective user,
  not writable by group or others, and smaller than the caller's bound; anything else is a miss.
- :func:`write_file` replaces a cache file atomically by a new file of mode 0600 (made with
  ``O_EXCL``, renamed over the old name: a planted link or FIFO is replaced, never followed).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Optional

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def cache_dir() -> Optional[Path]:
    """Where cache files live, or None when caching is turned off or the directory is not safe."""
    if os.environ.get("PROBECTL_NO_CACHE") == "1":
        return None
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        home = os.path.expanduser("~")
        if home == "~":
            return None
        base = os.path.join(home, ".cache")
    directory = Path(base) / "probectl"
    try:
        os.makedirs(base, mode=0o700, exist_ok=True)
        if not _unchangeable(os.stat(base)):
            return None
    except OSError:
        return None
    return directory if private_dir(directory) else None


def private_dir(directory: Path) -> bool:
    """Whether ``directory`` (made with mode 0700 when missing, its parent must exist) is the
    effective user's own: a directory, not a symbolic link, owned by them, not writable by group
    or others."""
    try:
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and _private(st)


def open_file(path: Path, limit: int) -> Optional[int]:
    """A descriptor open for reading on the cache file ``path``, or None when it is missing or not
    to be trusted: not a regular file (a symbolic link, a FIFO, a device...), not owned by the
    effective user, writable by group or others, or larger than ``limit`` bytes."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and _private(st) and st.st_size <= limit:
            os.set_blocking(fd, True)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def read_file(path: Path, limit: int, touch: bool = False) -> Optional[bytes]:
    """The bytes of the cache file ``path``, or None when :func:`open_file` refuses it, it cannot be
    read or it holds more than ``limit`` bytes. ``touch`` sets its modification time (the least
    recently used cache files are removed first)."""
    fd = open_file(path, limit)
    if fd is None:
        return None
    try:
        parts, total = [], 0
        size = os.fstat(fd).st_size
        while True:
            part = os.read(fd, min(max(size - total, 0) + 1, limit + 1 - total))
            if not part:
                break
            parts.append(part)
            total += len(part)
            if total > limit:
                return None
        if touch:
            os.utime(fd)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes) -> bool:
    """Replace the cache file ``path`` by one holding ``data``, atomically, with mode 0600;
    False when that fails (the cache is left as it was)."""
    tmp = path.with_name(f".tmp-{os.getpid()}-{os.urandom(6).hex()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return True
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False


def _private(st: os.stat_result) -> bool:
    return st.st_uid == os.geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _unchangeable(st: os.stat_result) -> bool:
    """Whether no other user can rename or replace what is in a directory of status ``st``."""
    if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (os.geteuid(), 0):
        return False
    return not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or bool(st.st_mode & stat.S_ISVTX)
