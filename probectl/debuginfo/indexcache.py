"""An on-disk cache of the DWARF name index (``dieindex.build_indexes``), keyed by build-id.

Building the index means scanning every compilation unit: half a second for libc, much more for
a kernel. The index only depends on the DWARF bytes, so it is kept in
``$XDG_CACHE_HOME/probectl`` (default ``~/.cache/probectl``) as one small file per debug file,
named after its GNU build-id (or, without one, a hash of its path, size and modification time),
and read back in milliseconds by the next run.

A file is a magic line, the SHA-256 of the rest, and the rest: ``marshal`` data of (fingerprint,
functions, variables). The checksum is verified before anything is unmarshalled, so a truncated
or damaged file is never decoded; the fingerprint (format, Python's marshal version, the sizes of
``.debug_info``, ``.debug_abbrev`` and ``.debug_str``) rejects files of another format or made for
other DWARF. The cache is an optimisation only: a file that is missing, unreadable or rejected
is rebuilt; a directory that cannot be written is left alone. At most ``MAX_FILES`` files are
kept, the least recently used are removed. ``PROBECTL_NO_CACHE=1`` turns it off.
"""
from __future__ import annotations

import hashlib
import marshal
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..errors import ProbectlError

if TYPE_CHECKING:
    from .dwarf import DebugInfo

# Bump when the content of the index changes (dieindex's rules), so older files are not trusted.
FORMAT = 2
MAX_FILES = 64
_PREFIX = "dwarf-names-"
_SUFFIX = ".bin"
_MAGIC = b"probectl dwarf name index\n"

Index = dict[str, list[tuple[int, int]]]


def cache_dir() -> Optional[Path]:
    """Where cache files live, or None when caching is turned off."""
    if os.environ.get("PROBECTL_NO_CACHE") == "1":
        return None
    base = os.environ.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):
        home = os.path.expanduser("~")
        if home == "~":
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "probectl"


def load_or_build(debuginfo: "DebugInfo") -> tuple[Index, Index]:
    """(functions, variables) name indexes of ``debuginfo``: from the cache, else built and cached."""
    from .dieindex import build_indexes

    directory = cache_dir()
    if directory is None:
        return build_indexes(debuginfo)
    fingerprint = _fingerprint(debuginfo)
    path = directory / f"{_PREFIX}{_key(debuginfo)}{_SUFFIX}"
    cached = _read(path, fingerprint)
    if cached is not None:
        return cached
    funcs, variables = build_indexes(debuginfo)
    _write(directory, path, fingerprint, funcs, variables)
    return funcs, variables


def _key(debuginfo: "DebugInfo") -> str:
    from .elf import ElfFile

    build_id = None
    try:
        with ElfFile(debuginfo.path) as elf:
            build_id = elf.build_id
    except ProbectlError:
        pass
    if build_id:
        return build_id
    st = os.stat(debuginfo.path)
    text = f"{os.path.realpath(debuginfo.path)}\0{st.st_size}\0{st.st_mtime_ns}"
    return "path-" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _fingerprint(debuginfo: "DebugInfo") -> tuple:
    dwarf = debuginfo.dwarf
    return (FORMAT, marshal.version, sys.version_info[:2]) + tuple(
        sec.size if sec is not None else 0
        for sec in (dwarf.debug_info_sec, dwarf.debug_abbrev_sec, dwarf.debug_str_sec))


def _read(path: Path, fingerprint: tuple) -> Optional[tuple[Index, Index]]:
    try:
        data = path.read_bytes()
        head = len(_MAGIC) + 32
        if not data.startswith(_MAGIC) or hashlib.sha256(data[head:]).digest() != data[len(_MAGIC):head]:
            return None
        stored, funcs, variables = marshal.loads(data[head:])
    except (OSError, ValueError, EOFError, TypeError):
        return None
    if stored != fingerprint or type(funcs) is not dict or type(variables) is not dict:
        return None
    try:
        os.utime(path)  # least recently used goes first when pruning
    except OSError:
        pass
    return funcs, variables


def _write(directory: Path, path: Path, fingerprint: tuple, funcs: Index, variables: Index) -> None:
    payload = marshal.dumps((fingerprint, funcs, variables))
    tmp = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, path)
        tmp = None
        _prune(directory, keep=path)
    except OSError:
        pass
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _prune(directory: Path, keep: Path) -> None:
    files = []
    for entry in os.scandir(directory):
        if entry.name.startswith(_PREFIX) and entry.name.endswith(_SUFFIX) and entry.path != str(keep):
            try:
                files.append((entry.stat().st_mtime, entry.path))
            except OSError:
                pass
    files.sort()
    for _mtime, name in files[:max(0, len(files) + 1 - MAX_FILES)]:
        try:
            os.unlink(name)
        except OSError:
            pass
