"""`probectl script` and the formatters: text, CSV, JSON and folded stacks, -F and -e selection,
print-format rendering of probe events, stacks attached to their events, symbols, read_trace.

The committed samples of tests/data/tracedat (a tracepoint recording, its trace-cmd conversions and
``trace-cmd report -R -t`` of it) keep these tests offline; live recordings are in test_record.py.
"""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

import probectl
from tests.helpers import build_fixture
from tests.helpers import probectl as probectl_cli  # (probectl is the package here)
from probectl.formats import EventFormat
from probectl.record import decode_proc_maps, encode_proc_maps, synthesize_maps
from probectl.script import (KernelSymbols, Mapping, Source, StackJoiner, TextFormatter, UserSymbols,
                             parse_fields, split_print_fmt, stack_addresses, trace_template, write_script)
from probectl.tracedat import kallsyms_addresses_shown, open_trace
from tests.test_tracedat import parse_report

DATA = Path(__file__).resolve().parent / "data"
SAMPLES = ["sample-v7.dat", "sample-v6.dat", "tracecmd-v6.dat", "tracecmd-v7-zstd.dat"]
SAMPLE = DATA / "tracedat" / "sample-v7.dat"
META = json.loads((DATA / "tracedat" / "sample.json").read_text())

# COMM TID [CPU] SECS.USECS: GROUP:EVENT: rest
TEXT_LINE = re.compile(r"^\s*(?P<comm>.*?)\s+(?P<tid>\d+) \[(?P<cpu>\d{3})\]\s+(?P<secs>\d+)\.(?P<us>\d{6}): "
                       r"(?P<event>[\w]+:[\w]+):(?: (?P<rest>.*))?$")


def script_text(path: Path, kind: str = "text", fields: tuple[str, ...] | None = None, events=()) -> str:
    buf = io.StringIO()
    with open_trace(path) as t:
        if fields is None:
            write_script(t, buf, kind, events=events)
        else:
            write_script(t, buf, kind, fields, events=events)
    return buf.getvalue()


def fields_of(rest: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', rest or ""):
        if value.startswith('"'):
            out[name] = value[1:-1].encode().decode("unicode_escape")
        elif re.fullmatch(r"0x[0-9a-f]+", value):
            out[name] = int(value, 16)
        else:
            out[name] = int(value)
    return out


# ---- text against trace-cmd's report of the same file -------------------------------------------


@pytest.mark.parametrize("name", SAMPLES)
def test_text_lines_carry_what_trace_cmd_reports(name):
    report = parse_report((DATA / "tracedat" / "sample-report.txt").read_text())
    lines = script_text(DATA / "tracedat" / name).splitlines()
    assert len(lines) == len(report) == 104
    for line, (ts, cpu, pid, event, values) in zip(lines, report):
        m = TEXT_LINE.match(line)
        assert m, line
        assert int(m["tid"]) == pid and int(m["cpu"]) == cpu
        assert int(m["secs"]) * 1_000_000 + int(m["us"]) == ts // 1000  # microseconds, truncated
        assert m["event"].split(":")[1] == event
        got = fields_of(m["rest"])
        for key, value in values.items():
            if key == "ip":
                continue  # trace-cmd prints the symbol, probectl the address
            if isinstance(value, str):  # (the report's parse drops a trailing newline)
                assert got[key].rstrip("\n") == value, (line, key)
            else:
                assert got[key] == value, (line, key)
    getpid = [l for l in lines if "sys_enter_getpid" in l]
    assert len(getpid) == META["getpid_count"]
    assert all(f" {META['getpid_pid']} [" in l for l in getpid)
    assert f'filename="{META["exec_filename"]}"' in "\n".join(lines)
    # the marker's newline is escaped, so one event stays one line
    assert any(l.endswith(f'buf="{META["markers"][0]}\\n"') for l in lines)


def test_fields_selection():
    text = script_text(SAMPLE, fields=parse_fields("pid,tid,time,event"))
    first = [l for l in text.splitlines() if "getpid" in l][0]
    assert re.fullmatch(rf"\s*{META['getpid_pid']}/{META['getpid_pid']}\s+\d+\.\d{{6}}: syscalls:sys_enter_getpid:",
                        first)
    only_comm = script_text(SAMPLE, fields=("comm", "trace")).splitlines()
    assert only_comm[1].split() == ["python", "__syscall_nr=39"]
    with pytest.raises(probectl.errors.ProbectlError, match="unknown output field: bogus"):
        parse_fields("comm,bogus")


def test_event_selection():
    text = script_text(SAMPLE, events=("sched:*",))
    assert len(text.splitlines()) == 2 and all("sched_process_exec" in l for l in text.splitlines())
    assert len(script_text(SAMPLE, events=("sys_enter_getpid",)).splitlines()) == 100
    rows = list(csv.reader(io.StringIO(script_text(SAMPLE, "csv", events=("ftrace:print",)))))
    assert len(rows) == 1 + 2


# ---- JSON and CSV -------------------------------------------------------------------------------


def test_json_lines():
    objs = [json.loads(l) for l in script_text(SAMPLE, "json").splitlines()]
    assert len(objs) == 104
    getpid = [o for o in objs if o["event"] == "syscalls:sys_enter_getpid"]
    assert len(getpid) == 100
    o = getpid[0]
    assert set(o) == {"time", "cpu", "pid", "tid", "comm", "event", "fields"}
    assert o["fields"] == {"__syscall_nr": 39} and o["pid"] == META["getpid_pid"] and o["comm"] == "python"
    assert isinstance(o["time"], float) and o["time"] > 0
    exec_ = [o for o in objs if o["event"] == "sched:sched_process_exec" and o["pid"] == META["exec_pid"]][0]
    assert exec_["fields"] == {"filename": META["exec_filename"], "pid": META["exec_pid"], "old_pid": META["exec_pid"]}
    marks = [o["fields"]["buf"] for o in objs if o["event"] == "ftrace:print"]
    assert marks == [m + "\n" for m in META["markers"]]
    assert [o["time"] for o in objs] == sorted(o["time"] for o in objs)


def test_csv_rows():
    rows = list(csv.reader(io.StringIO(script_text(SAMPLE, "csv", ("time", "cpu", "pid", "tid", "comm", "event", "trace")))))
    header, body = rows[0], rows[1:]
    assert header[:6] == ["time", "cpu", "pid", "tid", "comm", "event"]
    # one column per event field, an event field named like a header column gets a prefix
    assert {"__syscall_nr", "filename", "trace.pid", "old_pid", "ip", "buf"} <= set(header)
    assert len(header) == len(set(header))
    assert len(body) == 104 and all(len(r) == len(header) for r in body)
    col = {name: i for i, name in enumerate(header)}
    getpid = [r for r in body if r[col["event"]] == "syscalls:sys_enter_getpid"]
    assert len(getpid) == 100 and {r[col["__syscall_nr"]] for r in getpid} == {"39"}
    assert all(r[col["filename"]] == "" for r in getpid)
    prints = [r for r in body if r[col["event"]] == "ftrace:print"]
    assert prints[1][col["buf"]] == META["markers"][1] + "\n"  # quoted by the CSV writer, not mangled
    assert re.fullmatch(r"0x[0-9a-f]+", prints[0][col["ip"]])
    assert re.fullmatch(r"\d+\.\d{9}", getpid[0][col["time"]])


def test_cli_script_formats_and_errors(tmp_path):
    out = probectl_cli("script", "-i", str(SAMPLE), "--format", "json", "-e", "sched:*")
    assert len(out.stdout.splitlines()) == 2
    bad = probectl_cli("script", "-i", str(SAMPLE), "--format", "folded", check=False)
    assert bad.returncode == 1 and "has no stacks to fold" in bad.stderr and "record with -g" in bad.stderr
    assert "Traceback" not in bad.stderr
    missing = probectl_cli("script", "-i", str(tmp_path / "nope.dat"), check=False)
    assert missing.returncode == 1 and "Error: cannot open" in missing.stderr
    junk = tmp_path / "junk.dat"
    junk.write_bytes(b"not a trace file at all")
    bad = probectl_cli("script", "-i", str(junk), check=False)
    assert bad.returncode == 1 and "not a trace.dat file" in bad.stderr
    badf = probectl_cli("script", "-i", str(SAMPLE), "-F", "comm,nope", check=False)
    assert badf.returncode == 1 and "unknown output field: nope" in badf.stderr


# ---- print formats of probe events --------------------------------------------------------------


def _fmt(name: str, system: str = "probe") -> EventFormat:
    return EventFormat.parse((DATA / "formats" / f"{name}.format").read_text(), system)


def test_split_print_fmt():
    text, args = split_print_fmt(r'"(%lx) a=%d s=\"%s\"", REC->__probe_ip, REC->a, __get_str(s)')
    assert text == '(%lx) a=%d s="%s"' and args == ["REC->__probe_ip", "REC->a", "__get_str(s)"]
    text, args = split_print_fmt(r'"x=%d" " y=%s", (int)(REC->x), foo(a, b)')
    assert text == "x=%d y=%s" and args == ["(int)(REC->x)", "foo(a, b)"]
    assert split_print_fmt("REC->x") is None
    assert split_print_fmt('"no args"') == ("no args", [])


def test_probe_events_print_like_the_kernel():
    ret = _fmt("uretprobe")
    text, slots = trace_template(ret)
    assert text == "arg1=0x%x"
    # a probe format with a string array: the rest still follows the print format's conversions
    text, _ = trace_template(_fmt("uprobe_args"))
    assert 'name="%s"' in text and "n=%d" in text and "im=0x%x" in text and "arg10=0x%x" in text
    assert "ch='%s'" in text and "arr={%s}" in text
    # tracepoints: name=value by type, pointers and addresses in hex
    text, _ = trace_template(_fmt("sys_enter_read", "syscalls"))
    assert text == "__syscall_nr=%d fd=%d buf=0x%x count=%d"
    text, _ = trace_template(_fmt("ftrace_print", "ftrace"))
    assert text == 'ip=0x%x buf="%s"'


def test_probe_line_rendering(tmp_path):
    """A full line of a uprobe event with every kind of value, through the row path."""
    fmt = EventFormat.parse("""name: add
ID: 2400
format:
	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
	field:unsigned char common_flags;	offset:2;	size:1;	signed:0;
	field:unsigned char common_preempt_count;	offset:3;	size:1;	signed:0;
	field:int common_pid;	offset:4;	size:4;	signed:1;

	field:unsigned long __probe_ip;	offset:8;	size:8;	signed:0;
	field:s32 a;	offset:16;	size:4;	signed:1;
	field:u32 bits;	offset:20;	size:4;	signed:0;
	field:u64 seed;	offset:24;	size:8;	signed:0;
	field:__data_loc char[] text;	offset:32;	size:4;	signed:1;

print fmt: "(%lx) a=%d bits=%u seed=0x%Lx text=\\"%s\\"", REC->__probe_ip, REC->a, REC->bits, REC->seed, __get_str(text)
""", "probe_t")

    class Names(Source):
        def comm(self, tid: int) -> str:
            return "prog"

    f = TextFormatter(Names())
    f.set_formats([fmt])
    from probectl.script.stacks import Record
    rec = Record((1641_301826123, 1, 2400, 4242, 0, 0, (0x55D5E51CF1A9, -3, 4294967280, 0xDEADBEEF00000000, 'a"b\nc')))
    line = f.format_record(rec)
    assert line == ('            prog   4242 [001]  1641.301826: probe_t:add: (55d5e51cf1a9) a=-3 bits=4294967280 '
                    'seed=0xdeadbeef00000000 text="a\\"b\\nc"\n')


# ---- stacks and symbols -------------------------------------------------------------------------


def test_stack_records_join_the_event_before_them_on_their_cpu():
    K, U, E = 4, 13, 100
    rows = [
        (10, 0, E, 7, 0, 0, ()),            # event A on cpu 0
        (11, 1, E, 8, 0, 0, ()),            # event B on cpu 1, between A and A's stacks
        (12, 0, K, 7, 0, 0, (2, (0xffffffff81000010, 0xffffffff81000020, 0xdead))),
        (12, 0, U, 7, 0, 0, (7, (0x401000, 0x402000, 0, 0x9))),
        (13, 1, K, 8, 0, 0, (1, (0xffffffff81000030,))),
        (14, 1, K, 9, 0, 0, (1, (0xffffffff81000030,))),  # another pid: an orphan, dropped
        (15, 0, E, 7, 0, 0, ()),
    ]
    j = StackJoiner({K: "kernel", U: "user"})
    recs = list(j.feed(rows)) + list(j.finish())
    assert [r.row[0] for r in recs] == [10, 11, 15]
    a, b, c = recs
    assert a.stacks == [("kernel", 0, (0xffffffff81000010, 0xffffffff81000020)), ("user", 7, (0x401000, 0x402000))]
    assert b.stacks == [("kernel", 0, (0xffffffff81000030,))]
    assert c.stacks == [] and j.orphans == 1
    assert stack_addresses("kernel", (3, (1, 2, 3, 4))) == (0, (1, 2, 3))
    assert stack_addresses("user", (5, (1, 0, 3))) == (5, (1,))



def test_a_uprobes_kernel_stack_is_left_out_and_a_kprobes_kept():
    """A uprobe's kernel stack is the probe's machinery (older recordings have it): an event whose probe
    address is a user one gets none; a kprobe's (a kernel address) keeps its stack. probectl's callchain
    record is a user stack."""
    K, C, UP, KP = 4, 2000, 100, 101
    kstack = (1, (0xffffffff81000010,))
    rows = [
        (10, 0, UP, 7, 0, 0, (0x401000,)),  # a uprobe at a user address
        (11, 0, K, 7, 0, 0, kstack),
        (11, 0, C, 7, 0, 0, (7, (0x401000, 0x402000))),
        (12, 0, KP, 7, 0, 0, (0xffffffff81234560,)),  # a kprobe
        (13, 0, K, 7, 0, 0, kstack),
    ]
    j = StackJoiner({K: "kernel", C: "user"}, probe_ips={UP: 0, KP: 0})
    up, kp = list(j.feed(rows)) + list(j.finish())
    assert up.stacks == [("user", 7, (0x401000, 0x402000))]
    assert kp.stacks == [("kernel", 0, (0xffffffff81000010,))]


# The stack record formats of a file, as another kernel (or a damaged file) may have them: fields
# reordered, missing, added, of another type; (declaration, offset, size, signed) after the common
# fields, and the frames that can still be read from records written to match the format.
_KS = [("int size", 8, 4, 1), ("unsigned long caller[8]", 16, 64, 0)]
_US = [("unsigned int tgid", 8, 4, 0), ("unsigned long caller[8]", 16, 64, 0)]
STACK_FORMATS = {
    "kernel's": (_KS, _US, 2, 2),
    "reordered": ([("unsigned long caller[8]", 8, 64, 0), ("int size", 72, 4, 1)],
                  [("unsigned long caller[8]", 8, 64, 0), ("unsigned int tgid", 72, 4, 0)], 2, 2),
    "extra field": ([("int foo", 8, 4, 1), ("int size", 12, 4, 1), ("unsigned long caller[8]", 16, 64, 0)],
                    [("int foo", 8, 4, 1), ("unsigned int tgid", 12, 4, 0), ("unsigned long caller[8]", 16, 64, 0)],
                    2, 2),
    "signed callers, no size": ([("long caller[8]", 8, 64, 1)], [("long caller[8]", 8, 64, 1)], 2, 2),
    "no caller": ([("int size", 8, 4, 1)], [("unsigned int tgid", 8, 4, 0)], 0, 0),
    "scalar caller": ([("int size", 8, 4, 1), ("unsigned long caller", 16, 8, 0)],
                      [("unsigned int tgid", 8, 4, 0), ("unsigned long caller", 16, 8, 0)], 1, 1),
    "text": ([("char size[4]", 8, 4, 1), ("char caller[64]", 16, 64, 0)],
             [("char tgid[4]", 8, 4, 0), ("char caller[64]", 16, 64, 0)], 0, 0),
    "no fields": ([], [], 0, 0),
}


def _stack_record(ident: int, fields, values: dict[str, Any]) -> bytes:
    import struct

    from tests.test_native import common

    payload = bytearray(common(ident, 9) + b"\0" * (max((o + n for _d, o, n, _s in fields), default=8) - 8))
    for decl, offset, size, _signed in fields:
        value = values[decl.split()[-1].split("[")[0]]
        if decl.startswith("char"):
            data = b"text"[:size]
        elif isinstance(value, list):
            data = struct.pack(f"<{size // 8}Q", *(value + [0] * 8)[:size // 8])
        else:
            data = value.to_bytes(size, "little", signed=True)
        payload[offset:offset + len(data)] = data
    return bytes(payload)


def _stack_trace(tmp_path: Path, kernel_fields, user_fields) -> Path:
    from probectl.tracedat import TraceMetadata, write_tracedat
    from tests.test_native import COMMON_FIELDS, SIMPLE_FORMAT, data_record, make_page, simple_payload
    from tests.test_tracedat import HEADER_EVENT, HEADER_PAGE

    def fmt(name: str, ident: int, fields) -> str:
        body = "".join(f"\tfield:{d};\toffset:{o};\tsize:{n};\tsigned:{s};\n" for d, o, n, s in fields)
        return f'name: {name}\nID: {ident}\nformat:\n{COMMON_FIELDS}\n{body}\nprint fmt: "stack"\n'

    kernel = _stack_record(4, kernel_fields, {"size": 2, "caller": [0xffffffff81000110, 0xffffffff81000120],
                                              "foo": 7})
    user = _stack_record(13, user_fields, {"tgid": 9, "caller": [0x401000, 0x402000], "foo": 7})
    raw = tmp_path / "cpu0.raw"
    raw.write_bytes(make_page(b"".join(data_record(simple_payload(9, i), 100) + data_record(kernel, 1)
                                       + data_record(user, 1) for i in range(3)), 10**9))
    meta = TraceMetadata(header_page=HEADER_PAGE, header_event=HEADER_EVENT, page_size=4096, cpus=1,
                         ftrace_formats=[fmt("kernel_stack", 4, kernel_fields), fmt("user_stack", 13, user_fields)],
                         event_formats=[("test", [SIMPLE_FORMAT])],
                         kallsyms=b"ffffffff81000000 T _stext\nffffffff81000100 T probectl_test_symbol\n",
                         printk_formats=b"", cmdlines="9 simple\n", tgids="9 9\n",
                         trace_clock="[local] global counter", uname="Linux synthetic 1.0 x86_64", trace_id=1,
                         cpustats={0: "entries: 0\noverrun: 0\n"})
    path = tmp_path / "stacks.dat"
    write_tracedat(path, meta, {0: raw}, version=7)
    return path


@pytest.mark.parametrize("variant", STACK_FORMATS)
def test_stack_records_of_unexpected_formats_print_what_they_can(tmp_path, variant):
    """The stack fields are found by name in the file's formats; a format of another shape gives the
    frames that can be read, and the events print in every output format, with no traceback."""
    kernel_fields, user_fields, kernel_frames, user_frames = STACK_FORMATS[variant]
    path = str(_stack_trace(tmp_path, kernel_fields, user_fields))
    events = [json.loads(line) for line in probectl_cli("script", "-i", path, "--format", "json").stdout.splitlines()]
    assert [e["fields"]["seq"] for e in events] == [0, 1, 2]
    for e in events:
        assert e["kernel_stack"] == ["probectl_test_symbol+0x10", "probectl_test_symbol+0x20"][:kernel_frames]
        assert len(e["user_stack"]) == user_frames
    for kind in ("text", "csv", "folded"):
        out = probectl_cli("script", "-i", path, "--format", kind, check=False)
        assert out.returncode == 0 and not out.stderr, (kind, out.stderr)
        assert out.stdout.count("test:simple" if kind != "folded" else " 3\n") == (1 if kind == "folded" else 3)


def folded_both_ways(path) -> str:
    """``script --format folded`` of ``path`` counted natively (native/fold.c), checked equal to the
    row path it replaces (the stacks joined in Python, StackJoiner): the text, events and stacks."""
    outs = []
    for native in (True, False):
        with open_trace(path) as t:
            text = io.StringIO()
            result = write_script(t, text, "folded", native=native)
            outs.append((text.getvalue(), result.events, result.printed))
    assert outs[0] == outs[1]
    return outs[0][0]


@pytest.mark.parametrize("variant", STACK_FORMATS)
def test_folded_natively_as_the_row_path_folds(tmp_path, variant):
    kernel_fields, user_fields, _kernel_frames, _user_frames = STACK_FORMATS[variant]
    text = folded_both_ways(_stack_trace(tmp_path, kernel_fields, user_fields))
    assert text.endswith(" 3\n")


def test_stack_addresses_of_unexpected_values():
    assert stack_addresses("kernel", (2,)) == (0, ())  # no caller array
    assert stack_addresses("kernel", (1, 0xffffffff81000010)) == (0, (0xffffffff81000010,))  # a scalar
    assert stack_addresses("kernel", ("ab", "text")) == (0, ())
    assert stack_addresses("kernel", (-3, (1, 2))) == (0, (1, 2))  # a negative count: no limit
    assert stack_addresses("kernel", (None, (1, "x", -1))) == (0, (1,))  # -1: ULONG_MAX, the end
    assert stack_addresses("user", ((1, 2), 3), first=1, callers=0) == (3, (1, 2))
    assert stack_addresses("user", (5, (1, 2)), first=None, callers=None) == (0, ())


def test_kernel_symbols_from_kallsyms_text():
    ks = KernelSymbols(b"ffffffff81000000 T _stext\nffffffff81000100 t helper\n"
                       b"ffffffff81000200 D some_data\nffffffff81000300 T in_mod\t[mymod]\n")
    assert ks.lookup(0xffffffff81000000) == ("_stext", 0)
    assert ks.lookup(0xffffffff81000150) == ("helper", 0x50)
    assert ks.lookup(0xffffffff81000250) == ("helper", 0x150)  # data symbols are not code
    assert ks.lookup(0xffffffff81000301) == ("in_mod [mymod]", 1)
    assert ks.lookup(0x1000) is None


def test_kallsyms_starting_with_per_cpu_symbols():
    """Debian's SMP kernels list per-CPU symbols first, at offsets from zero: the addresses are there
    (the recorder keeps the text) and the functions after them are named."""
    text = (b"0000000000000000 A fixed_percpu_data\n0000000000001000 A cpu_debug_store\n"
            b"0000000000000000 A __per_cpu_start\n"
            b"ffffffffb3a00000 T _stext\nffffffffb3c5b900 T tcp_sendmsg\nffffffffb3c5ba80 t tcp_push\n")
    assert kallsyms_addresses_shown(text)
    assert KernelSymbols(text).lookup(0xffffffffb3c5ba31) == ("tcp_sendmsg", 0x131)
    hidden = b"0000000000000000 A fixed_percpu_data\n0000000000000000 T _stext\n0000000000000000 T tcp_sendmsg\n"
    assert not kallsyms_addresses_shown(hidden)  # without privileges every address reads as zero


def test_user_symbols_through_maps_and_the_elf_file(tmp_path):
    binary = build_fixture("uprobe_target")
    from probectl.debuginfo.elf import ElfFile
    with ElfFile(binary) as elf:
        add = next(s for s in elf.functions() if s.name == "add_ints")
        text_seg = next(s for s in elf.segments if s.executable)
        offset = elf.vaddr_to_offset(add.value)
    # a PIE mapped at 0x555555554000: the executable segment's mapping line
    base = 0x555555554000
    start = base + (text_seg.vaddr & ~0xFFF)
    maps = {4242: f"{start:x}-{start + 0x2000:x} r-xp {text_seg.offset & ~0xFFF:08x} 08:01 123 {binary}\n"
                  f"7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0 [vdso]"}
    decoded = decode_proc_maps(encode_proc_maps(maps))
    assert decoded[4242][0] == Mapping(start, start + 0x2000, text_seg.offset & ~0xFFF, str(binary), "r-xp")
    us = UserSymbols(decoded)
    assert us.lookup(4242, base + add.value + 3) == ("add_ints", 3, str(binary))
    assert us.lookup(4242, 0x7ffff7fc1010) == ("[vdso]", 0x10, "[vdso]")
    assert us.lookup(4242, 0x10) is None and us.lookup(1, base + add.value) is None
    # the fallback for processes that ended: maps placed by a probe's address and file offset
    synth = synthesize_maps(str(binary), offset, base + add.value)
    us2 = UserSymbols(decode_proc_maps(encode_proc_maps({9: synth})))
    assert us2.lookup(9, base + add.value + 1)[:2] == ("add_ints", 1)


# ---- the Python API -----------------------------------------------------------------------------


@pytest.mark.parametrize("globs", [["sched:*"], ["sched_process_exec"], ["sys_enter_*"], ["*"], ["print"],
                                   ["syscalls:*getpid"], ["*:*print*"], ["sched_process_exec", "syscalls:*"]],
                         ids=lambda g: ",".join(g))
def test_the_python_api_and_script_select_the_same_events(globs):
    """One -e rule (formats.name_matches): read_trace(...).events(*globs) keeps the events that
    script -e keeps, in the same order, a glob without ':' matching the event's name alone."""
    rows = script_text(SAMPLE, "csv", ("event",), events=globs).splitlines()[1:]
    by_script = [row.split(",", 1)[0] for row in rows]
    with probectl.read_trace(SAMPLE) as t:
        by_events = [e.name for e in t.events(*globs)]
    assert by_events == by_script and by_script, (globs, by_script[:3])


def test_read_trace_events_and_batches():
    with probectl.read_trace(SAMPLE) as t:
        events = list(t)
        assert len(events) == 104
        getpid = [e for e in events if e.name == "syscalls:sys_enter_getpid"]
        assert len(getpid) == 100 and getpid[0]["__syscall_nr"] == 39
        assert t.comm(getpid[0].pid) == "python"
        assert [e.name for e in t.events("sched:*")] == ["sched:sched_process_exec"] * 2
        total = 0
        nrs = []
        for batch in t.batches("syscalls:sys_enter_getpid"):
            total += len(batch)
            nrs += list(batch.column("syscalls:sys_enter_getpid", "__syscall_nr"))
        assert total == 104 and nrs == [39] * 100
        assert t.format("sched:sched_process_exec").field("filename").is_string
