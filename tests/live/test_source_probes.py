"""Source-level definitions that fail add nothing to the live tracefs (offline: tests/test_source_probes.py)."""
from __future__ import annotations

import os

import pytest

from tests.test_source_probes import binary, probectl_process
from tests.test_source_probes import stripped_copy  # noqa: F401  (fixtures)


@pytest.mark.root
def test_errors_add_nothing(live_tracefs, stripped_copy):
    """Without -D the same failures leave uprobe_events as it was (live_tracefs also checks)."""
    before = (live_tracefs / "uprobe_events").read_text()
    group = f"pterr{os.getpid()}"
    path = binary("dwarf_structs", "-O2")
    # one good and one bad definition in one command: neither is added
    out = probectl_process("add", "-x", path, f"{group}:ok=paint w->id", f"{group}:bad=paint w->nmae")
    assert out.returncode == 1 and "did you mean 'name'?" in out.stderr
    for args in (["-x", path, f"{group}:a=paint:25 area"],
                 ["-x", path, f"{group}:b=nosuchfunc x"],
                 ["-x", stripped_copy, f"{group}:c=paint w"]):
        out = probectl_process("add", *args)
        assert out.returncode == 1 and out.stderr.startswith("Error: ") and "Traceback" not in out.stderr
    assert (live_tracefs / "uprobe_events").read_text() == before
