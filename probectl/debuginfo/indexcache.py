"""On-disk indexes of large files, keyed by build-id: what a whole-file scan found, kept for the next run.

Building an index means reading a whole file: the DWARF name index scans every compilation unit
(half a second for libc, seconds for a kernel), the address order of a symbol table decodes every
entry. The results only depend on the file's bytes, so they are kept in ``$XDG_CACHE_HOME/probectl``
(default ``~/.cache/probectl``) as one small file per kind of index and file, named after the file's
GNU build-id (or, without one, a hash of its path, size and modification time), and read back in
milliseconds by the next run. The kinds are:

- ``dwarf-names`` and ``dwarf-lookups``: a DWARF name index and single names found without it
  (:mod:`probectl.debuginfo.dwarf.nameindex`);
- ``elf-functions``: a symbol table's functions in address order (``ElfFile.symbol_at``);
- ``kprobe-rules``: a vmlinux's kprobe boundaries, blacklist and ftrace sites (:class:`probectl.resolve.kprobe_rules.KprobeRules`);
- ``cfi-fdes``: the FDEs of a ``.debug_frame`` by address (:mod:`probectl.debuginfo.dwarf.cfi`);
- ``dwarf-inflated``: the pages of compressed DWARF sections a run read, inflated (:mod:`probectl.debuginfo.dwarf.inflating`);
- ``btf-records``: where each record of a kernel's BTF starts, and its name offsets, keyed by the BTF's digest (:mod:`probectl.debuginfo.btf`).

A file is a magic line, the SHA-256 of the rest, and the rest: ``marshal`` data of (fingerprint,
payload...). The checksum is verified before anything is unmarshalled, so a truncated or damaged
file is never decoded; the fingerprint (the kind's format, Python's marshal version, sizes of the
sections the index was made from) rejects files of another format or made for other contents. The
cache is an optimisation only: a file that is missing, unreadable or rejected is rebuilt; a
directory that cannot be written is left alone. Files are read and written through
:mod:`probectl.cachedir`: a file that is not a regular file of the effective user's (a link, a FIFO,
another user's file...) or is larger than ``MAX_SIZE`` is a miss, never read. At most ``MAX_FILES`` files of each kind are kept,
the least recently used are removed. ``PROBECTL_NO_CACHE=1`` turns it off.
"""
from __future__ import annotations

import hashlib
import marshal
import os
from pathlib import Path
from typing import Optional

from ..cachedir import cache_dir, read_file, write_file

MAX_FILES = 64
# Larger files are not read (a kernel's name index is some tens of MB).
MAX_SIZE = 512 << 20
_SUFFIX = ".bin"
_MAGIC = b"probectl index\n"


def file_key(path: os.PathLike | str, build_id: Optional[str]) -> str:
    """The name a file's indexes are kept under: its build-id, else a hash of its path, size and
    modification time."""
    if build_id:
        return build_id
    st = os.stat(path)
    text = f"{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}"
    return "path-" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def load(kind: str, key: str, fingerprint: tuple) -> Optional[tuple]:
    """The payload stored for (``kind``, ``key``) if its fingerprint is ``fingerprint``, else None."""
    directory = cache_dir()
    if directory is None:
        return None
    return _read(directory / f"{kind}-{key}{_SUFFIX}", (kind,) + fingerprint)


def store(kind: str, key: str, fingerprint: tuple, payload: tuple) -> None:
    """Keep ``payload`` (marshal-able values) for (``kind``, ``key``); failures are ignored."""
    directory = cache_dir()
    if directory is not None:
        _write(directory, kind, key, (kind,) + fingerprint, payload)


def _read(path: Path, fingerprint: tuple) -> Optional[tuple]:
    data = read_file(path, MAX_SIZE, touch=True)  # least recently used goes first when pruning
    if data is None:
        return None
    try:
        head = len(_MAGIC) + 32
        if not data.startswith(_MAGIC) or hashlib.sha256(data[head:]).digest() != data[len(_MAGIC):head]:
            return None
        stored = marshal.loads(data[head:])
    except (ValueError, EOFError, TypeError):
        return None
    if type(stored) is not tuple or not stored or stored[0] != fingerprint:
        return None
    return stored[1:]


def _write(directory: Path, kind: str, key: str, fingerprint: tuple, payload: tuple) -> None:
    path = directory / f"{kind}-{key}{_SUFFIX}"
    data = marshal.dumps((fingerprint, *payload))
    if write_file(path, _MAGIC + hashlib.sha256(data).digest() + data):
        try:
            _prune(directory, f"{kind}-", keep=path)
        except OSError:
            pass


def _prune(directory: Path, prefix: str, keep: Path) -> None:
    """Keep at most MAX_FILES files whose names start with ``prefix``, removing the least recently used."""
    files = []
    for entry in os.scandir(directory):
        if entry.name.startswith(prefix) and entry.name.endswith(_SUFFIX) and entry.path != str(keep):
            try:
                files.append((entry.stat(follow_symlinks=False).st_mtime, entry.path))
            except OSError:
                pass
    files.sort()
    for _mtime, name in files[:max(0, len(files) + 1 - MAX_FILES)]:
        try:
            os.unlink(name)
        except OSError:
            pass
