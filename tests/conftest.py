"""The suite's fixtures and pytest hooks, built from tests/helpers.py (where the shared functions are).

Each folder adds its own base fixture in its conftest.py: live/ the tracefs checked around each test,
guest/ the kernel a guest boots, fuzz/ the pass's seed and budget.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import TRACEFS, build_fixture, missing, require_tool, require_tracefs, tracefs_snapshot


def pytest_collection_modifyitems(config, items):
    """Every test that uses ``live_tracefs`` (directly or through another fixture) is a ``root`` test,
    marked or not, so that ``-m 'not root'`` is a run without tracefs."""
    for item in items:
        if "live_tracefs" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.root)


@pytest.fixture(scope="session")
def fixture_binary():
    """``fixture_binary(name, opt='-O0', ...)`` builds a fixture program and returns its path."""
    return build_fixture


@pytest.fixture
def live_tracefs():
    """Root + a mounted, writable tracefs with uprobe_events; checks that the test leaves it as it found it."""
    require_tracefs()
    before = tracefs_snapshot()
    yield TRACEFS
    after = tracefs_snapshot()
    assert after == before, "the test left tracefs changed"


@pytest.fixture
def syscall_maker():
    """A process of the test's own that makes a syscall every millisecond for a minute (killed at the
    end): a system-wide count or recording finds it among the others, where a quiet machine may make
    no syscall in a second."""
    busy = subprocess.Popen([sys.executable, "-c", "import os, time\nend = time.monotonic() + 60\n"
                             "while time.monotonic() < end:\n    os.getppid()\n    time.sleep(0.001)\n"])
    try:
        yield busy
    finally:
        busy.kill()
        busy.wait()


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
