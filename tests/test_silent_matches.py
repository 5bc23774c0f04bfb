"""Silent matches (issue "bad input never hurts", class 9): a definition or option that matches nothing
it names must say so, not quietly do something else."""
from __future__ import annotations

import subprocess
import sys

from conftest import build_fixture


def probectl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "probectl", *args], capture_output=True, text=True, timeout=120)


def test_func_at_a_source_file_that_does_not_define_it_is_not_found():
    """perf: 'Probe point not found'. probectl used to fall back to the symbol and probe every
    function of that name, whatever file it was in."""
    app = build_fixture("dwarf_structs")
    out = probectl("add", "-D", "-x", str(app), "paint@nosuch.c w->id")
    assert out.returncode == 1 and out.stdout == ""
    assert "Probe point 'paint@nosuch.c' not found." in out.stderr
    assert "not in a file ending with 'nosuch.c'" in out.stderr
    ok = probectl("add", "-D", "-x", str(app), "paint@dwarf_structs.c w->id")
    assert ok.returncode == 0 and ok.stdout.startswith("p:probe_dwarf_structs/paint ")


def test_an_alias_keeps_its_source_filter():
    """malloc is __libc_malloc's alias (found through the symbol): @SRC still applies to it."""
    from conftest import _missing
    from pathlib import Path

    if not list(Path("/usr/lib/debug/.build-id").glob("*/*.debug")):
        _missing("libc6-dbg is not installed")
    assert probectl("add", "-D", "-x", "libc", "malloc@malloc.c bytes").returncode == 0
    out = probectl("add", "-D", "-x", "libc", "malloc@nosuch.c bytes")
    assert out.returncode == 1 and "not found" in out.stderr and out.stdout == ""
