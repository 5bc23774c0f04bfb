"""Kprobe definitions live on an arm64 kernel: test_qemu_kprobes.py's probes and checks, on Debian's arm64
cloud kernel booted in ``qemu-system-aarch64 -M virt`` (TCG).

The same probes are resolved against the arm64 kernel's vmlinux (tools/kernel-testdata-arm64.sh) by the
oracle, ``perf probe -k VMLINUX -D`` (perf on x86-64 reads it), and by ``probectl add -D -k VMLINUX``;
the guest writes both sets (and one bad line), makes the same TCP traffic on loopback, and each set's
events are checked as on x86-64, by the test functions of test_qemu_kprobes.py run here against this
module's kernel and guest: sizes sent, ``$retval``, ESTABLISHED, ``sockaddr_in``, state changes, user
strings. An arm64 vmlinux is position independent: the addresses of its ftrace sites and its kprobe
blacklist are in its relocations, which probectl reads (without them every function looked notrace).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.guest.test_qemu_kprobes import (BAD, PROBES, WORKLOAD, definitions, source,  # noqa: F401
                                           test_connect_arguments_and_state_changes, test_definitions_are_accepted,
                                           test_rejected_definition_shows_the_kernel_error_log,
                                           test_tcp_sendmsg_return_value_is_the_size, test_tcp_sendmsg_sizes_and_state,
                                           test_user_strings_are_the_paths_opened, test_vfs_write_counts)
from tests.helpers import missing
from vmtest.busybox_guest import AARCH64_GUEST, GuestResult, run_in_guest

pytestmark = pytest.mark.qemu


@pytest.fixture(scope="module")
def kernel_dir(arm64_kernel_dir) -> Path:
    """The arm64 kernel, for test_qemu_kprobes' ``definitions`` fixture (its vmlinux) and the guest."""
    if not (arm64_kernel_dir / "vmlinux").is_file():
        missing(f"no arm64 vmlinux in {arm64_kernel_dir} (run tools/kernel-testdata-arm64.sh)")
    return arm64_kernel_dir


@pytest.fixture(scope="module")
def guest(kernel_dir, definitions) -> GuestResult:  # noqa: F811
    defs = [d for found in definitions.values() if isinstance(found, list) for d in found]
    return run_in_guest(kernel_dir, [*defs, BAD], WORKLOAD, timeout=300, machine=AARCH64_GUEST)


def test_definitions_are_placed_after_the_patchable_entry(definitions):  # noqa: F811
    """The functions of an arm64 kernel begin with ftrace's two NOPs, outside their DWARF range: the
    entry both tools write is FUNC+8 (a return probe stays at FUNC+0), and probectl's are perf's."""
    perf, mine = definitions["perf"], definitions["probectl"]
    if perf is None:
        missing("perf (apt linux-perf) is not installed")
    assert isinstance(mine, list), mine
    places = [line.split()[1] for line in mine]
    assert places == [line.split()[1] for line in perf]
    assert all(p.endswith("+8") for line, p in zip(mine, places) if line.startswith("p:"))
    assert [p for line, p in zip(mine, places) if line.startswith("r:")] == ["tcp_sendmsg+0"]
    assert len(places) == len(PROBES)
