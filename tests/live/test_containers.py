"""Programs in containers (issue 24): a service started in its own mount and PID namespace
(``unshare --mount --pid --fork --mount-proc``), its binary copied to a tmpfs only that namespace sees
(``/srv/app/svc``), probed from the host by ``--target-ns=PID`` (perf's option) and by the
``/proc/PID/root/...`` path. perf probe is the oracle of the definitions (it enters the namespace);
the recorded values are compared with what the service printed (``EXPECT`` lines of
fixtures/container_service.c), under the host's pid.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from probectl.debuginfo.elf import ElfFile
from tests.helpers import TRACEFS, build_fixture, fails, probectl, require_tool

G = f"pct{os.getpid()}"
INNER = "/srv/app/svc"
# The "container": a private tmpfs on /srv in a new mount namespace (unshare makes its mounts private,
# so the host never sees it), the binary copied there, then run as the namespace's first process.
TMPFS_SETUP = "mount -t tmpfs probectl-test /srv && mkdir -p /srv/app && cp {binary} /srv/app/svc"


class Service:
    """A fixture service in its own namespaces: ``pid`` is its pid on the host, ``proc`` the unshare."""

    def __init__(self, proc: subprocess.Popen, pid: int):
        self.proc, self.pid = proc, pid

    def serve(self, timeout: float = 20) -> str:
        """Let a ``--linger`` service handle its requests; what it printed (it runs on until :meth:`run`)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        text = ""
        while "DONE" not in text:  # (read from the descriptor: a buffered reader would hide what select sees)
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            got = os.read(self.proc.stdout.fileno(), 65536).decode() if ready else ""
            assert got, text  # (nothing in time, or the end: it failed)
            text += got
        return text

    def run(self, timeout: float = 20) -> str:
        """Let it handle its requests; what it printed."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        out, _err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, out
        return out


class Run:
    """A probectl command running in the background; ``out`` and ``err`` are its output once it has ended."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.out, self.err = proc, "", ""


@contextlib.contextmanager
def contained(binary: Path, *args: str, setup: str = TMPFS_SETUP, cgroup: Path | None = None) -> Iterator[Service]:
    """The service run as ``INNER --wait ARGS`` in new mount and PID namespaces (``setup``: what makes
    INNER; the tmpfs one copies ``binary`` there), in ``cgroup`` from its start when one is given."""
    require_tool("unshare", "util-linux")
    script = setup.format(binary=binary) + f" && exec {INNER} --wait " + " ".join(args)
    command = ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child", "sh", "-c", script]
    if cgroup is not None:  # (the shell enters the cgroup, then becomes the unshare: all it starts is in it)
        command = ["sh", "-c", f'echo $$ > {cgroup}/cgroup.procs && exec "$@"', "sh", *command]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        line = proc.stdout.readline() if ready else ""
        assert line == "READY pid=1\n", line
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1, children
        yield Service(proc, int(children[0]))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def expected(stdout: str) -> list[dict[str, int]]:
    return [{"pid": int(m.group(1)), "id": int(m.group(2)), "size": int(m.group(3))}
            for m in re.finditer(r"EXPECT func=handle pid=(\d+) id:s32=(-?\d+) size:s64=(-?\d+)", stdout)]


@pytest.fixture(scope="module")
def service_binary() -> Path:
    return build_fixture("container_service")


@pytest.fixture
def image(service_binary, tmp_path) -> Path:
    """An "image": a lower directory with the service at app/svc, for overlay mounts of containers."""
    lower = tmp_path / "image"
    (lower / "app").mkdir(parents=True)
    shutil.copy(service_binary, lower / "app" / "svc")
    return lower


def overlay_setup(image: Path, name: str) -> str:
    """Mount the container ``name``'s overlay of ``image`` on /srv (its own upper and work directories)."""
    upper, work = image.parent / name / "upper", image.parent / name / "work"
    upper.mkdir(parents=True)
    work.mkdir()
    return f"mount -t overlay probectl-test -o lowerdir={image},upperdir={upper},workdir={work} /srv"


@pytest.fixture
def clean_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{G}:*", check=False)


def test_the_binary_is_not_the_hosts(live_tracefs, service_binary):
    """The premise: the host has no /srv/app/svc (what the issue's first attempt ran into)."""
    with contained(service_binary) as svc:
        assert not Path(INNER).exists()
        assert Path(f"/proc/{svc.pid}/root{INNER}").is_file()
        svc.run()


def test_definitions_equal_perf_target_ns(live_tracefs, service_binary):
    perf = require_tool("perf", "linux-perf")
    with contained(service_binary) as svc:
        oracle = subprocess.run([perf, "probe", f"--target-ns={svc.pid}", "-x", INNER, "-D", "handle r->id r->size"],
                                capture_output=True, text=True)
        assert oracle.returncode == 0, oracle.stderr
        (want,) = [line for line in oracle.stdout.splitlines() if line.startswith("p:")]
        # perf enters the namespace and writes the path as the process names it; probectl writes it
        # through the process's root, which the kernel resolves from the host to the same file.
        want = want.replace(f" {INNER}:", f" /proc/{svc.pid}/root{INNER}:")
        by_option = probectl("add", "-D", f"--target-ns={svc.pid}", "-x", INNER, "handle r->id r->size").stdout
        by_path = probectl("add", "-D", "-x", f"/proc/{svc.pid}/root{INNER}", "handle r->id r->size").stdout
        perf_style = probectl(f"--target-ns={svc.pid}", "-x", INNER, "-D", "handle r->id r->size").stdout
        svc.run()
    assert by_option.splitlines() == by_path.splitlines() == perf_style.splitlines() == [want]


def test_funcs_vars_and_lines_read_the_containers_file(live_tracefs, service_binary):
    with contained(service_binary) as svc:
        funcs = probectl("funcs", "--target-ns", str(svc.pid), "-x", "svc", "hand*").stdout.split()
        by_path = probectl("funcs", "-x", f"/proc/{svc.pid}/root{INNER}", "hand*").stdout.split()
        variables = probectl("vars", "--target-ns", str(svc.pid), "-x", INNER, "handle", "--json").stdout
        lines = probectl("lines", "--target-ns", str(svc.pid), "-x", INNER, "handle").stdout
        svc.run()
    assert funcs == by_path == ["handle"]
    (place,) = json.loads(variables)["places"]
    assert [(v["type"], v["name"]) for v in place["variables"]] == [("struct request*", "r")]
    assert "handled += r->size;" in lines


@pytest.mark.parametrize("how", ["target-ns", "proc-root"])
def test_recorded_values_are_the_services_with_the_host_pid(clean_group, service_binary, tmp_path, how):
    path = tmp_path / "svc.dat"
    with contained(service_binary, "3") as svc:
        where = ["--target-ns", str(svc.pid), "-x", INNER] if how == "target-ns" else \
            ["-x", f"/proc/{svc.pid}/root{INNER}"]
        added = probectl("add", *where, f"{G}:handle=handle r->id r->size")
        assert f"/proc/{svc.pid}/root{INNER}" in added.stdout
        with recording(path, "-e", f"{G}:handle", "-p", str(svc.pid)):
            out = svc.run()
    want = expected(out)
    assert len(want) == 3 and {w["pid"] for w in want} == {1}, out
    events = script_json(path)
    assert [(e["fields"]["id"], e["fields"]["size"]) for e in events] == [(w["id"], w["size"]) for w in want]
    # the host's pid, and on request the service's own (read while it ran: 1, the namespace's first)
    assert {(e["pid"], e["tid"], e["nspid"]) for e in events} == {(svc.pid, svc.pid, 1)}
    lines = probectl("script", "-i", str(path), "-F", "comm,pid,tid,nspid,event").stdout.splitlines()
    assert [line.split() for line in lines] == [["svc", f"{svc.pid}/{svc.pid}", "(1)", f"{G}:handle:"]] * 3
    rows = probectl("script", "-i", str(path), "--format", "csv", "-F", "pid,nspid,trace").stdout.splitlines()
    assert rows[0] == "pid,nspid,__probe_ip,id,size"
    assert [row.split(",")[:2] + row.split(",")[3:] for row in rows[1:]] == \
        [[str(svc.pid), "1", str(w["id"]), str(w["size"])] for w in want]


@contextlib.contextmanager
def running(*args: str, events: Sequence[str] = ()) -> Iterator[Run]:
    """``probectl ARGS`` (trace, hist: probes added for the run, of group G or ``events``, GROUP/EVENT)
    running while the block runs, armed before it, then ended by SIGINT."""
    run = Run(subprocess.Popen([sys.executable, "-m", "probectl", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True))
    try:
        wait_armed(run.proc, events=events)
        yield run
        run.proc.send_signal(signal.SIGINT)
        run.out, err = run.proc.communicate(timeout=30)
        assert run.proc.returncode == 0, err
    finally:
        stop(run.proc)


def test_trace_and_hist_with_target_ns(live_tracefs, service_binary):
    """trace and hist add their probes through --target-ns for the run: the service's values, streamed
    and counted."""
    with contained(service_binary, "3") as svc:
        with running("trace", "--target-ns", str(svc.pid), "-x", INNER, f"{G}:handle=handle r->id r->size",
                     "-p", str(svc.pid), "--format", "json") as traced:
            want = expected(svc.run())
    events = [json.loads(line) for line in traced.out.splitlines() if line.startswith("{")]
    assert [(e["pid"], e["fields"]["id"], e["fields"]["size"]) for e in events] == \
        [(svc.pid, w["id"], w["size"]) for w in want]
    with contained(service_binary, "4") as svc:
        with running("hist", "--target-ns", str(svc.pid), "-x", INNER, f"{G}:handle=handle id=r->id", "--key", "id",
                     "-p", str(svc.pid), "--json") as counted:
            want = expected(svc.run())
    table = json.loads(counted.out)
    assert sorted((row["key"]["id"], row["count"]) for row in table["rows"]) == sorted((w["id"], 1) for w in want)
    with contained(service_binary, "5") as svc:
        with running("latency", "--target-ns", str(svc.pid), "-x", INNER, "handle", "-p", str(svc.pid), "--json",
                     events=["probe_svc/handle", "probe_svc/handle__return"]) as timed:
            want = expected(svc.run())
    assert json.loads(timed.out)["count"] == len(want) == 5


def test_a_killed_latency_run_leaves_what_cleanup_removes(live_tracefs, service_binary):
    """latency adds its start probe, then its end probe: each batch is noted for the run's clean-up, so
    that the next run (or cleanup) removes both when the run was killed (found when a killed run's
    start probe stayed and took the next run's event name)."""
    with contained(service_binary, "1") as svc:
        run = subprocess.Popen([sys.executable, "-m", "probectl", "latency", "--target-ns", str(svc.pid), "-x", INNER,
                                "handle", "-p", str(svc.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_armed(run, events=["probe_svc/handle", "probe_svc/handle__return"])
        finally:
            run.kill()
            run.wait()
        svc.run()
    out = probectl("cleanup").stdout
    assert "Removed probe probe_svc:handle\n" in out and "Removed probe probe_svc:handle__return\n" in out, out


def test_pid_scoping_takes_the_services_children_across_namespaces(clean_group, image, tmp_path):
    """-p with the host pid: the service and the child it forks (another pid inside) are recorded, and a
    second service running the same file (an overlay of one image) in another namespace is not."""
    path = tmp_path / "scoped.dat"
    with contained(image, "--fork", "2", setup=overlay_setup(image, "a")) as svc, \
            contained(image, "--fork", "2", setup=overlay_setup(image, "b")) as other:
        probectl("add", "--target-ns", str(svc.pid), "-x", INNER, f"{G}:handle=handle r->id r->size")
        with recording(path, "-e", f"{G}:handle", "-p", str(svc.pid)):
            out = svc.run()
            other.run()
    want = expected(out)
    inside = sorted({w["pid"] for w in want})
    assert len(inside) == 2 and inside[0] == 1, out
    events = script_json(path)
    assert [(e["fields"]["id"], e["fields"]["size"]) for e in events] == [(w["id"], w["size"]) for w in want]
    parent = [e["pid"] for e in events if e["fields"]["id"] < 1000]
    child = [e["pid"] for e in events if e["fields"]["id"] >= 1000]
    (child_pid,) = set(child)
    assert set(parent) == {svc.pid} and child_pid not in (svc.pid, *inside)  # (host pids, not the namespace's)


@pytest.mark.parametrize("where", ["container", "host"])
def test_debug_files_in_the_container_then_on_the_host(clean_group, service_binary, tmp_path, where):
    """A stripped service: its debug file by build-id in the container's /usr/lib/debug (a tmpfs there,
    which the host does not see), or else in the host's."""
    stripped, debug = tmp_path / "svc", tmp_path / "svc.debug"
    subprocess.run(["objcopy", "--only-keep-debug", str(service_binary), str(debug)], check=True)
    subprocess.run(["objcopy", "--strip-debug", str(service_binary), str(stripped)], check=True)
    build_id = ElfFile(stripped).build_id
    assert build_id and not ElfFile(stripped).has_dwarf
    by_id = f"/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug"
    setup = TMPFS_SETUP
    host_copy = Path(by_id)
    if where == "container":
        setup += f" && mount -t tmpfs probectl-test /usr/lib/debug && mkdir -p {Path(by_id).parent} && cp {debug} {by_id}"
    else:
        assert not host_copy.exists()
        host_copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(debug, host_copy)
    try:
        with contained(stripped, setup=setup) as svc:
            assert where == "host" or not host_copy.exists()
            variables = probectl("vars", "--target-ns", str(svc.pid), "-x", INNER, "handle", "--json").stdout
            probectl("add", "--target-ns", str(svc.pid), "-x", INNER, f"{G}:handle=handle r->id")
            (listed,) = json.loads(probectl("list", "--json", f"{G}:*").stdout)
            svc.run()
    finally:
        if where == "host":
            host_copy.unlink()
    (place,) = json.loads(variables)["places"]
    assert [(v["type"], v["name"]) for v in place["variables"]] == [("struct request*", "r")]
    # list names the place from the same debug file (perf -l's FUNC@SRC)
    assert re.fullmatch(rf"handle(:\d+|\+\d+)?@\S*container_service\.c in /proc/{svc.pid}/root{INNER}", listed["on"]), listed


def test_a_probe_on_an_image_file_fires_in_every_container_that_runs_it(clean_group, image, tmp_path):
    """Two containers over one image (two overlay mounts of one lower directory): the kernel puts the
    probe on the lower file, so it fires in both; add says so, and -p keeps to one."""
    everyone, one = tmp_path / "all.dat", tmp_path / "one.dat"
    with contained(image, setup=overlay_setup(image, "a")) as a, contained(image, setup=overlay_setup(image, "b")) as b:
        added = probectl("add", "--target-ns", str(a.pid), "-x", INNER, f"{G}:handle=handle r->id r->size")
        with recording(everyone, "-e", f"{G}:handle", "-a"):
            with recording(one, "-e", f"{G}:handle", "-p", str(a.pid)):
                out_a, out_b = a.run(), b.run()
    assert "is on an overlay filesystem" in added.stderr and "-p PID" in added.stderr
    want_a, want_b = expected(out_a), expected(out_b)
    assert len(want_a) == len(want_b) == 3
    both = script_json(everyone)
    assert sorted((e["pid"], e["fields"]["id"]) for e in both) == \
        sorted([(a.pid, w["id"]) for w in want_a] + [(b.pid, w["id"]) for w in want_b])
    assert [(e["pid"], e["fields"]["id"], e["fields"]["size"]) for e in script_json(one)] == \
        [(a.pid, w["id"], w["size"]) for w in want_a]


def test_a_file_on_no_overlay_gets_no_note(clean_group, service_binary):
    with contained(service_binary) as svc:
        added = probectl("add", "--target-ns", str(svc.pid), "-x", INNER, f"{G}:handle=handle")
        svc.run()
    assert "overlay" not in added.stderr


def test_a_containers_program_without_frame_pointers_has_its_stacks_unwound(live_tracefs, tmp_path):
    """record -g -p of a container's process whose program keeps no frame pointers: the program is read
    through the process's root (its own path names no file on the host), so its stacks are copied and
    unwound, as a host program's are."""
    binary = build_fixture("container_service", "-O2", ("-fomit-frame-pointer",))
    path = tmp_path / "fp.dat"
    with contained(binary, "--linger", "2") as svc:
        with recording(path, "-g", "-e", "syscalls:sys_enter_write", "-p", str(svc.pid)) as rec:
            svc.serve()
        stacks = [e["user_stack"] for e in script_json(path)]
        svc.run()
    assert f"/proc/{svc.pid}/root{INNER} keeps no frame pointers" in rec.err, rec.err
    assert stacks and all("main" in [f.split("+")[0] for f in stack] for stack in stacks), stacks


def test_a_library_name_is_the_library_the_process_maps(live_tracefs, service_binary):
    with contained(service_binary) as svc:
        maps = Path(f"/proc/{svc.pid}/maps").read_text()
        libc = next(line.split()[-1] for line in maps.splitlines() if re.search(r"/libc[.-]\S*so", line))
        line = probectl("add", "-D", "--target-ns", str(svc.pid), "-x", "libc", "malloc").stdout
        svc.run()
    assert line.split()[1].rsplit(":", 1)[0] == f"/proc/{svc.pid}/root{libc}"


def test_bad_processes_and_paths(live_tracefs, service_binary):
    dead = subprocess.Popen(["true"])
    dead.wait()
    err = fails("add", "--target-ns", str(dead.pid), "-x", INNER, f"{G}:h=handle")
    assert f"there is no process {dead.pid}" in err and "Hint:" in err
    err = fails("add", "-x", f"/proc/{dead.pid}/root{INNER}", f"{G}:h=handle")
    assert f"there is no process {dead.pid}" in err
    with contained(service_binary) as svc:
        err = fails("add", "--target-ns", str(svc.pid), "-x", "/srv/app/nothing", f"{G}:h=handle")
        assert "/srv/app/nothing (in process" in err and "no such file" in err
        err = fails("funcs", "--target-ns", str(svc.pid), "-x", "no-such-lib-xyz")
        assert f"cannot find a program or library called 'no-such-lib-xyz' in process {svc.pid}" in err
        err = fails("add", "--target-ns", str(svc.pid), f"{G}:h=handle")
        assert "--target-ns" in err and "-x" in err
        fails("add", "--target-ns", str(svc.pid), "-k", "/nonexistent", f"{G}:h=handle", status=2)
        svc.run()
    assert not [line for line in (TRACEFS / "uprobe_events").read_text().splitlines() if f"{G}/" in line]


def test_a_process_that_ends_before_the_probe_is_written(live_tracefs, service_binary):
    """Resolved through a process's root, written once the process has ended (it exited during add):
    the kernel finds no file; the error says why, and nothing is left."""
    from probectl.errors import TracefsError
    from probectl.events import EventDefinition
    from probectl.tracefs import Tracefs

    with contained(service_binary) as svc:
        line = probectl("add", "-D", "--target-ns", str(svc.pid), "-x", INNER, f"{G}:h=handle").stdout.strip()
        svc.run()
    with pytest.raises(TracefsError) as caught:
        Tracefs.open().add([EventDefinition.parse(line, True)])
    assert "Failed to find the given file" in caught.value.message
    assert f"/proc/{svc.pid}/root{INNER} exists" in caught.value.hint and "must still run" in caught.value.hint


# ---- scoped to a cgroup -----------------------------------------------------------------------------


@pytest.fixture
def cgroup() -> Iterator[Path]:
    """A new cgroup of the perf_event hierarchy, removed at the end (its processes are gone by then)."""
    from probectl.record.cgroups import perf_event_hierarchy

    mount, _root, _v1 = perf_event_hierarchy()
    path = mount / f"probectl-test-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        deadline = time.monotonic() + 10
        while True:
            try:
                path.rmdir()
                break
            except OSError:  # (busy until its last process is reaped)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


def test_a_cgroup_records_its_processes_also_those_that_enter_it_later(clean_group, image, tmp_path, cgroup):
    """--cgroup: a service started in the cgroup after the recording began, and the child it forks, are
    recorded from their first event; one moved into the cgroup once the recording runs (as a runtime's
    exec is) too; a service outside it, running the same file (overlays of one image), is not."""
    path = tmp_path / "cg.dat"
    with contained(image, "1", setup=overlay_setup(image, "late")) as late, \
            contained(image, "--fork", "2", setup=overlay_setup(image, "outside")) as outside:
        probectl("add", "--target-ns", str(late.pid), "-x", INNER, f"{G}:handle=handle r->id r->size")
        with recording(path, "-e", f"{G}:handle", "-e", "sched:sched_process_fork", "--cgroup", str(cgroup)):
            with contained(image, "--fork", "2", setup=overlay_setup(image, "inside"), cgroup=cgroup) as inside:
                (cgroup / "cgroup.procs").write_text(str(late.pid))
                out_inside, out_late, _ = inside.run(), late.run(), outside.run()
    events = script_json(path)
    got = [(e["pid"], e["fields"]["id"], e["fields"]["size"]) for e in events if e["event"].endswith(":handle")]
    want_inside, want_late = expected(out_inside), expected(out_late)
    assert len(want_inside) == 4 and len(want_late) == 1
    children = {pid for pid, ident, _ in got if ident >= 1000}
    assert len(children) == 1 and not children & {inside.pid, late.pid, outside.pid}
    (child,) = children
    assert sorted(got) == sorted([(inside.pid if w["id"] < 1000 else child, w["id"], w["size"]) for w in want_inside]
                                 + [(late.pid, w["id"], w["size"]) for w in want_late])
    # A tracepoint is scoped the same way: the service's fork of its child is there, the other's not.
    forks = [(e["fields"]["parent_pid"], e["fields"]["child_pid"]) for e in events if e["event"].endswith("_fork")]
    assert (inside.pid, child) in forks and not [f for f in forks if outside.pid in f]


@pytest.mark.parametrize("stacks", [False, True])
def test_the_cgroup_of_a_process(clean_group, image, tmp_path, cgroup, stacks):
    """--cgroup-of PID: the cgroup the process is in; the same cgroup by its name in the hierarchy. With
    -g the events have their user stacks; without, none."""
    from probectl.record.cgroups import cgroup_of, find_cgroup, perf_event_hierarchy

    mount, _root, _v1 = perf_event_hierarchy()
    path = tmp_path / "of.dat"
    with contained(image, "--linger", "2", setup=overlay_setup(image, "in"), cgroup=cgroup) as inside, \
            contained(image, "1", setup=overlay_setup(image, "out")) as outside:
        assert cgroup_of(inside.pid) == cgroup == find_cgroup("/" + str(cgroup.relative_to(mount)))
        probectl("add", "--target-ns", str(inside.pid), "-x", INNER, f"{G}:handle=handle r->id r->size")
        with recording(path, "-e", f"{G}:handle", "--cgroup-of", str(inside.pid), *(["-g"] if stacks else [])):
            want = expected(inside.serve())
            outside.run()
        assert [(e["pid"], e["comm"], e["fields"]["id"]) for e in script_json(path)] == \
            [(inside.pid, "svc", w["id"]) for w in want]
        if stacks:  # (named from the service's own file, through its root, while it runs)
            folded = probectl("script", "-i", str(path), "--format", "folded").stdout.splitlines()
            assert len(folded) == 1 and re.fullmatch(rf"svc;(\S+;)?main;serve;handle {len(want)}", folded[0]), folded
        else:  # (no probectl:user_callchain record: the samples carried no stack)
            assert "has no stacks to fold" in fails("script", "-i", str(path), "--format", "folded")
        inside.run()


def test_stat_counts_a_cgroups_processes(clean_group, image, cgroup):
    """stat --cgroup (perf stat -G): the hits of the cgroup's service, not those of the same file's
    service outside it (counted by intervals: the first interval's line says the counters run)."""
    with contained(image, "3", setup=overlay_setup(image, "in"), cgroup=cgroup) as inside, \
            contained(image, "2", setup=overlay_setup(image, "out")) as outside:
        probectl("add", "--target-ns", str(inside.pid), "-x", INNER, f"{G}:handle=handle")
        stat = subprocess.Popen([sys.executable, "-m", "probectl", "stat", "-e", f"{G}:handle", "--cgroup", str(cgroup),
                                 "--json", "-I", "100"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert stat.stdout is not None
            ready, _, _ = select.select([stat.stdout], [], [], 20)
            assert ready and stat.stdout.readline().startswith("{")
            want = expected(inside.run())
            outside.run()
            stat.send_signal(signal.SIGINT)
            out, err = stat.communicate(timeout=30)
            assert stat.returncode == 0, err
        finally:
            if stat.poll() is None:
                stat.kill()
                stat.wait()
    rows = [json.loads(line) for line in out.splitlines()]
    assert {row["event"] for row in rows} == {f"{G}:handle"}
    assert sum(int(float(row["counter-value"])) for row in rows) == len(want) == 3, rows


def test_a_containers_jit_map_is_read_from_its_own_tmp(clean_group, tmp_path, cgroup):
    """A JIT in a container writes /tmp/perf-<its pid>.map in its own /tmp (a tmpfs the host does not
    see) under its pid there (1): the recording reads that map while the process runs, and names the
    JIT frame from it."""
    jit = build_fixture("jit_target")
    assert not Path("/tmp/perf-1.map").exists(), "a host file of the container's name would hide the test"
    probectl("add", "-x", str(jit), f"{G}:probed=probed")
    path = tmp_path / "jit.dat"
    # (the program bound where the container's /tmp does not hide it: the same file, which the probe is on)
    script = f'echo $$ > {cgroup}/cgroup.procs && exec unshare --mount --pid --fork --mount-proc --kill-child ' \
             f'sh -c "mount -t tmpfs probectl-test /srv && touch /srv/jit && mount --bind {jit} /srv/jit && ' \
             f'mount -t tmpfs probectl-test /tmp && exec /srv/jit --linger 2"'
    proc = None
    try:
        with recording(path, "-g", "-e", f"{G}:probed", "--cgroup", str(cgroup)) as rec:
            proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert proc.stdout is not None
            out = ""
            while "DONE" not in out:
                ready, _, _ = select.select([proc.stdout], [], [], 20)
                got = os.read(proc.stdout.fileno(), 4096).decode() if ready else ""
                assert got, out  # (nothing in 20 s, or the end: it failed)
                out += got
            assert "map=/tmp/perf-1.map" in out, out
        # (the recording ended while the JIT runs on: its map was read from its /tmp)
        proc.communicate(timeout=20)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not Path("/tmp/perf-1.map").exists()
    assert re.search(r"/proc/\d+/root/tmp/perf-1\.map: 2 lines that are no 'START SIZE name' left out", rec.err), rec.err
    events = script_json(path)
    assert len(events) == 2
    for ev in events:
        assert ev["user_stack"][0] == "probed" and ev["user_stack"][2].startswith("jit_trampoline"), ev["user_stack"]


def test_a_cgroup_recording_keeps_its_filters(clean_group, image, tmp_path, cgroup):
    """--filter on an event taken from perf (the cgroup's route) is the kernel's filter of its perf event."""
    path = tmp_path / "filtered.dat"
    with contained(image, "4", setup=overlay_setup(image, "f"), cgroup=cgroup) as inside:
        probectl("add", "--target-ns", str(inside.pid), "-x", INNER, f"{G}:handle=handle id=r->id")
        with recording(path, "-e", f"{G}:handle", "--filter", "id > 41", "--cgroup", str(cgroup)):
            want = expected(inside.run())
    assert [e["fields"]["id"] for e in script_json(path)] == [w["id"] for w in want if w["id"] > 41] == [42, 43]


def test_bad_cgroups(live_tracefs, tmp_path):
    err = fails("record", "-e", "sched:sched_switch", "--cgroup", str(tmp_path), "-o", str(tmp_path / "x.dat"))
    assert f"{tmp_path} is not a cgroup of the perf_event hierarchy" in err and "Hint:" in err
    dead = subprocess.Popen(["true"])
    dead.wait()
    err = fails("record", "-e", "sched:sched_switch", "--cgroup-of", str(dead.pid), "-o", str(tmp_path / "x.dat"))
    assert f"there is no process {dead.pid}" in err
    err = fails("record", "-e", "sched:sched_switch", "--cgroup", "/", "-p", "1", "-o", str(tmp_path / "x.dat"),
                status=2)
    assert "-p and --cgroup" in err
    assert not (tmp_path / "x.dat").exists()


# ---- recording helpers ----------------------------------------------------------------------------


@contextlib.contextmanager
def recording(path: Path, *args: str) -> Iterator["Run"]:
    """``probectl record ARGS -o PATH`` running while the block runs (armed before it), then ended by
    SIGINT (what it said in ``.err``)."""
    run = Run(subprocess.Popen([sys.executable, "-m", "probectl", "record", *args, "-o", str(path)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        events = [b.replace(":", "/") for a, b in zip(args, args[1:]) if a == "-e"]
        wait_armed(run.proc, from_perf=any(a.startswith("--cgroup") for a in args), events=events)
        yield run
        run.proc.send_signal(signal.SIGINT)
        run.out, run.err = run.proc.communicate(timeout=30)
        assert run.proc.returncode == 0, run.err
    finally:
        stop(run.proc)


def stop(proc: subprocess.Popen) -> None:
    """End a probectl run the test left running (a failure): Ctrl-C, so that it removes what it added,
    then SIGKILL if it will not end."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_armed(rec: subprocess.Popen, from_perf: bool = False, timeout: float = 20.0,
               events: Sequence[str] = ()) -> None:
    """Until the recording's instance has tracing on (its ``events``, GROUP/EVENT, or else G's, are
    enabled before that). ``from_perf``: the events are perf's (--cgroup), enabled before tracing is
    turned on in the instance, whose clock is set to perf's (after tracing was turned off in the new
    instance) first."""
    inst = TRACEFS / "instances" / f"probectl-{rec.pid}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert rec.poll() is None, rec.communicate()
        with contextlib.suppress(OSError):
            enables = [inst / "events" / e / "enable" for e in events] or list((inst / "events" / G).glob("*/enable"))
            if from_perf:
                if "[perf]" in (inst / "trace_clock").read_text() and (inst / "tracing_on").read_text().strip() == "1":
                    return
            elif (inst / "tracing_on").read_text().strip() == "1" and enables and \
                    all(f.read_text().strip() == "1" for f in enables):
                return
        time.sleep(0.02)
    raise AssertionError("the recording did not start")


def script_json(path: Path, *args: str) -> list[dict]:
    return [json.loads(line) for line in probectl("script", "-i", str(path), "--format", "json", *args)
            .stdout.splitlines()]
