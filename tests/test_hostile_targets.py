"""Targets a hostile or careless user can name (issue "bad input never hurts", class 5): files that are
not regular files, ELF files for another machine, and ELF files whose section headers are damaged.
Each gets a clear error, quickly: no hang, no traceback, nothing written."""
from __future__ import annotations

import functools
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.helpers import build_fixture, missing, probectl as run_probectl

TIMEOUT = 20  # seconds; a hang (the defect) is a failure, not a stuck suite


probectl = functools.partial(run_probectl, check=False, timeout=TIMEOUT)


def refused(out: subprocess.CompletedProcess, *words: str) -> None:
    assert out.returncode != 0, out.stdout
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("Error: "), out.stderr
    for word in words:
        assert word in out.stderr, out.stderr


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


def test_a_fifo_never_hangs(fifo):
    refused(probectl("add", "-D", "-x", str(fifo), "main"), "FIFO")
    refused(probectl("add", "-D", "-x", str(fifo), "main argc"), "FIFO")
    refused(probectl("funcs", "-x", str(fifo)), "FIFO")
    refused(probectl("script", "-i", str(fifo)), "FIFO")


def test_a_device_is_not_a_binary():
    refused(probectl("add", "-D", "-x", "/dev/zero", "main"), "character device")
    refused(probectl("script", "-i", "/dev/zero"), "character device")


def _patched(src: Path, dst: Path, offset: int, fmt: str, value: int) -> Path:
    data = bytearray(src.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    dst.write_bytes(bytes(data))
    dst.chmod(0o755)
    return dst


def test_other_machines_are_refused(tmp_path):
    """probectl knows x86-64 and AArch64 (tests/test_arm64.py); a file of another machine is refused."""
    app = build_fixture("dwarf_structs")
    riscv = _patched(app, tmp_path / "riscv-app", 0x12, "<H", 243)  # e_machine = EM_RISCV
    refused(probectl("add", "-D", "-x", str(riscv), "paint w->id"), "RISC-V", "x86-64 and AArch64")
    refused(probectl("add", "-D", "-x", str(riscv), "main"), "RISC-V")


def test_a_32_bit_x86_library_is_refused(tmp_path):
    if not shutil.which("ld"):
        missing("no ld (binutils) to link a 32-bit library")
    src = tmp_path / "f.c"
    src.write_text("int f(int x) { return x + 1; }\n")
    obj = tmp_path / "f32.o"
    built = subprocess.run(["gcc", "-m32", "-c", str(src), "-o", str(obj)], capture_output=True)
    if built.returncode:
        missing(f"gcc cannot build 32-bit objects here: {built.stderr.decode(errors='replace')[:200]}")
    lib = tmp_path / "lib32.so"
    subprocess.run(["ld", "-m", "elf_i386", "-shared", str(obj), "-o", str(lib)], check=True)
    refused(probectl("add", "-D", "-x", str(lib), "f"), "32-bit", "i386")


@pytest.mark.parametrize("damage", ["name table index", "name offsets"])
def test_damaged_section_headers_say_so(tmp_path, damage):
    """A damaged section name table used to leave every section unnamed, so the file seemed to have
    no debug information ("install the debug symbols"): the user was sent looking for the wrong thing."""
    app = build_fixture("dwarf_structs")
    data = bytearray(app.read_bytes())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shnum, = struct.unpack_from("<H", data, 0x3C)
    if damage == "name table index":
        struct.pack_into("<H", data, 0x3E, shnum + 100)
    else:
        for i in range(1, shnum):
            struct.pack_into("<I", data, shoff + i * 64, 0x7FFFFFF0)
    bad = tmp_path / "damaged"
    bad.write_bytes(bytes(data))
    bad.chmod(0o755)
    for definition in ("paint w->id", "paint"):
        out = probectl("add", "-D", "-x", str(bad), definition)
        refused(out, "section name table")
        assert "debug information" not in out.stderr and "debug symbols" not in out.stderr


def test_vmlinux_and_module_together_are_refused_not_ignored():
    out = probectl("add", "-D", "-k", "/nonexistent/vmlinux", "-m", "vfat", "vfat_create")
    refused(out, "-k and -m cannot be used together")
    out = probectl("funcs", "-k", "/nonexistent/vmlinux", "-m", "vfat")
    refused(out, "-k and -m cannot be used together")


def test_a_vmlinux_that_is_a_fifo_or_another_machine(fifo, tmp_path):
    refused(probectl("add", "-D", "-k", str(fifo), "tcp_sendmsg size"), "FIFO")
    riscv = _patched(build_fixture("dwarf_structs"), tmp_path / "vmlinux-riscv", 0x12, "<H", 243)
    refused(probectl("add", "-D", "-k", str(riscv), "tcp_sendmsg size"), "RISC-V")
