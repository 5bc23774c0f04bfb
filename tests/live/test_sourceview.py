"""list describing live events by source place (offline: tests/test_sourceview.py)."""
from __future__ import annotations

import json
import os

import pytest

from tests.helpers import build_fixture
from tests.test_sourceview import probectl


@pytest.mark.root
def test_list_shows_source_places(live_tracefs):
    binary = str(build_fixture("dwarf_structs", "-O2"))
    group = f"ptview{os.getpid()}"
    added = probectl("add", "-x", binary, f"{group}:a=paint:3 w->id", f"{group}:b=paint%return $retval",
                     f"{group}:c=use_globals")
    assert added.returncode == 0, added.stderr
    try:
        listed = {e["event"]: e["on"] for e in json.loads(probectl("list", "--json", f"{group}:*").stdout)}
        assert listed["a"] == f"paint:3@main/fixtures/dwarf_structs.c in {binary}" or \
            listed["a"].startswith("paint:3@") and listed["a"].endswith(f"dwarf_structs.c in {binary}")
        assert listed["b__return"].startswith("paint%return@") and listed["b__return"].endswith(f" in {binary}")
        assert listed["c"].startswith("use_globals@")
    finally:
        probectl("del", f"{group}:*")
