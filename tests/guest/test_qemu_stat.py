"""stat on kprobes and hist --interval on the kernel path (hist triggers, their hist file read at every
interval), in one boot of Debian's cloud kernel running this checkout's probectl (vmtest/probectl_guest.py):
this machine's kernel has neither kprobes nor hist triggers."""
from __future__ import annotations

import csv
import io
import json

import pytest

from tests.guest.test_qemu_probectl import KPROBE_EVENTS, SEND  # (its clients of tcp_sendmsg)
from vmtest.probectl_guest import GuestRun, Step, ok, run_named_steps

pytestmark = pytest.mark.qemu

DD = "dd if=/dev/zero of=/dev/null bs=4321 count=3"  # three reads of 4321 bytes

STEPS = {
    # a kprobe of a definition added for the run: counted per task with inherit, removed after
    "stat_kprobe": f"probectl stat -x , tcp_sendmsg -- sh /guest/files/send.sh 100 777 100; cat {KPROBE_EVENTS}",
    # the kernel path of hist, at intervals: two runs of dd a second apart, counted every 0.4 s
    "hist_interval": ("probectl hist syscalls:sys_enter_read --key count --filter 'count == 4321' --json "
                      f"--interval 0.4 -- sh -c '{DD}; sleep 1; {DD}'"),
}


@pytest.fixture(scope="module")
def guest_run(probectl_kernel_dir) -> GuestRun:
    return run_named_steps(probectl_kernel_dir, STEPS, files={"send.sh": SEND.encode()})


@pytest.fixture(scope="module")
def guest(guest_run) -> dict[str, Step]:
    return dict(zip(STEPS, guest_run.steps))


def test_stat_counts_a_kprobe_and_removes_it(guest):
    step = ok(guest["stat_kprobe"])
    rows = [row for row in csv.reader(io.StringIO(step.stdout)) if len(row) > 2 and row[2].endswith(":tcp_sendmsg")]
    assert [int(row[0]) for row in rows] == [3], step.output
    assert "tcp_sendmsg" not in step.stdout.split(rows[0][2])[-1].split("\n", 1)[-1]  # (kprobe_events after: empty)


def test_hist_intervals_on_the_kernel_path(guest):
    step = ok(guest["hist_interval"])
    assert "hist trigger in the kernel" in step.stderr, step.output
    blocks = [json.loads(line) for line in step.stdout.splitlines() if line.startswith("{")]
    assert all(b["path"] == "kernel" for b in blocks)
    counted = [b["total"] for b in blocks if b["total"]]
    assert len(counted) >= 2 and sum(counted) == 6, step.output
