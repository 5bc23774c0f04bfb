"""Writing a file the user named (``-o FILE``): whole or not at all, and never waiting on a FIFO.

A regular file (or a new one) is written to a temporary file beside it, which replaces it only once
complete: an error or Ctrl-C part way leaves the old file, or none, never half a trace.dat or half
an SVG. A device or a FIFO (``-o /dev/null``, ``-o /dev/stdout``, a named pipe) is written in place:
renaming over it would replace the node itself with a regular file (as root, /dev/null for everyone).

The file is claimed when the command starts (:class:`OutputFile`), before any work: a directory, a
directory that cannot be written, or a FIFO that no process reads is an error then, not after a
recording. A FIFO is opened without blocking because ``open()`` for writing waits until a reader
comes, forever if none does; with no reader the kernel says ENXIO, and probectl says so.
"""
from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Optional

from .errors import OutputFileError


class OutputFile:
    """The file ``path`` claimed for writing; :meth:`write` writes it once, :meth:`close` gives it up.

    Use it as a context manager around the work, so that a failure before the write closes a device
    or FIFO opened in place (its reader then sees the end of its input)."""

    def __init__(self, path: os.PathLike | str):
        self.path = Path(path)
        self._in_place: Optional[BinaryIO] = None
        try:
            mode: Optional[int] = os.stat(self.path).st_mode
        except FileNotFoundError:
            mode = None
        except OSError as err:
            raise OutputFileError(f"cannot write {self.path}: {err.strerror}") from None
        if mode is not None and stat.S_ISDIR(mode):
            raise OutputFileError(f"{self.path} is a directory", "give the path of a file to write, in it or elsewhere")
        if mode is not None and not stat.S_ISREG(mode):
            self._in_place = self._open_in_place()
            return
        directory = self.directory
        if not directory.is_dir():
            raise OutputFileError(f"cannot write {self.path}: {directory} is not a directory",
                                  "check that its directory exists and is writable")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise OutputFileError(f"cannot write {self.path}: {directory} is not writable",
                                  "write to a directory you can write in (-o DIR/FILE)")

    @property
    def directory(self) -> Path:
        return self.path.parent if str(self.path.parent) else Path(".")

    def _open_in_place(self) -> BinaryIO:
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as err:
            if err.errno == errno.ENXIO:
                raise OutputFileError(f"cannot write {self.path}: no process is reading this FIFO",
                                      "start its reader first, or write to a regular file") from None
            raise OutputFileError(f"cannot write {self.path}: {err.strerror}") from None
        os.set_blocking(fd, True)  # (the reader may be slower than the writer: wait for it, as any pipe does)
        return os.fdopen(fd, "wb")

    def can_start_from(self, path: os.PathLike | str) -> bool:
        """Whether :meth:`write` can make the output of the file ``path`` (``start_from``): the output
        is a regular file (or a new one) and ``path`` a regular file on the same file system."""
        if self._in_place is not None:
            return False
        try:
            st = os.lstat(path)
            return stat.S_ISREG(st.st_mode) and st.st_dev == os.stat(self.directory).st_dev
        except OSError:
            return False

    def write(self, produce: Callable[[BinaryIO], object], *, seekable: bool = False,
              start_from: Optional[os.PathLike | str] = None) -> None:
        """Write the file with ``produce(stream)``. ``seekable``: ``produce`` seeks back (a device or
        FIFO then gets the output whole from a temporary file, since a pipe cannot seek).
        ``start_from``: a file of the caller's (see :meth:`can_start_from`) that ``produce`` is given
        open for update, at its start, and which then replaces the output: data already in it is
        not copied. It is the caller's to remove if the write fails."""
        try:
            if start_from is not None:
                self._finish_and_rename(produce, Path(start_from))
            elif self._in_place is not None:
                self._write_in_place(produce, seekable)
            else:
                self._write_and_rename(produce)
        except OSError as err:  # a full disk, /dev/full, a reader that went away
            raise OutputFileError(f"cannot write {self.path}: {err.strerror or err}",
                                  "write the output elsewhere (-o FILE)") from None
        finally:
            self.close()

    def _write_in_place(self, produce: Callable[[BinaryIO], object], seekable: bool) -> None:
        out = self._in_place
        assert out is not None
        if seekable:
            with tempfile.TemporaryFile() as whole:
                produce(whole)
                whole.seek(0)
                shutil.copyfileobj(whole, out)
        else:
            produce(out)
        out.flush()

    def _write_and_rename(self, produce: Callable[[BinaryIO], object]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as out:
                produce(out)
            os.chmod(tmp, 0o666 & ~_umask())  # (mkstemp makes it 0600; a new file gets the usual mode)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _finish_and_rename(self, produce: Callable[[BinaryIO], object], path: Path) -> None:
        assert self._in_place is None
        with open(path, "r+b") as out:
            produce(out)
        os.chmod(path, 0o666 & ~_umask())
        os.replace(path, self.path)

    def close(self) -> None:
        if self._in_place is not None:
            out, self._in_place = self._in_place, None
            try:
                out.close()
            except OSError:  # (what was left to flush had nowhere to go; the write already said so)
                pass

    def __enter__(self) -> "OutputFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_text(path: os.PathLike | str, text: str) -> None:
    """``text`` written (UTF-8) to the file ``path``, whole or not at all; bytes that were not UTF-8
    where the text came from (kept as surrogates: a frame of folded stacks) are written as they were."""
    data = text.encode("utf-8", "surrogateescape")
    OutputFile(path).write(lambda out: out.write(data))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
