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
- ``dwarf-aranges``: a large ``.debug_aranges`` as sorted address ranges and their units (:func:`probectl.debuginfo.dwarf.dieindex.address_ranges`);
- ``kprobe-rules``: a vmlinux's kprobe boundaries, blacklist and ftrace sites (:class:`probectl.resolve.kprobe_rules.KprobeRules`);
- ``cfi-fdes``: the FDEs of a ``.debug_frame`` by address (:mod:`probectl.debuginfo.dwarf.cfi`);
- ``dwarf-unit-scans``: per unit scanned so far, its functions' code bounds and its inline instances by
  origin (:class:`probectl.debuginfo.dwarf.dieindex.UnitScans`);
- ``line-entries``: per function entry asked for in a large line table, the rows the prologue skip reads
  (:func:`probectl.debuginfo.dwarf.lines.entry_rows`);
- ``demangled-functions``: the demangled function list ``funcs`` shows
  (:func:`probectl.debuginfo.demangle.function_rows`);
- ``dwarf-inflated``: the pages of compressed DWARF sections runs read, inflated, kept as parts (below; :mod:`probectl.debuginfo.dwarf.inflating`);
- ``btf-records``: where each record of a kernel's BTF starts, and its name offsets, keyed by the BTF's digest (:mod:`probectl.debuginfo.btf`).

A file is a magic line, the CRC-32 of the rest, and the rest: ``marshal`` data of (fingerprint,
payload...). The checksum is verified before anything is unmarshalled, so a truncated or damaged
file is never decoded (a checksum is for damage, not for a writer: see parts below); the fingerprint (the kind's format, Python's marshal version, sizes of the
sections the index was made from) rejects files of another format or made for other contents. The
cache is an optimisation only: a file that is missing, unreadable or rejected is rebuilt; a
directory that cannot be written is left alone. Files are read and written through
:mod:`probectl.cachedir`: a file that is not a regular file of the effective user's (a link, a FIFO,
another user's file...) or is larger than ``MAX_SIZE`` is a miss, never read. At most ``MAX_FILES`` files of each kind are kept,
the least recently used are removed (with their lock files). ``PROBECTL_NO_CACHE=1`` turns it off.

Parts (:func:`store_parts`, :func:`load_parts`) are for an index of which a run reads a little: the
pages of compressed DWARF earlier runs inflated grow with every function probed (to 16 MB), and a
warm run reads a few of them. Such a file is a magic line, the length and CRC-32 of a header, the
header (``marshal`` of the fingerprint, a table and each part's length and CRC-32), then the parts;
a run reads the header, and each part it uses when it uses it, checked against its CRC-32 (a part
that does not match, or lies past the end, is a miss). A checksum is for damage (a truncated file,
a bit flipped on disk): it is no safeguard against a writer, who could rewrite it as well, and who
is kept out by the checks on the file's owner and mode above. So a CRC-32 serves, and reading the
parts a run needs costs what they are, not what the file has grown to.

Indexes are built through :func:`load_or_build`, which lets one process build an index while the
others wait: parallel cold runs on one vmlinux (a build system, a fleet script) would otherwise all
spend tens of seconds building the same index. The builder holds ``flock`` on a lock file of the
index (``.lock-KIND-KEY`` in the cache directory); the kernel releases it when the holder exits or
is killed, so a stale lock file never blocks. A process that finds the lock held says on stderr
that it waits for another probectl building the index of FILE, then reads what was built (or
builds it itself, when the other one failed). Without a usable cache directory, or when the lock
file cannot be made, every process builds on its own, as without the cache. With
``PROBECTL_DEBUG`` set, each build is noted on stderr.
"""
from __future__ import annotations

import errno
import fcntl
import gc
import marshal
import os
import stat
import struct
import zlib
from pathlib import Path
from typing import Callable, Optional, TypeVar

from ..cachedir import cache_dir, open_file, read_file, write_file
from ..notice import notice_stderr

T = TypeVar("T")

MAX_FILES = 64
# Larger files are not read (a kernel's name index is some tens of MB).
MAX_SIZE = 512 << 20
_SUFFIX = ".bin"
_MAGIC = b"probectl index 2\n"  # (the first format's checksum was a SHA-256)
_CRC = struct.Struct("<I")


def file_key(path: os.PathLike | str, build_id: Optional[str]) -> str:
    """The name a file's indexes are kept under: its build-id with its size and modification time,
    else a hash of its path, size and modification time.

    A build-id names a build, not a file: a copy damaged or edited in place keeps it, and with the
    build-id alone the indexes of one answered for the other (a fuzzed copy without segments stored
    a names index without its functions, and the intact fixture's functions were then 'not found')."""
    st = os.stat(path)
    if build_id:
        return f"{build_id}-{st.st_size:x}-{st.st_mtime_ns:x}"
    text = f"{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}"
    import hashlib  # (only for a file without a build-id: loading OpenSSL's hashes is a start-up cost)

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


class PendingStore:
    """An index that grows as a run reads its file (``kind``, under ``key`` and ``fingerprint``), stored
    once, with what was added (``changed``), when its owner (the file's DebugInfo) calls :meth:`keep`
    as it closes, else when the owner is collected or at exit, whichever comes first. Written once, not
    after each addition: a cold ``funcs`` of a C++ library added 47 unit scans. Never kept pending with a
    reference to its owner: at exit, it held every DebugInfo that added one, and its open file, for a
    long-lived process's life (``weakref.finalize``). :meth:`payload` is what is stored."""

    kind = ""

    def __init__(self, owner: object, key: str, fingerprint: tuple):
        import weakref

        self.key, self.fingerprint = key, fingerprint
        self.changed = False
        weakref.finalize(owner, self.keep)

    def load(self) -> Optional[tuple]:
        return load(self.kind, self.key, self.fingerprint)

    def payload(self) -> tuple:
        raise NotImplementedError

    def keep(self) -> None:
        """Store the index if something was added since it was last stored."""
        if self.changed:
            self.changed = False
            store(self.kind, self.key, self.fingerprint, self.payload())


_PARTS_MAGIC = b"probectl parts\n"
_PARTS_HEAD = struct.Struct("<QI")  # the header's length and CRC-32


class StoredParts:
    """What :func:`load_parts` found: the ``table`` stored with the parts, and ``part(i)`` to read
    each part (None when it is damaged). The file stays open until this is closed or collected."""

    def __init__(self, fd: int, table, places: list[tuple[int, int, int]]):
        self._fd: Optional[int] = fd
        self.table = table
        self._places = places  # (position in the file, length, CRC-32) of each part

    def __len__(self) -> int:
        return len(self._places)

    def length(self, i: int) -> int:
        """The length of part ``i``, as the header says."""
        return self._places[i][1]

    def part(self, i: int) -> Optional[bytes]:
        """The bytes of part ``i``, or None when they cannot be read or do not match their CRC-32."""
        if self._fd is None or not 0 <= i < len(self._places):
            return None
        at, length, crc = self._places[i]
        try:
            data = os.pread(self._fd, length, at)
        except OSError:
            return None
        return data if len(data) == length and zlib.crc32(data) == crc else None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:
        self.close()


def store_parts(kind: str, key: str, fingerprint: tuple, table, parts: list[bytes]) -> None:
    """Keep ``table`` (marshal-able) and ``parts`` for (``kind``, ``key``), to be read back part by
    part (:func:`load_parts`); failures are ignored."""
    directory = cache_dir()
    if directory is None:
        return
    head = marshal.dumps(((kind,) + fingerprint, table, [(len(part), zlib.crc32(part)) for part in parts]))
    path = directory / f"{kind}-{key}{_SUFFIX}"
    if write_file(path, b"".join([_PARTS_MAGIC, _PARTS_HEAD.pack(len(head), zlib.crc32(head)), head, *parts])):
        try:
            _prune(directory, f"{kind}-", keep=path)
        except OSError:
            pass


def load_parts(kind: str, key: str, fingerprint: tuple) -> Optional[StoredParts]:
    """The parts stored for (``kind``, ``key``) with ``fingerprint`` (header read and checked, parts
    read when asked for), or None."""
    directory = cache_dir()
    if directory is None:
        return None
    fd = open_file(directory / f"{kind}-{key}{_SUFFIX}", MAX_SIZE)
    if fd is None:
        return None
    try:
        size = os.fstat(fd).st_size
        first = os.pread(fd, len(_PARTS_MAGIC) + _PARTS_HEAD.size, 0)
        if len(first) != len(_PARTS_MAGIC) + _PARTS_HEAD.size or not first.startswith(_PARTS_MAGIC):
            raise ValueError
        length, crc = _PARTS_HEAD.unpack_from(first, len(_PARTS_MAGIC))
        if length > size - len(first):
            raise ValueError
        head = os.pread(fd, length, len(first))
        if len(head) != length or zlib.crc32(head) != crc:
            raise ValueError
        stored = _unmarshalled(head)
        if type(stored) is not tuple or len(stored) != 3 or stored[0] != (kind,) + fingerprint:
            raise ValueError
        places = []
        at = len(first) + length
        for part_length, part_crc in stored[2]:
            if type(part_length) is not int or type(part_crc) is not int or part_length < 0:
                raise ValueError
            places.append((at, part_length, part_crc))
            at += part_length
        if at != size:  # (truncated, or more than was written)
            raise ValueError
        os.utime(fd)  # least recently used goes first when pruning
    except (OSError, ValueError, EOFError, TypeError):
        os.close(fd)
        return None
    return StoredParts(fd, stored[1], places)


def load_or_build(kind: str, key: str, fingerprint: tuple, *, decode: Callable[[tuple], Optional[T]],
                  build: Callable[[], tuple[T, tuple]], what: str,
                  notice: Callable[[str], None] = notice_stderr) -> T:
    """The index (``kind``, ``key``): ``decode`` of the payload stored with ``fingerprint`` (None when
    it is unusable), else the value of ``build()`` (which gives the value and the payload to store).
    While one process builds it, the others wait for it (``what`` names the file in the notice)."""
    stored = load(kind, key, fingerprint)
    value = decode(stored) if stored is not None else None
    if value is not None:
        return value
    directory = cache_dir()
    lock = _lock(directory, kind, key, what, notice) if directory is not None else None
    try:
        if lock is not None and lock[1]:  # another process built it while this one waited
            stored = load(kind, key, fingerprint)
            value = decode(stored) if stored is not None else None
            if value is not None:
                return value
        if os.environ.get("PROBECTL_DEBUG", "0") not in ("", "0"):
            notice(f"probectl: building the {kind} index of {what}")
        value, payload = build()
        store(kind, key, fingerprint, payload)
        return value
    finally:
        if lock is not None:
            os.close(lock[0])  # (releases the flock)


def _lock(directory: Path, kind: str, key: str, what: str,
          notice: Callable[[str], None]) -> Optional[tuple[int, bool]]:
    """(descriptor, waited) holding ``flock`` on the lock file of (``kind``, ``key``), or None when it
    cannot be had (the caller builds without it). ``waited``: another process held it first."""
    path = directory / f".lock-{kind}-{key}"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            os.close(fd)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd, False
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
        notice(f"probectl: waiting for another probectl building the index for {what}")
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd, True
    except OSError:
        os.close(fd)
        return None


def _read(path: Path, fingerprint: tuple) -> Optional[tuple]:
    data = read_file(path, MAX_SIZE, touch=True)  # least recently used goes first when pruning
    if data is None:
        return None
    try:
        head = len(_MAGIC) + _CRC.size
        if len(data) < head or not data.startswith(_MAGIC):
            return None
        body = memoryview(data)[head:]  # (checked and decoded where it is, not copied)
        if zlib.crc32(body) != _CRC.unpack_from(data, len(_MAGIC))[0]:
            return None
        stored = _unmarshalled(body)
    except (ValueError, EOFError, TypeError):
        return None
    if type(stored) is not tuple or not stored or stored[0] != fingerprint:
        return None
    return stored[1:]


# Whether a load freezes what the run made (gc.freeze, below): set by probectl's command line, whose
# process ends with its command. Never in a long-lived process that imports probectl (a test run, a
# script of the Python API): there a cycle made before a load would never be collected, and a
# DebugInfo in one (its functions refer to it) holds its file open, ~2 descriptors a resolved
# definition, until select() of a test's terminal failed on a descriptor above 1023.
FREEZE_AFTER_LOAD = False


def _unmarshalled(data) -> object:
    """``marshal.loads(data)`` of an index, whose containers (a unit table of a C++ library: ~20,000
    tuples and lists) live as long as the run uses the file, and hold no cycle: made with the collector
    paused, then, in the program (``FREEZE_AFTER_LOAD``), frozen (``gc.freeze``) with what the run made
    before, so that no young collection traverses them (one did, ~2.5 ms of a warm ``add -D``; a
    collection of the next objects still runs when they reach the threshold). Only cycles made before
    a load and not yet collected stay uncollected (refcounting frees everything else, frozen or not)."""
    if not gc.isenabled():
        return marshal.loads(data)
    gc.disable()
    try:
        return marshal.loads(data)
    finally:
        if FREEZE_AFTER_LOAD:
            gc.freeze()
        gc.enable()


def _write(directory: Path, kind: str, key: str, fingerprint: tuple, payload: tuple) -> None:
    path = directory / f"{kind}-{key}{_SUFFIX}"
    data = marshal.dumps((fingerprint, *payload))
    if write_file(path, _MAGIC + _CRC.pack(zlib.crc32(data)) + data):
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
        lock = os.path.join(os.path.dirname(name), ".lock-" + os.path.basename(name)[:-len(_SUFFIX)])
        for gone in (name, lock):  # (an index's lock file goes with it)
            try:
                os.unlink(gone)
            except OSError:
                pass
