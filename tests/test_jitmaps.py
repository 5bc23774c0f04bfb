"""JIT maps (``/tmp/perf-PID.map``): their lines, perf's owner rule as probectl takes it, the bounds of a
map that grows without end, and the trace.dat option that keeps them (tracedat/jitmaps.py,
record/jitmaps.py); the live recording of a program that names its JIT code is in
tests/live/test_jit_maps.py."""
from __future__ import annotations

import os

from probectl.record.jitmaps import jit_maps_option, read_jit_map
from probectl.script.symbols import UserSymbols
from probectl.tracedat.jitmaps import (OPTION_JIT_MAPS, JitSymbol, JitSymbols, decode_jit_maps, encode_jit_maps,
                                       parse_perf_map)

NOBODY = 65534


def test_perf_map_lines():
    symbols, bad = parse_perf_map("7f0010 20 LazyCompile:*foo /src/a.js:3\n"
                                  "0x7f0040 0x8 py::bar:/src/b.py\n"
                                  "\n"
                                  "7f0050\n"            # no size
                                  "zz 10 name\n"        # not hex
                                  "7f0060 0 empty\n"    # no size
                                  "7f0070 10   \n")     # no name
    assert symbols == [JitSymbol(0x7F0010, 0x20, "LazyCompile:*foo /src/a.js:3"),
                       JitSymbol(0x7F0040, 8, "py::bar:/src/b.py")]
    assert bad == 4


def test_lookup_and_the_later_line_wins():
    jit = JitSymbols(parse_perf_map("1000 100 old\n2000 10 b\n1000 100 new\n1080 10 inner\n")[0])
    assert jit.lookup(0x1000) == ("new", 0)
    assert jit.lookup(0x1084) == ("inner", 4)
    assert jit.lookup(0x10F0) == ("new", 0xF0)
    assert jit.lookup(0x2010) is None and jit.lookup(0xFFF) is None


def test_the_option_round_trip_and_damage():
    maps = {42: [JitSymbol(0x1000, 0x10, "a b c")], 7: [JitSymbol(0x2000, 0x20, "x")]}
    decoded = decode_jit_maps(encode_jit_maps(maps))
    assert decoded[42].lookup(0x1008) == ("a b c", 8) and decoded[7].lookup(0x2000) == ("x", 0)
    damaged = decode_jit_maps(b"pid x\n1000 10 lost\npid 9\n1000 zz bad\n3000 10 ok\n\xff\xfe\n")
    assert list(damaged) == [9] and damaged[9].lookup(0x3001) == ("ok", 1) and len(damaged[9]) == 1
    assert decode_jit_maps(b"") == {} and decode_jit_maps(b"\x00" * 10) == {}


def test_the_owner_rule(tmp_path):
    path = tmp_path / f"perf-{os.getpid()}.map"
    path.write_text("1000 10 mine\n")
    notes: list[str] = []
    assert read_jit_map(os.getpid(), notes.append, directory=str(tmp_path)) == [JitSymbol(0x1000, 0x10, "mine")]
    assert not notes
    # another user's map for a process of ours (this test's, run as root or not): left out, with a note
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
        assert read_jit_map(os.getpid(), notes.append, directory=str(tmp_path)) is None
        assert "owned by uid 65534" in notes[-1] and "left out" in notes[-1]
    # a link to a file is not the map (perf lstat()s it)
    path.unlink()
    (tmp_path / "target").write_text("1000 10 planted\n")
    path.symlink_to(tmp_path / "target")
    assert read_jit_map(os.getpid(), notes.append, directory=str(tmp_path)) is None
    assert "not a regular file" in notes[-1]
    path.unlink()
    assert read_jit_map(os.getpid(), notes.append, directory=str(tmp_path)) is None  # (none: nothing said)


def test_a_huge_map_keeps_its_last_lines(tmp_path):
    path = tmp_path / f"perf-{os.getpid()}.map"
    lines = [f"{0x10000 + i * 0x10:x} 10 f{i}\n" for i in range(100_000)]
    path.write_text("".join(lines))
    notes: list[str] = []
    symbols = read_jit_map(os.getpid(), notes.append, limit=1 << 20, directory=str(tmp_path))
    assert symbols is not None and 0 < len(symbols) < 100_000
    assert symbols[-1].name == "f99999" and symbols[0].name == f"f{100_000 - len(symbols)}"  # whole lines only
    assert "last 1 MiB kept" in notes[-1]


def test_the_option_of_a_recording(tmp_path, monkeypatch):
    monkeypatch.setattr("probectl.record.jitmaps.MAP_DIR", str(tmp_path))
    (tmp_path / "perf-11.map").write_text("1000 10 a\n")
    (tmp_path / "perf-12.map").write_text("junk\n")
    assert jit_maps_option([], print) is None
    assert jit_maps_option([13], print) is None
    option = jit_maps_option([11, 12, 13, 11], print)
    assert option is not None and option[0] == OPTION_JIT_MAPS
    assert list(decode_jit_maps(option[1])) == [11]


def test_user_symbols_name_jit_code_only_outside_files():
    from probectl.tracedat.procmaps import Mapping

    maps = {5: [Mapping(0x400000, 0x401000, 0, "/nonexistent/bin")]}
    jit = {5: JitSymbols([JitSymbol(0x7000, 0x100, "jitted")])}
    symbols = UserSymbols(maps, jit)
    assert symbols.lookup(5, 0x7010) == ("jitted", 0x10, "/tmp/perf-5.map")
    assert symbols.lookup(6, 0x7010) is None
    assert symbols.lookup(5, 0x400010) is None  # (a file's address is the file's to name)
    assert OPTION_JIT_MAPS not in (0x7E01, 0x7E02)
