"""The time-sliced decoder (native/tables.c): a file cut into time slices, each merged and decoded on
its own thread, gives the tables the merged reader gives (the same rows in the same order), on
several CPUs with equal time stamps across and within them, a CPU without events, lost events, an
unknown event id, short records, variable-size fields, a last page cut short (an interrupted
recording); and a file it cannot cut exactly (time going back on a CPU, a bad page) is left to the
merged reader."""
from __future__ import annotations

import random
import struct
from pathlib import Path

import pyarrow as pa
import pytest

from tests.helpers import run_sanitized, sanitized_driver
from probectl.analysis.columns import ThreadNames, batch_of, event_schema, read_tables
from probectl.errors import TraceFileError
from probectl.formats import EventFormat
from probectl.ringbuf import EventReader
from probectl.tracedat import TraceMetadata, open_trace, write_tracedat
from tests.test_native import (KINDS_FORMAT, SIMPLE_FORMAT, data_record, kinds_payload, make_page, simple_payload,
                               time_stamp)
from tests.test_tracedat import HEADER_EVENT, HEADER_PAGE

PAGE = 4096


class Threads:  # (what a trace file says of its threads: 11 and 12 are threads of process 10)
    cmdlines = {10: "main", 11: "worker", 13: "other"}
    tgids = {11: 10, 12: 10, 13: 13}


@pytest.fixture(scope="module")
def formats() -> list[EventFormat]:
    return [EventFormat.parse(KINDS_FORMAT, "test"), EventFormat.parse(SIMPLE_FORMAT, "test")]


def payload(rng: random.Random, i: int) -> bytes:
    """A kinds or simple event of one of a few threads (some unknown), now and then an event id
    without a format or a record too short for its fields."""
    pid = rng.choice([10, 11, 12, 13, 99, 0])
    r = rng.random()
    if r < 0.05:
        return struct.pack("<HBBi", 4242, 0, 0, pid) + b"?" * 8  # (no format)
    if r < 0.08:
        return simple_payload(pid, i)[:6]  # (short: no pid, no seq)
    if r < 0.5:
        return simple_payload(pid, i)
    name = bytes(rng.choice(b"abc\xff\xc3") for _ in range(rng.randrange(0, 9)))
    return kinds_payload(pid, -i % 100, i & 0xffff, -i, 2**63 + i, -i, b"c%d" % i, name, b"r",
                         (i, 2, 3), tuple(range(i % 4)), b"\x00\x01\x02\x03\x04\x05")


def cpu_pages(rng: random.Random, stamps: list[int], *, missed_page: int = -1, cut_last: bool = False) -> bytes:
    """Pages of events at ``stamps`` (ascending), a page full at ~3.5 KiB; page ``missed_page``
    says events were lost before it; ``cut_last``: the last page ends after its data (a recording
    interrupted while the page was written out)."""
    pages, recs, base, now = [], b"", None, 0
    for i, ts in enumerate(stamps):
        body = payload(rng, i)
        if base is not None and len(recs) + len(body) + 24 > 3500:
            pages.append(make_page(recs, base, missed=5 if len(pages) == missed_page else None))
            recs, base = b"", None
        if base is None:
            base = now = ts
        if ts - now >= 1 << 27:
            recs += time_stamp(ts) + data_record(body, 0)
        else:
            recs += data_record(body, ts - now)
        now = ts
    if recs:
        pages.append(make_page(recs, base, missed=5 if len(pages) == missed_page else None))
    data = b"".join(pages)
    if cut_last:
        data = data[:len(data) - PAGE + 16 + len(recs)]
    return data


def streams(seed: int) -> list[tuple[int, bytes, int, int]]:
    """Four CPUs: two busy with equal stamps across them and within each, one with a page of no
    events, one with lost events and its last page cut short."""
    rng = random.Random(seed)
    shared = sorted(rng.sample(range(10**6, 10**9), 300))
    out = []
    for cpu in range(4):
        if cpu == 2:
            data = make_page(b"", 5 * 10**8)
        else:
            stamps = sorted(rng.sample(range(10**6, 10**9), 1500) + shared)
            stamps[20] = stamps[21] = stamps[22]  # (equal stamps on one CPU keep their order)
            stamps.append(stamps[-1] + (1 << 40))  # (a jump: an absolute time stamp)
            data = cpu_pages(rng, stamps, missed_page=3 if cpu == 3 else -1, cut_last=cpu == 3)
        out.append((cpu, data, 0, len(data)))
    return out


def as_tables(batches, formats) -> dict[str, list[dict]]:
    """The rows of each format of a reader's batches, as Arrow makes them."""
    names = ThreadNames(Threads())
    schemas = {f.id: event_schema(f) for f in formats}
    out: dict[str, list[pa.RecordBatch]] = {}
    for _n, tables in batches:
        for t in tables:
            out.setdefault(t.format.full_name, []).append(batch_of(t, schemas[t.format.id], names))
    return {name: pa.Table.from_batches(b).to_pylist() for name, b in out.items()}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("workers,slice_bytes", [(1, 1 << 30), (1, 3 * PAGE), (2, 5 * PAGE), (3, PAGE), (8, 2 * PAGE)])
def test_slices_give_the_merged_readers_tables(formats, seed, workers, slice_bytes):
    data = streams(seed)
    names = ThreadNames(Threads())
    merged_reader = EventReader(data, formats)
    merged = list(merged_reader.tables(500, names.lookup))
    reader = EventReader(data, formats)
    seen = []
    sliced = reader.slice_tables(workers, names.lookup, slice_bytes=slice_bytes, progress=seen.append)
    assert sliced is not None, "the pages could not be cut"
    assert len(sliced) > 1 if slice_bytes < 1 << 30 else len(sliced) == 1
    assert sum(n for n, _ in sliced) == sum(n for n, _ in merged) == seen[-1]
    want, got = as_tables(merged, formats), as_tables(sliced, formats)
    assert sorted(want) == sorted(got) == ["test:kinds", "test:simple"]
    for event in want:
        assert got[event] == want[event], event
    assert reader.short_records == merged_reader.short_records > 0


def test_slices_without_threads(formats):
    data = streams(3)
    merged = list(EventReader(data, formats).tables(300))
    sliced = EventReader(data, formats).slice_tables(2, slice_bytes=4 * PAGE)
    assert sliced is not None and len(sliced) > 2
    for name in ("test:kinds", "test:simple"):
        want = b"".join(bytes(t.ts) for _, ts in merged for t in ts if t.format.full_name == name)
        got = b"".join(bytes(t.ts) for _, ts in sliced for t in ts if t.format.full_name == name)
        assert got == want and all(t.thread is None for _, ts in sliced for t in ts)


def test_time_going_back_is_left_to_the_merged_reader(formats):
    rng = random.Random(4)
    a = cpu_pages(rng, list(range(1000, 200000, 50)))
    b = cpu_pages(rng, list(range(1000, 100000, 50))) + cpu_pages(rng, list(range(500, 50000, 50)))
    data = [(0, a, 0, len(a)), (1, b, 0, len(b))]
    assert EventReader(data, formats).slice_tables(2, slice_bytes=2 * PAGE) is None
    # (one slice is not cut, and decodes as the merged reader does)
    merged = list(EventReader(data, formats).tables())
    one = EventReader(data, formats).slice_tables(1, slice_bytes=1 << 30)
    assert one is None or as_tables(one, formats) == as_tables(merged, formats)


def test_a_bad_page_is_left_to_the_merged_reader(formats):
    rng = random.Random(5)
    a = bytearray(cpu_pages(rng, list(range(1000, 300000, 40))))
    struct.pack_into("<Q", a, 3 * PAGE + 8, 9999)  # (the fourth page's commit is impossible)
    data = [(0, bytes(a), 0, len(a))]
    for slice_bytes in (2 * PAGE, 1 << 30):
        assert EventReader(data, formats).slice_tables(2, slice_bytes=slice_bytes) is None
    with pytest.raises(TraceFileError, match="commit"):
        list(EventReader(data, formats).tables())


# ---- whole files ------------------------------------------------------------------------------------


def write_file(path: Path, data: list[tuple[int, bytes, int, int]], tmp: Path, version: int = 7,
               formats: tuple[str, ...] = (KINDS_FORMAT, SIMPLE_FORMAT)) -> None:
    """A trace.dat of the CPUs' pages in ``data``, with ``formats`` (system ``test``) and the
    threads of :class:`Threads`."""
    files = {}
    for cpu, raw, _off, _size in data:
        files[cpu] = tmp / f"cpu{cpu}.raw"
        files[cpu].write_bytes(raw)
    meta = TraceMetadata(header_page=HEADER_PAGE, header_event=HEADER_EVENT, page_size=PAGE, cpus=len(files),
                         event_formats=[("test", list(formats))],
                         cmdlines="".join(f"{t} {c}\n" for t, c in Threads.cmdlines.items()),
                         tgids="".join(f"{t} {g}\n" for t, g in Threads.tgids.items()), trace_clock="[local] global",
                         uname="Linux slicehost 6.1 #1 x86_64", trace_id=1,
                         cpustats={c: "entries: 0\noverrun: 0\n" for c in files})
    write_tracedat(path, meta, files, version=version)


def test_read_tables_is_the_same_on_any_number_of_threads(tmp_path):
    path = tmp_path / "t.dat"
    write_file(path, streams(6), tmp_path)
    with open_trace(path) as trace:
        merged = read_tables(trace, workers=0)
        for workers, slice_bytes in ((1, 1 << 30), (2, 3 * PAGE), (3, PAGE)):
            sliced = read_tables(trace, workers=workers, slice_bytes=slice_bytes)
            assert sliced.events == merged.events and sorted(sliced.tables) == sorted(merged.tables)
            for event, table in merged.tables.items():
                assert sliced.tables[event].equals(table), (workers, event)
    # A corrupt page in the middle of a CPU's pages: the same error either way.
    data = streams(6)
    cpu, raw, off, size = data[1]
    bad = bytearray(raw)
    struct.pack_into("<Q", bad, 5 * PAGE + 8, 9999)
    data[1] = (cpu, bytes(bad), off, size)
    write_file(tmp_path / "bad.dat", data, tmp_path)
    errors = []
    for workers in (0, 2):
        with open_trace(tmp_path / "bad.dat") as trace, pytest.raises(TraceFileError) as err:
            read_tables(trace, workers=workers, slice_bytes=2 * PAGE)
        errors.append(str(err.value))
    assert errors[0] == errors[1] and "cpu 1: page at data offset 0x5000: corrupt" in errors[0]


# ---- the C core under sanitizers ---------------------------------------------------------------------


@pytest.mark.parametrize("sanitizer", ["address,undefined", "thread"])
def test_slices_under_sanitizers(tmp_path, sanitizer):
    """native/fuzz/tables_fuzz.c: random multi-CPU pages (a third of them with flipped bits) cut into
    1-8 slices decoded on as many threads; whenever no slice refuses them, the merged reader reads
    them too and the rows are its rows. Under ASan+UBSan (bounds, leaks) and TSan (the threads)."""
    exe = sanitized_driver(tmp_path, ["fuzz/tables_fuzz.c", "tables.c", "columns.c", "ringbuf.c", "reader.c"],
                           sanitizer)
    for seed in ("1", "2"):
        assert run_sanitized(exe, "1500", seed) == "ok 1500\n"
