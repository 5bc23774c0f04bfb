"""Rust functions probed by their paths record what the program got (fixtures/rust_shop.rs prints it
in EXPECT lines): a &str's length, a method's arguments through references (it.id, self.items), the
program's main. (Strings as text: tests/live/test_counted_strings.py.)
The offline tests are tests/test_rust_names.py."""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.helpers import build_rust_fixture, probectl
from tests.live.test_live_uprobes import expect_lines, trace_events

GROUP = f"prust{os.getpid()}"


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


@pytest.mark.root
@pytest.mark.parametrize("mangling", ["legacy", "v0"])
def test_paths_record_the_programs_values(cleanup_group, mangling):
    tracefs = cleanup_group
    binary = build_rust_fixture("rust_shop", mangling=mangling)
    probectl("add", "-x", str(binary), f"{GROUP}:lookup=rust_shop::shop::lookup key.length",
             f"{GROUP}:main=main", f"{GROUP}:add=rust_shop::shop::Cart::add it.id qty self.items self.owner")
    inst = tracefs / "instances" / f"probectl-rust-{os.getpid()}"
    inst.mkdir()
    try:
        (inst / "events" / GROUP / "enable").write_text("1")
        run = subprocess.run([str(binary)], capture_output=True, text=True, check=True)
        (inst / "tracing_on").write_text("0")
        text = (inst / "trace").read_text()
        (inst / "events" / GROUP / "enable").write_text("0")
    finally:
        inst.rmdir()
    want = expect_lines(run.stdout)
    got: dict[str, list[dict[str, str]]] = {}
    for name, fields in trace_events(text):
        got.setdefault(name, []).append(fields)
    assert [int(e["length"], 0) for e in got["lookup"]] == [int(c["key.len"]) for c in want["lookup"]]
    assert len(got["main"]) == 1
    # a method of an impl block, its arguments through references as Rust writes them
    assert [(int(e["id"], 0), int(e["qty"], 0), int(e["items"], 0), int(e["owner"], 0)) for e in got["add"]] == \
           [(int(c["id"]), int(c["qty"]), int(c["items"]), int(c["owner"])) for c in want["add"]]


@pytest.mark.root
@pytest.mark.parametrize("mangling", ["legacy", "v0"])
def test_enums_are_recorded_by_their_variants(cleanup_group, tmp_path, mangling):
    """Option<u32>, Option<&u64>, Option<Box<u32>> (niches), a C-like enum and an enum with data behind
    a reference, recorded and read back by script (text, JSON), the API and query as the program printed
    them with {:?} (and the pointers' addresses): Some(2), None, Some(0x7ff…), Green, Square(12), Empty."""
    import json

    import probectl as api

    binary = build_rust_fixture("rust_shop", mangling=mangling)
    probectl("add", "-x", str(binary), f"{GROUP}:lookup=rust_shop::shop::lookup n",
             f"{GROUP}:pick=rust_shop::shop::pick r b c s")
    out = tmp_path / "enums.dat"
    run = probectl("record", "-e", f"{GROUP}:*", "-o", str(out), "--", str(binary))
    want = expect_lines(run.stdout)
    objs = [json.loads(line) for line in probectl("script", "-i", str(out), "--format", "json").stdout.splitlines()]
    got: dict[str, list[dict]] = {}
    for obj in objs:
        got.setdefault(obj["event"].split(":", 1)[1], []).append(obj["fields"])
    assert [e["n"] for e in got["lookup"]] == [c["n"] for c in want["lookup"]] == ["Some(2)", "None", "None"]
    for key in "rbcs":
        assert [e[key] for e in got["pick"]] == [c[key] for c in want["pick"]]
    assert [e.fields for e in api.read_trace(str(out))] == [obj["fields"] for obj in objs]
    text = probectl("script", "-i", str(out)).stdout
    assert "c=Green s=Circle(9)" in text and "r=None b=None c=Red s=Empty" in text
    assert "__v" not in text and "__p" not in text, "the parts are hidden"
    # query's columns: the same text (the pointers in hex), Option<u32>'s too
    rows = json.loads(probectl("query", "-i", str(out), "--json",
                               f"SELECT r, b, c, s FROM {GROUP}.pick ORDER BY ts").stdout)
    assert rows == [{k: c[k] for k in "rbcs"} for c in want["pick"]]
    rows = json.loads(probectl("query", "-i", str(out), "--json", f"SELECT n FROM {GROUP}.lookup ORDER BY ts").stdout)
    assert [r["n"] for r in rows] == ["Some(2)", "None", "None"]
    # hist of the recording: keyed by the variant's name
    out = probectl("hist", "-i", str(out), f"{GROUP}:pick", "--key", "c", "--json").stdout
    assert {row["key"]["c"]: row["count"] for row in json.loads(out)["rows"]} == {"Green": 1, "Blue": 1, "Red": 1}


@pytest.mark.root
def test_hist_keyed_by_an_enum_counts_its_variants(live_tracefs):
    """hist's key of an enum is its variant's name: a C-like enum's (Green, Blue, Red), an Option's
    (Some for any payload, None), as many as the program passed each."""
    import json

    binary = build_rust_fixture("rust_shop")
    for definition, key, want in (("rust_shop::shop::pick c", "c", {"Green": 1, "Blue": 1, "Red": 1}),
                                  ("rust_shop::shop::lookup n", "n", {"None": 2, "Some": 1})):
        out = probectl("hist", "-x", str(binary), definition, "--key", key, "--json", "--", str(binary)).stdout
        table = json.loads(out[out.index("\n{") + 1:])
        assert {row["key"][key]: row["count"] for row in table["rows"]} == want
