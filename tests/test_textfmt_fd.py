"""The native formatter writing straight to a file descriptor (``format_text(..., fd=N)``, what
``write_script`` does for a stream with a descriptor): the same bytes as the batches it would
return, in order with what the stream holds before and after, output of several megabytes
(written in chunks), and write errors raised as OSError."""
from __future__ import annotations

import io
import os

import pytest

from probectl.ringbuf import EventReader
from probectl.script import make_formatter, write_script
from probectl.script.nativeplan import native_formatter
from probectl.tracedat import open_trace
from tests.test_textfmt import (CSV_FIELDS, PAGE, SAMPLES, Names, assert_same, fake_symbols, outputs, random_events)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
@pytest.mark.parametrize("kind", ["text", "json", "csv"])
def test_write_script_to_a_file_equals_writing_to_a_string(tmp_path, path, kind):
    fields = CSV_FIELDS if kind == "csv" else ("comm", "tid", "cpu", "time", "event", "ip", "trace")
    buf = io.StringIO()
    with open_trace(path) as t:
        write_script(t, buf, kind, fields)
    out_path = tmp_path / "out.txt"
    with open(out_path, "w", encoding="utf-8") as out, open_trace(path) as t:
        out.write("before\n")
        write_script(t, out, kind, fields)
        assert out.tell() == len(("before\n" + buf.getvalue()).encode())  # (the position follows)
        out.write("after\n")
    assert_same("before\n" + buf.getvalue() + "after\n", out_path.read_text(encoding="utf-8"), kind)


def test_megabytes_of_output_come_out_whole_and_in_order():
    formats, streams = random_events(11, nformats=6, nevents=40000)
    python, native = outputs(formats, streams, "text", ("comm", "tid", "cpu", "time", "event", "trace"),
                             batch=4096)  # (outputs() checks the descriptor's bytes against native)
    assert len(native.encode()) > 3 << 20
    assert_same(python, native, "megabytes")


def test_a_write_error_is_an_os_error(tmp_path):
    formats, streams = random_events(3)
    f = make_formatter("text", Names())
    f.set_formats(formats)
    fake_symbols(f)
    reader = EventReader(streams, formats, PAGE)
    fd = os.open(tmp_path / "ro", os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError):
            reader._native.format_text(native_formatter(f), 512, fd=fd)
    finally:
        os.close(fd)
        reader.close()


def test_a_pipe_reader_that_goes_away_is_a_broken_pipe():
    formats, streams = random_events(4, nevents=20000)
    f = make_formatter("text", Names())
    f.set_formats(formats)
    fake_symbols(f)
    reader = EventReader(streams, formats, PAGE)
    r, w = os.pipe()
    os.close(r)
    try:
        with pytest.raises(BrokenPipeError):
            reader._native.format_text(native_formatter(f), 512, fd=w)
    finally:
        os.close(w)
        reader.close()


def test_what_comes_before_a_corrupt_page_is_written_then_the_error_raised(tmp_path):
    """A strict reader stops at a corrupt page: the events before it are printed (as a reader of
    the good pages alone prints them), then DecodeError."""
    from probectl import _native

    formats, streams = random_events(6, nevents=3000)
    assert len(streams) == 2
    cpu, data, _, size = streams[1]
    bad = bytearray(PAGE.page_size)
    bad[8:16] = (PAGE.page_size * 4).to_bytes(8, "little")  # a commit size past the page
    broken = [streams[0], (cpu, data + bytes(bad), 0, size + len(bad))]

    def fmt() -> object:
        f = make_formatter("text", Names())
        f.set_formats(formats)
        fake_symbols(f)
        return native_formatter(f)

    good = EventReader(streams, formats, PAGE)
    want = b"".join(item[1] for item in iter(lambda: good._native.format_text(fmt(), 100000), None))
    good.close()
    reader = EventReader(broken, formats, PAGE)
    with open(tmp_path / "out", "wb") as out:
        with pytest.raises(_native.DecodeError):
            reader._native.format_text(fmt(), 512, fd=out.fileno())
    reader.close()
    got = (tmp_path / "out").read_bytes()
    assert got and want.startswith(got)
    # (the stream of cpu 1 ends with the bad page: every event of cpu 0 before its time is out)
    assert len(got) >= len(want) // 3
