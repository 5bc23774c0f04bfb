"""Enum names in filters on probe events, from the debug information behind each event."""
from __future__ import annotations

from pathlib import Path

from probectl.record.enumnames import dwarf_enumerators, kernel_enumerators

from tests.helpers import build_fixture, missing


def test_dwarf_enumerators_of_a_fixture():
    table = dwarf_enumerators(str(build_fixture("dwarf_structs", "-O2")))
    assert table["MODE_WRITE"] == 2 and table["LEVEL_LOW"] == -1 and table["LEVEL_HIGH"] == 100


def test_kernel_enumerators_from_btf():
    if not Path("/sys/kernel/btf/vmlinux").exists():
        missing("the running kernel has no BTF")
    table = kernel_enumerators()
    assert table["TCP_ESTABLISHED"] == 1 and table["TCP_CLOSE"] == 7
