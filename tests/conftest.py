"""The suite's pytest hooks and the fixtures every folder may use (the oracles' programs), built from
tests/helpers.py, where the shared functions are.

Each folder adds its base fixture in its own conftest.py: live/ the tracefs checked around each test
(live_tracefs), guest/ the kernel a guest boots (kernel_dir, probectl_kernel_dir), fuzz/ the pass's
budget and seed (fuzz_seconds, fuzz_seed).
"""
from __future__ import annotations

import subprocess

import pytest

from tests.helpers import missing, require_tool


def pytest_collection_modifyitems(config, items):
    """Every test that uses ``live_tracefs`` (directly or through another fixture) is a ``root`` test,
    marked or not, so that ``-m 'not root'`` is a run without tracefs."""
    for item in items:
        if "live_tracefs" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.root)


@pytest.fixture(scope="session")
def perf_bin():
    path = require_tool("perf", "apt linux-perf")
    if subprocess.run([path, "probe", "-h"], capture_output=True).returncode not in (0, 129):
        missing("perf (apt linux-perf) is not installed")
    return path


@pytest.fixture(scope="session")
def trace_cmd_bin():
    return require_tool("trace-cmd", "apt trace-cmd")


@pytest.fixture(scope="session")
def chromium_bin():
    """Headless Chromium (apt chromium), which opens the pictures as a user's browser does."""
    from tests.chromium import chromium_binary

    path = chromium_binary()
    if not path:
        missing("chromium (apt chromium) is not installed")
    return path
