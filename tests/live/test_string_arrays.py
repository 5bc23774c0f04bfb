""":string[N] arguments of a live uprobe: the recorded strings are the program's words (offline:
tests/test_string_arrays.py)."""
from __future__ import annotations

import os

import pytest

from tests.helpers import build_fixture, probectl as cli
from tests.test_string_arrays import decoded


GROUP = f"pstrarr{os.getpid()}"


WORDS = ["alpha", "be ta", "", "unused"]


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
