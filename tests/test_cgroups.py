"""Which cgroup --cgroup and --cgroup-of name (record/cgroups.py), offline. The live tests
(tests/live/test_containers.py, test_podman.py) record through this machine's hierarchy, cgroup2; a
cgroup v1 hierarchy with the perf_event controller cannot be mounted here beside it (the controller
is the unified hierarchy's), so its case is given as mount tables and /proc/PID/cgroup files: a mock
of what cannot exist on this machine."""
from __future__ import annotations

from pathlib import Path

import pytest

from probectl.record import cgroups
from probectl.record.cgroups import CgroupError, cgroup_of, find_cgroup
from probectl.target.process import Mount, mount_table

V1 = [Mount("/", "/sys/fs/cgroup/memory", "cgroup", ("rw", "memory")),
      Mount("/", "/sys/fs/cgroup/perf_event", "cgroup", ("rw", "perf_event")),
      Mount("/", "/sys/fs/cgroup/unified", "cgroup2", ("rw",))]


def test_the_mount_table_is_read_with_its_escapes(tmp_path):
    table = tmp_path / "mountinfo"
    table.write_text("36 35 98:0 / /mnt/a\\040b rw,noatime - overlay overlay rw,lowerdir=/x\n"
                     "37 35 0:41 /sub /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate\n"
                     "junk line\n")
    assert mount_table(table) == [Mount("/", "/mnt/a b", "overlay", ("rw", "lowerdir=/x")),
                                  Mount("/sub", "/sys/fs/cgroup/unified", "cgroup2", ("rw", "nsdelegate"))]


def fake_process(tmp_path: Path, monkeypatch, mounts: list[Mount], pid: int, cgroup_file: str, cgroup: str) -> Path:
    """A /proc with process ``pid``'s cgroup file, the hierarchy ``mounts`` give, and the directory of
    ``cgroup`` (under ``tmp_path``, where the hierarchy is taken to be mounted)."""
    monkeypatch.setattr("probectl.target.process.mount_table", lambda: mounts)
    monkeypatch.setattr(cgroups, "_in_hierarchy", lambda mount, root, name: tmp_path / name.lstrip("/"))
    proc = tmp_path / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(cgroup_file)
    (tmp_path / cgroup.lstrip("/")).mkdir(parents=True)
    return proc


def test_a_v1_perf_event_hierarchy_is_the_one_and_its_line_names_the_cgroup(tmp_path, monkeypatch):
    proc = fake_process(tmp_path, monkeypatch, V1, 42,
                        "4:memory:/machine/x\n3:perf_event:/machine/libpod-abc\n0::/other\n", "/machine/libpod-abc")
    assert cgroups.perf_event_hierarchy() == (Path("/sys/fs/cgroup/perf_event"), "/", True)
    assert cgroup_of(42, proc) == tmp_path / "machine" / "libpod-abc"
    with pytest.raises(CgroupError, match="there is no process 43"):
        cgroup_of(43, proc)


def test_cgroup2_names_the_unified_line(tmp_path, monkeypatch):
    proc = fake_process(tmp_path, monkeypatch, V1[2:], 7, "9:name=systemd:/\n4:memory:/m\n0::/system.slice/x.scope\n",
                        "/system.slice/x.scope")
    assert cgroups.perf_event_hierarchy() == (Path("/sys/fs/cgroup/unified"), "/", False)
    assert cgroup_of(7, proc) == tmp_path / "system.slice" / "x.scope"


def test_a_name_inside_a_cgroup_namespace_root(monkeypatch):
    """A hierarchy mounted from a cgroup below the top (a cgroup namespace): /proc/PID/cgroup names
    cgroups from the top, the mount shows them below its root."""
    assert cgroups._in_hierarchy(Path("/sys/fs/cgroup"), "/machine", "/machine/app") == Path("/sys/fs/cgroup/app")
    assert cgroups._in_hierarchy(Path("/sys/fs/cgroup"), "/", "/machine/app") == Path("/sys/fs/cgroup/machine/app")


def test_what_is_no_cgroup(tmp_path):
    with pytest.raises(CgroupError, match="is not a cgroup of the perf_event hierarchy") as caught:
        find_cgroup(str(tmp_path))
    assert "--cgroup-of PID" in caught.value.hint
    with pytest.raises(CgroupError, match="empty"):
        find_cgroup(" ")
