"""libstdc++ containers recorded live (fixtures/cxx_containers.cc at -O0 and -O2): vectors of integers,
of structs and of std::strings named by their variables (by reference, by value, through this), and the sizes of a
vector, map, multimap, set, unordered_map, unordered_set, list and string (NAME.size()). What
``record`` wrote, read by ``script`` (JSON and text), by ``probectl.read_trace`` and by ``query``, is
what the program printed in its EXPECT lines before each call: the elements within the vector's length
(its first 16; of structs or strings, the first 4), the sizes. perf cannot read these (it refuses members of a
reference or of a base class, tests/test_cxx_containers.py): the program's own values decide. The
offline tests are tests/test_cxx_containers.py."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import probectl as api
from tests.helpers import build_cxx_fixture, probectl

GROUP = f"pcxc{os.getpid()}"
ROUNDS = 4  # (the fourth call's vector has 23 elements: more than the 16 read)
PROBES = {
    "total": "shop::total v names names.size() m.size() v.size()",
    "sum_longs": "shop::sum_longs v v.size()",
    "prices": "shop::prices items items.size()",
    "sizes": "shop::sizes s.size() mm.size() u.size() us.size() l.size() str.size()",
    "count": "shop::Cart::count this->items this->counts this->counts.size()",
}


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


def expected(stdout: str) -> dict[str, list[dict[str, object]]]:
    """The EXPECT lines by function: each call's values as script's JSON gives them (a vector of
    integers a list, of structs or strings its text, a size a number)."""
    calls: dict[str, list[dict[str, object]]] = {}
    for line in stdout.splitlines():
        if not line.startswith("EXPECT "):
            continue
        values = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
        func = values.pop("func")
        calls.setdefault(func, []).append({
            k: v if k == "names" else [int(x) for x in v[1:-1].split(",") if x] if v.startswith("{")
            else v.strip('"') if v.startswith('"') else int(v) for k, v in values.items()})
    return calls


@pytest.mark.root
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_containers_are_the_programs_elements_and_sizes(cleanup_group, tmp_path, opt):
    binary = build_cxx_fixture("cxx_containers", opt)
    probectl("add", "-x", str(binary), *(f"{GROUP}:{name}={definition}" for name, definition in PROBES.items()))
    out = tmp_path / "containers.dat"
    run = probectl("record", "-e", f"{GROUP}:*", "-o", str(out), "--", str(binary), str(ROUNDS))
    want = expected(run.stdout)
    assert sorted(want) == sorted(PROBES) and all(len(calls) == ROUNDS for calls in want.values())
    assert len(want["total"][3]["v"]) == 16 and want["total"][3]["v_size"] == 23  # (more than read)
    assert want["prices"][0]["items"] == "[{id:101 price:5}]" and want["total"][1]["v"] == []
    assert want["total"][3]["names"] == '{"name0","name1","a-name-longer-than-fifteen-2","name3"}'  # (one on the heap)

    objs = [json.loads(line) for line in probectl("script", "-i", str(out), "--format", "json").stdout.splitlines()]
    got: dict[str, list[dict[str, object]]] = {}
    for obj in objs:
        fields = {k: v for k, v in obj["fields"].items() if k != "__probe_ip"}
        got.setdefault(obj["event"].split(":", 1)[1], []).append(fields)
    assert got == want

    # the Python API and the text give the same; the hidden pointers and elements are left out
    assert [{k: list(v) if isinstance(v, tuple) else v for k, v in e.fields.items()}
            for e in api.read_trace(str(out))] == [obj["fields"] for obj in objs]
    text = probectl("script", "-i", str(out)).stdout
    assert not re.search(r"__(begin|end|e0)", text)
    first = ",".join(map(str, want["total"][0]["v"]))
    assert f'v={{{first}}} names={{"name0"}} names_size=1 m_size=1 v_size=3' in text
    # query: the same lengths and elements, and vectors of strings and of structs as script shows them
    # (a vector of strings was an internal error once enums' texts met containers' parts)
    rows = json.loads(probectl("query", "-i", str(out), f"select v, v_size, names_size, names from {GROUP}.total",
                               "--json").stdout)
    assert rows == [{k: call[k] for k in ("v", "v_size", "names_size", "names")} for call in want["total"]]
    rows = json.loads(probectl("query", "-i", str(out), f"select items from {GROUP}.prices", "--json").stdout)
    assert rows == [{"items": call["items"]} for call in want["prices"]]


@pytest.mark.root
def test_hist_keyed_by_a_vectors_size_counts_the_programs_sizes(live_tracefs):
    """The kernel's key would be the vector's begin pointer: hist counts in user space, by the sizes
    the decoder works out, and sums one (a map's count, a plain field) as it is."""
    binary = build_cxx_fixture("cxx_containers", "-O2")
    out = probectl("hist", "-x", str(binary), "shop::total v.size() m.size()", "--key", "v_size", "--value", "m_size",
                   "--json", "--", str(binary), str(ROUNDS))
    table = json.loads(out.stdout[out.stdout.index("\n{") + 1:])  # (after the program's lines)
    assert table["path"] == "user space"
    assert "a C++ vector's size is worked out from its two pointers" in out.stderr
    want = expected(out.stdout)["total"]
    assert sorted((row["key"]["v_size"], row["count"], row["sum"]) for row in table["rows"]) == sorted(
        (call["v_size"], 1, call["m_size"]) for call in want)
