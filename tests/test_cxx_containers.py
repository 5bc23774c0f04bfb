"""libstdc++ containers (fixtures/cxx_containers.cc, g++ -O0 and -O2, and hand-made records): a
std::vector named by its variable is fetched as its elements (integers: its first 16 as an array cut
at its length; structs: its first elements' members), ``NAME.size()`` reads a container's count, or a
vector's two pointers, all found by the members DWARF gives; the decoders work a vector's length out
of its two pointers from the event's format alone (probectl.formats), in every reader. The live values
are tests/live/test_cxx_containers.py.

perf -D with the mangled name is the oracle where it succeeds: it reads a vector passed by value as its
first 8 bytes, cut down (its begin pointer, which probectl reads at the same place); it refuses the
members of a reference or of a base class ("is not a data structure nor a union"), where the
programs' own values decide (the live test).
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import probectl
from probectl.errors import ProbeSyntaxError
from probectl.formats import EventFormat
from probectl.ringbuf import KIND_INT, KIND_INT_ARRAY, field_spec
from probectl.spec import Method, Variable, parse_probe, render_expr
from tests.helpers import build_cxx_fixture, fails, missing, probectl as cli
from tests.test_native import COMMON_FIELDS


@pytest.fixture(scope="module", params=["-O0", "-O2"])
def containers(request) -> Path:
    return build_cxx_fixture("cxx_containers", request.param)


# -- the definition grammar ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, variable", [
    ("v.size()", Variable("v", (), Method("size"))),
    ("p->size()", Variable("p", (), Method("size", arrow=True))),
])
def test_size_is_a_method_at_the_end_of_a_chain(text, variable):
    (arg,) = parse_probe(f"f {text}").args
    assert arg.expr == variable and render_expr(arg.expr) == text
    chain = parse_probe("f this->items.size():u32").args[0]
    assert render_expr(chain.expr) == "this->items.size()" and chain.type is not None and chain.type.text == "u32"


@pytest.mark.parametrize("text, message, column", [
    ("f v.foo()", "'foo()': a probe reads memory and calls nothing; the one method it reads is .size()", 4),
    ("f v.size(1)", "expected '()': .size() takes no arguments", 8),
    ("f v.size().x", "unexpected '.x'", 10),
])
def test_other_calls_are_refused_at_their_column(text, message, column):
    with pytest.raises(ProbeSyntaxError) as err:
        parse_probe(text)
    assert err.value.message.startswith(message) and err.value.column == column


def test_size_is_no_sdt_operand_nor_a_go_result():
    from probectl.errors import ProbeSemanticError
    from tests.helpers import build_go_fixture

    with pytest.raises(ProbeSemanticError, match="the arguments of an SDT probe are arg1, arg2"):
        parse_probe("%probectl:regs arg1.size()")
    err = fails("add", "-D", "-x", str(build_go_fixture("go_target")), "main.divmod%return q.size()")
    assert "Error: 'q.size()': .size() reads a C++ container, not a Go result" in err


# -- definitions ---------------------------------------------------------------------------------------


def _args(binary: Path, definition: str) -> dict[str, str]:
    """name → fetch:type of the one event ``add -D`` writes for ``definition``."""
    (line,) = [x for x in cli("add", "-D", "-x", str(binary), definition).stdout.splitlines() if x.startswith("p:")]
    return dict(arg.split("=", 1) for arg in line.split()[2:])


def test_a_vector_of_integers_is_its_elements_and_its_two_pointers(containers):
    args = _args(containers, "shop::total v")
    begin, end = args["v__begin"].rsplit(":", 1)[0], args["v__end"].rsplit(":", 1)[0]
    assert args["v"] == f"+0({begin}):s32[16]", args  # (its elements, read from its begin pointer)
    assert args["v__begin"].endswith(":u64") and args["v__end"].endswith(":u64")
    # _M_finish is 8 bytes after _M_start in the one object (the offsets DWARF gives, not assumed)
    assert end.split("(", 1)[1] == begin.split("(", 1)[1] and int(end.split("(")[0]) == int(begin.split("(")[0]) + 8
    assert _args(containers, "shop::total v:u32[64]")["v_u32_64_"].endswith(":u32[64]")


def test_vectors_through_this_and_of_structs(containers):
    args = _args(containers, "shop::Cart::count this->counts this->items")
    assert args["counts"].endswith(":s16[16]") and "counts__begin" in args and "counts__end" in args
    # a vector of structs: its begin pointer (read as its length), its end pointer with the element's
    # size (16 bytes: an int and a long), and the members of its first 4 elements, 16 bytes apart
    assert args["items"].endswith(":u64") and args["items__end16"].endswith(":u64")
    assert [name for name in args if name.startswith("items__e") and name[8].isdigit()] == [
        f"items__e{i}_{m}" for i in range(4) for m in ("id", "price")]
    base = args["items"].rsplit(":", 1)[0]
    assert args["items__e3_price"] == f"+56({base}):s64" and args["items__e1_id"] == f"+16({base}):s32"


def test_a_vector_of_strings_is_the_text_of_its_first_four(containers):
    args = _args(containers, "shop::total names")
    begin = args["names"].rsplit(":", 1)[0]
    assert args["names"].endswith(":u64") and args["names__end32"].endswith(":u64")  # (a std::string: 32 bytes)
    # each string's text from the pointer it keeps (_M_dataplus._M_p, at its start), strings 32 bytes apart
    assert [(k, v) for k, v in args.items() if k.startswith("names__e") and k[8:].isdigit()] == [
        (f"names__e{i}", f"+0(+{32 * i}({begin})):string") for i in range(4)]


def test_sizes_are_the_count_members_or_a_vectors_pointers(containers):
    args = _args(containers, "shop::sizes s.size() mm.size() u.size() us.size() l.size() str.size()")
    assert list(args) == ["s_size", "mm_size", "u_size", "us_size", "l_size", "str_size"]
    # (red-black tree: _M_node_count after the comparator and the header node; hash table:
    # _M_element_count after the buckets; list: the count in its sentinel node; string: its length)
    offsets = {name: int(fetch.split("(", 1)[0]) for name, fetch in args.items()}
    assert offsets == {"s_size": 40, "mm_size": 40, "u_size": 24, "us_size": 24, "l_size": 16, "str_size": 8}
    assert all(fetch.endswith(":u64") for fetch in args.values())
    assert _args(containers, "shop::sizes s.size():u32")["s_size"].endswith(":u32")
    vector = _args(containers, "shop::total v.size() names.size() n=m.size()")
    assert list(vector) == ["v_size", "v_size__end4", "names_size", "names_size__end32", "n"]
    assert vector["v_size"] == vector["v_size__end4"].replace("+8(", "+0(")


def test_perf_reads_a_vector_by_value_where_its_begin_pointer_is(containers):
    perf = shutil.which("perf")
    if not perf:
        missing("perf (linux-perf) is not installed")
    symbol = "_ZN4shop9sum_longsESt6vectorIlSaIlEE"
    out = subprocess.run([perf, "probe", "-x", str(containers), "-D", f"{symbol} v"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (theirs,) = [x for x in out.stdout.splitlines() if x.startswith("p:")]
    ours = _args(containers, "shop::sum_longs v")["v__begin"].replace(":u64", ":x64")
    if "-O0" in containers.name:
        # the copy's address is in a stack slot ("DW_OP_fbreg -72; DW_OP_deref"), and perf drops the
        # DW_OP_deref: it reads the address, probectl the vector there (the live test: the program's values)
        assert "v=+0(" + theirs.split()[2][2:].replace(":x64", "):x64") == "v=" + ours
    else:
        assert theirs.split()[2] == "v=" + ours
    assert theirs.split()[1] == cli("add", "-D", "-x", str(containers), "shop::sum_longs v").stdout.split()[1]


@pytest.mark.parametrize("definition, message, hint", [
    ("main argc.size()", "'argc' is int, which has no size(): it is read from libstdc++'s std::vector", ""),
    ("shop::Cart::count this->size()", "'this' (struct Cart) has no size() that probectl reads", "this->MEMBER"),
    ("shop::Cart::count this.size()", "size() must be called by '->': 'this' is a pointer", "this->size()"),
    ("shop::sizes s->size()", "size() must be called by '.': 's' is not a pointer", "s.size()"),
    ("shop::Cart::count this->items.size", "'this->items' (class vector<shop::Item, std::allocator<shop::Item> >) "
     "has no member 'size'", "this->items.size()"),
    ("shop::total m", "'m' is a class map<int, int", "m.size()"),
    ("shop::total names:string", "'names' is a vector of strings: it is read as its first 4 strings, with no cast",
     ""),
    ("shop::total v.size():u32", "'v.size()' is worked out from two pointers when the events are read: it takes "
     "no cast", ""),
    ("shop::total v:s64[4]", "'v' is a vector of 4-byte int: a cast can change how many are read", ":s32[64]"),
    ("shop::prices items:s32[4]", "'items' is a vector of struct Item: it is read as its first 4 elements' members",
     ""),
    ("shop::total v.foo()", "'foo()': a probe reads memory and calls nothing", "NAME.size()"),
])
def test_what_has_no_size_or_elements_is_refused_clearly(containers, definition, message, hint):
    err = fails("add", "-D", "-x", str(containers), definition)
    assert f"Error: {message}" in err and hint in err and "Traceback" not in err, err


# -- decoding: the length from the two pointers, in every reader -----------------------------------------

FORMAT = f"""name: total
ID: 1601
format:
{COMMON_FIELDS}
\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:s32 v[16];\toffset:16;\tsize:64;\tsigned:1;
\tfield:u64 v__begin;\toffset:80;\tsize:8;\tsigned:0;
\tfield:u64 v__end;\toffset:88;\tsize:8;\tsigned:0;
\tfield:u64 v_size;\toffset:96;\tsize:8;\tsigned:0;
\tfield:u64 v_size__end4;\toffset:104;\tsize:8;\tsigned:0;
\tfield:u64 items;\toffset:112;\tsize:8;\tsigned:0;
\tfield:u64 items__end16;\toffset:120;\tsize:8;\tsigned:0;
\tfield:s32 items__e0_id;\toffset:128;\tsize:4;\tsigned:1;
\tfield:s32 items__e1_id;\toffset:132;\tsize:4;\tsigned:1;

print fmt: "(%lx) v={{%d,%d}} v__begin=%Lu v__end=%Lu v_size=%Lu v_size__end4=%Lu items=%Lu items__end16=%Lu items__e0_id=%d items__e1_id=%d", REC->__probe_ip, REC->v[0], REC->v[1], REC->v__begin, REC->v__end, REC->v_size, REC->v_size__end4, REC->items, REC->items__end16, REC->items__e0_id, REC->items__e1_id
"""


def payload(begin: int, end: int, items_end: int) -> bytes:
    """A record of FORMAT: the vector v = {1, 2, ..., 16} as read (its first 16 ints) with its pointers
    ``begin`` and ``end``, its size's pointers the same, and a vector of 16-byte structs from ``begin``
    to ``items_end``, the ids of its first two elements 101 and 102."""
    return (struct.pack("<HBBiQ", 1601, 0, 0, 77, 0x401000) + struct.pack("<16i", *range(1, 17))
            + struct.pack("<6Q", begin, end, begin, end, begin, items_end) + struct.pack("<2i", 101, 102))


def test_the_pointers_are_linked_to_their_vector_and_hidden():
    fmt = EventFormat.parse(FORMAT, "probe_c")
    assert [f.name for f in fmt.event_fields] == ["__probe_ip", "v", "v_size", "items"]
    v, size, items = fmt.field("v"), fmt.field("v_size"), fmt.field("items")
    assert v is not None and v.bound == (88, 8) and v.begin == (80, 8) and not v.is_composed
    assert field_spec(v)[3] == KIND_INT_ARRAY and field_spec(v)[6:] == (8, 88, 8, 80)
    assert size is not None and size.bound == (104, 8) and size.element_size == 4 and not size.is_composed
    assert field_spec(size)[3] == KIND_INT and field_spec(size)[6:] == (8, 104, 4, 0)
    assert items is not None and items.element_size == 16 and items.is_composed
    assert [p.field for p in items.elements] == ["items__e0_id", "items__e1_id"]


@pytest.mark.parametrize("bad, shown", [
    (FORMAT.replace("u64 v__end;", "u32 v__end;").replace("size:8;\tsigned:0;\n\tfield:u64 v_size;",
                                                           "size:4;\tsigned:0;\n\tfield:u64 v_size;"),
     ["v__begin", "v__end"]),
    (FORMAT.replace("v__begin", "v__start"), ["v__start", "v__end"]),
    (FORMAT.replace("u64 v_size__end4", "u64 v_size__end0"), ["v_size__end0"]),
    (FORMAT.replace("u64 v_size__end4", "u8 v_size__end4[8]"), ["v_size__end4"]),
], ids=["pointers-of-two-sizes", "no-begin", "size-zero", "end-an-array"])
def test_parts_that_make_no_vector_are_plain_fields(bad, shown):
    fmt = EventFormat.parse(bad, "probe_c")
    v, size = fmt.field("v"), fmt.field("v_size")
    assert v is not None and size is not None
    assert (v.bound, v.begin) == (None, None) if "v__end" in shown else (size.bound, size.element_size) == (None, 0)
    assert [f.name for f in fmt.event_fields if f.name in shown] == shown


def _one_event(tmp_path: Path, record: bytes) -> Path:
    from tests.test_string_arrays import one_event_trace

    return one_event_trace(tmp_path, record, FORMAT, "probe_c")


@pytest.mark.parametrize("begin, end, items_end, want", [
    (0x5000, 0x500c, 0x5020, ([1, 2, 3], 3, "[{id:101} {id:102}]")),
    (0x5000, 0x5000, 0x5000, ([], 0, "[]")),  # empty
    (0x5000, 0x5000 + 4 * 22, 0x5000 + 16 * 5, (list(range(1, 17)), 22, "[{id:101} {id:102} ...]")),  # more
    (0x5000, 0x4ff0, 0x4ff0, ([], 0, "[]")),  # its end before its start (read before it was made): none
], ids=["three", "empty", "more-than-read", "end-before-start"])
def test_every_reader_gives_the_elements_within_the_pointers(tmp_path, begin, end, items_end, want):
    path = _one_event(tmp_path, payload(begin, end, items_end))
    elements, count, items = want
    fields = {"__probe_ip": 0x401000, "v": elements, "v_size": count, "items": items}
    (obj,) = [json.loads(x) for x in cli("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    assert obj["fields"] == fields
    (event,) = list(probectl.read_trace(str(path)))
    assert dict(event.fields, v=list(event.fields["v"])) == fields
    line = cli("script", "-i", str(path)).stdout.strip()
    assert line.endswith(f" v={{{','.join(map(str, elements))}}} v_size={count} items={items}"), line
    assert "__begin" not in line and "__end" not in line and "__e0" not in line
    (row,) = list(csv.DictReader(io.StringIO(cli("script", "-i", str(path), "--format", "csv").stdout)))
    assert row["v_size"] == str(count)
    # (query: a vector of structs is the text script shows, as a slice of structs is)
    (table,) = json.loads(cli("query", "-i", str(path), "select v, v_size, items from probe_c.total",
                              "--json").stdout)
    assert table == {"v": elements, "v_size": count, "items": items}


STRINGS = f"""name: names
ID: 1602
format:
{COMMON_FIELDS}
\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u64 names;\toffset:16;\tsize:8;\tsigned:0;
\tfield:u64 names__end32;\toffset:24;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] names__e0;\toffset:32;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] names__e1;\toffset:36;\tsize:4;\tsigned:1;

print fmt: "(%lx) names=%Lu names__end32=%Lu names__e0=\\"%s\\" names__e1=\\"%s\\"", REC->__probe_ip, REC->names, REC->names__end32, __get_str(names__e0), __get_str(names__e1)
"""


@pytest.mark.parametrize("count, texts, want", [
    (2, [b"apple", b'say "hi"\tnow'], '{"apple","say \\"hi\\"\\tnow"}'),
    (1, [b"apple", b"pear"], '{"apple"}'),  # (the second string read is past its length: not its own)
    # a string the kernel could not read (empty, as a :string argument shows it); more than were read
    (3, [b"apple", None], '{"apple","",...}'),
    (0, [b"", b""], "{}"),
], ids=["two", "one", "fault-and-more", "empty"])
def test_a_vector_of_strings_is_shown_as_its_texts_within_its_length(tmp_path, count, texts, want):
    from tests.test_string_arrays import one_event_trace

    fmt = EventFormat.parse(STRINGS, "probe_c")
    names = fmt.field("names")
    assert [f.name for f in fmt.event_fields] == ["__probe_ip", "names"]
    assert names is not None and names.element_size == 32 and [p.member for p in names.elements] == ["", ""]
    data, words = b"", []
    for text in texts:  # (a string the kernel could not read: its data_loc of length 0)
        words.append(0 if text is None else (len(text) + 1) << 16 | (40 + len(data)))
        data += b"" if text is None else text + b"\0"
    record = struct.pack("<HBBiQQQ2I", 1602, 0, 0, 77, 0x401000, 0x5000, 0x5000 + 32 * count, *words) + data
    path = one_event_trace(tmp_path, record, STRINGS, "probe_c")
    (obj,) = [json.loads(x) for x in cli("script", "-i", str(path), "--format", "json").stdout.splitlines()]
    assert obj["fields"] == {"__probe_ip": 0x401000, "names": want}
    assert cli("script", "-i", str(path)).stdout.strip().endswith(f" names={want}")


def test_a_filter_on_a_vectors_size_is_refused():
    """The kernel would compare the begin pointer: the size exists only once the events are decoded."""
    from probectl.filters import compile_filter
    from probectl.filters.checker import FilterError

    fmt = EventFormat.parse(FORMAT, "probe_c")
    assert compile_filter("items__end16 > 3", fmt)  # (a plain field: the kernel compares what it holds)
    with pytest.raises(FilterError) as err:
        compile_filter("v_size > 3", fmt)
    assert "a C++ vector's length worked out from its two pointers" in err.value.message


@pytest.mark.parametrize("spec", [
    (8, 8, 0, KIND_INT, 0, False, 8, 16, 0, 0),  # a vector's begin pointer without its element's size
    (8, 64, 0, KIND_INT_ARRAY, 4, True, 8, 72, 3, 80),  # a vector's array with a 3-byte begin pointer
], ids=["size-without-element-size", "begin-of-3-bytes"])
def test_the_decoder_refuses_vector_fields_it_cannot_read(spec):
    from probectl import _native

    with pytest.raises(ValueError, match="cannot be decoded"):
        _native.Reader([], [(1, (spec,))])
    fixed = spec[:8] + (8,) + spec[9:]  # (with an 8-byte element size or begin pointer: read)
    _native.Reader([], [(1, (fixed,))]).close()
