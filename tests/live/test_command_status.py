"""A command run with ``-- COMMAND`` gives probectl its exit status, as perf record and perf stat end
with their command's: the code it exited with, 128 + N when signal N ended it (as a shell says it),
and 0 when probectl ended the run itself (--duration), whatever the command would have done."""
from __future__ import annotations

import pytest

from tests.helpers import probectl


def _commands(tmp_path) -> dict[str, list[str]]:
    return {
        "record": ["record", "-e", "sched:sched_process_exit", "-o", str(tmp_path / "status.dat")],
        "trace": ["trace", "-e", "sched:sched_process_exit"],
        "stat": ["stat", "-e", "raw_syscalls:sys_enter"],
        "hist": ["hist", "raw_syscalls:sys_enter", "--key", "id"],
        "latency": ["latency", "--start", "raw_syscalls:sys_enter", "--end", "raw_syscalls:sys_exit"],
    }


@pytest.mark.root
@pytest.mark.parametrize("command", ["record", "trace", "stat", "hist", "latency"])
@pytest.mark.parametrize("workload, status", [
    ("exit 0", 0),
    ("exit 7", 7),
    ("kill -USR1 $$", 128 + 10),
])
def test_probectl_ends_with_its_commands_status(live_tracefs, tmp_path, command, workload, status):
    out = probectl(*_commands(tmp_path)[command], "--", "sh", "-c", workload, check=False, timeout=60)
    assert out.returncode == status, out.stderr
    assert "Error" not in out.stderr, out.stderr


@pytest.mark.root
@pytest.mark.parametrize("command", ["record", "stat"])
def test_a_run_probectl_ended_is_a_success(live_tracefs, tmp_path, command):
    """--duration ends the run and probectl stops the command: that is no failure of the command's."""
    out = probectl(*_commands(tmp_path)[command], "--duration", "0.3", "--", "sh", "-c", "sleep 30; exit 7",
                   check=False, timeout=60)
    assert out.returncode == 0, out.stderr
