"""probectl.outputfile: a file named with -o is written whole or not at all, a device or FIFO in
place, and nothing ever waits on a FIFO that no process reads (the fuzzer's ``record -o FIFO`` hung)."""
from __future__ import annotations

import os
import stat
import threading

import pytest

from tests.helpers import FifoReader
from probectl.errors import OutputFileError
from probectl.outputfile import OutputFile, write_text


def test_a_regular_file_is_replaced_whole_with_the_usual_mode(tmp_path):
    path = tmp_path / "out.svg"
    path.write_text("old")
    write_text(path, "new ✓")
    assert path.read_text() == "new ✓"
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
    assert [p.name for p in tmp_path.iterdir()] == ["out.svg"]


def test_a_failure_part_way_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "out.dat"
    path.write_text("old")

    def produce(out):
        out.write(b"half")
        raise KeyboardInterrupt  # (Ctrl-C while writing)

    with pytest.raises(KeyboardInterrupt):
        OutputFile(path).write(produce)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["out.dat"]


@pytest.mark.parametrize("where, message", [("dir", "is a directory"), ("missing/x", "is not a directory")])
def test_a_place_that_cannot_be_written_is_refused_when_claimed(tmp_path, where, message):
    (tmp_path / "dir").mkdir()
    with pytest.raises(OutputFileError, match=message):
        OutputFile(tmp_path / where)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]


def test_a_fifo_nobody_reads_is_an_error_at_once_not_a_wait(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = threading.Event()

    def claim():
        with pytest.raises(OutputFileError, match="no process is reading this FIFO") as err:
            OutputFile(fifo)
        assert "start its reader first" in err.value.hint
        done.set()

    worker = threading.Thread(target=claim, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert done.is_set(), "claiming a FIFO with no reader waited"
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("seekable", [False, True])
def test_a_fifo_with_a_reader_is_written_in_place(tmp_path, seekable):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)

    def produce(out):  # (as the trace.dat writer does: a size filled in afterwards)
        out.write(b"\0" * 4 + b"x" * 100_000)
        if seekable:
            out.seek(0)
            out.write(b"SIZE")

    with OutputFile(fifo) as output:
        output.write(produce, seekable=seekable)
    assert reader.result() == (b"SIZE" if seekable else b"\0" * 4) + b"x" * 100_000
    assert stat.S_ISFIFO(fifo.stat().st_mode) and [p.name for p in tmp_path.iterdir()] == ["fifo"]


def test_a_reader_that_goes_away_is_an_error_not_a_signal(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    output = OutputFile(fifo)
    os.close(reader)
    with pytest.raises(OutputFileError, match="Broken pipe"):
        output.write(lambda out: out.write(b"x" * 1_000_000))


def test_an_unseekable_write_to_a_fifo_is_refused_by_the_stream_not_corrupted(tmp_path):
    """A writer that seeks must say so (seekable=True); one that forgets fails instead of writing
    a file with holes."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(OutputFileError, match="not seekable"):
            OutputFile(fifo).write(lambda out: (out.write(b"ab"), out.seek(0)))
    finally:
        os.close(reader)
