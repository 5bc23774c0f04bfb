"""Enum names in the filter of a live uprobe, from the binary behind it (offline: tests/test_enumnames.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from probectl.record.selection import EventRequest, expand_event_requests
from probectl.tracefs import Tracefs

from tests.helpers import build_fixture


@pytest.mark.root
def test_filter_on_a_uprobe_uses_the_binarys_enum_names(live_tracefs):
    binary = str(build_fixture("dwarf_structs", "-O2"))
    group = f"ptenum{os.getpid()}"
    add = subprocess.run([sys.executable, "-m", "probectl", "add", "-x", binary, f"{group}:ev=paint w->mode"],
                         capture_output=True, text=True)
    assert add.returncode == 0, add.stderr
    try:
        (selected,) = expand_event_requests(Tracefs.open(), [EventRequest(f"{group}:ev", "mode == MODE_WRITE || mode < 0")])
        assert selected.filter.text == "mode == 2 || mode < 0"
    finally:
        subprocess.run([sys.executable, "-m", "probectl", "del", f"{group}:*"], capture_output=True)
