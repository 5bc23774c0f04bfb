"""probectl's callchain records in a recording's pages (probectl/tracedat/callchain.py over
native/chainmerge.c): pages written anew keep every record, time and lost count; samples join the event
of their thread and type nearest in time, or come in by time with their own record; an entry uprobe's
caller is put in unless the kernel's callchain has it; damaged perf records end the samples; the format
is one that trace.dat readers parse."""
from __future__ import annotations

import struct

import pytest
from pathlib import Path

from probectl.formats import EventFormat
from probectl.ringbuf import PageLayout, parse_page
from probectl import ringbuf
from probectl.tracedat.callchain import ENTRY, RAW, STACK, USER_CALLCHAIN, free_event_id, user_callchain_format, \
    write_with_callchains
from tests.helpers import run_sanitized, sanitized_driver
from tests.test_native import make_page

LAYOUT = PageLayout(page_size=4096)
CHAIN = 99
USER = 0xFFFFFFFFFFFFFE00  # PERF_CONTEXT_USER


def record(etype: int, pid: int, body: bytes = b"") -> bytes:
    return struct.pack("<HBBi", etype, 0, 0, pid) + body


def small(payload: bytes, delta: int = 0) -> bytes:
    """One ring-buffer record of a payload of at most 112 bytes, padded to 4."""
    payload += bytes(-len(payload) % 4)
    return struct.pack("<I", delta << 5 | len(payload) // 4) + payload


def sample(perf_id: int, ts: int, pid: int, tid: int, ips: list[int], raw: bytes | None = None,
           sp_word: int | None = None, copy: tuple[list[int], bytes, int] | None = None) -> bytes:
    """A PERF_RECORD_SAMPLE of IDENTIFIER|TID|TIME|CPU|CALLCHAIN (+RAW, + REGS_USER/STACK_USER of 8, or
    of ``copy``: (registers, stack bytes, dyn_size))."""
    body = struct.pack("<QIIQIIQ", perf_id, pid, tid, ts, 0, 0, len(ips)) + struct.pack(f"<{len(ips)}Q", *ips)
    if raw is not None:
        raw += bytes(-(4 + len(raw)) % 8)
        body += struct.pack("<I", len(raw)) + raw
    if sp_word is not None:
        body += struct.pack("<QQQQQ", 2, 0x7ffd0000, 8, sp_word, 8)
    if copy is not None:
        regs, stack, dyn = copy
        body += struct.pack(f"<Q{len(regs)}QQ", 2 if regs else 0, *regs, len(stack)) + stack
        body += struct.pack("<Q", dyn) if stack else b""
    return struct.pack("<IHH", 9, 0, 8 + len(body)) + body


def comm(pid: int, tid: int, name: bytes) -> bytes:
    """A PERF_RECORD_COMM (with sample_id_all's fields after the name)."""
    body = struct.pack("<II", pid, tid) + name + bytes(8 - len(name) % 8) + struct.pack("<IIQIIQ", pid, tid, 0, 0, 0, 0)
    return struct.pack("<IHH", 3, 0x2000, 8 + len(body)) + body


def mmap2(pid: int, addr: int, length: int, pgoff: int, path: bytes) -> bytes:
    """A PERF_RECORD_MMAP2 of an executable private mapping (device 08:01, inode 77)."""
    body = struct.pack("<IIQQQIIQQII", pid, pid, addr, length, pgoff, 8, 1, 77, 0, 5, 2) + path
    body += bytes(8 - len(path) % 8) + struct.pack("<IIQIIQ", pid, pid, 0, 0, 0, 0)
    return struct.pack("<IHH", 10, 0x2002, 8 + len(body)) + body


def test_exec_names_and_executable_mappings_are_returned(tmp_path):
    perf = tmp_path / "perf"
    perf.write_bytes(comm(50, 50, b"worker") + mmap2(50, 0x555500001000, 0x2000, 0x1000, b"/usr/bin/worker")
                     + mmap2(50, 0x7f0000000000, 0x1000, 0, b"//anon")  # (JIT code: its perf map names it)
                     + mmap2(51, 0x7f1000000000, 0x3000, 0, b"[vdso]"))
    _w, _l, comms, maps = write_with_callchains(None, perf, tmp_path / "dst", LAYOUT, CHAIN, [])
    assert comms == [(50, 50, "worker")]
    assert maps == {50: ["555500001000-555500003000 r-xp 00001000 08:01 77 /usr/bin/worker"],
                    51: ["7f1000000000-7f1000003000 r-xp 00000000 08:01 77 [vdso]"]}


def read(path: Path) -> list[tuple[int, int, int, bytes]]:
    """(time, type, pid, payload) of every record."""
    data = path.read_bytes()
    out = []
    for off in range(0, len(data), LAYOUT.page_size):
        for ts, p in parse_page(data[off:off + LAYOUT.page_size], LAYOUT).events:
            out.append((ts, struct.unpack_from("<H", p)[0], struct.unpack_from("<i", p, 4)[0], p))
    return out


def chain_of(payload: bytes) -> tuple[int, tuple[int, ...]]:
    tgid, loc = struct.unpack_from("<iI", payload, 8)
    n = (loc >> 16) // 8
    return tgid, struct.unpack_from(f"<{n}Q", payload, loc & 0xFFFF)


def test_pages_written_anew_keep_every_record_time_and_loss(tmp_path):
    # two pages: big deltas (time extends), a record too long for a small header, a loss counted
    recs1 = [small(record(7, 5, bytes(8)), 0), small(record(7, 6), 1000),
             struct.pack("<II", 0, 300 + 4) + record(7, 5, bytes(292))]
    src = tmp_path / "src"
    src.write_bytes(make_page(b"".join(recs1), 10**12) + make_page(small(record(8, 5)), 10**12 + 10**10, missed=42))
    before = [(ts, t, pid) for ts, t, pid, _p in read(src)]
    assert len(before) == 4
    perf = tmp_path / "perf"
    perf.write_bytes(b"")
    assert write_with_callchains(src, perf, tmp_path / "dst", LAYOUT, CHAIN, []) [:3] == (0, 0, [])
    assert [(ts, t, pid) for ts, t, pid, _p in read(tmp_path / "dst")] == before
    pages = (tmp_path / "dst").read_bytes()
    assert [parse_page(pages[o:o + 4096], LAYOUT).missed for o in range(0, len(pages), 4096)][-1] == 42


def test_samples_join_their_event_or_come_in_by_time(tmp_path):
    src = tmp_path / "src"
    src.write_bytes(make_page(small(record(7, 5)) + small(record(7, 6), 1000) + small(record(8, 5), 1000)
                              + small(record(7, 5), 6000), 1000))
    perf = tmp_path / "perf"
    perf.write_bytes(
        sample(1, 1003, 50, 5, [USER, 0x401000, 0x402000])  # joins the event at 1000 (thread 5, type 7)
        + sample(1, 2990, 60, 6, [USER, 0x403000])  # joins thread 6's event at 2000, the nearest of its kind
        + sample(2, 5_000_000, 50, 5, [USER, 0x1])  # nothing of its kind within the window: left over
        + sample(3, 5000, 50, 5, [USER, 0x404000], raw=record(11, 5, b"\x01\0\0\0"))  # its own record
        + comm(50, 5, b"worker")  # an exec's name
        + b"\x09\0\0\0\0\0\xff\x7f")  # a record cut short ends the samples
    events = [(1, 7, 0), (2, 8, 0), (3, 11, RAW)]
    assert write_with_callchains(src, perf, tmp_path / "dst", LAYOUT, CHAIN, events) [:3] == (3, 1, [(50, 5, "worker")])
    got = read(tmp_path / "dst")
    assert [(ts, t, pid) for ts, t, pid, _p in got] == [
        (1000, 7, 5), (1000, CHAIN, 5), (2000, 7, 6), (2000, CHAIN, 6), (3000, 8, 5), (5000, 11, 5),
        (5000, CHAIN, 5), (9000, 7, 5)]
    chains = [chain_of(p) for _ts, t, _pid, p in got if t == CHAIN]
    assert chains == [(50, (0x401000, 0x402000)), (60, (0x403000,)), (50, (0x404000,))]
    # only some processes: thread 6's sample is left out
    assert write_with_callchains(src, perf, tmp_path / "dst2", LAYOUT, CHAIN, events, pids=[50])[:2] == (2, 1)


def test_an_entry_uprobes_caller_comes_from_the_stack_pointer(tmp_path):
    perf = tmp_path / "perf"
    raw = record(11, 5)
    perf.write_bytes(
        sample(3, 10, 5, 5, [USER, 0x1000, 0x3000], raw=raw, sp_word=0x2000)  # the caller is missing
        + sample(3, 20, 5, 5, [USER, 0x1000, 0x2000, 0x3000], raw=raw, sp_word=0x2000))  # the kernel had it
    assert write_with_callchains(None, perf, tmp_path / "dst", LAYOUT, CHAIN, [(3, 11, RAW | ENTRY)])[:2] == (2, 0)
    chains = [chain_of(p)[1] for _ts, t, _pid, p in read(tmp_path / "dst") if t == CHAIN]
    assert chains == [(0x1000, 0x2000, 0x3000)] * 2


def test_stack_copies_are_read_and_their_unwound_chains_replace_the_kernels(tmp_path):
    """Samples of a STACK event give their registers and the filled part of the copy (dyn_size), which
    ringbuf.unwind_copies hands back whole when it knows no rule (the Python unwinder takes them); a
    sample without user registers (a kernel thread's) gives none; the chains given by record offset
    replace the kernel's, a chain pointing out of its pool is ignored."""
    perf = tmp_path / "perf"
    raw = record(11, 5)
    regs = list(range(100, 117))
    first = sample(4, 10, 5, 5, [USER, 0x1000], raw=raw, copy=(regs, bytes(range(64)), 40))
    second = sample(4, 20, 5, 5, [USER, 0x1000], raw=raw, copy=([], b"", 0))  # (no registers)
    third = sample(4, 30, 5, 5, [USER, 0x1000, 0x9999], raw=raw, copy=(regs, bytes(16), 16))
    perf.write_bytes(first + second + third)
    events = [(4, 11, RAW | STACK)]
    # (no rule known for any address: every sample comes back whole, for the Python unwinder)
    _index, _pool, others = ringbuf.unwind_copies(perf.read_bytes(), events, 17, 16, 7, 6, 127, lambda pid, a: None)
    found = [sample for _i, sample in others]
    assert [i for i, _sample in others] == [0, 1]
    assert [(s.offset, s.pid, s.time, s.stack_len) for s in found] == [
        (0, 5, 10, 40), (len(first) + len(second), 5, 30, 16)]
    assert struct.unpack("<17Q", found[0].registers) == tuple(regs)
    assert perf.read_bytes()[found[0].stack_offset:found[0].stack_offset + 40] == bytes(range(40))
    index = struct.pack("<6Q", found[0].offset, 0, 3, found[1].offset, 2, 99)  # (the second: out of the pool)
    pool = struct.pack("<3Q", 0x1000, 0x2000, 0x3000)
    written = write_with_callchains(None, perf, tmp_path / "dst", LAYOUT, CHAIN, events, chains=(index, pool))
    assert written[:2] == (3, 0)
    chains = [chain_of(p)[1] for _ts, t, _pid, p in read(tmp_path / "dst") if t == CHAIN]
    assert chains == [(0x1000, 0x2000, 0x3000), (0x1000,), (0x1000, 0x9999)]
    with pytest.raises(ValueError, match="sorted by offset"):
        write_with_callchains(None, perf, tmp_path / "dst", LAYOUT, CHAIN, events,
                              chains=(index[24:] + index[:24], pool))


def test_chainmerge_under_sanitizers(tmp_path):
    """native/fuzz/chainmerge_fuzz.c: random perf records of every kind, a share of them damaged or cut
    short, with random replacement chains, through cm_stacks(), cm_write(), cm_names() and a cm_stream
    under ASan+UBSan."""
    exe = sanitized_driver(tmp_path, ["fuzz/chainmerge_fuzz.c", "chainmerge.c", "ringbuf.c", "unwind.c"])
    for seed in ("1", "2"):
        assert run_sanitized(exe, "4000", seed) == "ok 4000\n"


def test_the_format_parses_as_a_dynamic_array_of_u64():
    fmt = EventFormat.parse(user_callchain_format(1234), "probectl")
    assert (fmt.name, fmt.id) == (USER_CALLCHAIN, 1234)
    tgid, caller = fmt.event_fields
    assert (tgid.name, tgid.offset, tgid.size) == ("tgid", 8, 4)
    assert caller.name == "caller" and caller.is_data_loc and caller.element_type == "u64"


def test_the_event_id_is_one_no_format_of_the_file_has():
    assert free_event_id([1, 5, 300]) == 0xFFFF
    assert free_event_id(range(2, 0x10000)) == 1
    assert free_event_id([0xFFFF, 3]) == 0xFFFE
