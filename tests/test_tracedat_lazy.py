"""What a trace.dat reader finds without reading everything: event formats parsed when asked for
(:class:`~probectl.tracedat.formattable.FormatTable`) and the ids of the records found by walking
the pages (``TraceFile.event_ids``), each checked against the full work it replaces."""
from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from probectl.tracedat import open_trace
from probectl.tracedat.formattable import FormatTable, id_hint

DATA = Path(__file__).resolve().parent / "data" / "tracedat"
SAMPLES = ["sample-v7.dat", "sample-v6.dat", "tracecmd-v6.dat", "tracecmd-v7-zstd.dat"]

_FORMAT = """name: {name}
ID: {id}
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int value;\toffset:8;\tsize:4;\tsigned:1;

print fmt: "value=%d", REC->value
"""


def _sample_texts() -> list[tuple[str, str]]:
    with open_trace(DATA / "sample-v7.dat") as t:
        return list(t.format_texts)


def _full(texts: list[tuple[str, str]]) -> dict:
    """id -> format, as parsing every text in order gives it (the reference)."""
    ftrace, events, _ = FormatTable(texts).parse_all()
    return {f.id: f for f in (*ftrace, *events)}


def _check_lookups(texts: list[tuple[str, str]], extra_ids=()) -> None:
    full = _full(texts)
    table = FormatTable(texts)
    for event_id in sorted({*full, *extra_ids}):
        assert table.get(event_id) == full.get(event_id), event_id
    # asked in another order, on a fresh table, and once more from the cache
    table = FormatTable(texts)
    for event_id in sorted({*full, *extra_ids}, reverse=True):
        assert table.get(event_id) == full.get(event_id), event_id
        assert table.get(event_id) == full.get(event_id), event_id


def test_id_hints():
    assert id_hint(_FORMAT.format(name="a", id=12)) == 12
    assert id_hint(_FORMAT.format(name="a", id="0x10")) == 16
    assert id_hint(_FORMAT.format(name="a", id="twelve")) is None
    assert id_hint(_FORMAT.format(name="a", id=1).replace("ID: 1\n", "ID: 1\nID: 2\n")) is None
    assert id_hint(_FORMAT.format(name="a", id=1).replace("ID: 1\n", "")) is None
    assert id_hint(_FORMAT.format(name="ä", id=1)) is None
    assert id_hint(_FORMAT.format(name="a", id=1).replace("\n", "\r\n")) is None
    # an ID line after the print format is not read by the parser, nor here
    text = _FORMAT.format(name="a", id=3) + "ID: 4\n"
    assert id_hint(text) == 3


def test_lookups_equal_the_full_parse_on_a_recorded_file():
    texts = _sample_texts()
    assert len(texts) > 10
    _check_lookups(texts, extra_ids=(0, 65535, 12345))


def test_lookups_equal_the_full_parse_with_duplicates_and_bad_texts():
    texts = [
        ("test", "name: broken\nID: 7\nformat:\n\tnonsense\n"),  # id 7 does not parse...
        ("test", _FORMAT.format(name="seven", id=7)),  # ...so this one is 7
        ("test", _FORMAT.format(name="seven_again", id=7)),  # used twice
        ("test", _FORMAT.format(name="hex", id="0x20")),
        ("test", _FORMAT.format(name="two_ids", id=40).replace("ID: 40\n", "ID: 40\nID: 41\n")),  # 41
        ("test", _FORMAT.format(name="ünïcode", id=50)),
        ("test", _FORMAT.format(name="crlf", id=51).replace("\n", "\r\n")),
        ("test", _FORMAT.format(name="late", id=52) + "ID: 53\n"),
        ("test", _FORMAT.format(name="no_id", id=0).replace("ID: 0\n", "")),
        ("ftrace", _FORMAT.format(name="ft", id=60)),
        ("test", _FORMAT.format(name="other_seven", id=7)),
    ]
    full = _full(texts)
    assert full[7].name == "seven" and full[32].name == "hex" and full[41].name == "two_ids"
    assert 40 not in full and full[50].name == "ünïcode" and full[51].name == "crlf"
    _check_lookups(texts, extra_ids=range(0, 70))
    table = FormatTable(texts)
    table.get(7)
    assert [m for _, m in table.failures()] and all(s == "test" for s, _ in table.failures())
    assert [f.name for f in table.find("ftrace", "ft")] == ["ft"]
    assert table.find("test", "seven_again") == []  # (not the format of its id)


def test_lookups_equal_the_full_parse_on_mutated_texts():
    rng = random.Random(5)
    base = _sample_texts()
    for _ in range(40):
        texts = []
        for system, text in rng.sample(base, min(len(base), 30)):
            lines = text.split("\n")
            for _ in range(rng.randint(0, 3)):
                k = rng.randrange(len(lines))
                choice = rng.randrange(6)
                if choice == 0:
                    lines[k] = f"ID: {rng.choice([1, 2, 3, '0x2', 'x'])}"
                elif choice == 1:
                    del lines[k]
                elif choice == 2:
                    lines.insert(k, lines[rng.randrange(len(lines))])
                elif choice == 3:
                    lines[k] = " \t" + lines[k] + "\r"
                elif choice == 4:
                    lines[k] = "print fmt: \"x\""
                else:
                    lines[k] = lines[k].replace("ID:", "ID :")
            texts.append((system, "\n".join(lines)))
        _check_lookups(texts, extra_ids=range(0, 8))


@pytest.mark.parametrize("name", SAMPLES)
def test_event_ids_are_the_ids_of_the_records(name):
    with open_trace(DATA / name) as t:
        decoded = {ev.id for ev in t.events()}
        assert decoded and t.event_ids() == decoded
        assert [f.id for f in t.present_formats()] == sorted(i for i in decoded if t.format(i) is not None)
        assert all(t.format(f.id) is t.formats[f.id] or t.format(f.id) == t.formats[f.id]
                   for f in t.present_formats())


@pytest.mark.parametrize("name", ["sample-v7.dat", "sample-v6.dat"])
def test_event_ids_of_damaged_pages_are_those_a_lenient_reader_decodes(tmp_path, name):
    original = (DATA / name).read_bytes()
    with open_trace(DATA / name) as t:
        info = t.buffer("")
        spans = [(c.offset, c.size) for c in info.cpus if c.size]
    rng = random.Random(name)
    path = tmp_path / name
    for _ in range(60):
        data = bytearray(original)
        for _ in range(rng.randint(1, 6)):
            offset, size = rng.choice(spans)
            at = offset + rng.randrange(max(size - 4, 1))
            if rng.random() < 0.5:
                data[at] = rng.randrange(256)
            else:
                struct.pack_into("<I", data, at, rng.choice([0, 0xFFFFFFFF, rng.randrange(1 << 32)]))
        path.write_bytes(bytes(data))
        with open_trace(path) as t:
            assert t.event_ids() == {ev.id for ev in t.events(strict=False)}


def test_opening_parses_no_format(monkeypatch):
    from probectl.formats import EventFormat

    calls = []
    real = EventFormat.parse.__func__

    def counting(cls, text, system=""):
        calls.append(system)
        return real(cls, text, system)

    monkeypatch.setattr(EventFormat, "parse", classmethod(counting))
    with open_trace(DATA / "sample-v7.dat") as t:
        assert calls == []
        ids = t.event_ids()
        formats = t.present_formats()
        assert {f.id for f in formats} <= ids and len(calls) < len(t.format_texts)
        assert len(t.formats) >= len(formats) and len(calls) >= len(t.format_texts)
