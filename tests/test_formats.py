"""Event format parsing: golden files copied from a 6.18 kernel, an old-kernel layout, malformed text
(every format file of this machine, live: tests/live/test_formats.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from probectl.errors import ProbectlError
from probectl.errors import FormatError
from probectl.dataclass import replace
from probectl.formats import EventFormat, Field, for_libtraceevent, parse_fields

DATA = Path(__file__).parent / "data" / "formats"


def load(name: str, system: str = "") -> EventFormat:
    return EventFormat.parse((DATA / name).read_text(), system)


def test_sched_switch():
    fmt = load("sched_switch.format", "sched")
    assert (fmt.system, fmt.name, fmt.id, fmt.full_name) == ("sched", "sched_switch", 372, "sched:sched_switch")
    assert [f.name for f in fmt.common_fields] == ["common_type", "common_flags", "common_preempt_count", "common_pid"]
    assert [f.name for f in fmt.event_fields] == [
        "prev_comm", "prev_pid", "prev_prio", "prev_state", "next_comm", "next_pid", "next_prio"]
    assert fmt.field("prev_comm") == Field(
        name="prev_comm", type="char[16]", offset=8, size=16, signed=False, array_len=16)
    assert fmt.field("prev_comm").is_string and fmt.field("prev_comm").element_type == "char"
    assert fmt.field("common_pid") == Field("common_pid", "int", 4, 4, True, is_common=True)
    state = fmt.field("prev_state")
    assert (state.type, state.offset, state.size, state.signed, state.is_string) == ("long", 32, 8, True, False)
    assert fmt.field("nope") is None
    assert fmt.print_fmt.startswith('"prev_comm=%s prev_pid=%d') and fmt.print_fmt.endswith("REC->next_prio")
    assert fmt.record_size == 64


def test_syscall_type_and_size_disagree():
    """``unsigned int fd`` is stored in 8 bytes, after a 4-byte gap: offset/size win over the type."""
    fmt = load("sys_enter_read.format", "syscalls")
    fd = fmt.field("fd")
    assert (fd.type, fd.offset, fd.size, fd.signed) == ("unsigned int", 16, 8, False)
    nr = fmt.field("__syscall_nr")
    assert (nr.offset, nr.size, nr.is_common) == (8, 4, False)  # the gap 12..16 is padding
    buf = fmt.field("buf")
    assert (buf.type, buf.size, buf.is_string, buf.array_len) == ("char *", 8, False, None)


def test_uprobe_arguments():
    """A uprobe with strings, $comm, an x8[4] array, a bitfield, immediates, string[2] and unnamed args."""
    fmt = load("uprobe_args.format", "tfsx")
    assert fmt.field("__probe_ip").size == 8
    name = fmt.field("name")
    assert (name.type, name.is_data_loc, name.is_string, name.size, name.signed, name.array_len) == (
        "__data_loc char[]", True, True, 4, True, None)
    assert fmt.field("c").is_string and fmt.field("ims").is_string
    arr = fmt.field("arr")  # the kernel writes "u8 arr[]" of size 4
    assert (arr.type, arr.size, arr.array_len, arr.is_string, arr.element_type) == ("u8[]", 4, 4, False, "u8")
    sa = fmt.field("sa")  # an array of two dynamic strings
    assert (sa.type, sa.is_data_loc, sa.array_len, sa.is_string, sa.size) == ("__data_loc char[][2]", True, 2, True, 8)
    # fields are packed without alignment after a 1-byte char
    assert [(f.name, f.offset, f.size) for f in fmt.event_fields[-6:]] == [
        ("ims", 48, 4), ("ch", 52, 1), ("sa", 53, 8), ("arg10", 61, 8), ("arg11", 69, 2), ("ss", 71, 4)]
    assert fmt.field("ss").signed and not fmt.field("arg11").signed
    assert fmt.field("bf").type == "u32" and not fmt.field("bf").is_array


def test_uretprobe_fields():
    fmt = load("uretprobe.format", "tfsx")
    assert [f.name for f in fmt.event_fields] == ["__probe_func", "__probe_ret_ip", "arg1"]
    assert fmt.field("arg1").type == "u64"
    assert fmt.print_fmt.startswith('"(%lx <- %lx) arg1=0x%Lx"')


def test_old_kernel_layout():
    """common_lock_depth, a symbolic array length and a 4-byte hole before a long."""
    fmt = load("old_kernel_sched_switch.format", "sched")
    assert [f.name for f in fmt.common_fields][-1] == "common_lock_depth"
    comm = fmt.field("prev_comm")
    assert (comm.type, comm.offset, comm.array_len, comm.is_string, comm.signed) == (
        "char[TASK_COMM_LEN]", 12, 16, True, True)
    assert fmt.field("prev_state").offset == 40


def test_ftrace_flexible_array():
    fmt = load("ftrace_print.format", "ftrace")
    buf = fmt.field("buf")
    assert (buf.type, buf.size, buf.array_len, buf.is_string) == ("char[]", 0, None, True)


def test_array_lengths_are_written_in_for_libtraceevent():
    """What the trace.dat writer stores: a probe's fixed array written with empty brackets (Linux
    6.2 and later) gets its number of elements, from its size and its type's (libtraceevent reads
    its elements' size from that number, and reads ``s64 xs[]`` as zeros); nothing else changes,
    and probectl reads both texts alike."""
    text = (DATA / "uprobe_args.format").read_text()
    text = text.replace("\tfield:u32 bf;", "\tfield:s64 xs[];\toffset:75;\tsize:128;\tsigned:1;\n"
                        "\tfield:const s16 h[];\toffset:203;\tsize:6;\tsigned:1;\n"
                        "\tfield:u32 odd[];\toffset:209;\tsize:6;\tsigned:0;\n"
                        "\tfield:struct blob b[];\toffset:215;\tsize:8;\tsigned:0;\n\tfield:u32 bf;")
    written = for_libtraceevent(text)
    changed = [(a, b) for a, b in zip(text.splitlines(), written.splitlines()) if a != b]
    assert [(a.split(";")[0], b.split(";")[0]) for a, b in changed] == [
        ("\tfield:u8 arr[]", "\tfield:u8 arr[4]"), ("\tfield:s64 xs[]", "\tfield:s64 xs[16]"),
        ("\tfield:const s16 h[]", "\tfield:const s16 h[3]")]
    assert all(a.split(";")[1:] == b.split(";")[1:] for a, b in changed)
    before, after = EventFormat.parse(text, "tfsx"), EventFormat.parse(written, "tfsx")
    for old, new in zip(before.fields, after.fields, strict=True):
        assert replace(old, type=new.type) == new
        assert new.type in (old.type, old.type.replace("[]", f"[{new.array_len}]"))
    assert [after.field(n).array_len for n in ("arr", "xs", "h", "odd", "b")] == [4, 16, 3, 1, None]
    # a format of no such array (a flexible one of size 0, a length written in, a symbolic one) is as it was
    for name in ("ftrace_print.format", "sched_switch.format", "old_kernel_sched_switch.format", "uretprobe.format"):
        assert for_libtraceevent((DATA / name).read_text()) == (DATA / name).read_text()


def test_a_probes_narrow_signed_numbers_print_as_their_type_for_libtraceevent():
    """A probe event's %d of an s8 or s16, or of an element of an array of them, becomes %hhd or %hd
    (libtraceevent never extends their sign: %d of -1 printed 255); no other conversion changes, and
    a tracepoint's print format (any C) is left as it is."""
    text = (DATA / "uprobe_arrays.format").read_text()  # (6.18's format of a uprobe of six arrays)
    written = for_libtraceevent(text)
    fmt = EventFormat.parse(written)
    assert fmt.print_fmt.startswith('"(%lx) b={%hhd,%hhd,%hhd,%hhd} h={%hd,%hd,%hd,%hd} w={%d,%d,%d,%d} '
                                    'q={%Ld,%Ld,%Ld,%Ld} u={%u,%u,%u,%u} x={0x%x,0x%x,0x%x,0x%x}", REC->__probe_ip, ')
    assert fmt.print_fmt.split('", ')[1] == EventFormat.parse(text).print_fmt.split('", ')[1]  # the arguments
    assert for_libtraceevent(written) == written
    scalars = text.replace("\tfield:s8 b[];\toffset:16;\tsize:4;", "\tfield:s8 b;\toffset:16;\tsize:1;").replace(
        "b={%d,%d,%d,%d}", "b=%d c='%c'").replace("REC->b[0], REC->b[1], REC->b[2], REC->b[3]", "REC->b, REC->b")
    assert EventFormat.parse(for_libtraceevent(scalars)).print_fmt.startswith("\"(%lx) b=%hhd c='%c' h={%hd,")
    # not a probe event, or a print format of another shape: as it was
    tracepoint = text.replace("__probe_ip", "ip")
    assert for_libtraceevent(tracepoint) == tracepoint.replace("[]", "[4]")
    odd = text.replace("REC->h[3]", "(REC->h[3] + 1)")
    assert EventFormat.parse(for_libtraceevent(odd)).print_fmt == EventFormat.parse(odd).print_fmt


def test_header_page():
    fields = parse_fields((DATA / "header_page").read_text())
    assert [(f.name, f.type, f.offset, f.size, f.signed) for f in fields] == [
        ("timestamp", "u64", 0, 8, False), ("commit", "local_t", 8, 8, True),
        ("overwrite", "int", 8, 1, True), ("data", "char", 16, 4080, False)]


def test_tolerant_variants():
    text = (
        "name: x\r\nID: 0x10\r\nformat:\r\n"
        "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\r\n"  # no signed: (2.6.31)
        "\tfield:int common_padding;\toffset:4;\tsize:4;\tsigned:1;\talign:4;\r\n"  # unknown attribute
        "\tfield: const char   comm [ 8 ];\toffset:8;\tsize:8;\tsigned:0;\r\n"
        "\tfield:__rel_loc char[] rel;\toffset:16;\tsize:4;\tsigned:0;\r\n"
        "\r\nprint fmt: this is ( not C\r\n"
    )
    fmt = EventFormat.parse(text)
    assert fmt.id == 16 and fmt.system == ""
    assert fmt.field("common_type").signed is False
    assert [f.name for f in fmt.common_fields] == ["common_type", "common_padding"]
    comm = fmt.field("comm")
    assert (comm.type, comm.array_len, comm.is_string, comm.element_type) == ("const char[8]", 8, True, "char")
    rel = fmt.field("rel")
    assert rel.is_data_loc and rel.is_rel_loc and rel.is_string
    assert fmt.print_fmt == "this is ( not C"


def test_no_print_fmt_and_no_fields():
    fmt = EventFormat.parse("name: empty\nID: 3\nformat:\n")
    assert fmt.fields == () and fmt.print_fmt == "" and fmt.record_size == 0


@pytest.mark.parametrize("text, message", [
    ("", "no 'name:' line"),
    ("hello world\n", "line 1: unexpected text"),
    ("name: x\nformat:\n", "x has no 'ID:' line"),
    ("name: x\nID: twelve\n", "line 2: the event ID 'twelve' is not a number"),
    ("name: x\nID: 1\n", "x has no 'format:' section"),
    ("name: x\nID: 1\nformat:\n\tfield:int a;\tsize:4;\tsigned:1;\n", "line 4: field without offset"),
    ("name: x\nID: 1\nformat:\n\tfield:int a;\toffset:x;\tsize:4;\n", "line 4: offset, size and signed must be numbers"),
    ("name: x\nID: 1\nformat:\n\tfield:int a\toffset:0;\tsize:4;\n", "line 4: expected 'field:<type> <name>;"),
    ("name: x\nID: 1\nformat:\n\tfield:a;\toffset:0;\tsize:4;\n", "line 4: the field declaration 'a' has no type"),
    ("name: x\nID: 1\nformat:\n\tfield:int 9;\toffset:0;\tsize:4;\n", "line 4: cannot read the field declaration"),
    ("name: x\nID: 1\nformat:\n\tfield:int a;\toffset:-4;\tsize:4;\n", "line 4: negative offset or size"),
    ("name: x\nID: 1\nformat:\n\tfield:int a;\toffset:0;\tsize:4;\n\tfield:int a;\toffset:4;\tsize:4;\n",
     "two fields named 'a'"),
])
def test_malformed(text, message):
    with pytest.raises(FormatError) as info:
        EventFormat.parse(text, "grp")
    assert message in str(info.value)
    assert isinstance(info.value, ProbectlError)
