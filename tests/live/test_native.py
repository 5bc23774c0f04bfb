"""The native per-CPU recorder on a live tracefs instance: event counts, loss accounting, a prompt stop
(offline: tests/test_native.py)."""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from probectl.formats import EventFormat
from probectl.ringbuf import EventReader, PageLayout, Recorder


@contextlib.contextmanager
def tracefs_instance(root: Path, events: list[str], *, buffer_kb: int | None = None):
    """A private instance ``probectl-test-<pid>`` with ``events`` enabled; always removed."""
    path = root / "instances" / f"probectl-test-{os.getpid()}"
    path.mkdir()
    try:
        if buffer_kb is not None:
            (path / "buffer_size_kb").write_text(str(buffer_kb))
        for event in events:
            (path / "events" / event / "enable").write_text("1")
        yield path
    finally:
        for event in events:
            with contextlib.suppress(OSError):
                (path / "events" / event / "enable").write_text("0")
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)
        else:
            path.rmdir()


def getpid_child(n: int, cpu: int | None = None, *, only_in: Path | None = None) -> int:
    """Fork a child that calls getpid() ``n`` times (on ``cpu``) and exits; return its pid.

    With ``only_in``, the child waits until that instance's ``set_event_pid`` names it and its buffer
    is emptied, so the instance holds the child's events and no other process's (a getpid of any
    other process on the same CPU would otherwise be recorded or overwritten with them)."""
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_w)
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})
            os.read(ready_r, 1)
            for _ in range(n):
                os.getpid()
        finally:
            os._exit(0)
    os.close(ready_r)
    try:
        if only_in is not None:
            (only_in / "set_event_pid").write_text(str(pid))
            # Emptied, with its overrun counts, of what other processes wrote before the scope.
            (only_in / "trace").write_text("")
    finally:
        os.write(ready_w, b"x")
        os.close(ready_w)
        os.waitpid(pid, 0)
    return pid


def read_streams(files: dict[int, Path]) -> list[tuple[int, bytes, int, int]]:
    out = []
    for cpu, path in sorted(files.items()):
        data = path.read_bytes()
        out.append((cpu, data, 0, len(data)))
    return out


def instance_format(inst: Path, event: str) -> EventFormat:
    system, name = event.split("/")
    return EventFormat.parse((inst / "events" / system / name / "format").read_text(), system)


@pytest.mark.root
@pytest.mark.parametrize("use_read", [False, True], ids=["splice", "read"])
def test_recorder_records_every_event(live_tracefs, tmp_path, use_read):
    n = 20000 if not use_read else 3000
    cpus = list(range(os.cpu_count() or 1))
    with tracefs_instance(live_tracefs, ["syscalls/sys_enter_getpid"]) as inst:
        layout = PageLayout.from_header_page((inst / "events/header_page").read_text())
        fmt = instance_format(inst, "syscalls/sys_enter_getpid")
        with Recorder(inst, cpus, tmp_path, layout.page_size, use_read=use_read, poll_ms=50) as rec:
            rec.start()
            assert rec.running
            child = getpid_child(n)
            (inst / "tracing_on").write_text("0")
            stats = rec.stop()
            assert not rec.running
        streams = read_streams(rec.files)
    for s in stats:
        assert s.errno == 0 and s.bytes == s.pages * layout.page_size
        assert rec.files[s.cpu].stat().st_size == s.bytes
    if not use_read:
        assert sum(s.splice_bytes for s in stats) > 0  # whole pages went by splice
    assert sum(s.read_bytes for s in stats) > 0  # the last partial page needed read()
    reader = EventReader(streams, [fmt], layout)
    mine = [e for e in reader.events() if e.pid == child]
    assert len(mine) == n
    assert {e.fields["__syscall_nr"] for e in mine} == {39}  # x86-64 getpid
    assert all(a.ts <= b.ts for a, b in zip(mine, mine[1:]))
    assert sum(s["missed_events"] + s["missed_unknown"] for s in reader.stats()) == 0


@pytest.mark.root
def test_recorder_stops_promptly_without_events(live_tracefs, tmp_path):
    with tracefs_instance(live_tracefs, []) as inst:
        with Recorder(inst, [0], tmp_path, 4096, poll_ms=5000) as rec:
            rec.start()
            time.sleep(0.05)
            started = time.monotonic()
            stats = rec.stop()
            assert time.monotonic() - started < 2  # the stop eventfd wakes the poll at once
    assert stats[0].bytes == 0 and rec.files[0].stat().st_size == 0


@pytest.mark.root
def test_lost_events_equal_the_kernel_overrun(live_tracefs, tmp_path):
    """With a 16 KiB buffer in overwrite mode, the lost count stored in the pages is the kernel's
    per-CPU overrun figure, and lost + recorded = generated.

    The overrun counts every event lost on the CPU, whoever made it: the instance is scoped to the
    child before it starts, or another process's getpid on CPU 0 is one event too many (6.18)."""
    n = 20000
    event = "syscalls/sys_exit_getpid"  # 24-byte records leave room for the stored count
    with tracefs_instance(live_tracefs, [event], buffer_kb=16) as inst:
        layout = PageLayout.from_header_page((inst / "events/header_page").read_text())
        fmt = instance_format(inst, event)
        child = getpid_child(n, cpu=0, only_in=inst)
        (inst / "tracing_on").write_text("0")
        overrun = {}
        for cpu in range(os.cpu_count() or 1):
            stats = (inst / "per_cpu" / f"cpu{cpu}" / "stats").read_text()
            overrun[cpu] = int(stats.split("overrun:")[1].split()[0])
        with Recorder(inst, sorted(overrun), tmp_path, layout.page_size) as rec:
            rec.start()
            rec.stop()
        streams = read_streams(rec.files)
    assert overrun[0] > 0
    reader = EventReader(streams, [fmt], layout)
    pids = [e.pid for e in reader.events()]
    assert set(pids) <= {child}
    recorded = len(pids)
    stats = {s["cpu"]: s for s in reader.stats()}
    for cpu, count in overrun.items():
        assert stats[cpu]["missed_unknown"] == 0
        assert stats[cpu]["missed_events"] == count
    assert recorded + overrun[0] == n
