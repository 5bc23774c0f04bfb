"""The kernel as a probe target: which vmlinux describes the running kernel (perf's search, checked
by build-id), and where its BTF is when there is no vmlinux.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Optional

from .debuginfo.elf import ElfFile
from .errors import ProbectlError, TargetError

NOTES = Path("/sys/kernel/notes")
SYS_BTF = Path("/sys/kernel/btf/vmlinux")
NT_GNU_BUILD_ID = 3


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
    """The running kernel's build-id, from the ELF notes the kernel exports."""
    try:
        data = notes.read_bytes()
    except OSError:
        return None
    pos = 0
    while pos + 12 <= len(data):
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        pos += 12
        name = data[pos:pos + namesz].rstrip(b"\0")
        pos += (namesz + 3) & ~3
        desc = data[pos:pos + descsz]
        pos += (descsz + 3) & ~3
        if ntype == NT_GNU_BUILD_ID and name == b"GNU":
            return desc.hex()
    return None


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


def check_vmlinux(path: Path) -> Path:
    """A user-given vmlinux must exist and be an ELF file with DWARF."""
    if not path.is_file():
        raise TargetError(f"vmlinux {path} does not exist")
    with ElfFile(path) as elf:
        if not elf.has_dwarf:
            raise TargetError(f"{path} has no debug information",
                              hint="use the vmlinux of the kernel's debug package (Debian: linux-image-*-dbg)")
    return path.resolve()
