"""The guest tests' base fixtures: the kernel test data a guest boots (Debian's cloud kernel, which
has kprobes, hist triggers and synthetic events), with what this machine needs to boot it checked.

Each module boots its own guest once, in a module fixture over these, with the steps it asks about
(one boot takes minutes under TCG): ``kernel_dir`` for a busybox guest that writes definitions and
triggers itself (vmtest.busybox_guest), ``probectl_kernel_dir`` for a guest that runs this checkout's
probectl (vmtest.probectl_guest). Without the kernel data, qemu or busybox the modules skip; under
PROBECTL_REQUIRE_ALL=1 (CI) the kernel data is fetched and anything else missing fails.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

import pytest

from tests.helpers import missing
# the host's tracefs, as the live tests have it: a guest test takes event formats from it
from tests.live.conftest import live_tracefs  # noqa: F401
from vmtest.busybox_guest import (AARCH64_GUEST, fetch_arm64_kernel_dir, fetch_kernel_dir, find_arm64_kernel_dir,
                                  find_kernel_dir, missing_requirements)
from vmtest.probectl_guest import fetch_arm64_python, find_arm64_python, missing_guest_requirements


def _bootable_kernel_dir(lacking: Callable[[Optional[Path]], list[str]],
                         find: Callable[[], Optional[Path]] = find_kernel_dir,
                         fetch: Callable[[], Path] = fetch_kernel_dir) -> Path:
    directory = find()
    if directory is None and os.environ.get("PROBECTL_REQUIRE_ALL") == "1":
        directory = fetch()
    reasons = lacking(directory)
    if reasons:
        missing("; ".join(reasons))
    return directory


@pytest.fixture(scope="session")
def kernel_dir() -> Path:
    """The kernel test data for a busybox guest (vmtest.busybox_guest.run_in_guest)."""
    return _bootable_kernel_dir(missing_requirements)


@pytest.fixture(scope="session")
def probectl_kernel_dir() -> Path:
    """The kernel test data for a guest that runs probectl (vmtest.probectl_guest.run_probectl_in_guest):
    a busybox guest's needs, and mkfs.ext4 for its images and the vmlinux the host resolves against."""
    return _bootable_kernel_dir(missing_guest_requirements)


@pytest.fixture(scope="session")
def arm64_kernel_dir() -> Path:
    """Debian's arm64 cloud kernel and an arm64 busybox (tools/kernel-testdata-arm64.sh), for a busybox
    guest in qemu-system-aarch64 (run_in_guest with machine=AARCH64_GUEST)."""
    return _bootable_kernel_dir(lambda d: missing_requirements(d, AARCH64_GUEST), find_arm64_kernel_dir,
                                fetch_arm64_kernel_dir)


@pytest.fixture(scope="session")
def arm64_probectl_kernel_dir() -> Path:
    """The arm64 kernel for a guest that runs probectl (run_probectl_in_guest with machine=AARCH64_GUEST):
    an arm64 busybox guest's needs, Debian's arm64 Python (tools/python-arm64.sh, fetched under
    PROBECTL_REQUIRE_ALL=1), the cross compiler of the native extension, mkfs.ext4 and the vmlinux."""
    if find_arm64_python() is None and os.environ.get("PROBECTL_REQUIRE_ALL") == "1":
        fetch_arm64_python()
    return _bootable_kernel_dir(lambda d: missing_guest_requirements(d, AARCH64_GUEST), find_arm64_kernel_dir,
                                fetch_arm64_kernel_dir)
