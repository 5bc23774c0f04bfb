"""The native text formatter (native/textfmt.c, probectl/script/nativeplan.py) against the Python
formatter it stands in for, which stays the reference: text, JSON and CSV of the committed samples,
of random event formats with random print formats and random values (long strings of any bytes,
every integer width, arrays, bytes, short records, unknown ids), of every format of this machine's
tracefs, and of the command; Python's ``%`` for every flag, width, precision, letter and cast;
plans that fall back to Python per event; names asked once; bad plans refused; and the formatter
under AddressSanitizer (a C driver with random plans, and the Python comparisons with an
ASan-built extension).
"""
from __future__ import annotations

import io
import os
import random
import shutil
import struct
import subprocess
import tempfile
import sys
import sysconfig
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import pytest

from probectl import _native
from probectl.formats import EventFormat
from probectl.ringbuf import KIND_INT, KIND_STR, LOC_DATA, LOC_REL, EventReader, PageLayout, field_spec
from probectl.script import CsvFormatter, Source, TextFormatter, make_formatter, write_script
from probectl.script.nativeplan import NotNative, PlanCompiler, csv_text, native_formatter
from probectl.script.plan import FIELDS
from probectl.script.printfmt import Slot, _fit
from probectl.tracedat import open_trace
from tests.test_native import COMMON_FIELDS, common

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
SAMPLES = sorted((DATA / "tracedat").glob("*.dat"))
PAGE = PageLayout(page_size=1 << 16)
ALL_FIELDS = FIELDS
CSV_FIELDS = ("time", "cpu", "pid", "tid", "comm", "event", "trace")


# ---- names, pages and both formatters ---------------------------------------------------------------

COMMS = ["bash", 'a,b"c', "naïve-ü", "tab\there", "<...>", "x" * 21, "", "back\\slash", "日本語", "new\nline"]


class Names(Source):
    """Thread names with quotes, commas, controls and non-ASCII; thread groups of four threads."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def comm(self, tid: int) -> str:
        self.calls["comm"] += 1
        return COMMS[tid % len(COMMS)]

    def tgid(self, tid: int) -> int:
        self.calls["tgid"] += 1
        return tid - tid % 4


def fake_symbols(formatter: Any) -> None:
    """Symbols for every address (the fake processes have no maps): a name, an offset."""
    names = ["main", "[unknown]", "fn,comma", 'q"uote', "ünï"]
    formatter.sym_names.fn = lambda key: f"{names[key[1] % 5]}+0x{key[1] % 97:x}"


def stream_pages(payloads: Sequence[bytes], rng: random.Random, ts: int, page_size: int = PAGE.page_size) -> bytes:
    """Records (payloads with random time deltas) packed into pages of ``page_size``."""
    pages, recs, used = [], [], 16
    for p in payloads:
        padded = p + b"\0" * (-len(p) % 4)
        rec = (struct.pack("<I", len(padded) // 4 | rng.randrange(1 << 20) << 5) + padded if len(padded) <= 112
               else struct.pack("<II", rng.randrange(1 << 20) << 5, len(padded) + 4) + padded)
        if used + len(rec) > page_size:
            pages.append((ts, b"".join(recs)))
            ts += 1 << 28
            recs, used = [], 16
        recs.append(rec)
        used += len(rec)
    if recs:
        pages.append((ts, b"".join(recs)))
    out = b""
    for t, body in pages:
        page = struct.pack("<QQ", t, len(body)) + body
        out += page + b"\0" * (page_size - len(page))
    return out


def streams_of(payloads: Sequence[bytes], rng: random.Random, cpus: int = 2) -> list[tuple[int, bytes, int, int]]:
    """The payloads spread over ``cpus`` CPU streams (merged back by time when read)."""
    per_cpu: list[list[bytes]] = [[] for _ in range(cpus)]
    for p in payloads:
        per_cpu[rng.randrange(cpus)].append(p)
    out = []
    for cpu, ps in enumerate(per_cpu):
        data = stream_pages(ps, rng, 5_000_000_000_000 + rng.randrange(10**9) + cpu)
        if data:
            out.append((cpu, data, 0, len(data)))
    return out


def outputs(formats: Sequence[EventFormat], streams: list, kind: str, fields: Sequence[str], *,
            events: Sequence[str] = (), batch: int = 700,
            patch: Optional[Callable[[Any], None]] = None) -> tuple[str, str]:
    """What the Python formatter (batch path) and the native one print for the same events."""
    got = []
    for native in (False, True):
        f = make_formatter(kind, Names(), fields, events=events)
        f.set_formats(formats)
        fake_symbols(f)
        if patch is not None:
            patch(f)
        if isinstance(f, CsvFormatter):
            f.set_present(formats)
        reader = EventReader(streams, formats, PAGE)
        parts = [f.begin()]
        if native:
            nf = native_formatter(f)
            while (item := reader._native.format_text(nf, batch)) is not None:
                parts.append(item[1].decode())
            # the same, every batch written to a file descriptor by the C loop
            with tempfile.TemporaryFile() as out:
                fd_reader = EventReader(streams, formats, PAGE)
                n = fd_reader._native.format_text(native_formatter(f), batch, fd=out.fileno())
                fd_reader.close()
                out.seek(0)
                assert out.read().decode() == "".join(parts[1:])
                assert n == sum(1 for _ in reader_events(streams, formats))
        else:
            parts += [f.format_batch(b) for b in reader.batches(batch)]
        parts.append(f.end())
        reader.close()
        got.append("".join(parts))
    return got[0], got[1]


def reader_events(streams: list, formats: Sequence[EventFormat]) -> Iterator[Any]:
    reader = EventReader(streams, formats, PAGE)
    try:
        yield from reader.events()
    finally:
        reader.close()


def assert_same(python: str, native: str, what: str = "") -> None:
    if python == native:
        return
    a, b = python.splitlines(keepends=True), native.splitlines(keepends=True)
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            pytest.fail(f"{what}: line {i} differs\n python: {x!r}\n native: {y!r}")
    pytest.fail(f"{what}: {len(a)} python lines, {len(b)} native lines")


# ---- random event formats ----------------------------------------------------------------------------

INT_TYPES = [("s8", 1, 1), ("u8", 1, 0), ("short", 2, 1), ("unsigned short", 2, 0), ("int", 4, 1),
             ("unsigned int", 4, 0), ("long", 8, 1), ("unsigned long", 8, 0), ("s64", 8, 1), ("u64", 8, 0),
             ("void *", 8, 0), ("pid_t", 4, 1), ("bool", 1, 0)]
NAMES = ["a", "count", "flags", "ip", "call_site", "addr", "ret", "len", "x_ip", "caller", "mode", "v"]


def random_text(rng: random.Random, n: int) -> bytes:
    """Bytes of every sort: ASCII, controls, quotes, backslashes, commas, valid and invalid UTF-8."""
    pieces = [b'"', b"\\", b",", b"\n", b"\t", b"\r", b"\x7f", b"\x1b", "é".encode(), "€".encode(),
              "😀".encode(), b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xff", b"%", b"'"]
    out = bytearray()
    while len(out) < n:
        r = rng.random()
        if r < 0.5:
            out += bytes([rng.randrange(0x20, 0x7f)])
        elif r < 0.55:
            out += bytes([rng.randrange(1, 0x20)])
        else:
            out += rng.choice(pieces)
    return bytes(out[:n])


class RandomFormat:
    """A random event format (tracepoint or probe, with a random print format) and its records."""

    def __init__(self, rng: random.Random, event_id: int, probe: Optional[str]):
        self.rng = rng
        self.id = event_id
        decls: list[tuple[str, str, int, int]] = []  # (declaration, name, size, signed)
        if probe == "ret":
            decls += [("unsigned long __probe_func", "__probe_func", 8, 0),
                      ("unsigned long __probe_ret_ip", "__probe_ret_ip", 8, 0)]
        elif probe:
            decls.append(("unsigned long __probe_ip", "__probe_ip", 8, 0))
        for k in range(rng.randrange(0, 9)):
            name = f"{rng.choice(NAMES)}{k}"
            r = rng.random()
            if r < 0.45:
                t, size, signed = rng.choice(INT_TYPES)
                decls.append((f"{t} {name}", name, size, signed))
            elif r < 0.6:
                n = rng.randrange(1, 24)
                decls.append((f"char {name}[{n}]", name, n, 0))
            elif r < 0.72:
                decls.append((f"__data_loc char[] {name}", name, 4, 0))
            elif r < 0.76:
                decls.append((f"__rel_loc char[] {name}", name, 4, 0))
            elif r < 0.84:
                t, size, signed = rng.choice([("u32", 4, 0), ("s16", 2, 1), ("unsigned long", 8, 0), ("u8", 1, 0)])
                n = rng.randrange(1, 5)
                decls.append((f"{t} {name}[{n}]", name, size * n, signed))
            elif r < 0.9:
                t, size, signed = rng.choice([("s32", 4, 1), ("u16", 2, 0), ("u64", 8, 0)])
                decls.append((f"__data_loc {t}[] {name}", name, 4, signed))
            else:
                decls.append((f"struct blob{k} {name}", name, rng.randrange(1, 9), 0))
        lines, offset = [], 8
        for decl, name, size, signed in decls:
            lines.append(f"\tfield:{decl};\toffset:{offset};\tsize:{size};\tsigned:{signed};")
            offset += size
        self.fixed_end = offset
        system = ("probe_rnd" if probe else "rnd")
        text = (f"name: ev{event_id}\nID: {event_id}\nformat:\n{COMMON_FIELDS}\n" + "\n".join(lines)
                + "\n\nprint fmt: " + self._print_fmt(decls, probe) + "\n")
        self.format = EventFormat.parse(text, system)
        self.specs = [field_spec(f) for f in self.format.event_fields]

    def _print_fmt(self, decls: list[tuple[str, str, int, int]], probe: Optional[str]) -> str:
        rng = self.rng
        parts = ["(%lx <- %lx)" if probe == "ret" else "(%lx)"] if probe else []
        args = [f"REC->{d[1]}" for d in decls[:2 if probe == "ret" else 1]] if probe else []
        for decl, name, size, _signed in decls[len(args):]:
            if rng.random() < 0.1:
                parts.append("%%")
            lit = rng.choice([f"{name}=", f'{name}=\\"', "0x", "", f"{name}:'", "\\\\"])
            flags = "".join(c for c in "-+ #0" if rng.random() < 0.15)
            width = str(rng.randrange(1, 14)) if rng.random() < 0.3 else ""
            if "__data_loc char" in decl or "__rel_loc" in decl or decl.startswith("char "):
                arg = f"__get_str({name})" if "loc" in decl else f"REC->{name}"
                parts.append(f"{lit}%{'-' if '-' in flags else ''}{width}s")
            elif "[" in decl and "__data_loc" not in decl or "__data_loc" in decl:
                arg = f"REC->{name}[{rng.randrange(0, 5)}]"
                parts.append(f"{lit}%{flags}{width}{rng.choice(['', 'l', 'h', 'hh'])}{rng.choice('duxc')}")
            elif decl.startswith("struct"):
                arg = f"REC->{name}"
                parts.append(f"{lit}%p")  # (no such conversion in Python: name=value instead)
            else:
                arg = f"REC->{name}"
                prec = f".{rng.randrange(0, 7)}" if rng.random() < 0.2 else ""
                parts.append(f"{lit}%{flags}{width}{prec}{rng.choice(['', 'l', 'll', 'h', 'hh', 'z', 'L'])}"
                             f"{rng.choice('diuxXoc')}")
            args.append(arg)
        text = " ".join(parts)
        return '"' + text + '"' + "".join(", " + a for a in args)

    def payload(self, tid: int) -> bytes:
        rng = self.rng
        fixed = bytearray(common(self.id, tid, rng.randrange(256), rng.randrange(256)))
        tail = bytearray()
        for f, (offset, size, loc, kind, esize, _signed) in zip(self.format.event_fields, self.specs):
            assert len(fixed) == f.offset
            if loc in (LOC_DATA, LOC_REL):
                if kind == KIND_STR:
                    n = rng.choice([0, 1, 5, 30, rng.randrange(0, 3000)])
                    data = random_text(rng, n) + (b"\0" if rng.random() < 0.8 else b"")
                else:
                    data = bytes(rng.randrange(256) for _ in range(max(esize, 1) * rng.randrange(0, 6)))
                at = self.fixed_end + len(tail)
                if loc == LOC_REL:
                    at -= f.offset + 4
                word = len(data) << 16 | at
                if rng.random() < 0.05:
                    word = rng.randrange(1 << 32)  # anywhere: read as missing
                fixed += struct.pack("<I", word)
                tail += data
            elif kind == KIND_STR:
                fixed += random_text(rng, rng.randrange(0, f.size + 1)).ljust(f.size, b"\0")[:f.size]
            elif kind == KIND_INT:
                fixed += random_int_bytes(rng, f.size)
            else:
                fixed += bytes(rng.randrange(256) for _ in range(f.size))
        out = bytes(fixed + tail)
        if rng.random() < 0.03:
            out = out[:rng.randrange(8, len(out) + 1)]  # a short record: fields read as missing
        return out


def random_int_bytes(rng: random.Random, size: int) -> bytes:
    v = rng.choice([0, 1, -1, 39, (1 << (8 * size - 1)) - 1, -(1 << (8 * size - 1)), rng.randrange(1 << 8 * size)])
    return (v & ((1 << 8 * size) - 1)).to_bytes(size, "little")


def random_events(seed: int, nformats: int = 12, nevents: int = 1500) -> tuple[list[EventFormat], list]:
    rng = random.Random(seed)
    fmts = [RandomFormat(rng, 3000 + k, rng.choice([None, None, "entry", "ret"])) for k in range(nformats)]
    payloads = []
    for _ in range(nevents):
        if rng.random() < 0.01:
            payloads.append(common(65000 + rng.randrange(3), rng.randrange(1, 50)) + b"\0" * 8)  # no format
        else:
            payloads.append(rng.choice(fmts).payload(rng.choice([0, 1, 2, 3, 7, 8, 9, 100, 4321, 2**31 - 1])))
    return [f.format for f in fmts], streams_of(payloads, rng)


# ---- Python's % ----------------------------------------------------------------------------------------

INTS_FORMAT = f"""name: ints
ID: 900
format:
{COMMON_FIELDS}
\tfield:s8 i8;\toffset:8;\tsize:1;\tsigned:1;
\tfield:u8 u8;\toffset:9;\tsize:1;\tsigned:0;
\tfield:s16 i16;\toffset:10;\tsize:2;\tsigned:1;
\tfield:u16 u16;\toffset:12;\tsize:2;\tsigned:0;
\tfield:s32 i32;\toffset:14;\tsize:4;\tsigned:1;
\tfield:u32 u32;\toffset:18;\tsize:4;\tsigned:0;
\tfield:s64 i64;\toffset:22;\tsize:8;\tsigned:1;
\tfield:u64 u64;\toffset:30;\tsize:8;\tsigned:0;

print fmt: "i8=%d", REC->i8
"""


def _refuse(*args: Any) -> Any:
    raise AssertionError(f"not asked for: {args}")


def test_integers_print_as_pythons_percent():
    """Every flag set, widths, precisions, letters d o x X s and casts to each C integer size,
    over extreme and random values of each integer field width, equal Python's ``%``."""
    rng = random.Random(5)
    fmt = EventFormat.parse(INTS_FORMAT, "test")
    sizes = [1, 1, 2, 2, 4, 4, 8, 8]
    rows = []
    for _ in range(60):
        rows.append([int.from_bytes(random_int_bytes(rng, s), "little", signed=bool(j % 2 == 0))
                     for j, s in enumerate(sizes)])
    payloads = [common(900, 7) + struct.pack("<bBhHiIqQ", *r) for r in rows]
    streams = streams_of(payloads, rng, cpus=1)
    for _round in range(40):
        ops, specs = [], []
        for _ in range(60):
            j = rng.randrange(8)
            flags = "".join(c for c in "-+ #0" if rng.random() < 0.3)
            width = rng.choice([0, 0, 1, 3, 8, 25])
            prec = rng.choice([-1, -1, 0, 1, 5, 22])
            letter = rng.choice("doxXs")
            cast = rng.choice([None, None, (1, True), (2, False), (4, True), (4, False), (8, True), (8, False)])
            token = f"%{flags}{width or ''}{'.' + str(prec) if prec >= 0 else ''}{letter}"
            flag_bits = sum(bit for ch, bit in zip("-+ #0", (1, 2, 4, 8, 16)) if ch in flags)
            ops += [(_native.TF_SRC_FIELD, _native.TF_CONV_INT, flag_bits, ord(letter), cast[0] if cast else 0,
                     int(cast[1]) if cast else 0, width, prec, j, 0), b"|"]
            specs.append((j, token, cast))
        ops.append(b"\n")
        nf = _native.TextFormatter(_refuse, _refuse, _refuse, _refuse)
        nf.set_plan(900, ops)
        reader = EventReader(streams, [fmt], PAGE)
        text = b"".join(item[1] for item in iter(lambda: reader._native.format_text(nf, 1000), None)).decode()
        reader.close()
        expect = "".join("".join(token % (_fit(r[j], *cast) if cast else r[j]) + "|" for j, token, cast in specs)
                         + "\n" for r in rows)
        assert text == expect


def test_text_values_escape_as_python():
    """Strings of every sort of byte in a tracepoint (``name="..."``), a probe (``%-12s``), JSON
    and CSV; the spelling of a few, to document it."""
    rng = random.Random(11)
    fmts, _ = random_events(0, 0, 0)
    probe_text = f"""name: s
ID: 901
format:
{COMMON_FIELDS}
\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] s;\toffset:16;\tsize:4;\tsigned:0;
\tfield:char c[8];\toffset:20;\tsize:8;\tsigned:0;

print fmt: "(%lx) s=\\"%-12s\\" c=%5s", REC->__probe_ip, __get_str(s), REC->c
"""
    tp_text = probe_text.replace("name: s", "name: t").replace("ID: 901", "ID: 902").replace(
        "unsigned long __probe_ip", "unsigned long caller")
    fmts = [EventFormat.parse(probe_text, "probe_x"), EventFormat.parse(tp_text, "tp")]
    specials = [b'a"b', b"back\\slash", b"tab\tnew\nline\r", b"\xff\xfe", "é€😀".encode(), b"\xed\xa0\x80",
                b"\x7f\x01", b"", b"x" * 5000, b"a,b"]
    payloads = []
    for k in range(400):
        s = specials[k % len(specials)] if k < 40 else random_text(rng, rng.randrange(0, 200))
        c = random_text(rng, 8)[:8].ljust(8, b"\0")
        for eid in (901, 902):
            payloads.append(common(eid, k) + struct.pack("<QI", 0x4010 + k, (len(s) + 1) << 16 | 28) + c + s + b"\0")
    streams = streams_of(payloads, rng)
    for kind, fields in [("text", ("comm", "tid", "event", "trace")), ("json", ()), ("csv", CSV_FIELDS)]:
        python, native = outputs(fmts, streams, kind, fields)
        assert_same(python, native, kind)
    text = outputs(fmts, streams, "text", ("event", "trace"), batch=50)[1]
    # (the width counts the escaped text; invalid UTF-8 is \xNN, whose backslash is escaped too)
    assert r'probe_x:s: s="a\"b        "' in text and r's="\\xff\\xfe  "' in text
    assert r'tp:t: caller=0x4012 s="tab\tnew\nline\x0d"' in text and r's="\\xed\\xa0\\x80"' in text


@pytest.mark.parametrize("seed", range(6))
def test_random_formats_print_as_python(seed):
    """Random tracepoint and probe formats (random print formats: flags, widths, precisions,
    length modifiers, %c, array elements, %p), random values and unknown ids, in every output
    format, with all fields, with some events selected, with batches of any size."""
    formats, streams = random_events(seed)
    rng = random.Random(seed)
    cases = [("text", ("comm", "tid", "cpu", "time", "event", "ip", "trace")), ("text", ALL_FIELDS),
             ("text", ("pid", "tid", "sym")), ("text", ("event",)), ("json", ()), ("csv", CSV_FIELDS),
             ("csv", ALL_FIELDS), ("csv", ("sym",))]
    for kind, fields in cases:
        python, native = outputs(formats, streams, kind, fields or CSV_FIELDS, batch=rng.choice([1, 37, 700, 5000]))
        assert_same(python, native, f"{kind} {fields}")
    selected = [f"rnd:ev{formats[0].id}", "ev30*"]
    assert_same(*outputs(formats, streams, "text", ALL_FIELDS, events=selected), "selection")


def test_every_plan_of_the_random_formats_is_native():
    """The plans of the formats above need no Python per event (%p aside, which Python cannot
    print either: those print name=value)."""
    formats, _ = random_events(1, nformats=60, nevents=0)
    for kind, fields in [("text", ALL_FIELDS), ("json", ()), ("csv", ALL_FIELDS)]:
        f = make_formatter(kind, Names(), fields or CSV_FIELDS)
        f.set_formats(formats)
        if isinstance(f, CsvFormatter):
            f.set_present(formats)
        compiler = PlanCompiler(f)
        for fmt in formats:
            compiler.ops(f.plan(fmt.id))


def _tracefs_formats() -> list[EventFormat]:
    root = Path("/sys/kernel/tracing/events")
    out = []
    try:
        for path in sorted(root.glob("*/*/format")):
            try:
                out.append(EventFormat.parse(path.read_text(errors="replace"), path.parent.parent.name))
            except Exception:
                continue
    except OSError:
        return []
    return out


def test_every_tracefs_format_prints_as_python():
    """Every event format of this machine, with random records of its layout: the same output
    from both formatters, and each plan native."""
    formats = _tracefs_formats()
    if len(formats) < 100:
        pytest.skip("no readable tracefs events")
    rng = random.Random(3)
    payloads = []
    for fmt in formats:
        for _ in range(2):
            fixed = bytearray(common(fmt.id, rng.choice([1, 2, 50])))
            end = max((f.offset + f.size for f in fmt.event_fields), default=8)
            fixed += bytes(rng.randrange(256) for _ in range(max(end - 8, 0)))
            tail = random_text(rng, rng.randrange(0, 60)) + b"\0"
            for f in fmt.event_fields:  # dynamic fields: a valid location half the time
                if f.is_data_loc and rng.random() < 0.5 and f.offset + 4 <= len(fixed):
                    at = len(fixed) - (f.offset + 4 if f.is_rel_loc else 0)
                    fixed[f.offset:f.offset + 4] = struct.pack("<I", len(tail) << 16 | at)
            payloads.append(bytes(fixed) + tail)
    streams = streams_of(payloads, rng)
    for kind, fields in [("text", ("comm", "tid", "cpu", "time", "event", "ip", "trace")), ("json", ()),
                         ("csv", CSV_FIELDS)]:
        assert_same(*outputs(formats, streams, kind, fields or CSV_FIELDS, batch=4096), kind)
    f = make_formatter("text", Names())
    f.set_formats(formats)
    compiler = PlanCompiler(f)
    for fmt in formats:
        compiler.ops(f.plan(fmt.id))


# ---- files and the command ----------------------------------------------------------------------------


def script(path: Path, kind: str, fields: Optional[Sequence[str]], native: bool, events: Sequence[str] = ()) -> str:
    buf = io.StringIO()
    with open_trace(path) as t:
        if fields is None:
            write_script(t, buf, kind, events=events, native=native)
        else:
            write_script(t, buf, kind, fields, events=events, native=native)
    return buf.getvalue()


@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
def test_samples_print_as_python(path):
    for kind, fields, events in [("text", None, ()), ("text", ALL_FIELDS, ()), ("text", ("pid", "time", "event"), ()),
                                 ("text", ("comm", "trace"), ("sched:*", "sys_enter_getpid")),
                                 ("json", None, ()), ("csv", CSV_FIELDS, ()), ("csv", ALL_FIELDS, ("ftrace:print",)),
                                 ("csv", ("sym",), ())]:
        python = script(path, kind, fields, False, events)
        assert python, (kind, fields)
        assert_same(python, script(path, kind, fields, True, events), f"{path.name} {kind} {fields} {events}")


@pytest.mark.parametrize("args", [[], ["-F", "comm,pid,tid,cpu,time,event,ip,sym,trace"], ["--format", "json"],
                                  ["--format", "csv"], ["-e", "sys_enter_getpid", "-F", "tid,time"]])
def test_the_command_prints_the_reference_bytes(args):
    """``probectl script`` (native, straight to stdout's buffer) against the Python formatter."""
    path = DATA / "tracedat" / "sample-v7.dat"
    run = subprocess.run([sys.executable, "-m", "probectl", "script", "-i", str(path), *args], capture_output=True)
    assert run.returncode == 0, run.stderr
    kind = args[args.index("--format") + 1] if "--format" in args else "text"
    fields = tuple(args[args.index("-F") + 1].split(",")) if "-F" in args else (CSV_FIELDS if kind == "csv" else None)
    events = (args[args.index("-e") + 1],) if "-e" in args else ()
    assert run.stdout == script(path, kind, fields, False, events).encode()


# ---- plans, names, errors ------------------------------------------------------------------------------


def test_plans_python_cannot_compile_print_through_python_per_event():
    """A conversion without a native tag: that format's events go through the row path, the
    others stay native, and the output is unchanged."""
    formats, streams = random_events(2)
    victim = formats[0].id
    calls = Counter()

    def untagged(value: Any) -> str:
        calls["untagged"] += 1
        return f"<{value!r}>"

    def patch(f: Any) -> None:
        make = f.make_plan

        def make_plan(fmt: Optional[EventFormat], event_id: int) -> Any:
            plan = make(fmt, event_id)
            if event_id == victim:
                plan.template = plan.template.replace("%16s", "%s")
                plan.slots[0] = Slot("comm", untagged)
            return plan
        f.make_plan = make_plan

    python, native = outputs(formats, streams, "text", ("comm", "tid", "event", "trace"), patch=patch)
    assert_same(python, native, "fallback")
    assert "<'" in native and calls["untagged"] > 0
    f = make_formatter("text", Names())
    f.set_formats(formats)
    patch(f)
    with pytest.raises(NotNative):
        PlanCompiler(f).ops(f.plan(victim))


def test_names_are_asked_once_per_thread():
    formats, streams = random_events(4)
    names = Names()
    f = TextFormatter(names, ALL_FIELDS)
    f.set_formats(formats)
    nf = native_formatter(f)
    reader = EventReader(streams, formats, PAGE)
    while reader._native.format_text(nf, 300) is not None:
        pass
    tids = {9, 8, 7, 3, 2, 1, 0, 100, 4321, 2**31 - 1} | set(range(1, 50))
    assert 0 < names.calls["comm"] <= len(tids) and names.calls["tgid"] <= len(tids)


def test_csv_cells_quote_as_the_csv_module():
    import csv
    for text in ["", "a", "a,b", 'a"b', "a\nb", "a\rb", " a", "a\tb"]:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([text, "x"])
        assert buf.getvalue() == csv_text(text) + ",x\n"


def test_bad_plans_are_refused():
    fmt = EventFormat.parse(INTS_FORMAT, "test")
    nf = _native.TextFormatter(_refuse, _refuse, _refuse, _refuse)
    op = (_native.TF_SRC_FIELD, _native.TF_CONV_INT, 0, ord("d"), 0, 0, 0, -1, 0, 0)
    for bad in [(op[0], op[1], 0, ord("q")) + op[4:], (99,) + op[1:], op[:1] + (99,) + op[2:],
                op[:4] + (3,) + op[5:], op[:6] + (_native.TF_MAX_WIDTH + 1,) + op[7:],
                (_native.TF_SRC_TID, _native.TF_CONV_STR) + op[2:], op[:2] + (256,) + op[3:]]:
        with pytest.raises(ValueError):
            nf.set_plan(900, [bad])
    with pytest.raises(TypeError):
        nf.set_plan(900, [1.5])
    with pytest.raises(TypeError):
        nf.set_plan(900, 7)
    with pytest.raises(ValueError):
        nf.set_plan(70000, None)
    # a conversion the field's kind does not have: refused when an event needs it
    nf.set_plan(900, [(_native.TF_SRC_FIELD, _native.TF_CONV_STR) + op[2:]])
    payload = common(900, 1) + bytes(30)
    reader = EventReader(streams_of([payload] * 3, random.Random(1), cpus=1), [fmt], PAGE)
    with pytest.raises(ValueError, match="does not fit"):
        reader._native.format_text(nf)
    with pytest.raises(TypeError):
        reader._native.format_text(object())
    reader.close()


def test_callback_errors_come_through_and_the_reader_goes_on():
    fmt = EventFormat.parse(INTS_FORMAT, "test")
    boom = RuntimeError("plan callback failed")

    def plan(event_id: int) -> Any:
        raise boom

    nf = _native.TextFormatter(plan, _refuse, _refuse, _refuse)
    payloads = [common(900, 1) + bytes(30)] * 5000
    reader = EventReader(streams_of(payloads, random.Random(1), cpus=1), [fmt], PAGE)
    with pytest.raises(RuntimeError, match="plan callback failed"):
        reader._native.format_text(nf, 1000)
    nf.set_plan(900, [b"x\n"])
    n, text = reader._native.format_text(nf, 1000)
    assert n == 1000 and text == b"x\n" * 1000
    # a plan callback that returns a bad plan, a thread callback that returns the wrong thing
    nf2 = _native.TextFormatter(lambda i: [(_native.TF_SRC_COMM, _native.TF_CONV_RAW, 0, ord("s"), 0, 0, 0, -1, 0, 0)],
                                lambda tid: "not a tuple", _refuse, _refuse)
    with pytest.raises(TypeError):
        reader._native.format_text(nf2, 10)
    reader.close()


# ---- AddressSanitizer ----------------------------------------------------------------------------------

SANITIZE = ["-std=gnu99", "-O1", "-g", "-fno-omit-frame-pointer", "-Wall", "-Wextra", "-Werror"]


def _gcc_or_skip() -> str:
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc is needed to build the sanitizer builds")
    return gcc


def _skip_without_runtime(build: subprocess.CompletedProcess) -> None:
    if build.returncode and "sanitize" in build.stderr and "cannot find" in build.stderr:
        pytest.skip(f"no sanitizer runtime: {build.stderr.strip()}")
    assert build.returncode == 0, build.stderr


def test_formatter_under_address_sanitizer(tmp_path):
    """native/fuzz/textfmt_fuzz.c with ASan+UBSan: random plans over random records (long strings of
    any bytes, data_loc words anywhere, short records), random names, every TF_NEED_* answered."""
    gcc = _gcc_or_skip()
    exe = tmp_path / "tffuzz"
    build = subprocess.run(
        [gcc, *SANITIZE, "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         f"-I{ROOT / 'native'}", *(str(ROOT / "native" / n) for n in ("fuzz/textfmt_fuzz.c", "textfmt.c", "textfmt_run.c",
                                                                       "ringbuf.c", "reader.c")), "-o", str(exe)],
        capture_output=True, text=True)
    _skip_without_runtime(build)
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1")
    for seed in (1, 2, 3):
        run = subprocess.run([str(exe), "1500", str(seed)], capture_output=True, text=True, env=env, timeout=300)
        assert "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr[-3000:]
        assert run.returncode == 0 and run.stdout.startswith("ok"), (run.returncode, run.stderr[-2000:])


_PRELOAD_RUNNER = """\
import importlib.util, sys
spec = importlib.util.spec_from_file_location("probectl._native", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.modules["probectl._native"] = module
import probectl.ringbuf
assert probectl.ringbuf._native is module
import pytest
sys.exit(pytest.main(["-q", "-s", "-p", "no:cacheprovider", "-x", *sys.argv[2:]]))  # (-s: reports reach stderr)
"""


def test_comparisons_under_address_sanitizer(tmp_path):
    """The comparisons of this file (random formats, long strings, every integer spec, bad plans
    and failing callbacks) with the extension built with ASan: no report, same results."""
    gcc = _gcc_or_skip()
    if os.environ.get("PROBECTL_UNDER_ASAN"):
        pytest.skip("already under ASan")
    libasan = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not libasan or not os.path.isabs(libasan):
        pytest.skip("no libasan.so to preload")
    ext = tmp_path / "_native_asan.so"
    build = subprocess.run(
        [gcc, *SANITIZE, "-fsanitize=address", "-shared", "-fPIC", f"-I{ROOT / 'native'}",
         f"-I{sysconfig.get_paths()['include']}", *(str(p) for p in sorted((ROOT / "native").glob("*.c"))),
         "-o", str(ext), "-lpthread"],
        capture_output=True, text=True)
    _skip_without_runtime(build)
    runner = tmp_path / "run.py"
    runner.write_text(_PRELOAD_RUNNER)
    env = dict(os.environ, LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0",
               PROBECTL_UNDER_ASAN="1")
    tests = ["test_integers_print_as_pythons_percent", "test_text_values_escape_as_python",
             "test_random_formats_print_as_python", "test_bad_plans_are_refused",
             "test_callback_errors_come_through_and_the_reader_goes_on", "test_samples_print_as_python"]
    run = subprocess.run([sys.executable, str(runner), str(ext), str(Path(__file__)), "-k", " or ".join(tests)],
                         capture_output=True, text=True, env=env, cwd=ROOT / "tests", timeout=900)
    assert "AddressSanitizer" not in run.stderr, run.stderr[-4000:]
    assert run.returncode == 0, (run.stdout[-3000:], run.stderr[-3000:])
    assert " passed" in run.stdout
