"""Strings counted by a length (a Go or Rust string, a std::string: probectl.formats), decoded from
hand-made records of the kernel's layout: the text read to a NUL (``s``, a ``__data_loc char[]``),
its length (``s__len``) and its first bytes (``s__head``, u8[64]). Every reading path (script's text,
CSV, JSON, ``probectl.read_trace``, the aggregator behind ``report``) gives the text cut at the
length, or the head where the text to the NUL falls short (no NUL within the kernel's limit: an
empty data_loc); the parts are hidden. trace-cmd reads the file. The live test is
tests/live/test_counted_strings.py."""
from __future__ import annotations

import csv
import io
import json
import struct
import subprocess
from pathlib import Path

import pytest

import probectl
from probectl.formats import EventFormat
from probectl.ringbuf import field_spec
from tests.helpers import probectl as cli
from tests.helpers import require_tool
from tests.test_native import COMMON_FIELDS

FORMAT = f"""name: greet
ID: 1501
format:
{COMMON_FIELDS}
\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] s;\toffset:16;\tsize:4;\tsigned:1;
\tfield:u64 s__len;\toffset:20;\tsize:8;\tsigned:0;
\tfield:u8 s__head[];\toffset:28;\tsize:64;\tsigned:0;
\tfield:s64 n;\toffset:92;\tsize:8;\tsigned:1;

print fmt: "(%lx) s=\\"%s\\" s__len=%Lu s__head={{%u,%u}} n=%Ld", REC->__probe_ip, __get_str(s), REC->s__len, REC->s__head[0], REC->s__head[1], REC->n
"""


def payload(text: bytes | None, length: int, head: bytes) -> bytes:
    """A record of FORMAT: ``text`` as the kernel's string fetch stored it (with its NUL; None: it
    found no NUL, an empty data_loc), the length, the head (padded to 64 bytes with '#')."""
    data = b"" if text is None else text + b"\0"
    loc = 0 if text is None else len(data) << 16 | 100
    return (struct.pack("<HBBiQIQ", 1501, 0, 0, 77, 0x401000, loc, length) + head.ljust(64, b"#")
            + struct.pack("<q", 7) + data)


def one_event_trace(tmp_path: Path, record: bytes) -> Path:
    from tests.test_string_arrays import one_event_trace as written

    return written(tmp_path, record, FORMAT, "probe_go")


def test_the_parts_are_linked_to_their_string_and_hidden():
    fmt = EventFormat.parse(FORMAT, "probe_go")
    s = fmt.field("s")
    assert s is not None and s.bound == (20, 8) and s.head == (28, 64)
    assert [f.name for f in fmt.event_fields] == ["__probe_ip", "s", "n"]
    assert field_spec(s)[6:] == (8, 20, 64, 28)
    # a length of another type, or without its string, is an ordinary field
    other = EventFormat.parse(FORMAT.replace("__data_loc char[] s;", "__data_loc char[] t;"), "probe_go")
    assert [f.name for f in other.event_fields] == ["__probe_ip", "t", "s__len", "s__head", "n"]


@pytest.mark.parametrize("text, length, head, want", [
    (b"probectlprobectl", 3, b"pro", "pro"),  # a substring: the text runs on to the NUL after its string
    (None, 5, b"hello, world", "hello"),  # a literal among others: no NUL for the kernel, the head
    (b"", 0, b"", ""),  # empty
    (None, 0, b"", ""),  # empty, its pointer nil: the kernel's fault
    (b"a\0b", 3, b"a\0b", "a\x00b"),  # a NUL inside: the head has the bytes the text stopped at
    (None, 100, b"x" * 64, "x" * 64),  # longer than the head and no NUL: its first 64 bytes
    (b"y" * 90, 90, b"y" * 64, "y" * 90),  # longer than the head, a NUL after it: all of it
    # a NUL inside a long one: its first 64 bytes, the NUL and what follows it included
    (b"short", 1000, b"short\0tail", "short\x00tail" + "#" * 54),
], ids=["substring", "literal", "empty", "nil", "inner-nul", "long-no-nul", "long", "long-inner-nul"])
def test_every_reader_gives_the_text_of_its_length(tmp_path, text, length, head, want):
    path = one_event_trace(tmp_path, payload(text, length, head))
    line = cli("script", "-i", str(path)).stdout.strip()
    assert "__len" not in line and "__head" not in line and line.endswith(" n=7"), line
    (row,) = list(csv.DictReader(io.StringIO(cli("script", "-i", str(path), "--format", "csv").stdout)))
    (obj,) = [json.loads(x) for x in cli("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    (event,) = list(probectl.read_trace(str(path)))
    assert obj["fields"] == {"__probe_ip": 0x401000, "s": want, "n": 7} == event.fields
    assert row["s"] == want
    assert 's="' + want.replace("\0", "\\x00") + '"' in line
    counted = cli("report", "-i", str(path), "--sort", "s", "--json").stdout
    assert want in counted or "\0" in want, counted  # (the aggregator's key)


def test_trace_cmd_reads_the_parts_as_fields(tmp_path):
    path = one_event_trace(tmp_path, payload(b"probectlprobectl", 3, b"pro"))
    report = subprocess.run([require_tool("trace-cmd", "trace-cmd"), "report", str(path)], capture_output=True,
                            text=True, check=True).stdout
    assert 's="probectlprobectl" s__len=3 s__head={112,114} n=7' in report


def test_a_counted_string_missing_at_one_place_reads_the_magic_address_there():
    """Where a multi-place event's string cannot be fetched, its arguments read perf's magic value
    instead, in forms the kernel takes (it refuses an immediate of an array type: "+0(\\IMM)" for
    the head), and the kernel's rules pass the definition."""
    from probectl.errors import VariableUnavailable
    from probectl.events import EventDefinition
    from probectl.probes.kernel_rules import check_definitions
    from probectl.probes.naming import fetch_args
    from probectl.resolve import MISSING_ARG_MAGIC, Resolver
    from probectl.resolve.fetchresult import StringPart
    from probectl.resolve.points import ResolvedArg
    from probectl.target import Target
    from types import SimpleNamespace

    found = ResolvedArg("+0(%ax)", "string", "s", parts=(StringPart("length", "%bx", "u64"),
                                                         StringPart("head", "+0(%ax)", "u8[64]")))
    missing = VariableUnavailable("'s' is optimized out", "", "s", 0x20, [], [], "optimized_out")
    resolver = Resolver(Target(kind="uprobe", path=None))
    sites = [SimpleNamespace(address=0x10), SimpleNamespace(address=0x20)]  # (what _fill_missing reads of a site)
    rows = resolver._fill_missing([[found], [missing]], sites)
    magic = f"\\{MISSING_ARG_MAGIC:#x}"
    args = fetch_args((rows[1][0],))
    assert [a.render() for a in args] == [f"s={magic}:string", f"s__len={magic}:u64", f"s__head=+0({magic}):u8[64]"]
    check_definitions([EventDefinition(kind="p", group="g", event="e", place="/bin/true:0x20", args=args,
                                       is_uprobe=True)], None)


def test_a_kernel_filter_on_a_go_or_rust_string_is_refused():
    """The kernel would compare the text read to a NUL ("probectlprobectl" for "pro"); its length
    filters, and a std::string's text (a NUL right after it) compares as it is."""
    from probectl.filters import compile_filter
    from probectl.filters.checker import FilterError

    fmt = EventFormat.parse(FORMAT, "probe_go")
    with pytest.raises(FilterError, match="a string counted by a length") as err:
        compile_filter('s == "pro"', fmt)
    assert "s__len" in (err.value.hint or "")
    assert compile_filter("s__len > 2", fmt).text == "s__len > 2"
    std = EventFormat.parse(FORMAT.replace("\tfield:u8 s__head[];\toffset:28;\tsize:64;\tsigned:0;\n", ""), "probe_cxx")
    assert compile_filter('s == "pro"', std).text == 's == "pro"'


SLICE_FORMAT = f"""name: greet
ID: 1501
format:
{COMMON_FIELDS}
\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:s64 xs[4];\toffset:16;\tsize:32;\tsigned:1;
\tfield:u64 xs__len;\toffset:48;\tsize:8;\tsigned:0;

print fmt: "(%lx) xs={{%Ld,%Ld,%Ld,%Ld}} xs__len=%Lu", REC->__probe_ip, REC->xs[0], REC->xs[1], REC->xs[2], REC->xs[3], REC->xs__len
"""


@pytest.mark.parametrize("length, want", [(0, []), (2, [30, -31]), (4, [30, -31, 32, 33]), (99, [30, -31, 32, 33])])
def test_a_slice_is_its_elements_up_to_its_length(tmp_path, length, want):
    """A Go or Rust slice: its first elements as a fixed array, cut at xs__len elements (a length past
    the array keeps the array), by every reader; the length hidden."""
    from tests.test_string_arrays import one_event_trace as written

    record = struct.pack("<HBBiQ4qQ", 1501, 0, 0, 77, 0x401000, 30, -31, 32, 33, length)
    path = written(tmp_path, record, SLICE_FORMAT, "probe_go")
    fmt = EventFormat.parse(SLICE_FORMAT, "probe_go")
    assert [f.name for f in fmt.event_fields] == ["__probe_ip", "xs"]
    (line,) = cli("script", "-i", str(path)).stdout.splitlines()
    assert line.endswith(" xs={" + ",".join(map(str, want)) + "}"), line
    (obj,) = [json.loads(x) for x in cli("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    (event,) = list(probectl.read_trace(str(path)))
    assert obj["fields"]["xs"] == want and list(event.fields["xs"]) == want
