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
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import probectl
from tests.helpers import build_fixture

GROUP = f"pstrarr{os.getpid()}"
WORDS = ["alpha", "be ta", "", "unused"]


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "probectl", *args], capture_output=True, text=True)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def decoded(path: Path) -> dict[str, object]:
    """The value of field ``w`` of the only event of ``path``, by every reading path."""
    text = cli("script", "-i", str(path)).stdout.strip().splitlines()
    rows = list(csv.DictReader(io.StringIO(cli("script", "-i", str(path), "--format", "csv").stdout)))
    objs = [json.loads(line) for line in cli("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    api = [e.fields["w"] for e in probectl.read_trace(str(path))]
    assert len(text) == len(rows) == len(objs) == len(api) == 1
    return {"text": text[0].split(" w=", 1)[1].rsplit(" n=", 1)[0], "csv": rows[0]["w"],
            "json": objs[0]["fields"]["w"], "api": api[0]}


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    cli("del", f"{GROUP}:*", check=False)


def test_live_string_array_is_the_programs_words(cleanup_group, tmp_path):
    binary = build_fixture("string_array")
    cli("add", "-x", str(binary), f"{GROUP}:words=show_words w=+0(%di):string[3] n=%si:s32")
    fmt = (cleanup_group / "events" / GROUP / "words" / "format").read_text()
    assert "__data_loc char[][3] w;" in fmt
    out = tmp_path / "words.dat"
    rec = cli("record", "-e", f"{GROUP}:words", "-o", str(out), "--", str(binary), *WORDS)
    expect = [line.split("=", 1)[1] for line in rec.stdout.splitlines() if line.startswith("EXPECT word[")]
    assert expect == WORDS
    got = decoded(out)
    kernel_text = "{" + ",".join(f'"{w}"' for w in WORDS[:3]) + "}"  # trace_probe.c's print_type_string
    assert got == {"text": kernel_text, "csv": kernel_text, "json": WORDS[:3], "api": tuple(WORDS[:3])}


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


def one_event_trace(tmp_path: Path, record: bytes) -> Path:
    from probectl.tracedat import TraceMetadata, write_tracedat
    from tests.test_native import data_record, make_page
    from tests.test_tracedat import HEADER_EVENT, HEADER_PAGE

    raw = tmp_path / "cpu0.raw"
    raw.write_bytes(make_page(data_record(record, 100), 10**9))
    meta = TraceMetadata(header_page=HEADER_PAGE, header_event=HEADER_EVENT, page_size=4096, cpus=1,
                         ftrace_formats=[], event_formats=[("probe_x", [FORMAT])], kallsyms=b"",
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
