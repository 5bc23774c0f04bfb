"""Strings counted by a length, recorded live: a Go ``string`` (and a Go slice's elements) and a Rust ``&str`` and ``String``
(pointer and length; no NUL after the bytes: a literal sits in the program's other strings, a
substring runs on into the rest of its string) and a C++ ``std::string`` (libstdc++'s, by its
members), probed by their variables' names with no cast, or with ``:string``. What ``record`` wrote,
read by ``script`` (text and JSON) and by ``probectl.read_trace``, is what each fixture printed in
its EXPECT lines, empty strings included; trace-cmd still reads the recording (the hidden length and
head fields are plain fields to it). The offline tests: tests/test_counted_strings.py (the decoders
on hand-made records), tests/test_fetch_walker.py (the walker), tests/test_go_programs.py (-D)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

import probectl as api
from tests.helpers import build_cxx_fixture, build_go_fixture, build_rust_fixture, probectl, require_tool
from tests.live.test_live_uprobes import expect_lines

GROUP = f"pstr{os.getpid()}"


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


def record(tmp_path: Path, binary: Path, *args: str) -> tuple[dict[str, list[dict[str, str]]], dict[str, list[dict]]]:
    """Record GROUP's events over one run of ``binary``: its EXPECT lines, and the events' fields
    by event name as script's JSON gives them (checked equal to the API's and the text's)."""
    out = tmp_path / "strings.dat"
    run = probectl("record", "-e", f"{GROUP}:*", "-o", str(out), "--", str(binary), *args)
    objs = [json.loads(line) for line in probectl("script", "-i", str(out), "--format", "json").stdout.splitlines()]
    events: dict[str, list[dict]] = {}
    for obj in objs:
        events.setdefault(obj["event"].split(":", 1)[1], []).append(obj["fields"])
    assert [{k: list(v) if isinstance(v, tuple) else v for k, v in e.fields.items()}  # (the API's arrays are tuples)
            for e in api.read_trace(str(out))] == [obj["fields"] for obj in objs]
    text = probectl("script", "-i", str(out)).stdout.splitlines()
    for line, obj in zip(text, objs, strict=True):
        for name, value in obj["fields"].items():
            if isinstance(value, str):  # (a string quoted; a slice of structs, [{id:1}], as it is)
                assert f'{name}="{value}"' in line or value.startswith("[") and f"{name}={value}" in line, line
            elif isinstance(value, list):  # (x-typed elements print in hex)
                shown = line.split(f" {name}={{", 1)[1].split("}", 1)[0]
                assert [int(x, 0) for x in shown.split(",") if x] == value, line
    assert not re.search(r"__(len|head|e0_)", "".join(text)), "the parts are hidden"
    report = subprocess.run([require_tool("trace-cmd", "trace-cmd"), "report", str(out)], capture_output=True,
                            text=True, check=True).stdout
    assert sum("__len=" in line or "__e0_" in line for line in report.splitlines()) == len(objs), \
        "trace-cmd reads every event, the length (or a slice of structs' first member) a field of it"
    return expect_lines(run.stdout), events


def words(expect: list[dict[str, str]], key: str) -> list[str]:
    return [call[key].strip('"') for call in expect]


@pytest.mark.root
@pytest.mark.parametrize("gcflags", ["", "all=-N -l"], ids=["optimised", "unoptimised"])
def test_go_strings_are_the_programs_words(cleanup_group, tmp_path, gcflags):
    """greet gets "hello" and "probectl" (literals, in the middle of the program's string data: no NUL
    for kilobytes, where the kernel's string fetch gives nothing), "" and a substring "pro" of
    "probectlprobectl" made while it runs."""
    binary = build_go_fixture("go_target", gcflags)
    probectl("add", "-x", str(binary), f"{GROUP}:greet=main.greet s xs.len xs", f"{GROUP}:cast=main.greet s:string")
    want, got = record(tmp_path, binary, "10")
    assert words(want["greet"], "s") == ["hello", "probectl", "", "pro"]
    assert [e["s"] for e in got["greet"]] == words(want["greet"], "s")
    assert [e["s_string"] for e in got["cast"]] == words(want["greet"], "s")
    assert [e["len"] for e in got["greet"]] == [int(call["xs.len"]) for call in want["greet"]]
    # the slice's elements, its length's (its capacity's past them are not its own)
    assert [e["xs"] for e in got["greet"]] == [[int(x) for x in w.split(",") if x] for w in words(want["greet"], "xs")]


@pytest.mark.root
@pytest.mark.parametrize("mangling", ["legacy", "v0"])
def test_rust_strings_are_the_programs_words(cleanup_group, tmp_path, mangling):
    """lookup's &str: "hello", "pro" cut from "probectlprobectl", ""; label's String "cart-10" (passed
    by reference, where it is in memory: the line after the entry); sum's &Vec<u32> (7, 8, 9 of a
    capacity of 8) and &String."""
    binary = build_rust_fixture("rust_shop", mangling=mangling)
    probectl("add", "-x", str(binary), f"{GROUP}:lookup=rust_shop::shop::lookup key",
             f"{GROUP}:label=rust_shop::shop::label:1 name:string", f"{GROUP}:sum=rust_shop::shop::sum values name")
    want, got = record(tmp_path, binary)
    assert words(want["lookup"], "key") == ["hello", "pro", ""]
    assert [e["key"] for e in got["lookup"]] == words(want["lookup"], "key")
    (name,) = words(want["label"], "name")
    assert got["label"] and all(e["name_string"] == name for e in got["label"])
    # a &Vec<u32> and a &String, read through their references
    (call,) = want["sum"]
    assert [(e["values"], e["name"]) for e in got["sum"]] == [([int(v) for v in call["values"].strip('"').split(",")],
                                                              call["name"].strip('"'))]


@pytest.mark.root
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_std_strings_are_the_programs_words(cleanup_group, tmp_path, opt):
    """A std::string member through this (this->label) and a reference argument (const std::string
    &name): a short one held in the object, an empty one, one of 51 bytes on the heap."""
    binary = build_cxx_fixture("cxx_shop", opt)
    probectl("add", "-x", str(binary), f"{GROUP}:add=shop::Cart::add this->label",
             f"{GROUP}:tag=shop::tag name")
    want, got = record(tmp_path, binary, "2")
    assert [e["label"] for e in got["add"]] == words(want["add"], "label")
    assert [e["name"] for e in got["tag"]] == words(want["tag"], "name")
    assert [len(e["name"]) for e in got["tag"]] == [int(call["size"]) for call in want["tag"]] == [6, 0, 51]


@pytest.mark.root
def test_hist_keyed_by_a_go_string_counts_the_programs_words(live_tracefs):
    """hist's key is the text of the string's length, counted in user space (the kernel's key would be
    the text read to a NUL)."""
    binary = build_go_fixture("go_target")
    out = probectl("hist", "-x", str(binary), "main.greet s", "--key", "s", "--json", "--", str(binary), "10")
    table = json.loads(out.stdout[out.stdout.index("\n{") + 1:])  # (after the program's lines)
    want = words(expect_lines(out.stdout)["greet"], "s")
    assert table["path"] == "user space"
    assert sorted((row["key"]["s"], row["count"]) for row in table["rows"]) == sorted((w, 1) for w in want)


@pytest.mark.root
@pytest.mark.parametrize("language", ["go", "rust"])
def test_slices_of_structs_are_the_programs_elements(cleanup_group, tmp_path, language):
    """A Go []Item and a Rust &[Item] of 2, 0 and 6 elements: its first 4 elements' members as Go's
    %+v writes them, "..." after them when it has more, as the programs print them, in script and in
    query's column."""
    if language == "go":
        binary = build_go_fixture("go_target")
        probectl("add", "-x", str(binary), f"{GROUP}:spend=main.spend items")
        want, got = record(tmp_path, binary, "10")
        (event,) = got
    else:
        binary = build_rust_fixture("rust_shop")
        probectl("add", "-x", str(binary), f"{GROUP}:total=rust_shop::shop::total items")
        want, got = record(tmp_path, binary)
        event = "total"
    shown = words(want[event], "items")
    assert shown[1] == "[]" and shown[2].endswith(" ...]")
    assert [e["items"] for e in got[event]] == shown
    # query's column (and Parquet's) is the same text
    rows = json.loads(probectl("query", "-i", str(tmp_path / "strings.dat"), "--json",
                               f"SELECT items FROM {GROUP}.{event} ORDER BY ts").stdout)
    assert [r["items"] for r in rows] == shown


@pytest.mark.root
@pytest.mark.parametrize("language", ["go", "rust"])
def test_a_struct_in_a_slices_elements_is_its_members(cleanup_group, tmp_path, language):
    """A Go []Order and a Rust &[Order] whose Order holds an Item: each element's id and its item's
    members, nested as the programs print them ({id:1 item:{id:201 price:0}}), in script and in
    query's column."""
    if language == "go":
        binary = build_go_fixture("go_target")
        probectl("add", "-x", str(binary), f"{GROUP}:ship=main.ship orders")
        want, got = record(tmp_path, binary, "10")
    else:
        binary = build_rust_fixture("rust_shop")
        probectl("add", "-x", str(binary), f"{GROUP}:ship=rust_shop::shop::ship orders")
        want, got = record(tmp_path, binary)
    shown = words(want["ship"], "orders")
    assert shown[0].startswith("[{id:1 item:{id:201 price:0}} ") and shown[1].endswith(" ...]")
    assert [e["orders"] for e in got["ship"]] == shown
    rows = json.loads(probectl("query", "-i", str(tmp_path / "strings.dat"), "--json",
                               f"SELECT orders FROM {GROUP}.ship ORDER BY ts").stdout)
    assert [r["orders"] for r in rows] == shown

