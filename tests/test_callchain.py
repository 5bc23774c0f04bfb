"""probectl's callchain records in a recording's pages (probectl/tracedat/callchain.py): pages written
anew keep every record, time and lost count; samples join the event of their thread and type nearest
in time, or come in by time with their own record; the format is one trace.dat readers parse."""
from __future__ import annotations

import struct
from pathlib import Path

from probectl.formats import EventFormat
from probectl.ringbuf import PageLayout, parse_page
from probectl.tracedat.callchain import USER_CALLCHAIN, _PageWriter, free_event_id, user_callchain_format, \
    write_with_callchains

LAYOUT = PageLayout(page_size=4096)


def record(etype: int, pid: int, body: bytes = b"") -> bytes:
    return struct.pack("<HBBi", etype, 0, 0, pid) + body


def write_pages(path: Path, records: list[tuple[int, bytes]], missed_at: dict[int, int] | None = None) -> None:
    with open(path, "wb") as f:
        w = _PageWriter(f, LAYOUT)
        for i, (ts, payload) in enumerate(records):
            if missed_at and i in missed_at:
                w.lost(missed_at[i])
            w.add(ts, payload)
        w.flush()


def read_pages(path: Path) -> list[tuple[int, bytes, int]]:
    data = path.read_bytes()
    out = []
    for off in range(0, len(data), LAYOUT.page_size):
        page = parse_page(data[off:off + LAYOUT.page_size], LAYOUT)
        for i, (ts, payload) in enumerate(page.events):
            out.append((ts, payload, page.missed if i == 0 else 0))
    return out


def test_pages_written_anew_keep_every_record_time_and_loss(tmp_path):
    # small and big records, deltas that need a time extension, a loss before record 300
    records = []
    ts = 10**12
    for i in range(600):
        ts += 1 << (30 if i % 97 == 0 else 4)
        body = bytes([i % 251]) * (4 if i % 5 else 300)
        records.append((ts, record(7, 100 + i % 3, body)))
    src = tmp_path / "src"
    write_pages(src, records, {300: 42})
    back = read_pages(src)
    assert [(t, p[:len(r)]) for (t, p, _m), (_, r) in zip(back, records)] == [(t, r) for t, r in records]
    assert [m for _t, _p, m in back if m] == [42]
    dst = tmp_path / "dst"
    joined, left = write_with_callchains(src, dst, LAYOUT, 9, [])
    assert (joined, left) == (0, 0)
    assert [(t, p[:len(r)]) for (t, p, _m), (_, r) in zip(read_pages(dst), records)] == [(t, r) for t, r in records]
    assert [m for _t, _p, m in read_pages(dst) if m] == [42]


def test_samples_join_their_event_or_come_in_by_time(tmp_path):
    src = tmp_path / "src"
    write_pages(src, [(1000, record(7, 5)), (2000, record(7, 6)), (3000, record(8, 5)), (9000, record(7, 5))])
    samples = [
        (1003, 5, 50, 7, (0x401000, 0x402000), None),  # joins the event at 1000 (thread 5, type 7)
        (2990, 6, 60, 7, (0x403000,), None),  # joins the event at 2000 of thread 6 (the nearest of its kind)
        (5_000_000, 5, 50, 8, (0x1,), None),  # nothing of its kind within the window: left over
        (5000, 5, 50, 11, (0x404000,), record(11, 5, b"\x01\x00\x00\x00")),  # its own record, at 5000
    ]
    joined, left = write_with_callchains(src, tmp_path / "dst", LAYOUT, 99, samples)
    assert (joined, left) == (3, 1)
    got = [(ts, struct.unpack_from("<H", p)[0], struct.unpack_from("<i", p, 4)[0]) for ts, p, _m in
           read_pages(tmp_path / "dst")]
    assert got == [(1000, 7, 5), (1000, 99, 5), (2000, 7, 6), (2000, 99, 6), (3000, 8, 5), (5000, 11, 5),
                   (5000, 99, 5), (9000, 7, 5)]
    chains = [p for _ts, p, _m in read_pages(tmp_path / "dst") if struct.unpack_from("<H", p)[0] == 99]
    tgid, loc = struct.unpack_from("<iI", chains[0], 8)
    assert tgid == 50 and loc == (16 << 16 | 16)
    assert struct.unpack_from("<2Q", chains[0], 16) == (0x401000, 0x402000)


def test_the_format_parses_as_a_dynamic_array_of_u64():
    fmt = EventFormat.parse(user_callchain_format(1234), "probectl")
    assert (fmt.name, fmt.id) == (USER_CALLCHAIN, 1234)
    tgid, caller = fmt.event_fields
    assert (tgid.name, tgid.offset, tgid.size) == ("tgid", 8, 4)
    assert caller.name == "caller" and caller.is_data_loc and caller.element_type == "u64"


def test_the_event_id_is_one_no_format_of_the_file_has():
    assert free_event_id([1, 5, 300]) == 301
    assert free_event_id(range(2, 0x10000)) == 1
    assert free_event_id([0xFFFF, 3]) == 0xFFFE
