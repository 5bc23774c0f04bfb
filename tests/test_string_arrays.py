"""``:string[N]`` arguments: the kernel writes ``__data_loc char[][N]`` fields (N data_loc words, each
locating one string of the record; length 0 when it could not read the string, printed ``(fault)``)
and prints them as ``name={"a","b",""}``. Every reading path gives the N strings: ``script``'s text
(as the kernel prints them), CSV (the same text in one cell), JSON (a list, null for a fault) and
``probectl.read_trace`` (a tuple, None for a fault).

trace-cmd report is no oracle here: libtraceevent cannot parse the kernel's ``__get_str(w[0])`` and
prints ``[FAILED TO PARSE]`` for such events; the oracle is the fixture's own output and the kernel's
``trace`` text format.
"""
from __future__ import annotations

import csv
import io
import json
import struct
from pathlib import Path

import pytest

import probectl

from tests.helpers import probectl as cli  # (probectl is the package here)


def decoded(path: Path) -> dict[str, object]:
    """The value of field ``w`` of the only event of ``path``, by every reading path."""
    text = cli("script", "-i", str(path)).stdout.strip().splitlines()
    rows = list(csv.DictReader(io.StringIO(cli("script", "-i", str(path), "--format", "csv").stdout)))
    objs = [json.loads(line) for line in cli("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    api = [e.fields["w"] for e in probectl.read_trace(str(path))]
    assert len(text) == len(rows) == len(objs) == len(api) == 1
    return {"text": text[0].split(" w=", 1)[1].rsplit(" n=", 1)[0], "csv": rows[0]["w"],
            "json": objs[0]["fields"]["w"], "api": api[0]}


# ---- a hand-built trace.dat: faults, escapes, words pointing outside the record -------------------

FORMAT = """name: words
ID: 1500
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:__data_loc char[][3] w;\toffset:16;\tsize:12;\tsigned:1;
\tfield:s32 n;\toffset:28;\tsize:4;\tsigned:1;

print fmt: "(%lx) w={\\"%s\\",\\"%s\\",\\"%s\\"} n=%d", REC->__probe_ip, __get_str(w[0]), __get_str(w[1]), __get_str(w[2]), REC->n
"""


def payload(strings: list[object]) -> bytes:
    """A record of FORMAT: each item is bytes (stored with its NUL), None (a fault: length 0) or an
    int (a raw data_loc word)."""
    head = struct.pack("<HBBiQ", 1500, 0, 0, 77, 0x401000)
    data, words = b"", []
    for s in strings:
        if isinstance(s, int):
            words.append(s)
        elif s is None:
            words.append(0)
        else:
            words.append((len(s) + 1) << 16 | (32 + len(data)))
            data += s + b"\0"
    return head + struct.pack("<3I", *words) + struct.pack("<i", len(strings)) + data


def one_event_trace(tmp_path: Path, record: bytes, event_format: str = FORMAT, system: str = "probe_x") -> Path:
    """A trace.dat of one record of ``event_format`` (of ``system``), written by task 77."""
    from probectl.tracedat import TraceMetadata, write_tracedat
    from tests.test_native import data_record, make_page
    from tests.test_tracedat import HEADER_EVENT, HEADER_PAGE

    raw = tmp_path / "cpu0.raw"
    raw.write_bytes(make_page(data_record(record, 100), 10**9))
    meta = TraceMetadata(header_page=HEADER_PAGE, header_event=HEADER_EVENT, page_size=4096, cpus=1,
                         ftrace_formats=[], event_formats=[(system, [event_format])], kallsyms=b"",
                         printk_formats=b"", cmdlines="77 words\n", tgids="77 77\n",
                         trace_clock="[local] global counter", uname="Linux synthetic 1.0 x86_64", trace_id=1,
                         cpustats={0: "entries: 1\noverrun: 0\n"})
    path = tmp_path / "words.dat"
    write_tracedat(path, meta, {0: raw}, version=7)
    return path


@pytest.mark.parametrize("strings, text, values", [
    ([b"alpha", b"be ta", b""], '{"alpha","be ta",""}', ("alpha", "be ta", "")),
    ([b"one", None, b"three"], '{"one",(fault),"three"}', ("one", None, "three")),
    ([b'q"uote', b"tab\there", b"\xc3\xbcn\xc3\xaf"], '{"q\\"uote","tab\\there","\xfcn\xef"}',
     ('q"uote', "tab\there", "\xfcn\xef")),
    # a word whose string runs past the end of the record, and one pointing at the words themselves
    # (the first word, 0x00030020, reads as " " up to its NUL)
    ([b"ok", 0x00ff0020, 16 | 4 << 16], '{"ok",(fault)," "}', ("ok", None, " ")),
], ids=["plain", "fault", "escapes", "outside"])
def test_string_array_in_a_hand_built_file(tmp_path, strings, text, values):
    got = decoded(one_event_trace(tmp_path, payload(strings)))
    assert got == {"text": text, "csv": text, "json": list(values), "api": values}
