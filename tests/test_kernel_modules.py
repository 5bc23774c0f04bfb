"""Kprobes in kernel modules (-m PATH) from the debug objects of Debian's cloud kernel, against
`perf probe -m PATH -D`; compressed modules, module names, and what cannot be probed."""
from __future__ import annotations

import functools
import lzma
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probectl.target.kernel import find_module, module_name, module_release

from tests.helpers import kernel_testdata, probectl as run_probectl

pytestmark = pytest.mark.vmlinux

CASES = [
    ("vfat", "vfat_create dir dentry->d_name.name:string mode"),
    ("vfat", "vfat_lookup:3"),
    ("vfat", "vfat_create%return $retval"),
    ("fat", "fat_fill_super silent sb->s_flags"),
    ("fat", "fat_setattr attr->ia_valid"),
    ("tcp_diag", "tcp_diag_dump cb->nlh->nlmsg_len"),
    ("overlay", "ovl_lookup dentry->d_name.name:string flags"),
]


@pytest.fixture(scope="module")
def modules_dir() -> Path:
    return kernel_testdata("modules", "vfat.ko").parent


probectl = functools.partial(run_probectl, check=False)


@pytest.mark.perf
@pytest.mark.parametrize("module,definition", CASES, ids=[c[1].split()[0] for c in CASES])
def test_module_definitions_match_perf(perf_bin, modules_dir, tmp_path, module, definition):
    path = str(modules_dir / f"{module}.ko")
    theirs = subprocess.run([perf_bin, "probe", "-m", path, "-D", definition], capture_output=True, text=True,
                            env=dict(os.environ, HOME=str(tmp_path)))
    assert theirs.returncode == 0, theirs.stderr
    ours = probectl("add", "-D", "-m", path, definition)
    assert ours.returncode == 0, ours.stderr
    expected = theirs.stdout.splitlines()
    if definition.endswith("%return $retval"):
        # perf leaves $retval untyped; probectl types it from DWARF (vfat_create returns int).
        expected = [line + ":s32" for line in expected]
    assert ours.stdout.splitlines() == expected


def test_module_name_and_compressed_modules(modules_dir, tmp_path):
    vfat = modules_dir / "vfat.ko"
    assert module_name(vfat) == "vfat"
    packed = tmp_path / "vfat.ko.xz"
    packed.write_bytes(lzma.compress(vfat.read_bytes()))
    path, name = find_module(str(packed), cache_dir=tmp_path / "cache")
    assert name == "vfat" and path.read_bytes() == vfat.read_bytes()
    plain = probectl("add", "-D", "-m", str(vfat), "vfat_create dir")
    from_xz = subprocess.run([sys.executable, "-m", "probectl", "add", "-D", "-m", str(packed), "vfat_create dir"],
                             capture_output=True, text=True, env=dict(os.environ, XDG_CACHE_HOME=str(tmp_path)))
    assert from_xz.returncode == 0, from_xz.stderr
    assert from_xz.stdout == plain.stdout


@pytest.mark.parametrize("definition,message", [
    ("init_vfat_fs", "is in the module's .init.text section"),
    ("vfat_rmdir+4", "vfat_rmdir+4 is inside the instruction at vfat_rmdir+0"),
    ("no_such_function", "Probe point 'no_such_function' not found."),
])
def test_module_errors(modules_dir, definition, message):
    out = probectl("add", "-D", "-m", str(modules_dir / "vfat.ko"), definition)
    assert out.returncode == 1 and message in out.stderr and "Traceback" not in out.stderr


def test_btf_of_a_module_of_another_kernel_is_refused(modules_dir):
    """--btf with -m reads the module's split BTF on top of the running kernel's (tested live in the
    qemu guest, tests/guest/test_qemu_probectl.py); a module built for another kernel would be read
    against the wrong types (struct file's f_flags at +40 instead of +64 here), so it is an error."""
    vfat = modules_dir / "vfat.ko"
    release = module_release(vfat)
    assert release == modules_dir.parent.name
    if release == os.uname().release:
        pytest.skip("this machine runs the test data's kernel")
    out = probectl("add", "-D", "--btf", "-m", str(vfat), "vfat_create dir")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"was built for kernel {release}, not for the running {os.uname().release}" in out.stderr


def test_missing_module_is_a_clear_error():
    out = probectl("add", "-D", "-m", "/nonexistent/mod.ko", "f")
    assert out.returncode == 1 and "module file /nonexistent/mod.ko does not exist" in out.stderr
    out = probectl("add", "-D", "-m", "no_such_module_xyz", "f")
    assert out.returncode == 1 and "no_such_module_xyz" in out.stderr
