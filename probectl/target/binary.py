"""Finding the user-space binary or shared library to probe, and the uprobe group perf would give it.

``find_binary`` accepts what a perf user types after ``-x``: a path, a program name found on
``$PATH``, or a library short name (``libc``, ``libc.so.6``, ``c`` as in ``-lc``). Libraries come
from the ld.so cache, the standard library directories and the libraries running processes have
mapped; when several files match, the one the running system has loaded wins.
"""
from __future__ import annotations

import errno
import os
import re
import stat
import struct
from pathlib import Path
from typing import Iterable, Optional

from ..arch import Arch, for_machine, known_names, machine_name
from ..dataclass import dataclass, field
from ..debuginfo.elf import ElfFile
from ..errors import ProbectlError, TargetError
from .process import ProcessView, split_proc_root

LD_SO_CACHE = Path("/etc/ld.so.cache")
LD_SO_CONF = Path("/etc/ld.so.conf")
STANDARD_LIB_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib")
PROC = Path("/proc")

_CACHE_MAGIC_NEW = b"glibc-ld.so.cache1.1"
_CACHE_MAGIC_OLD = b"ld.so-1.7.0"
_GROUP_CUT = re.compile(r"[^A-Za-z0-9_]")
MAX_GROUP_NAME = 63


def uprobe_group_name(path: os.PathLike | str) -> str:
    """perf's default group for a uprobe on ``path``: ``probe_`` + the basename up to its first
    character that is not alphanumeric or ``_`` (``libc.so.6`` → ``probe_libc``, ``my-app`` → ``probe_my``)."""
    base = os.path.basename(os.fspath(path))
    m = _GROUP_CUT.search(base)
    group = "probe_" + (base[:m.start()] if m else base)
    if len(group) > MAX_GROUP_NAME:
        raise TargetError(f"the group name {group!r} made from {base!r} is longer than {MAX_GROUP_NAME} characters",
                          hint="name the group explicitly: GROUP:EVENT=PROBEPOINT")
    return group


def find_binary(name: str, view: Optional[ProcessView] = None) -> Path:
    """The real path of the ELF file to probe for ``name`` (a path, a command, or a library name).

    ``view``: the files as a process sees them (``--target-ns=PID``), where ``name`` is looked for
    (:func:`find_in_process`); a path ``/proc/PID/root/PATH`` is PATH as process PID sees it.
    Raises TargetError when nothing matches, when the file is not ELF, or when a library name is
    ambiguous (the message lists the candidates and what was searched).
    """
    if not name:
        raise TargetError("no target given", hint="give a path, a program on $PATH or a library name")
    in_root = split_proc_root(name) if view is None else None
    if in_root is not None:
        view, name = ProcessView.of(in_root[0]), in_root[1]
    if view is not None:
        return find_in_process(name, view)
    path = Path(name).expanduser()
    if "/" in name or name in (".", ".."):
        return _checked_elf(path, name)

    rejected: list[str] = []
    if _is_file(path):  # a file in the current directory, as perf takes it
        try:
            return _checked_elf(path, name)
        except TargetError as exc:
            rejected.append(f"./{name}: {exc.message}")
    from shutil import which  # (shutil, and subprocess below, load modules a kprobe never needs: docs/ledger.md)

    found = which(name)
    if found:
        try:
            return _checked_elf(Path(found), name)
        except TargetError as exc:
            rejected.append(f"{found}: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))

    lib = find_library(name)
    if lib.path is not None:
        return lib.path
    searched = [f"the current directory and $PATH for a program called {name!r}",
                *rejected, *lib.searched]
    if lib.candidates:
        listing = "\n".join(f"  {c}" for c in lib.candidates)
        raise TargetError(f"{name!r} matches several libraries:\n{listing}\n" + _searched_text(searched),
                          hint="give the full soname (e.g. libfoo.so.1) or the library's path")
    raise TargetError(f"cannot find a program or library called {name!r}\n" + _searched_text(searched),
                      hint="give the path of the binary, or check that the library is installed")


def _searched_text(lines: Iterable[str]) -> str:
    return "searched:\n" + "\n".join(f"  - {line}" for line in lines)


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a regular file (False for a name the system refuses: too long, a loop...)."""
    try:
        return path.is_file()
    except OSError:
        return False


def stat_target(path: Path, name: str) -> os.stat_result:
    """``path``'s status, or TargetError saying why there is none (missing, a name too long...)."""
    try:
        return path.stat()
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ENOTDIR):
            raise TargetError(f"{name}: no such file", hint="check the path, or give a program or library name") \
                from None
        raise TargetError(f"{name}: {err.strerror or err}") from None


def _checked_elf(path: Path, name: str) -> Path:
    """``path``'s realpath if it exists and is an ELF file; TargetError otherwise."""
    if stat.S_ISDIR(stat_target(path, name).st_mode):
        raise TargetError(f"{name} is a directory, not an executable or library")
    return _probeable_elf(path.resolve(), name)


def _probeable_elf(real: Path, name: str) -> Path:
    """``real`` (a resolved path) if it is an executable or shared library for this machine."""
    try:
        with ElfFile(real) as elf:
            if elf.type not in ("EXEC", "DYN"):
                raise TargetError(f"{name} is an ELF {elf.type} file, not an executable or shared library",
                                  hint="probe the linked program instead" if elf.type == "REL" else "")
            check_machine(elf, name)
    except ProbectlError as exc:  # (named once: the reader's messages often start with the path)
        if str(real) in exc.message or name in exc.message:
            if isinstance(exc, TargetError):
                raise
            raise TargetError(exc.message, hint=exc.hint) from None
        raise TargetError(f"{name}: {exc.message}", hint=exc.hint) from None
    return real


def check_machine(elf: ElfFile, name: str) -> Arch:
    """The facts of ``elf``'s machine; TargetError unless it is a 64-bit file of a machine probectl knows
    (x86-64, AArch64): on another it would place and fetch wrongly, not knowing its registers,
    calling convention and instructions."""
    arch = for_machine(elf.machine)
    if arch is not None and elf.elf_class == 64:
        return arch
    raise TargetError(f"{name} is a {elf.elf_class}-bit ELF file for {machine_name(elf.machine)}; probectl probes "
                      f"64-bit {known_names()} programs and kernels only")


def file_arch(path: Path) -> Arch:
    """The machine facts of the ELF file at ``path`` (a TargetError, as check_machine's, for one
    probectl does not know)."""
    with ElfFile(path) as elf:
        return check_machine(elf, str(path))


# --- libraries -------------------------------------------------------------------------------------

@dataclass
class LibraryMatch:
    """The outcome of a library search: the chosen path, or the candidates that made it ambiguous."""

    path: Optional[Path] = None
    candidates: list[str] = field(default_factory=list)
    searched: list[str] = field(default_factory=list)


def library_queries(name: str) -> list[str]:
    """The file-name stems ``name`` can stand for: ``c`` → ``c``, ``libc``; ``libc.so`` → ``libc``."""
    stem = name[:-3] if name.endswith(".so") else name
    out = [stem]
    if not stem.startswith("lib"):
        out.append("lib" + stem)
    return out


def library_name_matches(filename: str, name: str) -> bool:
    """Whether a library file name answers to ``name``: the exact name, or ``<stem>.so`` and
    ``<stem>.so.<version>`` for each stem of ``library_queries(name)``."""
    if filename == name:
        return True
    for stem in library_queries(name):
        if filename.startswith(stem + ".so"):
            rest = filename[len(stem) + 3:]
            if rest == "" or rest.startswith("."):
                return True
    return False


def find_library(name: str) -> LibraryMatch:
    """Search for a shared library called ``name`` (see ``library_name_matches``).

    Preference: libraries mapped by running processes, then ld.so cache entries, then files in the
    standard directories; only ELF shared objects for this machine count. One candidate in the
    first tier that has any is chosen; several make the match ambiguous.
    """
    result = LibraryMatch()
    cache, cache_source = read_ld_so_cache()
    result.searched.append(f"the ld.so cache ({cache_source})")
    from_cache = [Path(p) for soname, p in cache if library_name_matches(soname, name)]
    dirs = library_dirs()
    result.searched.append("library directories: " + ", ".join(dirs))
    from_dirs = [Path(d) / f for d in dirs for f in _listdir(d) if library_name_matches(f, name)]

    machine = _host_machine()
    tiers: dict[str, list[Path]] = {"cache": [], "dirs": []}
    seen: dict[Path, str] = {}
    for tier, paths in (("cache", from_cache), ("dirs", from_dirs)):
        for p in paths:
            real = _real_library(p, machine)
            if real is not None and real not in seen:
                seen[real] = tier
                tiers[tier].append(real)

    candidates = tiers["cache"] + tiers["dirs"]
    if len(candidates) != 1:
        # Only now pay for scanning every process: to break a tie, or to find a library loaded from
        # a private directory (RPATH, LD_LIBRARY_PATH) that neither the cache nor the usual dirs know.
        result.searched.append("libraries mapped by running processes (/proc/*/maps)")
        loaded = [p for p in mapped_libraries() if library_name_matches(p.name, name)]
        loaded_real = []
        for p in loaded:
            real = _real_library(p, machine)
            if real is not None and real not in loaded_real:
                loaded_real.append(real)
        if len(loaded_real) == 1:
            result.path = loaded_real[0]
            return result
        if loaded_real:
            result.candidates = [f"{p} (loaded)" for p in loaded_real]
            return result
    if tiers["cache"]:
        if len(tiers["cache"]) == 1:
            result.path = tiers["cache"][0]
        else:
            result.candidates = [f"{p} (ld.so cache)" for p in tiers["cache"]]
        return result
    if len(tiers["dirs"]) == 1:
        result.path = tiers["dirs"][0]
    elif tiers["dirs"]:
        result.candidates = [str(p) for p in tiers["dirs"]]
    return result


def _real_library(path: Path, machine: Optional[int], resolve: bool = True) -> Optional[Path]:
    """``path``'s realpath (``resolve`` False: ``path``, resolved already) if it is an ELF shared object
    for ``machine`` (None: any), else None."""
    try:
        real = path.resolve() if resolve else path
        with ElfFile(real) as elf:
            if elf.type != "DYN":
                return None
            if machine is not None and elf.machine != machine:
                return None
            return real
    except (ProbectlError, OSError, RuntimeError):
        return None


def _listdir(d: str) -> list[str]:
    try:
        return sorted(os.listdir(d))
    except OSError:
        return []


_HOST_MACHINE: list[Optional[int]] = []


def _host_machine() -> Optional[int]:
    """The ELF machine of this process (libraries for other architectures are never what is meant)."""
    if not _HOST_MACHINE:
        try:
            with ElfFile("/proc/self/exe") as elf:
                _HOST_MACHINE.append(elf.machine)
        except (ProbectlError, OSError):
            _HOST_MACHINE.append(None)
    return _HOST_MACHINE[0]


def library_dirs() -> list[str]:
    """Existing library directories: /etc/ld.so.conf (with includes), then the standard ones."""
    out: list[str] = []
    for d in [*_ld_so_conf_dirs(LD_SO_CONF, set()), *STANDARD_LIB_DIRS]:
        if d not in out and os.path.isdir(d):
            out.append(d)
    return out


def _ld_so_conf_dirs(conf: Path, visited: set[Path]) -> list[str]:
    if conf in visited:
        return []
    visited.add(conf)
    try:
        lines = conf.read_text(errors="replace").splitlines()
    except OSError:
        return []
    out: list[str] = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            pattern = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
            base = pattern if pattern.startswith("/") else str(conf.parent / pattern)
            import glob  # (only for an ld.so.conf with includes)

            for inc in sorted(glob.glob(base)):
                out.extend(_ld_so_conf_dirs(Path(inc), visited))
        elif line.startswith("/"):
            out.append(line.split("=", 1)[0].rstrip("/") or "/")
    return out


def read_ld_so_cache(path: Path = LD_SO_CACHE) -> tuple[list[tuple[str, str]], str]:
    """(soname, path) entries of the ld.so cache, and where they came from.

    The binary file is parsed directly (glibc's new format, alone or after the old one); if it is
    missing or in a format not understood, the output of ``ldconfig -p`` is used instead.
    """
    try:
        data = path.read_bytes()
        entries = parse_ld_so_cache(data)
        if entries is not None:
            return entries, str(path)
    except OSError:
        pass
    entries = _ldconfig_p()
    return entries, "ldconfig -p"


def parse_ld_so_cache(data: bytes) -> Optional[list[tuple[str, str]]]:
    """Entries of an ld.so.cache image, or None if it is not in a format this understands."""
    start = 0
    if data.startswith(_CACHE_MAGIC_OLD):
        # Old header: magic (11 bytes, padded to 12), nlibs, then 12-byte entries; the new cache follows, 8-aligned.
        if len(data) < 16:
            return None
        (nlibs,) = struct.unpack_from("<I", data, 12)
        start = (16 + 12 * nlibs + 7) & ~7
        # String offsets of the combined format are relative to the new header.
    if not data.startswith(_CACHE_MAGIC_NEW, start):
        return None
    header = struct.Struct("<20sIIB3xI12x")
    if len(data) < start + header.size:
        return None
    _magic, nlibs, _strings_len, _flags, _ext = header.unpack_from(data, start)
    entry = struct.Struct("<iIIIQ")
    first = start + header.size
    if first + nlibs * entry.size > len(data):
        return None
    out: list[tuple[str, str]] = []
    for i in range(nlibs):
        _eflags, key, value, _osv, _hwcap = entry.unpack_from(data, first + i * entry.size)
        soname = _cstring_at(data, start + key)
        libpath = _cstring_at(data, start + value)
        if soname is None or libpath is None:
            return None
        out.append((soname, libpath))
    return out


def _cstring_at(data: bytes, offset: int) -> Optional[str]:
    if not 0 <= offset < len(data):
        return None
    end = data.find(b"\0", offset)
    if end < 0:
        return None
    return data[offset:end].decode("utf-8", "surrogateescape")


def _ldconfig_p() -> list[tuple[str, str]]:
    import subprocess
    from shutil import which

    exe = which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    entries = []
    for line in out.splitlines():
        m = re.match(r"\s+(\S+) \(.*\) => (.+)$", line)
        if m:
            entries.append((m.group(1), m.group(2)))
    return entries


def process_objects(pid: int, proc: Path = PROC) -> list[Path]:
    """The ELF files (program and libraries) process ``pid`` maps, in map order, each once, as paths
    this process can open (through ``/proc/PID/root`` when the process has another root)."""
    try:
        maps = (proc / str(pid) / "maps").read_text(errors="surrogateescape")
    except FileNotFoundError:
        raise TargetError(f"there is no process {pid}", hint="check the PID (ps, pgrep)") from None
    except OSError as exc:
        raise TargetError(f"cannot read the mappings of process {pid}: {exc.strerror}",
                          hint="run as root, or as the process's owner") from None
    view = ProcessView.of(pid, proc)
    out: list[Path] = []
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/") or parts[5].endswith(" (deleted)"):
            continue
        path = view.host_path(parts[5])  # (the kernel's names in maps are resolved already)
        if path in out:
            continue
        try:
            with open(path, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
        except OSError:
            continue
        out.append(path)
    return out


def mapped_libraries(proc: Path = PROC) -> list[Path]:
    """Shared objects (``*.so*``) mapped by processes that share our root directory and mount namespace,
    most-mapped first."""
    try:
        root, mounts = os.stat("/"), os.stat(proc / "self" / "ns" / "mnt")
    except OSError:
        return []
    counts: dict[str, int] = {}
    try:
        pids = [d for d in os.listdir(proc) if d.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            st, ns = os.stat(proc / pid / "root"), os.stat(proc / pid / "ns" / "mnt")
            if (st.st_dev, st.st_ino) != (root.st_dev, root.st_ino) or ns.st_ino != mounts.st_ino:
                continue  # another mount namespace or chroot: its paths mean other files
            maps = (proc / pid / "maps").read_text(errors="surrogateescape")
        except OSError:
            continue
        seen: set[str] = set()
        for line in maps.splitlines():
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].startswith("/"):
                continue
            p = parts[5]
            if p.endswith(" (deleted)") or ".so" not in os.path.basename(p) or p in seen:
                continue
            seen.add(p)
            counts[p] = counts.get(p, 0) + 1
    return [Path(p) for p, _n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


# --- a process's files (--target-ns, /proc/PID/root) ------------------------------------------------

def find_in_process(name: str, view: ProcessView) -> Path:
    """The file ``name`` means to the process of ``view``, as a path probectl and the kernel open
    (``/proc/PID/root/...`` for a process of another mount namespace): a path as the process names
    it (relative: to its working directory); a program or library name among the files the process
    maps (``libc``: the libc it runs), then on its ``$PATH``, then in its ld.so cache and library
    directories. TargetError when nothing matches or several files do."""
    where = f"process {view.pid}"
    if "/" in name or name in (".", ".."):
        path = view.find(name)
        if stat.S_ISDIR(stat_target(path, f"{name} (in {where})").st_mode):
            raise TargetError(f"{name} (in {where}) is a directory, not an executable or library")
        return _probeable_elf(path, f"{name} (in {where})")
    searched = [f"the files {where} maps"]
    mapped = _unique_files(p for p in process_objects(view.pid)
                           if p.name == name or library_name_matches(p.name, name))
    if len(mapped) > 1:
        listing = "\n".join(f"  {view.inner_path(p)} (mapped)" for p in mapped)
        raise TargetError(f"{name!r} matches several files {where} maps:\n{listing}",
                          hint="give the full soname (e.g. libfoo.so.1) or the file's path")
    if mapped:
        return _probeable_elf(mapped[0], name)
    dirs = view.path_dirs()
    searched.append(f"its $PATH ({':'.join(dirs)})")
    for d in dirs:
        found = _existing_in(view, f"{d}/{name}")
        if found is not None and not stat.S_ISDIR(os.stat(found).st_mode):
            return _probeable_elf(found, f"{name} (in {where})")
    cache_path = view.host_path(str(LD_SO_CACHE))
    try:
        entries = parse_ld_so_cache(cache_path.read_bytes()) or []
    except OSError:
        entries = []
    searched.append(f"its ld.so cache ({LD_SO_CACHE})")
    candidates = [c for soname, p in entries if library_name_matches(soname, name)
                  if (c := _existing_in(view, p)) is not None]
    if not candidates:
        searched.append("its library directories: " + ", ".join(STANDARD_LIB_DIRS))
        for d in STANDARD_LIB_DIRS:
            inside = _existing_in(view, d)
            if inside is not None and inside.is_dir():
                candidates += [c for f in _listdir(str(inside)) if library_name_matches(f, name)
                               if (c := _existing_in(view, f"{d}/{f}")) is not None]
    machine = _host_machine()
    libraries = _unique_files(c for c in candidates if _real_library(c, machine, resolve=False) is not None)
    if len(libraries) == 1:
        return libraries[0]
    if libraries:
        listing = "\n".join(f"  {view.inner_path(p)}" for p in libraries)
        raise TargetError(f"{name!r} matches several libraries of {where}:\n{listing}",
                          hint="give the full soname (e.g. libfoo.so.1) or the library's path")
    raise TargetError(f"cannot find a program or library called {name!r} in {where}\n" + _searched_text(searched),
                      hint="give the path of the binary as the process sees it")


def _existing_in(view: ProcessView, inner: str) -> Optional[Path]:
    """:meth:`ProcessView.find` of ``inner``, or None when the process has no such file."""
    try:
        return view.find(inner)
    except TargetError:
        return None


def _unique_files(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without a second name of one file (a library in /lib and in /usr/lib, merged /usr)."""
    out: list[Path] = []
    seen: set[tuple[int, int]] = set()
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            out.append(p)
    return out
