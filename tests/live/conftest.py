"""The live tests' base fixture, ``live_tracefs``: root and a mounted tracefs with uprobe_events (a skip
without them, a failure under PROBECTL_REQUIRE_ALL=1), and the dynamic events and instances checked
to be as the test found them. A test that takes it is a ``root`` test (tests/conftest.py marks it), so
``-m 'not root'`` runs without tracefs.

The tracefs is the machine's own: another run adding or removing events at the same moment shows as
a change, so such a failure is worth running again before believing it.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import TRACEFS, require_tracefs, tracefs_snapshot


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
