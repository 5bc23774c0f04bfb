"""The native ring-buffer core: page and record decoding, field tables, the merged columnar
reader, robustness against corrupt pages (in-process and under AddressSanitizer). The per-CPU
recorder on a live tracefs instance (event counts, loss accounting): tests/live/test_native.py."""
from __future__ import annotations

import os
import random
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from probectl import _native
from probectl.errors import TraceFileError
from probectl.formats import EventFormat
from probectl.ringbuf import (KIND_BYTES, KIND_INT, KIND_INT_ARRAY, KIND_STR, LOC_DATA, LOC_FIXED, LOC_REL, LOC_TAIL,
                              EventReader, PageLayout, field_spec, format_specs, parse_page)

ROOT = Path(__file__).resolve().parent.parent

# ---- synthetic pages ------------------------------------------------------------------------------


def record(type_len: int, delta: int, body: bytes = b"", be: bool = False) -> bytes:
    """One record: the u32 header (type_len:5, time_delta:27 in the kernel's bit order) + body."""
    assert 0 <= type_len < 32 and 0 <= delta < (1 << 27)
    header = (type_len << 27 | delta) if be else (type_len | delta << 5)
    return struct.pack(">I" if be else "<I", header) + body


def data_record(payload: bytes, delta: int = 0, be: bool = False, long_form: bool = False) -> bytes:
    """A data record as the kernel writes it: type_len = words for payloads up to 112 bytes,
    else type_len 0 with the length (itself included) in array[0]."""
    padded = payload + b"\0" * (-len(payload) % 4)
    if padded and len(padded) <= 112 and not long_form:
        return record(len(padded) // 4, delta, padded, be)
    return record(0, delta, struct.pack(">I" if be else "<I", len(padded) + 4) + padded, be)


def time_extend(delta: int, be: bool = False) -> bytes:
    return record(30, delta & ((1 << 27) - 1), struct.pack(">I" if be else "<I", delta >> 27), be)


def time_stamp(ts: int, be: bool = False) -> bytes:
    return record(31, ts & ((1 << 27) - 1), struct.pack(">I" if be else "<I", (ts >> 27) & 0xffffffff), be)


def padding(length: int, delta: int = 1, be: bool = False) -> bytes:
    """A discarded record / filler of 4 + length bytes (length counts array[0] itself)."""
    return record(29, delta, struct.pack(">I" if be else "<I", length) + b"\0" * (length - 4), be)


def make_page(records: bytes, ts: int, *, missed: int | None = None, unknown_missed: bool = False,
              long_size: int = 8, be: bool = False, page_size: int = 4096) -> bytes:
    """A sub-buffer: timestamp, commit (+ missed flags, sign-extended as on 64-bit), records,
    the stored lost count, zeros."""
    e = ">" if be else "<"
    commit = len(records)
    if missed is not None or unknown_missed:
        commit |= 1 << 31
        if missed is not None:
            commit |= 1 << 30
    if long_size == 8:
        word = struct.pack(e + "Q", commit | (0xFFFFFFFF00000000 if commit >> 31 else 0))
    else:
        word = struct.pack(e + "I", commit)
    page = struct.pack(e + "Q", ts) + word + records
    if missed is not None:
        page += struct.pack(e + ("Q" if long_size == 8 else "I"), missed)
    assert len(page) <= page_size
    return page + b"\0" * (page_size - len(page))


def common(event_id: int, pid: int, flags: int = 0, preempt: int = 0, be: bool = False) -> bytes:
    return struct.pack(">HBBi" if be else "<HBBi", event_id, flags, preempt, pid)


COMMON_FIELDS = """\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
"""

# Every kind of field the decoder knows, deliberately unaligned.
KINDS_FORMAT = f"""name: kinds
ID: 1001
format:
{COMMON_FIELDS}
\tfield:s8 a8;\toffset:8;\tsize:1;\tsigned:1;
\tfield:u16 b16;\toffset:9;\tsize:2;\tsigned:0;
\tfield:s32 c32;\toffset:11;\tsize:4;\tsigned:1;
\tfield:u64 d64;\toffset:15;\tsize:8;\tsigned:0;
\tfield:s64 e64;\toffset:23;\tsize:8;\tsigned:1;
\tfield:char comm[16];\toffset:31;\tsize:16;\tsigned:0;
\tfield:__data_loc char[] name;\toffset:47;\tsize:4;\tsigned:0;
\tfield:__rel_loc char[] rel;\toffset:51;\tsize:4;\tsigned:0;
\tfield:u32 arr[3];\toffset:55;\tsize:12;\tsigned:0;
\tfield:__data_loc s16[] dyn;\toffset:67;\tsize:4;\tsigned:1;
\tfield:struct blob raw;\toffset:71;\tsize:6;\tsigned:0;

print fmt: "a8=%d name=%s", REC->a8, __get_str(name)
"""

SIMPLE_FORMAT = f"""name: simple
ID: 1002
format:
{COMMON_FIELDS}
\tfield:u64 seq;\toffset:8;\tsize:8;\tsigned:0;

print fmt: "seq=%llu", REC->seq
"""


def kinds_payload(pid: int, a8: int, b16: int, c32: int, d64: int, e64: int, comm: bytes,
                  name: bytes, rel: bytes, arr: tuple[int, int, int], dyn: tuple[int, ...],
                  raw: bytes, be: bool = False) -> bytes:
    e = ">" if be else "<"
    fixed_end = 77
    name_b = name + b"\0"
    dyn_b = struct.pack(e + "h" * len(dyn), *dyn)
    name_off = fixed_end
    dyn_off = name_off + len(name_b)
    rel_off = dyn_off + len(dyn_b)
    rel_b = rel + b"\0"
    body = (common(1001, pid, be=be)
            + struct.pack(e + "bHiQq", a8, b16, c32, d64, e64)
            + comm.ljust(16, b"\0")
            + struct.pack(e + "I", len(name_b) << 16 | name_off)
            + struct.pack(e + "I", len(rel_b) << 16 | (rel_off - (51 + 4)))
            + struct.pack(e + "III", *arr)
            + struct.pack(e + "I", len(dyn_b) << 16 | dyn_off)
            + raw)
    assert len(body) == fixed_end
    return body + name_b + dyn_b + rel_b


def simple_payload(pid: int, seq: int, be: bool = False) -> bytes:
    return common(1002, pid, be=be) + struct.pack(">Q" if be else "<Q", seq)


@pytest.fixture(scope="module")
def kinds_fmt() -> EventFormat:
    return EventFormat.parse(KINDS_FORMAT, "test")


@pytest.fixture(scope="module")
def simple_fmt() -> EventFormat:
    return EventFormat.parse(SIMPLE_FORMAT, "test")


# ---- pages and records ------------------------------------------------------------------------------


def test_page_header_and_small_records():
    recs = data_record(simple_payload(7, 1), 10) + data_record(simple_payload(7, 2), 5)
    page = parse_page(make_page(recs, 1000))
    assert (page.timestamp, page.size, page.flags, page.missed, page.data_offset) == (1000, len(recs), 0, 0, 16)
    assert [ts for ts, _ in page.events] == [1010, 1015]
    assert page.events[1][1] == simple_payload(7, 2)


def test_long_records_use_type_len_zero():
    payload = simple_payload(1, 3) + bytes(range(200))
    rec = data_record(payload, 4)
    assert rec[0] & 0x1f == 0  # the kernel's form for payloads over 112 bytes
    page = parse_page(make_page(rec + data_record(b"abcd", 1, long_form=True), 50))
    assert page.events == [(54, payload), (55, b"abcd")]


def test_time_extend_and_absolute_time_stamp():
    recs = (data_record(b"1234", 1)
            + time_extend(5 << 27 | 77)
            + data_record(b"5678", 0)
            + time_stamp(0x3_0000_0000_1234)
            + data_record(b"9abc", 6))
    page = parse_page(make_page(recs, 100))
    assert [ts for ts, _ in page.events] == [101, 101 + (5 << 27) + 77, 0x3_0000_0000_1234 + 6]


def test_absolute_time_stamp_keeps_the_top_bits():
    # Absolute stamps carry 59 bits; the top 5 come from the running time.
    base = 0xF8 << 56
    page = parse_page(make_page(time_stamp(12345) + data_record(b"abcd"), base | 1))
    assert page.events[0][0] == base | 12345


def test_padding_is_skipped_and_a_null_padding_ends_the_page():
    recs = (data_record(b"aaaa", 3)
            + padding(12, delta=4)  # a discarded record: its delta still counts
            + data_record(b"bbbb", 2)
            + record(29, 0)  # null padding: the rest of the page is unused
            + data_record(b"cccc", 1))
    page = parse_page(make_page(recs, 0))
    assert page.events == [(3, b"aaaa"), (9, b"bbbb")]


@pytest.mark.parametrize("missed, unknown, expect", [(None, False, 0), (1752, False, 1752), (None, True, -1)])
def test_missed_events_flags(missed, unknown, expect):
    page = parse_page(make_page(data_record(b"abcd", 1), 5, missed=missed, unknown_missed=unknown))
    assert page.missed == expect
    assert page.events == [(6, b"abcd")]
    if expect:
        assert page.flags & (1 << 31)


def test_big_endian_and_32_bit_long_pages():
    for be in (False, True):
        for long_size in (4, 8):
            recs = data_record(simple_payload(9, 42, be), 7, be) + time_extend(1 << 27, be) + data_record(b"wxyz", 0, be)
            raw = make_page(recs, 1 << 40, missed=3, long_size=long_size, be=be, page_size=1024)
            page = parse_page(raw, PageLayout(long_size, be, 1024))
            assert page.data_offset == 8 + long_size
            assert page.missed == 3
            assert page.events == [((1 << 40) + 7, simple_payload(9, 42, be)), ((1 << 40) + 7 + (1 << 27), b"wxyz")]


@pytest.mark.parametrize("raw, message", [
    (b"\0" * 10, "shorter than its header"),
    (struct.pack("<QQ", 0, 5000) + b"\0" * 4080, "commit size larger than the page"),
    (struct.pack("<QQ", 0, 100) + b"\0" * 50, "shorter than its header or committed size"),
    (struct.pack("<QQ", 0, 8) + record(0, 0, struct.pack("<I", 2)), "impossible length"),
    (struct.pack("<QQ", 0, 8) + record(0, 0, struct.pack("<I", 400)), "runs past"),
    (struct.pack("<QQ", 0, 8) + record(5, 0, b"1234"), "runs past"),
    (struct.pack("<QQ", 0, 6) + record(30, 0, b"12"), "runs past"),
])
def test_corrupt_pages_are_errors(raw, message):
    with pytest.raises(TraceFileError, match=message):
        parse_page(raw, PageLayout(8, False, 4096))


def test_commit_flags_sign_extended_on_64_bit():
    # Observed on x86-64: commit word 0xffffffffc0000fd8 (both flags, size 0xfd8).
    word = 0xFFFFFFFFC0000000 | 8
    raw = struct.pack("<QQ", 1, word) + data_record(b"abcd", 2) + struct.pack("<Q", 99)
    page = parse_page(raw + b"\0" * (4096 - len(raw)))
    assert (page.size, page.missed, page.events) == (8, 99, [(3, b"abcd")])


# ---- fields -----------------------------------------------------------------------------------------


def test_field_specs_from_formats(kinds_fmt):
    specs = dict(zip([f.name for f in kinds_fmt.event_fields], format_specs(kinds_fmt)))
    assert specs["a8"] == (8, 1, LOC_FIXED, KIND_INT, 0, True)
    assert specs["d64"] == (15, 8, LOC_FIXED, KIND_INT, 0, False)
    assert specs["comm"] == (31, 16, LOC_FIXED, KIND_STR, 0, False)
    assert specs["name"] == (47, 4, LOC_DATA, KIND_STR, 0, False)
    assert specs["rel"] == (51, 4, LOC_REL, KIND_STR, 0, False)
    assert specs["arr"] == (55, 12, LOC_FIXED, KIND_INT_ARRAY, 4, False)
    assert specs["dyn"] == (67, 4, LOC_DATA, KIND_INT_ARRAY, 2, True)
    assert specs["raw"] == (71, 6, LOC_FIXED, KIND_BYTES, 0, False)
    print_fmt = EventFormat.parse((ROOT / "tests/data/formats/ftrace_print.format").read_text(), "ftrace")
    assert field_spec(print_fmt.field("buf"))[2] == LOC_TAIL  # char buf[] of size 0


def kinds_values(i: int) -> dict:
    return dict(a8=-5 - i, b16=0xBEEF, c32=-100000 * i, d64=(1 << 63) + i, e64=-(1 << 62) - i,
                comm=f"comm-{i}".encode(), name=f"name-{i}-ü".encode(), rel=f"rel{i}".encode(),
                arr=(1, 2, 3 + i), dyn=(-1, 2, -3)[: 1 + i % 3], raw=b"\x01\x02\x03\x04\x05\x06")


def test_every_field_kind_decodes(kinds_fmt):
    for be in (False, True):
        recs = b"".join(data_record(kinds_payload(100 + i, be=be, **kinds_values(i)), 10, be) for i in range(5))
        layout = PageLayout(8, be, 4096)
        raw = make_page(recs, 0, be=be)
        reader = EventReader([(0, raw, 0, len(raw))], [kinds_fmt], layout)
        events = list(reader.events())
        assert len(events) == 5
        for i, ev in enumerate(events):
            v = kinds_values(i)
            assert ev.pid == 100 + i and ev.format is kinds_fmt and ev.ts == 10 * (i + 1)
            assert ev.fields == dict(a8=v["a8"], b16=v["b16"], c32=v["c32"], d64=v["d64"], e64=v["e64"],
                                     comm=v["comm"].decode(), name=v["name"].decode(), rel=v["rel"].decode(),
                                     arr=v["arr"], dyn=v["dyn"], raw=v["raw"])
        # The same through the columnar batches.
        (batch,) = EventReader([(0, raw, 0, len(raw))], [kinds_fmt], layout).batches()
        assert list(batch.column(kinds_fmt, "d64")) == [kinds_values(i)["d64"] for i in range(5)]
        assert list(batch.column("test:kinds", "c32")) == [kinds_values(i)["c32"] for i in range(5)]
        assert batch.column(kinds_fmt, "name")[4] == "name-4-ü"
        assert list(batch.pid) == [100, 101, 102, 103, 104] and list(batch.row) == [0, 1, 2, 3, 4]


def test_fields_outside_the_record_read_as_missing(kinds_fmt):
    good = kinds_payload(1, **kinds_values(0))
    bad_loc = bytearray(good)
    struct.pack_into("<I", bad_loc, 47, 200 << 16 | 70)  # the name runs past the record
    short = good[:40]  # cut inside comm
    recs = data_record(bytes(bad_loc)) + data_record(short)
    raw = make_page(recs, 0)
    reader = EventReader([(0, raw, 0, len(raw))], [kinds_fmt])
    first, second = reader.events()
    assert first.fields["name"] is None and first.fields["a8"] == -5
    assert second.fields["comm"] is None and second.fields["e64"] == -(1 << 62)
    assert second.fields["name"] is None and second.fields["arr"] is None
    assert reader.short_records == 2


def test_unknown_ids_come_out_without_a_format(simple_fmt):
    recs = data_record(common(555, 3) + b"zzzz") + data_record(simple_payload(3, 9))
    raw = make_page(recs, 0)
    events = list(EventReader([(0, raw, 0, len(raw))], [simple_fmt], raw=True).events())
    assert [(e.id, e.format, e.values) for e in events] == [(555, None, None), (1002, simple_fmt, (9,))]
    assert events[0].raw == common(555, 3) + b"zzzz"


# ---- merging -----------------------------------------------------------------------------------------


def cpu_stream(pid: int, stamps: list[int], seqs: list[int], page_size: int = 4096, per_page: int = 50,
               missed_first: int | None = None) -> bytes:
    """Pages holding one simple record per time stamp, ``per_page`` records a page."""
    out = b""
    for start in range(0, len(stamps), per_page):
        chunk = list(zip(stamps[start:start + per_page], seqs[start:start + per_page]))
        base = chunk[0][0]
        recs, now = b"", base
        for ts, seq in chunk:
            delta = ts - now
            if delta >= 1 << 27:
                recs += time_extend(delta)
                delta = 0
            recs += data_record(simple_payload(pid, seq), delta)
            now = ts
        out += make_page(recs, base, missed=missed_first if start == 0 else None, page_size=page_size)
    return out


def test_cpus_merge_by_time_stamp(simple_fmt):
    rng = random.Random(5)
    streams, expect = [], []
    for cpu in range(5):
        stamps = sorted(rng.sample(range(1, 10**10), 400))
        stamps[7] = stamps[6]  # equal stamps on one CPU keep their order
        seqs = [cpu * 1000 + i for i in range(400)]
        data = cpu_stream(cpu + 10, stamps, seqs)
        streams.append((cpu, data, 0, len(data)))
        expect += [(ts, cpu, seq) for ts, seq in zip(stamps, seqs)]
    expect.sort()
    reader = EventReader(streams, [simple_fmt])
    got = [(e.ts, e.cpu, e.values[0]) for e in reader.events(max_events=77)]
    assert got == expect
    assert [s["events"] for s in reader.stats()] == [400] * 5
    # Columns in small batches give the same stream.
    cols = []
    for batch in EventReader(streams, [simple_fmt]).batches(max_events=333):
        seq = batch.column(simple_fmt, "seq")
        cols += [(batch.ts[i], batch.cpu[i], seq[batch.row[i]]) for i in range(len(batch))]
    assert cols == expect


def test_lost_events_are_marked_at_their_event(simple_fmt):
    a = cpu_stream(1, [10, 20, 30], [1, 2, 3], missed_first=17)
    b = cpu_stream(2, [15, 25], [4, 5], missed_first=None)
    b = b[:8] + struct.pack("<Q", 0xFFFFFFFF80000000 | struct.unpack_from("<Q", b, 8)[0]) + b[16:]
    reader = EventReader([(0, a, 0, len(a)), (1, b, 0, len(b))], [simple_fmt])
    (batch,) = reader.batches()
    assert [(lost.index, lost.cpu, lost.count) for lost in batch.lost] == [(0, 0, 17), (1, 1, -1)]
    assert [(s["missed_events"], s["missed_unknown"]) for s in reader.stats()] == [(17, 0), (0, 1)]


def test_strict_and_lenient_reading_of_a_corrupt_page(simple_fmt):
    data = bytearray(cpu_stream(1, list(range(100, 400)), list(range(300))))
    struct.pack_into("<Q", data, 4096 + 8, 9999)  # the second page's commit is impossible
    with pytest.raises(TraceFileError, match=r"cpu 0: page at data offset 0x1000: corrupt ring-buffer page: commit"):
        list(EventReader([(0, bytes(data), 0, len(data))], [simple_fmt]).events())
    # Strict mode still hands out what came before the bad page.
    reader = EventReader([(0, bytes(data), 0, len(data))], [simple_fmt])
    got = []
    with pytest.raises(TraceFileError):
        for e in reader.events(max_events=1000):
            got.append(e.values[0])
    assert got == list(range(50))
    lenient = EventReader([(0, bytes(data), 0, len(data))], [simple_fmt], strict=False)
    seqs = [e.values[0] for e in lenient.events()]
    assert seqs == list(range(50)) + list(range(100, 300))
    assert lenient.stats()[0]["bad_pages"] == 1


def test_a_truncated_stream_keeps_its_whole_pages(simple_fmt):
    data = cpu_stream(1, list(range(1, 121)), list(range(120)))
    cut = data[:2 * 4096 + 100]  # the third page is cut inside its header... nearly
    reader = EventReader([(0, cut, 0, len(cut))], [simple_fmt], strict=False)
    assert [e.values[0] for e in reader.events()] == list(range(100))
    with pytest.raises(TraceFileError):
        list(EventReader([(0, cut, 0, len(cut))], [simple_fmt]).events())


@pytest.mark.parametrize("streams, message", [
    ([(0, b"x" * 10, 5, 10)], "cpu 0: data at 5+10 is outside its buffer of 10 bytes"),
    ([(1, b"x" * 10, -1, 1)], "cpu 1: data at -1+1 is outside its buffer"),
    ([(0, b"x", 0)], "a stream is (cpu, buffer, offset, size)"),
    ([(0, "text", 0, 1)], "bytes-like object is required"),
    (5, "streams must be a sequence"),
])
def test_every_reader_of_streams_checks_them_alike(streams, message):
    """Reader, Aggregator.feed, fold_stacks and event_ids take the same streams, checked by one
    parser (stream_item, streams_open): the same error from each, and nothing held after it."""
    readers = [lambda: _native.Reader(streams, []), lambda: _native.Aggregator([(1, 0, [], None)]).feed(streams),
               lambda: _native.fold_stacks(streams, [], [], []), lambda: _native.event_ids(streams)]
    for read in readers:
        with pytest.raises((ValueError, TypeError), match=re.escape(message)):
            read()


def test_reader_argument_errors(simple_fmt):
    with pytest.raises(ValueError, match="outside its buffer"):
        _native.Reader([(0, b"x" * 10, 5, 10)], [])
    with pytest.raises(ValueError, match="page layout"):
        _native.Reader([], [], long_size=6)
    with pytest.raises(ValueError, match="duplicate id"):
        _native.Reader([], [(1, ()), (1, ())])
    with pytest.raises(ValueError, match="cannot be decoded"):
        _native.Reader([], [(1, ((8, 3, LOC_FIXED, KIND_INT, 0, False),))])
    reader = EventReader([], [simple_fmt])
    assert list(reader.events()) == []
    reader.close()
    with pytest.raises(ValueError, match="closed"):
        list(reader.events())


# ---- fuzzing ----------------------------------------------------------------------------------------


def mutate(rng: random.Random, page: bytes) -> bytes:
    b = bytearray(page)
    for _ in range(rng.randint(1, 6)):
        what = rng.randrange(6)
        at = rng.randrange(len(b))
        if what == 0:
            b[at] = rng.randrange(256)
        elif what == 1 and len(b) >= 12:
            struct.pack_into("<I", b, 8, rng.randrange(5000) | rng.randrange(4) << 30)
        elif what == 2 and at - at % 4 + 4 <= len(b):
            struct.pack_into("<I", b, at - at % 4, rng.choice([28, 29, 30, 31, 0]) | rng.randrange(1 << 27) << 5)
        elif what == 3 and at + 4 <= len(b):
            struct.pack_into("<I", b, at, rng.randrange(1 << 32))
        elif what == 4:
            del b[at:]
            if not b:
                b = bytearray(b"\0")
        else:
            b[at:at + 16] = bytes(rng.randrange(256) for _ in range(16))[: len(b) - at]
    return bytes(b)


def corpus_pages(kinds_fmt: EventFormat) -> list[bytes]:
    rng = random.Random(1)
    pages = []
    for n in (1, 5, 30):
        recs = b""
        for i in range(n):
            recs += data_record(kinds_payload(i, **kinds_values(i)), rng.randrange(1 << 20))
            if i % 7 == 3:
                recs += time_extend(rng.randrange(1 << 40))
            if i % 11 == 5:
                recs += padding(16)
        pages.append(make_page(recs, rng.randrange(1 << 50), missed=rng.choice([None, 3])))
    return pages


def test_random_and_mutated_pages_never_crash(kinds_fmt, simple_fmt):
    rng = random.Random(1234)
    pages = corpus_pages(kinds_fmt)
    errors = 0
    for i in range(3000):
        if i % 3 == 0:
            page = bytes(rng.randrange(256) for _ in range(rng.choice([16, 64, 4096])))
        else:
            page = mutate(rng, rng.choice(pages))
        try:
            parse_page(page)
        except TraceFileError:
            errors += 1
        streams = [(0, page, 0, len(page)), (1, rng.choice(pages), 0, 4096)]
        for strict in (True, False):
            try:
                for batch in EventReader(streams, [kinds_fmt, simple_fmt], strict=strict, raw=True).batches(50):
                    assert len(batch.ts) == len(batch)
                list(EventReader(streams, [kinds_fmt], strict=strict).events())
            except TraceFileError:
                assert strict
    assert 0 < errors < 3000


def test_decoder_under_address_sanitizer(tmp_path, kinds_fmt):
    """Build native/fuzz/fuzz_driver.c with ASan+UBSan and run a few hundred thousand mutated pages."""
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc is needed to build the sanitizer driver")
    exe = tmp_path / "rbfuzz"
    build = subprocess.run(
        [gcc, "-std=gnu99", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=undefined", "-Wall", "-Wextra", "-Werror",
         f"-I{ROOT / 'native'}", str(ROOT / "native/fuzz/fuzz_driver.c"), str(ROOT / "native/ringbuf.c"),
         str(ROOT / "native/reader.c"), "-o", str(exe)],
        capture_output=True, text=True)
    if build.returncode and "sanitize" in build.stderr and "cannot find" in build.stderr:
        pytest.skip(f"no sanitizer runtime: {build.stderr.strip()}")
    assert build.returncode == 0, build.stderr
    corpus = tmp_path / "corpus"
    corpus.write_bytes(b"".join(corpus_pages(kinds_fmt)))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    runs = [(4096, 8, 0, 30000, 1), (4096, 8, 0, 30000, 2)]
    be = tmp_path / "corpus-be"
    be.write_bytes(b"".join(make_page(data_record(kinds_payload(i, be=True, **kinds_values(i)), 3, True)
                                      * 3, i, be=True, long_size=4, missed=i or None) for i in range(4)))
    for cmd in [[str(exe), str(corpus), *map(str, r)] for r in runs] + [[str(exe), str(be), "4096", "4", "1", "20000", "3"]]:
        run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        assert "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr[-3000:]
        assert run.returncode == 0 and run.stdout.startswith("ok"), (run.returncode, run.stderr[-2000:])
