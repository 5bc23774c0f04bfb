"""Writing a picture to the file the user named: whole or not at all.

The text goes to a temporary file beside the target, which replaces the target only once it is
complete, so an error (or Ctrl-C) part way leaves the old file, or none, never half an SVG."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ..errors import ProbectlError


def write_atomically(path: os.PathLike | str, text: str) -> None:
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise ProbectlError(f"cannot write {path}: {err.strerror}",
                            "check that its directory exists and is writable") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as err:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(err, OSError):
            raise ProbectlError(f"cannot write {path}: {err.strerror}") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
