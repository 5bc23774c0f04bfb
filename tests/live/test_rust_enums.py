"""Rust enums recorded live and read back everywhere as the program printed them (fixtures/rust_enums.rs
prints EXPECT lines): variants holding several values (Rect{w:3 h:4}, Pair(7, -9), Some((1, 2))), a
C-like enum of 20 variants, variants holding a C-like enum (Set(High), Some(Low)), in script's text
and JSON, the API, query's SQL columns and the Parquet datasets; hist counts them by their variants'
names; trace-cmd reads the recording. (Enums of one value, hist by variant:
tests/live/test_rust_names.py; the definitions and the refusals: tests/test_rust_enums.py.)"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.helpers import build_rust_fixture, probectl, require_tool
from tests.live.test_live_uprobes import expect_lines

GROUP = f"penum{os.getpid()}"


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


def unquoted(calls: list[dict[str, str]], key: str) -> list[str]:
    return [c[key].strip('"') for c in calls]


@pytest.mark.root
@pytest.mark.parametrize("mangling, opt", [("legacy", "0"), ("v0", "0"), ("legacy", "2")])
def test_enums_read_the_same_in_script_the_api_sql_and_parquet(cleanup_group, tmp_path, mangling, opt):
    """(At -O2 f and p arrive by reference in registers, k in a register.)"""
    import probectl as api

    binary = build_rust_fixture("rust_enums", opt=opt, mangling=mangling)
    probectl("add", "-x", str(binary), f"{GROUP}:draw=rust_enums::shapes::draw f p k",
             f"{GROUP}:niche=rust_enums::shapes::niche n o")
    out = tmp_path / "enums.dat"
    run = probectl("record", "-e", f"{GROUP}:*", "-o", str(out), "--", str(binary))
    want = expect_lines(run.stdout)["draw"]
    expected = [{key: c[key].strip('"') for key in "fpk"} for c in want]
    assert expected[0] == {"f": "Rect{w:3 h:4}", "p": "Some((1, 2))", "k": "K17"}
    assert [e["k"] for e in expected] == ["K17", "K0", "K19", "K3"]  # (past the 16 variants shown before)

    niche = [{key: c[key] for key in "no"} for c in expect_lines(run.stdout)["niche"]]
    assert niche == [{"n": "Set(High)", "o": "None"}, {"n": "Unset", "o": "Some(Low)"}]  # (a C-like enum held)

    objs = [json.loads(line) for line in probectl("script", "-i", str(out), "--format", "json").stdout.splitlines()]
    assert [{k: o["fields"][k] for k in "fpk"} for o in objs if o["event"].endswith(":draw")] == expected
    assert [{k: o["fields"][k] for k in "no"} for o in objs if o["event"].endswith(":niche")] == niche
    assert [{k: e.fields[k] for k in "fpk"} for e in api.read_trace(str(out)) if e.name.endswith(":draw")] == expected
    text = probectl("script", "-i", str(out)).stdout
    assert "f=Rect{w:3 h:4} p=Some((1, 2)) k=K17" in text and "__m" not in text and "__v" not in text

    # trace-cmd reads the recording: the parts are plain fields to it
    report = subprocess.run([require_tool("trace-cmd", "trace-cmd"), "report", str(out)], capture_output=True,
                            text=True, check=True).stdout
    assert sum(" f__m0_Rect__w=3 f__m0_Rect__h=4 " in line for line in report.splitlines()) == 1

    # hist of the recording: keyed by the variant's name, whatever it holds
    table = json.loads(probectl("hist", "-i", str(out), f"{GROUP}:draw", "--key", "f", "--json").stdout)
    assert {row["key"]["f"]: row["count"] for row in table["rows"]} == {"Rect": 1, "Pair": 1, "Dot": 1, "Line": 1}

    # query: the columns are the text script shows, compared and grouped in SQL as they read
    table = f"{GROUP}.draw"
    rows = json.loads(probectl("query", "-i", str(out), "--json", f"SELECT f, p, k FROM {table} ORDER BY ts").stdout)
    assert rows == expected
    rows = json.loads(probectl("query", "-i", str(out), "--json", f"SELECT n, o FROM {GROUP}.niche ORDER BY ts").stdout)
    assert rows == niche
    rows = json.loads(probectl("query", "-i", str(out), "--json",
                               f"SELECT k FROM {table} WHERE p LIKE 'Some(%' ORDER BY ts").stdout)
    assert [r["k"] for r in rows] == [e["k"] for e in expected if e["p"].startswith("Some(")]
    rows = json.loads(probectl("query", "-i", str(out), "--json",
                               f"SELECT split_part(f, '(', 1) AS v, count(*) AS n FROM {table} GROUP BY v").stdout)
    assert {r["v"] for r in rows} == {"Rect{w:3 h:4}", "Pair", "Dot", "Line"}
    listed = probectl("query", "-i", str(out), "--list-tables").stdout
    assert not any(f"{k}__" in listed for k in "fpk"), "the parts are hidden"

    # Parquet: the same text, read back by DuckDB from the files
    pq = tmp_path / "pq"
    probectl("script", "-i", str(out), "--format", "parquet", "-o", str(pq))
    rows = json.loads(probectl("query", "-i", str(pq), "--json", f"SELECT f, p, k FROM {table} ORDER BY ts").stdout)
    assert rows == expected
    import pyarrow.parquet as pqr

    (part,) = pq.glob(f"{GROUP}.draw/**/*.parquet")
    schema = pqr.read_schema(part)
    assert {schema.field(k).type.__str__() for k in "fpk"} == {"large_string"}
