"""Programs in containers of a real runtime (issue 24): Debian's podman with runc (crun refuses this
machine's hybrid cgroups), without a registry: an image imported from a root filesystem the test
builds (the service of fixtures/container_service.c, the host's libc and dynamic loader copied in), its
own storage (``--root``, ``--runroot`` in the test's directory) and configuration (``CONTAINERS_CONF``:
runc, cgroupfs, ``default_ulimits = []``), no network. The container's host pid comes from
``podman inspect --format '{{.State.Pid}}'``, as a user gets it.

Checked against the runtime as against the plain namespaces of test_containers.py: perf probe
--target-ns as the oracle of the definition, the container's libc for ``-x libc``, the overlay note,
and a recording scoped to the container's cgroup (``--cgroup-of``) that has the service's values, the
values of a ``podman exec`` started in the container after the recording began, and nothing of a second
container of the same image.
"""
from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers import build_fixture, probectl, require_tool
from tests.live.test_containers import expected, recording, script_json

G = f"ppod{os.getpid()}"
IMAGE = f"probectl-test-svc-{os.getpid()}"
CONF = """[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
"""


class Podman:
    """podman on the test's own storage and configuration."""

    def __init__(self, base: Path):
        self.exe = require_tool("podman", "podman")
        require_tool("runc", "runc")
        self.base = base
        (base / "containers.conf").write_text(CONF)
        self.env = {**os.environ, "CONTAINERS_CONF": str(base / "containers.conf")}

    def argv(self, *args: str) -> list[str]:
        return [self.exe, "--root", str(self.base / "storage"), "--runroot", str(self.base / "run"), *args]

    def __call__(self, *args: str, **kw) -> str:
        out = subprocess.run(self.argv(*args), capture_output=True, text=True, env=self.env, timeout=120, **kw)
        assert out.returncode == 0, (args, out.stderr)
        return out.stdout

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.argv(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=self.env)


@pytest.fixture(scope="module")
def podman(tmp_path_factory) -> Iterator[Podman]:
    """The image: the service at /srv/app/svc, with the libc and loader it needs (copies: other files
    than the host's)."""
    base = tmp_path_factory.mktemp("podman")
    pod = Podman(base)
    rootfs = base / "rootfs"
    (rootfs / "srv" / "app").mkdir(parents=True)
    shutil.copy(build_fixture("container_service"), rootfs / "srv" / "app" / "svc")
    for lib in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"):
        (rootfs / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.realpath(lib), rootfs / lib.lstrip("/"))
    subprocess.run(["tar", "-C", str(rootfs), "-cf", str(base / "rootfs.tar"), "."], check=True)
    pod("import", str(base / "rootfs.tar"), IMAGE)
    try:
        yield pod
    finally:
        # (the storage's overlay mounts, containers and image go with it: the test's own storage only)
        subprocess.run(pod.argv("system", "reset", "-f"), capture_output=True, env=pod.env, timeout=120)


class Container:
    def __init__(self, proc: subprocess.Popen, pid: int, name: str):
        self.proc, self.pid, self.name = proc, pid, name

    def run(self, timeout: float = 30) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        out, _ = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, out
        return out


@contextlib.contextmanager
def container(pod: Podman, name: str, *args: str) -> Iterator[Container]:
    """The service in a container of the image (``podman run -i``), waiting for a line on its stdin."""
    name = f"probectl-test-{os.getpid()}-{name}"
    proc = pod.popen("run", "-i", "--rm", "--network", "none", "--name", name, IMAGE, "/srv/app/svc", "--wait",
                     *args)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        assert line == "READY pid=1\n", line
        pid = int(pod("inspect", "--format", "{{.State.Pid}}", name).strip())
        yield Container(proc, pid, name)
    finally:
        if proc.poll() is None:
            subprocess.run(pod.argv("kill", name), capture_output=True, env=pod.env, timeout=60)
            proc.wait(timeout=60)


@pytest.fixture
def clean_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{G}:*", check=False)


def test_the_definition_equals_perf_target_ns_and_libc_is_the_containers(live_tracefs, podman):
    perf = require_tool("perf", "linux-perf")
    with container(podman, "def") as box:
        oracle = subprocess.run([perf, "probe", f"--target-ns={box.pid}", "-x", "/srv/app/svc", "-D",
                                 "handle r->id r->size"], capture_output=True, text=True)
        ours = probectl("add", "-D", f"--target-ns={box.pid}", "-x", "/srv/app/svc", "handle r->id r->size").stdout
        libc = probectl("add", "-D", f"--target-ns={box.pid}", "-x", "libc", "malloc").stdout
        box.run()
    assert oracle.returncode == 0, oracle.stderr
    (want,) = [line for line in oracle.stdout.splitlines() if line.startswith("p:")]
    assert ours.splitlines() == [want.replace(" /srv/app/svc:", f" /proc/{box.pid}/root/srv/app/svc:")]
    assert libc.split()[1].rsplit(":", 1)[0] == f"/proc/{box.pid}/root/lib/x86_64-linux-gnu/libc.so.6"


def test_a_recording_of_the_containers_cgroup(clean_group, podman, tmp_path):
    """--cgroup-of the container's pid: its service's values under its host pid, and those of a
    ``podman exec`` started in it after the recording began (the runtime moves that process into the
    container's cgroup after forking it); a second container of the same image, whose probe fires too
    (the image's layer is one file), is not recorded."""
    path = tmp_path / "pod.dat"
    with container(podman, "a") as box, container(podman, "b") as other:
        added = probectl("add", "--target-ns", str(box.pid), "-x", "/srv/app/svc",
                         f"{G}:handle=handle r->id r->size")
        assert "is on an overlay filesystem" in added.stderr
        with recording(path, "-e", f"{G}:handle", "--cgroup-of", str(box.pid)):
            exec_out = podman("exec", box.name, "/srv/app/svc", "2")
            out, _ = box.run(), other.run()
    events = script_json(path)
    want, want_exec = expected(out), expected(exec_out)
    assert len(want) == 3 and len(want_exec) == 2
    from_box = [(e["fields"]["id"], e["fields"]["size"]) for e in events if e["pid"] == box.pid]
    assert from_box == [(w["id"], w["size"]) for w in want]
    exec_pids = {e["pid"] for e in events if e["pid"] != box.pid}
    assert len(exec_pids) == 1 and other.pid not in exec_pids
    assert [(e["fields"]["id"], e["fields"]["size"]) for e in events if e["pid"] in exec_pids] == \
        [(w["id"], w["size"]) for w in want_exec]
