"""trace.dat files: probectl's writer and reader (versions 6 and 7), against trace-cmd.

trace-cmd is the oracle both ways: ``trace-cmd report -R -t`` must print the events probectl wrote
with the values probectl decodes, and probectl must read what ``trace-cmd convert`` writes
(version 6, version 7 uncompressed and zstd-compressed). The committed samples in
tests/data/tracedat (see make_samples.py there) keep the offline tests honest without trace-cmd.
"""
from __future__ import annotations

import json
import os
import random
import re
import stat
import struct
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FifoReader
from probectl.errors import OutputFileError, TraceFileError
from probectl.formats import EventFormat
from probectl.ringbuf import PageLayout
from probectl.tracedat import OPTION_SAVED_TGIDS, Option, TraceFile, TraceMetadata, open_trace, write_tracedat
from probectl.tracedat.writer import CpuPages
from tests.test_native import (KINDS_FORMAT, SIMPLE_FORMAT, common, data_record, kinds_payload, kinds_values, make_page,
                               simple_payload, time_extend)

DATA = Path(__file__).resolve().parent / "data" / "tracedat"
SAMPLES = ["sample-v7.dat", "sample-v6.dat", "tracecmd-v6.dat", "tracecmd-v7-zstd.dat"]
HEADER_PAGE = """\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
"""
HEADER_EVENT = """# compressed entry header
\ttype_len    :    5 bits
\ttime_delta  :   27 bits
\tarray       :   32 bits

\tpadding     : type == 29
\ttime_extend : type == 30
\ttime_stamp : type == 31
\tdata max type_len  == 28
"""

# ---- trace-cmd report -R -t, parsed ------------------------------------------------------------

_REPORT_LINE = re.compile(r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<secs>\d+)\.(?P<ns>\d{9}):"
                          r"\s+(?P<event>\w+):\s*(?P<rest>.*)$")


def _value(text: str) -> Any:
    if re.fullmatch(r"0x[0-9a-fA-F]+", text):
        return int(text, 16)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def parse_report(text: str) -> list[tuple[int, int, int, str, dict[str, Any]]]:
    """(ts, cpu, pid, event, fields) of every event line of ``trace-cmd report -R -t``."""
    events = []
    for line in text.splitlines():
        m = _REPORT_LINE.match(line)
        if not m:
            continue
        fields = {}
        rest = m.group("rest").strip()
        if rest:
            for part in re.split(r"\s+(?=\w+=)", rest):
                name, _, value = part.partition("=")
                fields[name] = _value(value)
        ts = int(m.group("secs")) * 10**9 + int(m.group("ns"))
        events.append((ts, int(m.group("cpu")), int(m.group("pid")), m.group("event"), fields))
    return sorted(events, key=lambda e: (e[0], e[1]))


def _comparable(value: Any) -> Any:
    return value.rstrip("\n") if isinstance(value, str) else value


def decoded(trace: TraceFile, **kwargs: Any) -> list[tuple[int, int, int, str, dict[str, Any]]]:
    """The same tuples from probectl's reader."""
    events = [(e.ts, e.cpu, e.pid, e.format.name if e.format else f"unknown-{e.id}",
               {k: _comparable(v) for k, v in e.fields.items()}) for e in trace.events(**kwargs)]
    return sorted(events, key=lambda e: (e[0], e[1]))


def symbol_at(kallsyms: bytes, addr: int) -> str:
    """The kallsyms name of the function holding ``addr``."""
    best = (0, "")
    for line in kallsyms.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] in "tTwW":
            start = int(parts[0], 16)
            if best[0] < start <= addr:
                best = (start, parts[2])
    return best[1]


def assert_same_events(report: list, ours: list, kallsyms: bytes = b"") -> None:
    """trace-cmd's events are ours: same time stamps, CPUs, pids, names and field values.

    trace-cmd prints numbers and strings plainly, so those are compared; three of its habits are
    allowed for: it prints an s8 as unsigned (251 for -5), a string with non-ASCII bytes as
    ``ARRAY[..]``, and an address as a kernel symbol when the file has kallsyms. Arrays and blobs it prints its own way and they are not compared.
    """
    assert [e[:4] for e in report] == [e[:4] for e in ours]
    for theirs, mine in zip(report, ours):
        for name, value in mine[4].items():
            if name not in theirs[4] or not isinstance(value, (int, str)):
                continue
            got = theirs[4][name]
            if isinstance(value, int) and isinstance(got, str):
                assert got == symbol_at(kallsyms, value), (name, theirs, mine)
            elif isinstance(value, str) and isinstance(got, str) and got.startswith("ARRAY["):
                # (a string with bytes outside ASCII comes out as a byte array)
                raw = bytes(int(x, 16) for x in got[6:-1].split(","))
                assert raw.rstrip(b"\0").decode() == value, (name, theirs, mine)
            elif isinstance(value, int) and value < 0:
                assert got in (value, value % (1 << 8)), (name, theirs, mine)
            else:
                assert got == value, (name, theirs, mine)


def trace_cmd_report(trace_cmd: str, path: Path) -> str:
    run = subprocess.run([trace_cmd, "report", "-R", "-t", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


# ---- the committed samples ----------------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_samples_decode_like_trace_cmd_report(name):
    oracle = parse_report((DATA / "sample-report.txt").read_text())
    facts = json.loads((DATA / "sample.json").read_text())
    with open_trace(DATA / name) as trace:
        events = decoded(trace)
    assert events == oracle
    getpids = [e for e in events if e[3] == "sys_enter_getpid" and e[2] == facts["getpid_pid"]]
    assert len(getpids) == facts["getpid_count"]
    assert all(e[4] == {"__syscall_nr": 39} for e in getpids)
    execs = [e for e in events if e[3] == "sched_process_exec" and e[2] == facts["exec_pid"]]
    assert [e[4]["filename"] for e in execs] == [facts["exec_filename"]]
    assert [e[4]["buf"] for e in events if e[3] == "print"] == facts["markers"]


def test_sample_metadata():
    facts = json.loads((DATA / "sample.json").read_text())
    with open_trace(DATA / "sample-v7.dat") as v7, open_trace(DATA / "tracecmd-v7-zstd.dat") as zst, \
            open_trace(DATA / "sample-v6.dat") as v6:
        for t in (v7, zst, v6):
            assert t.layout == PageLayout(8, False, 4096)
            assert t.trace_clock == "local"
            assert t.uname == "Linux sample 6.18 x86_64"
            assert t.trace_id == 0x5A4D504C45
            assert t.cpus == 2 and sorted(t.cpustats) == [0, 1]
            assert t.comm(facts["exec_pid"]) == "true"
            assert {f.name for f in t.event_formats} == {"sys_enter_getpid", "sched_process_exec"}
            assert "print" in {f.name for f in t.ftrace_formats} and not t.unparsed_formats
            assert "commit" in t.header_page and "type_len" in t.header_event
        assert (v7.version, v7.compression, v6.version) == (7, "none", 6)
        assert (zst.version, zst.compression, zst.buffers[0].compressed) == (7, "zstd", True)
        assert v7.recorder_version.startswith("probectl")
        assert int(v7.cpustats[0]["overrun"]) == 0


# ---- writing and reading back -------------------------------------------------------------------


def synthetic_trace(tmp_path: Path, version: int) -> tuple[Path, TraceMetadata, list]:
    """A 4-CPU file with data on CPUs 0 and 2 (CPU 1 empty, CPU 3 without a file), every field
    kind, a time extend and lost events."""
    kinds = EventFormat.parse(KINDS_FORMAT, "test")
    recs0 = b"".join(data_record(kinds_payload(500 + i, **kinds_values(i)), 100) for i in range(4))
    recs0 += time_extend(3 << 27) + data_record(simple_payload(9, 77))
    pages0 = make_page(recs0, 10**9) + make_page(data_record(simple_payload(9, 78), 5), 2 * 10**9, missed=12)
    pages2 = make_page(b"".join(data_record(simple_payload(8, s), 50) for s in range(3)), 10**9 + 120)
    files = {}
    for cpu, data in ((0, pages0), (1, b""), (2, pages2)):
        files[cpu] = tmp_path / f"cpu{cpu}.raw"
        files[cpu].write_bytes(data)
    meta = TraceMetadata(
        header_page=HEADER_PAGE, header_event=HEADER_EVENT, page_size=4096, cpus=4,
        ftrace_formats=[(DATA.parent / "formats" / "ftrace_print.format").read_text()],
        event_formats=[("test", [KINDS_FORMAT, SIMPLE_FORMAT])],
        kallsyms=b"ffffffff81000000 T _stext\nffffffff81000100 T probectl_test_symbol\n",
        printk_formats=b'0xffffffff82000000 : "hello %d\\n"\n',
        cmdlines="500 kinds-500\n9 simple\n8 other\n",
        tgids="500 499\n9 9\n",
        trace_clock="[local] global counter",
        uname="Linux synthetic 1.0 x86_64",
        trace_id=1234567,
        cpustats={0: "entries: 0\noverrun: 12\n", 2: "entries: 0\noverrun: 0\n"},
        extra_options=[(Option.DATE, b"0x0\0")],
    )
    path = tmp_path / f"synthetic-v{version}.dat"
    write_tracedat(path, meta, files, version=version)
    t0 = 10**9
    expect = [(t0 + 100 * (i + 1), 0, 500 + i, "kinds") for i in range(4)]
    expect += [(t0 + 400 + (3 << 27), 0, 9, "simple"), (2 * 10**9 + 5, 0, 9, "simple")]
    expect += [(t0 + 120 + 50 * (s + 1), 2, 8, "simple") for s in range(3)]
    return path, meta, sorted(expect)


@pytest.mark.parametrize("version", [6, 7])
def test_write_and_read_back(tmp_path, version):
    path, meta, expect = synthetic_trace(tmp_path, version)
    with open_trace(path) as t:
        assert t.version == version and t.page_size == 4096 and t.cpus == 4
        assert t.kallsyms == meta.kallsyms and t.printk_formats == meta.printk_formats
        assert t.cmdlines == {500: "kinds-500", 9: "simple", 8: "other"}
        assert t.tgids == {500: 499, 9: 9}
        assert t.trace_clock == "local" and t.uname == meta.uname and t.trace_id == 1234567
        assert t.cpustats[0]["overrun"] == "12"
        assert (Option.DATE, b"0x0\0") in t.options
        assert [c.cpu for c in t.buffer().cpus if c.size] == [0, 2]
        events = list(t.events())
        assert [(e.ts, e.cpu, e.pid, e.format.name) for e in events] == expect
        kinds = [e for e in events if e.format.name == "kinds"]
        assert kinds[2].fields["name"] == "name-2-ü" and kinds[2].fields["dyn"] == (-1, 2, -3)
        reader = t.reader()
        (batch,) = reader.batches()
        assert [(lost.cpu, lost.count) for lost in batch.lost] == [(0, 12)]
        assert list(batch.column("test:simple", "seq")) == [0, 1, 2, 77, 78]


@pytest.mark.tracecmd
@pytest.mark.parametrize("version", [6, 7])
def test_trace_cmd_reads_what_probectl_writes(tmp_path, trace_cmd_bin, version):
    path, _meta, _expect = synthetic_trace(tmp_path, version)
    dump = subprocess.run([trace_cmd_bin, "dump", "-v", str(path)], capture_output=True, text=True)
    assert "valid trace-cmd file" in dump.stdout + dump.stderr
    report = parse_report(trace_cmd_report(trace_cmd_bin, path))
    with open_trace(path) as t:
        assert_same_events(report, decoded(t))


@pytest.mark.tracecmd
@pytest.mark.parametrize("args", [["--file-version", "6"], ["--file-version", "7", "--compression", "none"],
                                  ["--file-version", "7", "--compression", "zstd"]],
                         ids=["v6", "v7", "v7-zstd"])
def test_probectl_reads_trace_cmd_convert_output(tmp_path, trace_cmd_bin, args):
    original, _meta, _expect = synthetic_trace(tmp_path, 7)
    out = tmp_path / "converted.dat"
    run = subprocess.run([trace_cmd_bin, "convert", "-i", str(original), "-o", str(out), *args],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    with open_trace(original) as a, open_trace(out) as b:
        assert decoded(b) == decoded(a)
        assert b.cmdlines == a.cmdlines and b.kallsyms == a.kallsyms and b.cpustats == a.cpustats


def test_a_device_or_fifo_is_written_in_place_not_replaced(tmp_path):
    """``record -o /dev/null`` once replaced /dev/null by a regular file (the write-then-rename of a
    regular file): a device node or a FIFO is written into instead, and stays what it was."""
    path, meta, expect = synthetic_trace(tmp_path, 7)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    # (the reader opens first: a writer never waits for one, a FIFO nobody reads is an error)
    with pytest.raises(OutputFileError, match="no process is reading this FIFO"):
        write_tracedat(fifo, meta, {cpu: tmp_path / f"cpu{cpu}.raw" for cpu in (0, 1, 2)})
    reader = FifoReader(fifo)
    write_tracedat(fifo, meta, {cpu: tmp_path / f"cpu{cpu}.raw" for cpu in (0, 1, 2)})
    assert reader.result() == path.read_bytes()
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    if os.geteuid() == 0:  # a device node of its own (mknod needs root): the real /dev/null is nobody's to risk
        null = tmp_path / "null"
        os.mknod(null, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        write_tracedat(null, meta, {cpu: tmp_path / f"cpu{cpu}.raw" for cpu in (0, 1, 2)})
        assert stat.S_ISCHR(null.stat().st_mode)
        full = tmp_path / "full"  # /dev/full's device: a write error is the user's, not a bug
        os.mknod(full, 0o600 | stat.S_IFCHR, os.makedev(1, 7))
        with pytest.raises(OutputFileError, match="cannot write .*full: No space left on device"):
            write_tracedat(full, meta, {cpu: tmp_path / f"cpu{cpu}.raw" for cpu in (0, 1, 2)})
        assert stat.S_ISCHR(full.stat().st_mode)


@pytest.mark.tracecmd
def test_a_v7_file_is_made_of_the_largest_cpus_page_file(tmp_path, trace_cmd_bin):
    """Pages that start a page into their file (as ``record -g`` streams them, probectl.record.callchains)
    leave room for the head: the largest CPU's file becomes the trace.dat, its pages not copied, a torn
    last page cut; the file equals the one written from plain page files, and trace-cmd reads it. A
    FIFO, or a file elsewhere, gets a copy."""
    plain, meta, _expect = synthetic_trace(tmp_path, 7)
    files = {}
    for cpu in (0, 1, 2):
        files[cpu] = CpuPages(tmp_path / f"cpu{cpu}.pages", 4096)
        files[cpu].path.write_bytes(b"\xee" * 4096 + (tmp_path / f"cpu{cpu}.raw").read_bytes()
                                    + (b"\1" * 100 if cpu == 0 else b""))
    base = files[0].path.stat().st_ino  # (cpu 0 has the most pages)
    out = tmp_path / "made.dat"
    write_tracedat(out, meta, files)
    assert out.stat().st_ino == base and not files[0].path.exists()
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask
    with open_trace(plain) as a, open_trace(out) as b:
        assert decoded(b) == decoded(a) and b.kallsyms == a.kallsyms and b.cmdlines == a.cmdlines
        assert [(c.cpu, c.size) for c in b.buffer().cpus] == [(c.cpu, c.size) for c in a.buffer().cpus]
    report = parse_report(trace_cmd_report(trace_cmd_bin, out))
    with open_trace(out) as t:
        assert_same_events(report, decoded(t))
    # a FIFO: copied from the page files, which stay
    files[0] = CpuPages(tmp_path / "cpu0.pages", 4096)
    files[0].path.write_bytes(b"\xee" * 4096 + (tmp_path / "cpu0.raw").read_bytes())
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    write_tracedat(fifo, meta, files)
    with open(tmp_path / "from-fifo.dat", "wb") as f:
        f.write(reader.result())
    assert files[0].path.exists()
    with open_trace(plain) as a, open_trace(tmp_path / "from-fifo.dat") as b:
        assert decoded(b) == decoded(a)


# A uprobe of six integer arrays as Linux 6.18 writes its format (``s8 b[]`` of size 4, ...): the
# arguments of 'sum_arrays b[0]:s8[4] h[0]:s16[4] w[0]:s32[4] q[0]:s64[4] u[0]:u32[4] x=u[0]:x32[4]'
# on fixtures/int_arrays.c, whose values these are.
ARRAYS_FORMAT = (DATA.parent / "formats" / "uprobe_arrays.format").read_text()
ARRAYS = [dict(b=(-1, 2, -128, 127), h=(-300, 7, -32768, 32767), w=(-5, 100000, -2**31, 2**31 - 1),
               q=(-7, 1 << 40, -2**63, 2**63 - 1), u=(1, 2**31, 2**32 - 1, 0), x=(1, 2**31, 2**32 - 1, 0)),
          dict(b=(10, -20, 30, -40), h=(-1, -2, 3, 4), w=(0, -1, 1, -100000), q=(-(1 << 40), 0, 1, -1),
               u=(4000000000, 3, 2, 1), x=(4000000000, 3, 2, 1))]


def report_arrays(text: str) -> list[dict[str, list[int]]]:
    """The arrays ``NAME={E,E,...}`` of each event line of ``trace-cmd report`` (the kernel's print format)."""
    return [{name: [int(e, 0) for e in elements.split(",")] for name, elements in re.findall(r"(\w+)=\{([^}]*)\}", line)}
            for line in text.splitlines() if ": arrays:" in line]


@pytest.mark.tracecmd
@pytest.mark.parametrize("version", [6, 7])
def test_trace_cmd_reads_a_probes_integer_arrays(tmp_path, trace_cmd_bin, version):
    """trace-cmd prints a probe's fixed arrays of integers with the values probectl reads, where it
    printed every element of the kernel's ``s64 q[]`` as 0, and an s8's or s16's -1 as 255 or 65535
    (the writer writes the length in, and %hhd and %hd: probectl.formats.for_libtraceevent)."""
    pages = make_page(b"".join(data_record(common(1003, 700 + i) + struct.pack(
        "<Q4b4h4i4q4I4I", 0x401000, *v["b"], *v["h"], *v["w"], *v["q"], *v["u"], *v["x"]), 100)
        for i, v in enumerate(ARRAYS)), 10**9)
    (tmp_path / "cpu0.raw").write_bytes(pages)
    meta = TraceMetadata(header_page=HEADER_PAGE, header_event=HEADER_EVENT, page_size=4096, cpus=1,
                         event_formats=[("arrays1", [ARRAYS_FORMAT])], cmdlines="700 int_arrays\n701 int_arrays\n")
    path = tmp_path / "arrays.dat"
    write_tracedat(path, meta, {0: tmp_path / "cpu0.raw"}, version=version)
    with open_trace(path) as t:
        assert [{k: v for k, v in e.fields.items() if k != "__probe_ip"} for e in t.events()] == ARRAYS
    run = subprocess.run([trace_cmd_bin, "report", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert report_arrays(run.stdout) == [{k: list(v) for k, v in a.items()} for a in ARRAYS]


def test_write_arguments(tmp_path):
    _path, meta, _expect = synthetic_trace(tmp_path, 7)
    with pytest.raises(ValueError, match="version 5"):
        write_tracedat(tmp_path / "x.dat", meta, {}, version=5)
    with pytest.raises(ValueError, match="cpu 9"):
        write_tracedat(tmp_path / "x.dat", meta, {9: tmp_path / "cpu0.raw"})
    assert not (tmp_path / "x.dat").exists()
    # A torn last page (a recorder killed mid-write) is left out, not copied half.
    torn = tmp_path / "torn.raw"
    torn.write_bytes((tmp_path / "cpu2.raw").read_bytes() + b"\1" * 100)
    write_tracedat(tmp_path / "torn.dat", meta, {0: torn})
    with open_trace(tmp_path / "torn.dat") as t:
        assert t.buffer().cpus[0].size == 4096 and len(list(t.events())) == 3


# ---- corrupt and truncated files ----------------------------------------------------------------


def _read_all(path: Path) -> int:
    with open_trace(path) as t:
        n = sum(1 for _ in t.events())
        n += sum(1 for _ in t.events(strict=False))
        return n


@pytest.mark.parametrize("content, message", [
    (b"", "is empty"),
    (b"hello world, this is not a trace", "not a trace.dat file"),
    (b"\x17\x08\x44tracing8\0" + b"\0" * 40, "version '8' is not supported"),
    (b"\x17\x08\x44tracing7\0\0\x08" + struct.pack("<I", 4096) + b"lz4\0\0" + b"\0" * 20, "compression 'lz4'"),
    (b"\x17\x08\x44tracing6\0\0\x08" + struct.pack("<I", 1000), "page size 1000"),
    (b"\x17\x08\x44tracing6\0\0\x08" + struct.pack("<I", 4096) + b"header_page\0", "truncated"),
])
def test_bad_files_say_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.dat"
    path.write_bytes(content)
    with pytest.raises(TraceFileError, match=message):
        open_trace(path)


def test_missing_file(tmp_path):
    with pytest.raises(TraceFileError, match="cannot open"):
        open_trace(tmp_path / "nope.dat")


@pytest.mark.parametrize("name", ["sample-v7.dat", "sample-v6.dat", "tracecmd-v7-zstd.dat"])
def test_truncated_and_corrupted_files_raise_trace_file_errors(tmp_path, name):
    original = (DATA / name).read_bytes()
    rng = random.Random(name)
    path = tmp_path / name
    cuts = sorted(set(list(range(0, 64)) + [rng.randrange(len(original)) for _ in range(120)]))
    outcomes = {"error": 0, "ok": 0}
    for cut in cuts:
        path.write_bytes(original[:cut])
        try:
            _read_all(path)
            outcomes["ok"] += 1
        except TraceFileError:
            outcomes["error"] += 1
    for _ in range(200):
        data = bytearray(original)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(data))
            if rng.random() < 0.5:
                data[at] = rng.randrange(256)
            else:
                struct.pack_into("<I", data, min(at, len(data) - 4), rng.choice([0, 0xFFFFFFFF, rng.randrange(1 << 32)]))
        path.write_bytes(bytes(data))
        try:
            _read_all(path)
            outcomes["ok"] += 1
        except TraceFileError:
            outcomes["error"] += 1
    assert outcomes["error"] > 0


def test_truncated_data_is_reported_with_its_position(tmp_path):
    data = (DATA / "sample-v6.dat").read_bytes()
    path = tmp_path / "cut.dat"
    path.write_bytes(data[:-100])
    with pytest.raises(TraceFileError, match=r"truncated: cpu \d data ends at"):
        open_trace(path)
