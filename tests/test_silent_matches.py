"""Silent matches (issue "bad input never hurts", class 9): a definition or option that matches nothing
it names must say so, not quietly do something else."""
from __future__ import annotations

import functools
from pathlib import Path

from tests.helpers import build_fixture, probectl as run_probectl


probectl = functools.partial(run_probectl, check=False, timeout=120)


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
    from tests.helpers import missing

    if not list(Path("/usr/lib/debug/.build-id").glob("*/*.debug")):
        missing("libc6-dbg is not installed")
    assert probectl("add", "-D", "-x", "libc", "malloc@malloc.c bytes").returncode == 0
    out = probectl("add", "-D", "-x", "libc", "malloc@nosuch.c bytes")
    assert out.returncode == 1 and "not found" in out.stderr and out.stdout == ""


SAMPLE = Path(__file__).parent / "data" / "tracedat" / "sample-v7.dat"


def test_script_event_glob_that_matches_nothing():
    for glob in ("nope:*", "sched_swich"):
        out = probectl("script", "-i", str(SAMPLE), "-e", glob)
        assert out.returncode == 1 and out.stdout == "", out.stdout
        assert f"no event in {SAMPLE} matches {glob!r}" in out.stderr
        assert "sched:sched_process_exec" in out.stderr  # what the file holds
    ok = probectl("script", "-i", str(SAMPLE), "-e", "sched:*")
    assert ok.returncode == 0 and "sched:sched_process_exec" in ok.stdout


def test_fields_with_a_format_that_has_none():
    for kind in ("json", "folded"):
        out = probectl("script", "-i", str(SAMPLE), "--format", kind, "-F", "comm")
        assert out.returncode == 2 and "-F picks the fields of text and CSV lines" in out.stderr


def test_no_demangle_with_parquet_which_holds_no_stacks(tmp_path):
    out = probectl("script", "-i", str(SAMPLE), "--format", "parquet", "-o", str(tmp_path / "ds"), "--no-demangle")
    assert out.returncode == 2 and "which Parquet datasets do not hold" in out.stderr
    assert not (tmp_path / "ds").exists()


def test_funcs_glob_that_matches_nothing():
    app = build_fixture("dwarf_structs")
    out = probectl("funcs", "-x", str(app), "zzz*")
    assert out.returncode == 1 and out.stdout == "" and "no function in" in out.stderr
    out = probectl("funcs", "-x", str(app), "pain")
    assert out.returncode == 1 and "did you mean paint" in out.stderr
    assert probectl("funcs", "-x", str(app), "pai*").stdout.split() == ["paint"]


def test_lines_past_the_end_of_the_source():
    app = build_fixture("dwarf_structs")
    out = probectl("lines", "-x", str(app), "paint:300-305")
    assert out.returncode == 1 and out.stdout == "" and "which has" in out.stderr
    out = probectl("lines", "-x", str(app), "dwarf_structs.c:9000-9005")
    assert out.returncode == 1 and out.stdout == "" and "has no line 9000 to 9005" in out.stderr
    assert probectl("lines", "-x", str(app), "paint:2-3").returncode == 0


def test_a_glob_wider_than_perfs_limit_is_stopped():
    """perf stops at 128 places per definition (MAX_PROBES); '*' on libc made ~2,000 probes."""
    out = probectl("add", "-D", "-x", "libc", "*")
    assert out.returncode == 1 and out.stdout == ""
    assert "'*' matches" in out.stderr and "more than 128" in out.stderr and "--max-probes" in out.stderr
    lifted = probectl("add", "-D", "-x", "libc", "--max-probes", "0", "*")
    assert lifted.returncode == 0 and len(lifted.stdout.splitlines()) > 128
    assert probectl("add", "-D", "-x", "libc", "--max-probes", "5", "mem*").returncode == 1
    assert probectl("add", "-D", "-x", "libc", "mem*").returncode == 0
