"""The kernel as a probe target: which vmlinux describes the running kernel (perf's search, checked
by build-id), and where its BTF is when there is no vmlinux.
"""
from __future__ import annotations

import errno

import os
from pathlib import Path
from typing import Optional

from ..cachedir import cache_dir as probectl_cache_dir
from ..cachedir import open_file, private_dir, write_file
from ..debuginfo.elf import ElfFile, gnu_build_id, walk_notes
from ..errors import ProbectlError, TargetError
from .binary import check_machine

NOTES = Path("/sys/kernel/notes")
# An unpacked module kept in the cache is not used beyond this size (the largest modules, with their
# debug information, are some hundreds of MB).
_MAX_UNPACKED = 4 << 30


def vmlinux_candidates(release: Optional[str] = None) -> list[Path]:
    """perf's search order for the running kernel's vmlinux."""
    release = release or os.uname().release
    return [
        Path(f"/usr/lib/debug/boot/vmlinux-{release}"),
        Path(f"/usr/lib/debug/lib/modules/{release}/vmlinux"),
        Path(f"/boot/vmlinux-{release}"),
        Path(f"/lib/modules/{release}/build/vmlinux"),
        Path(f"/usr/lib/debug/boot/vmlinux-{release}.debug"),
        Path("/boot/vmlinux"),
        Path("vmlinux"),
    ]


def running_build_id(notes: Path = NOTES) -> Optional[str]:
    """The running kernel's build-id, from the ELF notes the kernel exports (in this machine's byte
    order: they are the kernel's own .notes section)."""
    try:
        data = notes.read_bytes()
    except OSError:
        return None
    return gnu_build_id(walk_notes(data, "="))


def find_running_vmlinux() -> tuple[Optional[Path], list[str]]:
    """The vmlinux whose build-id is the running kernel's (or None), and what was tried."""
    wanted = running_build_id()
    tried = []
    for path in vmlinux_candidates():
        if not path.is_file():
            tried.append(str(path))
            continue
        try:
            with ElfFile(path) as elf:
                found = elf.build_id
        except (ProbectlError, OSError):
            tried.append(f"{path} (not a readable ELF file)")
            continue
        if wanted and found != wanted:
            tried.append(f"{path} (build-id {found}, running kernel {wanted})")
            continue
        return path, tried
    return None, tried


def fetch_running_vmlinux():
    """The running kernel's vmlinux with DWARF from debuginfod (by its build-id), as a
    :class:`~probectl.target.debuginfod.Fetched`; None when no server is configured or the kernel
    exports no build-id. Raises DebugInfoError when the servers do not have it."""
    from .debuginfod import fetch_debuginfo, server_urls

    wanted = running_build_id()
    if not server_urls() or not wanted:
        return None
    return fetch_debuginfo(wanted, f"vmlinux {os.uname().release}")


def check_vmlinux(path: Path) -> Path:
    """A user-given vmlinux must exist and be an x86-64 ELF file with DWARF."""
    try:
        path.stat()
    except OSError as err:
        raise TargetError(f"vmlinux {path} does not exist" if err.errno in (errno.ENOENT, errno.ENOTDIR)
                          else f"vmlinux {path}: {err.strerror or err}") from None
    with ElfFile(path) as elf:  # (which refuses what is not a regular file: a FIFO would hang a read)
        check_machine(elf, str(path))
        if not elf.has_dwarf:
            raise TargetError(f"{path} has no debug information",
                              hint="use the vmlinux of the kernel's debug package (Debian: linux-image-*-dbg)")
    return path.resolve()


def module_name(path: Path) -> str:
    """A module's name as the kernel knows it: ``name=`` in its .modinfo, else the file name."""
    name = _modinfo(path).get("name")
    if name:
        return name
    return path.name.split(".ko", 1)[0].replace("-", "_")


def module_release(path: Path) -> Optional[str]:
    """The kernel release a module was built for (the first word of ``vermagic=``), or None."""
    words = _modinfo(path).get("vermagic", "").split()
    return words[0] if words else None


def _modinfo(path: Path) -> dict[str, str]:
    """The ``key=value`` entries of a module's .modinfo section (the first of each key)."""
    try:
        with ElfFile(path) as elf:
            info = elf.section_data(".modinfo") if elf.section(".modinfo") else b""
    except ProbectlError:
        info = b""
    entries: dict[str, str] = {}
    for entry in info.split(b"\0"):
        key, sep, value = entry.partition(b"=")
        if sep:
            entries.setdefault(key.decode(errors="replace"), value.decode(errors="replace"))
    return entries


def find_module(spec: str, cache_dir: Optional[Path] = None) -> tuple[Path, str]:
    """``-m NAME|PATH``: the module object to read (its debug file when there is one; ``.ko.xz`` and
    ``.ko.zst`` unpacked into the cache) and the module's name."""
    path = Path(spec)
    if "/" in spec or spec.endswith((".ko", ".ko.xz", ".ko.zst", ".ko.debug")):
        try:
            found = path.is_file()
        except OSError as err:  # (a name too long, a loop of links)
            raise TargetError(f"module file {spec}: {err.strerror or err}") from None
        if not found:
            raise TargetError(f"module file {spec} does not exist")
    else:
        path = _module_by_name(spec)
    path = _unpacked(path, cache_dir)
    return path.resolve(), module_name(path)


def _module_by_name(name: str) -> Path:
    release = os.uname().release
    root = Path(f"/lib/modules/{release}")
    wanted = {name.replace("-", "_"), name.replace("_", "-")}
    found = []
    try:
        deps = (root / "modules.dep").read_text().splitlines()
    except OSError:
        deps = []
    for line in deps:
        rel = line.split(":", 1)[0]
        base = rel.rsplit("/", 1)[-1].split(".ko", 1)[0]
        if base in wanted:
            found.append(rel)
    if not found:
        raise TargetError(f"module {name} is not in /lib/modules/{release}/modules.dep",
                          hint="give the module's path (a .ko or .ko.debug file) with -m")
    rel = found[0]
    debug = Path(f"/usr/lib/debug/lib/modules/{release}") / rel.split(".ko", 1)[0]
    for candidate in (debug.with_suffix(".ko"), Path(str(debug) + ".ko.debug")):
        if candidate.is_file():
            return candidate
    return root / rel


def _scratch_dir() -> Path:
    """A directory of this run's own, removed at exit (for unpacked modules when caching is off)."""
    import atexit
    import shutil
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="probectl-modules-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _unpacked(path: Path, cache_dir: Optional[Path]) -> Path:
    """Compressed modules are unpacked once into the cache (ELF readers need the plain file).

    The cache's ``modules`` directory (or ``cache_dir``) is used only if it is the effective user's
    own (:func:`probectl.cachedir.private_dir`), an unpacked file in it again only if it is a regular
    file of theirs, of sane size, that starts as an ELF file; anything else is unpacked again (into a
    directory of the run's own when the cache cannot be used)."""
    if path.suffix not in (".xz", ".zst"):
        return path
    if cache_dir is None:
        base = probectl_cache_dir()
        cache_dir = base / "modules" if base is not None else None
    elif not cache_dir.parent.is_dir():
        try:
            cache_dir.parent.mkdir(parents=True, mode=0o700)
        except OSError:
            pass
    if cache_dir is not None and not private_dir(cache_dir):
        cache_dir = None
    stat = path.stat()
    name = f"{path.name[:-len(path.suffix)]}-{stat.st_size}-{int(stat.st_mtime)}"
    if cache_dir is not None and _reusable(cache_dir / name):
        return cache_dir / name
    import lzma  # only for compressed modules: not imported by every command
    import subprocess

    try:
        if path.suffix == ".xz":
            plain = lzma.decompress(path.read_bytes())
        else:
            # Python's standard library has no zstd; the zstd tool does (Debian: apt install zstd).
            plain = subprocess.run(["zstd", "-dcq", str(path)], capture_output=True, check=True).stdout
    except (lzma.LZMAError, OSError, subprocess.CalledProcessError) as err:
        raise TargetError(f"cannot unpack the module {path}: {err}",
                          hint="for .ko.zst modules install zstd") from err
    if cache_dir is not None and write_file(cache_dir / name, plain):
        return cache_dir / name
    out = _scratch_dir() / name  # (when the cache is full, or cannot be used)
    if write_file(out, plain):
        return out
    raise TargetError(f"cannot unpack the module {path}: no directory to write it to")


def _reusable(path: Path) -> bool:
    """Whether the unpacked module ``path`` kept in the cache can be read again."""
    fd = open_file(path, _MAX_UNPACKED)
    if fd is None:
        return False
    try:
        return os.pread(fd, 4, 0) == b"\x7fELF"
    except OSError:
        return False
    finally:
        os.close(fd)
