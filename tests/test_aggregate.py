"""The native aggregator of hist and latency (native/aggregate.c) on synthesized pages, checked against
the same counts made in Python: every key kind (signed and unsigned numbers, fixed and __data_loc
text, pid, cpu), log2 and linear buckets, sums, many keys (the table grows), latency pairs keyed by
value with starts and ends interleaved in random order (the start table grows and shrinks), ends
without a start, short records, several CPUs merged by time, and corrupt pages."""
from __future__ import annotations

import random
import struct
from array import array
from collections import Counter

import pytest

from probectl import _native
from probectl.analysis.keys import (LOG2, ROLE_END, ROLE_START, SRC_LATENCY, decode_key, hist_plan,
                                    native_aggregator, parse_keys, parse_value)
from probectl.analysis.table import rows_from_entries
from probectl.formats import EventFormat
from tests.test_native import KINDS_FORMAT, common, data_record, kinds_payload, make_page

KINDS = EventFormat.parse(KINDS_FORMAT, "test")

REQ_FORMAT = """name: req
ID: 1003
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:u32 dev;\toffset:8;\tsize:4;\tsigned:0;
\tfield:u64 sector;\toffset:16;\tsize:8;\tsigned:0;

print fmt: "dev=%u sector=%llu", REC->dev, REC->sector
"""
START = EventFormat.parse(REQ_FORMAT, "blk")
END = EventFormat.parse(REQ_FORMAT.replace("name: req", "name: done").replace("ID: 1003", "ID: 1004"), "blk")


def pages(records: list[bytes], ts0: int = 10**9, delta: int = 10) -> bytes:
    """Records (each already a ring-buffer record with its delta) packed into whole pages."""
    out, cur, ts = [], b"", ts0
    for r in records:
        if len(cur) + len(r) > 4096 - 16:
            out.append(make_page(cur, ts))
            ts += 10**6
            cur = b""
        cur += r
    if cur:
        out.append(make_page(cur, ts))
    return b"".join(out)


def kinds(pid: int, c32: int, d64: int, comm: bytes, name: bytes) -> bytes:
    return kinds_payload(pid, -1, 7, c32, d64, -d64, comm, name, b"r", (1, 2, 3), (4,), b"\0" * 6)


def feed(agg, *streams: tuple[int, bytes]) -> int:
    return agg.feed([(cpu, data, 0, len(data)) for cpu, data in streams])


def table(agg, keys, value=None):
    return {r.key: (r.count, r.sum) for r in rows_from_entries(agg.entries(), keys, value is not None)}


def test_counts_and_sums_by_every_kind_of_key():
    rng = random.Random(1)
    comms = [b"alpha", b"beta", b"a-very-long-comm"]
    names = [b"x", b"/usr/lib/libc.so.6", b"n" * 100]  # the last is cut to the key's 64 bytes
    events = [(rng.choice((1, 2, 3)), rng.randint(-5, 5), rng.choice((0, 1, 5, 4096, 4097, 1 << 40)),
               rng.choice(comms), rng.choice(names)) for _ in range(5000)]
    data = pages([data_record(kinds(*e), 1) for e in events])
    for key_text, value_name, ref_key in [
        ("c32", "d64", lambda e: (e[1],)),
        ("comm,name", None, lambda e: (e[3].decode(), e[4][:64].decode())),
        ("pid,d64.log2", "c32", lambda e: (e[0], 0 if e[2] <= 1 else (e[2] - 1).bit_length())),
        ("d64.buckets=1000,cpu", None, lambda e: (e[2] // 1000 * 1000, 0)),
    ]:
        keys = parse_keys(key_text, KINDS)
        value = parse_value(value_name, KINDS)
        agg = native_aggregator([hist_plan(KINDS, keys, value)])
        assert feed(agg, (0, data)) == len(events)
        want: dict = {}
        for e in events:
            k = ref_key(e)
            v = {"d64": e[2], "c32": e[1]}.get(value_name or "", 0)
            c, s = want.get(k, (0, 0))
            want[k] = (c + 1, s + v)
        got = table(agg, keys, value)
        assert {k: c for k, (c, _s) in got.items()} == {k: c for k, (c, _s) in want.items()}, key_text
        if value is not None:
            assert {k: s for k, (_c, s) in got.items()} == {k: s for k, (_c, s) in want.items()}, key_text


def test_many_keys_grow_the_table():
    keys = parse_keys("d64", KINDS)
    agg = native_aggregator([hist_plan(KINDS, keys, None)])
    values = [i * 7919 % 100_003 for i in range(60_000)]
    feed(agg, (0, pages([data_record(kinds(1, 0, v, b"c", b"n"), 1) for v in values])))
    assert table(agg, keys) == {(v,): (n, None) for v, n in Counter(values).items()}


def latency_agg():
    keys_s, keys_e = parse_keys("dev,sector", START), parse_keys("dev,sector", END)
    value = (SRC_LATENCY, None, LOG2, 0, 8)
    return native_aggregator([(START.id, ROLE_START, [k.plan_part() for k in keys_s], None),
                              (END.id, ROLE_END, [k.plan_part() for k in keys_e], value)], time_div=1000)


def req(ident: int, dev: int, sector: int) -> bytes:
    return common(ident, 42) + struct.pack("<IIQ", dev, 0, sector)


def test_latency_pairs_on_field_keys_in_any_order():
    rng = random.Random(2)
    open_: list[tuple[int, int, int]] = []
    records, want, ts, n = [], [], 10**9, 0
    while n < 20_000 or open_:
        if n < 20_000 and (not open_ or rng.random() < 0.6):  # about 4,000 open at the peak
            key = (rng.randint(1, 3), n)
            open_.append((key[0], key[1], ts))
            records.append((ts, req(START.id, *key)))
            n += 1
        else:
            dev, sector, t0 = open_.pop(rng.randrange(len(open_)))
            records.append((ts, req(END.id, dev, sector)))
            want.append((ts, (ts - t0) // 1000))
        ts += rng.randint(1, 5000)
    records.append((ts, req(END.id, 9, 9)))  # an end without a start
    agg = latency_agg()
    feed(agg, (0, _timed_pages(records)))
    ends, lats = agg.pairs()
    got = list(zip(array("Q", ends), array("Q", lats)))
    assert got == want
    counters = agg.counters()
    assert counters["unmatched"] == 1 and counters["pending"] == 0 and counters["events"] == len(records)
    assert counters["replaced"] == 0
    log2 = Counter(0 if v <= 1 else (v - 1).bit_length() for _t, v in want)
    assert {decode_key(k, [parse_keys("dev", START)[0]])[0]: c for k, c, *_ in agg.entries()} == dict(log2)


def test_nested_starts_replace_the_one_before_and_are_counted():
    """Three nested calls of one key (a recursive function): the innermost is the one pair, the two
    starts it replaced are counted, and so are the two ends left without a start. An end of a key
    that never started (a call already running when tracing began) replaces nothing."""
    ts = 10**9
    records = [(ts, req(END.id, 7, 7))]
    records += [(ts + k * 1000, req(START.id, 1, 1)) for k in range(1, 4)]
    records += [(ts + k * 1000, req(END.id, 1, 1)) for k in range(4, 7)]
    agg = latency_agg()
    feed(agg, (0, _timed_pages(records)))
    ends, lats = agg.pairs()
    assert list(zip(array("Q", ends), array("Q", lats))) == [(ts + 4000, 1)]
    counters = agg.counters()
    assert counters["replaced"] == 2 and counters["unmatched"] == 3 and counters["pending"] == 0


def _timed_pages(records: list[tuple[int, bytes]]) -> bytes:
    """Pages of records at absolute times: each page's base is its first record's time."""
    out = []
    i = 0
    while i < len(records):
        base = records[i][0]
        cur, prev = b"", base
        while i < len(records):
            r = data_record(records[i][1], records[i][0] - prev)
            if len(cur) + len(r) > 4096 - 16:
                break
            cur += r
            prev = records[i][0]
            i += 1
        out.append(make_page(cur, base))
    return b"".join(out)


def test_cpus_are_merged_by_time_so_a_thread_that_migrates_pairs():
    agg = native_aggregator([(START.id, ROLE_START, [(2, None, 0, 0, 8)], None),
                             (END.id, ROLE_END, [(2, None, 0, 0, 8)], (SRC_LATENCY, None, 0, 0, 8))])
    cpu0 = make_page(data_record(req(START.id, 1, 1), 0), 1000)
    cpu1 = make_page(data_record(req(END.id, 1, 1), 0), 5000)
    feed(agg, (1, cpu1), (0, cpu0))
    assert [array("Q", b).tolist() for b in agg.pairs()] == [[5000], [4000]]


STACK_FORMAT = """name: kernel_stack
ID: 4
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int size;\toffset:8;\tsize:4;\tsigned:1;
\tfield:unsigned long caller[8];\toffset:16;\tsize:64;\tsigned:0;

print fmt: "stack"
"""


def stack_record(frames: list[int]) -> bytes:
    return common(4, 1) + struct.pack("<i4x", len(frames)) + struct.pack(f"<{len(frames)}Q", *frames)


def test_kernel_stacks_complete_the_key_of_the_event_before_them():
    """An event's stack is the kernel_stack record after it on its CPU (longer than caller[8], as
    the kernel writes them); an event whose stack never comes is counted with an empty one."""
    from probectl.analysis.keys import stack_plan

    stack_fmt = EventFormat.parse(STACK_FORMAT, "ftrace")
    keys = parse_keys("stacktrace,c32", KINDS)
    agg = native_aggregator([hist_plan(KINDS, keys, None), stack_plan(stack_fmt)])
    deep = list(range(0xffffffff81000000, 0xffffffff81000000 + 20))  # 20 frames: the key keeps 16
    cpu0 = pages([data_record(kinds(1, 1, 0, b"c", b"n"), 1), data_record(stack_record([0xa, 0xb]), 1),
                  data_record(kinds(1, 2, 0, b"c", b"n"), 1), data_record(stack_record(deep), 1),
                  data_record(kinds(1, 1, 0, b"c", b"n"), 1), data_record(stack_record([0xa, 0xb]), 1),
                  data_record(kinds(1, 3, 0, b"c", b"n"), 1)])  # no stack after it
    cpu1 = pages([data_record(stack_record([0xdead]), 1)])  # a stack of nothing counted
    feed(agg, (0, cpu0), (1, cpu1))
    assert table(agg, keys) == {((0xa, 0xb), 1): (2, None), (tuple(deep[:16]), 2): (1, None), ((), 3): (1, None)}


def test_short_records_and_corrupt_pages():
    keys = parse_keys("d64", KINDS)
    agg = native_aggregator([hist_plan(KINDS, keys, None)])
    short = common(KINDS.id, 1) + b"\0" * 4  # ends before d64
    feed(agg, (0, make_page(data_record(short, 1) + data_record(kinds(1, 0, 5, b"c", b"n"), 1), 10)))
    assert agg.counters()["short_records"] == 1 and table(agg, keys) == {(5,): (1, None)}
    bad = bytearray(make_page(data_record(kinds(1, 0, 5, b"c", b"n"), 1), 10))
    bad[8:16] = struct.pack("<Q", 5000)  # commit past the page
    with pytest.raises(_native.DecodeError):
        feed(agg, (0, bytes(bad)))


def test_bad_plans_are_refused():
    keys = parse_keys("comm", KINDS)
    with pytest.raises(ValueError):  # a text value
        native_aggregator([(KINDS.id, 0, [k.plan_part() for k in keys], keys[0].plan_part())])
    with pytest.raises(ValueError):  # a duplicate id
        native_aggregator([hist_plan(KINDS, keys, None), hist_plan(KINDS, keys, None)])
    with pytest.raises(ValueError):  # start and end keys of different sizes
        native_aggregator([(START.id, ROLE_START, [(2, None, 0, 0, 8)], None),
                           (END.id, ROLE_END, [(2, None, 0, 0, 8), (3, None, 0, 0, 8)], None)])


def test_aggregator_under_address_sanitizer(tmp_path):
    """Build native/fuzz/aggregate_fuzz.c with ASan+UBSan: random plans over random records, and the
    same records folded by thread and stacks (native/fold.c)."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc is needed to build the sanitizer driver")
    exe = tmp_path / "aggfuzz"
    build = subprocess.run(
        [gcc, "-std=gnu99", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=undefined", "-Wall", "-Wextra", "-Werror", f"-I{root / 'native'}",
         str(root / "native/fuzz/aggregate_fuzz.c"), str(root / "native/ringbuf.c"), str(root / "native/reader.c"),
         str(root / "native/aggregate.c"), str(root / "native/fold.c"), "-o", str(exe)],
        capture_output=True, text=True)
    if build.returncode and "sanitize" in build.stderr and "cannot find" in build.stderr:
        pytest.skip(f"no sanitizer runtime: {build.stderr.strip()}")
    assert build.returncode == 0, build.stderr
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    for seed in (1, 2):
        run = subprocess.run([str(exe), "4000", str(seed)], capture_output=True, text=True, env=env, timeout=300)
        assert "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr[-3000:]
        assert run.returncode == 0 and run.stdout.startswith("ok"), (run.returncode, run.stderr[-2000:])
