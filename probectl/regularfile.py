"""Opening a file the user named (a binary, a vmlinux, a debug file, BTF, a trace.dat) without hanging.

``open(path)`` on a FIFO blocks until a writer comes, and a character device such as ``/dev/zero``
reads without end; probectl reads such paths whole or maps them. So every file a user can name is
opened non-blocking, checked to be a regular file, and only then read.
"""
from __future__ import annotations

import errno
import io
import os
import stat
from typing import BinaryIO

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def open_regular(path: os.PathLike | str) -> BinaryIO:
    """``path`` opened for reading in binary mode; OSError (``strerror`` saying what it is) when it is
    not a regular file, as for any other reason it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise OSError(errno.EINVAL, f"it is {kind}, not a regular file", str(path))
        os.set_blocking(fd, True)
        raw = io.FileIO(fd, "rb")
        raw.name = os.fspath(path)  # (as open() names it: readers report and reopen it by name)
        return io.BufferedReader(raw)
    except BaseException:
        os.close(fd)
        raise
