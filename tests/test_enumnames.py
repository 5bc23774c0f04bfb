"""Enum names in filters on probe events, from the debug information behind each event."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from probectl.record.enumnames import dwarf_enumerators, kernel_enumerators
from probectl.record.selection import EventRequest, select_events
from probectl.tracefs import Tracefs

from tests.helpers import build_fixture, missing


def test_dwarf_enumerators_of_a_fixture():
    table = dwarf_enumerators(str(build_fixture("dwarf_structs", "-O2")))
    assert table["MODE_WRITE"] == 2 and table["LEVEL_LOW"] == -1 and table["LEVEL_HIGH"] == 100


def test_kernel_enumerators_from_btf():
    if not Path("/sys/kernel/btf/vmlinux").exists():
        missing("the running kernel has no BTF")
    table = kernel_enumerators()
    assert table["TCP_ESTABLISHED"] == 1 and table["TCP_CLOSE"] == 7


@pytest.mark.root
def test_filter_on_a_uprobe_uses_the_binarys_enum_names(live_tracefs):
    binary = str(build_fixture("dwarf_structs", "-O2"))
    group = f"ptenum{os.getpid()}"
    add = subprocess.run([sys.executable, "-m", "probectl", "add", "-x", binary, f"{group}:ev=paint w->mode"],
                         capture_output=True, text=True)
    assert add.returncode == 0, add.stderr
    try:
        (selected,) = select_events(Tracefs.open(), [EventRequest(f"{group}:ev", "mode == MODE_WRITE || mode < 0")])
        assert selected.filter.text == "mode == 2 || mode < 0"
    finally:
        subprocess.run([sys.executable, "-m", "probectl", "del", f"{group}:*"], capture_output=True)
