"""Module probes live: definitions for a module, resolved from its debug object (``-m PATH``), on the
module's loadable object insmod'ed in the qemu guest (Debian's cloud kernel, see vmtest/README.md).

The oracle is ``perf probe -m PATH -D``; both sets are written as ``overlay:SYMBOL+OFF`` probes after
``insmod overlay.ko``, an overlay filesystem is mounted on tmpfs, and files are looked up, created and
made in it; the events must carry the names and modes the workload used.
"""
from __future__ import annotations

import shutil
import stat
import sys

import pytest

from tests.helpers import missing
from vmtest.busybox_guest import GuestResult, run_in_guest
# source: each test once for perf's definitions, once for probectl's (it reads this module's ``definitions``).
from tests.guest.test_qemu_kprobes import PREFIX, _run_oracle, source  # noqa: F401

pytestmark = pytest.mark.qemu

PROBES = [
    ("ovl_lookup", "ovl_lookup dentry->d_name.name:string"),
    ("ovl_create_object", "ovl_create_object dentry->d_name.name:string mode"),  # static, in overlay.ko
]

WORKLOAD = """
mkdir /tmp/ov && mount -t tmpfs tmpfs /tmp/ov && cd /tmp/ov && mkdir lower upper work merged || exit 1
echo hello > lower/lowerfile
mount -t overlay overlay -o lowerdir=/tmp/ov/lower,upperdir=/tmp/ov/upper,workdir=/tmp/ov/work merged || exit 2
cat merged/lowerfile || exit 3
ls merged/missing_file 2>/dev/null && exit 4
touch merged/newfile_x && mkdir merged/newdir_y || exit 5
"""


@pytest.fixture(scope="module")
def module_paths(kernel_dir):
    debug, loadable = kernel_dir / "modules" / "overlay.ko", kernel_dir / "modules" / "loadable" / "overlay.ko"
    if not debug.is_file() or not loadable.is_file():
        missing(f"no overlay.ko debug and loadable objects in {kernel_dir}/modules (tools/kernel-testdata.sh)")
    return debug, loadable


@pytest.fixture(scope="module")
def definitions(module_paths) -> dict[str, object]:
    debug, _ = module_paths
    found: dict[str, object] = {"perf": None}
    if shutil.which("perf"):
        args = ["perf", "probe", "-m", str(debug)]
        for _func, probe in PROBES:
            args += ["-D", probe]
        found["perf"] = _run_oracle(args, ("HOME", "PERF_BUILDID_DIR"))
    try:
        found["probectl"] = _run_oracle(
            [sys.executable, "-m", "probectl", "add", "-D", "-m", str(debug),
             *(f"probectl:pc_{func}={probe}" for func, probe in PROBES)], ("XDG_CACHE_HOME",))
    except RuntimeError as exc:
        found["probectl"] = exc
    for who, defs in found.items():
        assert not isinstance(defs, list) or len(defs) == len(PROBES), (who, defs)
    return found


@pytest.fixture(scope="module")
def guest(kernel_dir, module_paths, definitions) -> GuestResult:
    defs = [d for found in definitions.values() if isinstance(found, list) for d in found]
    return run_in_guest(kernel_dir, defs, WORKLOAD, modules=[module_paths[1]], timeout=300)


def test_module_definitions_name_the_module(definitions, source):
    for line in definitions[source]:
        assert line.split()[1].startswith("overlay:"), line


def test_module_loads_and_definitions_are_accepted(guest, definitions, source):
    assert guest.loaded == ["overlay.ko"] and guest.load_errors == []
    assert [d for d in guest.accepted if d in definitions[source]] == definitions[source]
    assert guest.rejected == [] and guest.enable_errors == []
    assert guest.workload_status == 0, guest.workload_output


def test_lookups_carry_the_names_looked_up(guest, source):
    names = {e.args["name"].strip('"') for e in guest.events(PREFIX[source] + "ovl_lookup")}
    assert {"lowerfile", "missing_file", "newfile_x", "newdir_y"} <= names


def test_created_objects_carry_name_and_mode(guest, source):
    events = guest.events(PREFIX[source] + "ovl_create_object")
    created = {e.args["name"].strip('"'): e.int_arg("mode") for e in events}
    assert set(created) == {"newfile_x", "newdir_y"}
    # The modes touch and mkdir ask for: overlay on tmpfs has POSIX ACLs, so the VFS leaves the umask
    # to the upper filesystem's ACL code, after ovl_create_object.
    assert stat.S_ISREG(created["newfile_x"]) and stat.S_IMODE(created["newfile_x"]) == 0o666
    assert stat.S_ISDIR(created["newdir_y"]) and stat.S_IMODE(created["newdir_y"]) == 0o777
