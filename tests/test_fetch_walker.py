"""The one member-chain walker (probectl.resolve.fetch) on its own, over a small hand-made type model:
the places it moves through (memory, registers, register slices, structs in several registers), the
checks both debug formats share, and that DWARF and BTF answer it alike. The real DWARF and BTF paths
are checked end to end in test_location, test_types, test_dwarf and test_btf."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import pytest

from probectl.debuginfo.place import Computed, Memory, Pieces, Reg, Register, Value, Var
from probectl.debuginfo.typemodel import (AGGREGATE_KIND, ARRAY_KIND, DECLARED_KIND, POINTER_KIND, REFERENCE_KIND,
                                          SCALAR_KIND, Bitfield, scalar_fetch_type)
from probectl.errors import LocationError, TypeMismatchError, ValueTooWideError
from probectl.resolve.fetch import fetch_chain
from probectl.resolve.render import RenderOptions
from probectl.spec import Index, Member, TypeSpec, Variable


@dataclass(eq=False)
class T:
    """A C type of the fake model: ``kind``, a name, a size, a target (pointee/element), members."""

    kind: str
    name: str
    size: Optional[int] = None
    target: Optional["T"] = None
    members: dict = field(default_factory=dict)  # name -> (type, offset, bitfield)
    signed: bool = False
    user: bool = False


@dataclass(frozen=True)
class M:
    type: T
    offset: int
    bitfield: Optional[Bitfield] = None


class FakeModel:
    source = "FAKE"

    def strip(self, t):
        return t

    def kind(self, t):
        return t.kind

    def pointee(self, t):
        return t.target

    def element(self, t):
        return t.target, t.target.size if t.target else None

    def member(self, agg, name):
        found = agg.members.get(name)
        return M(*found) if found else None

    def member_names(self, agg):
        return list(agg.members)

    def no_member_error(self, owner, agg, name):
        return TypeMismatchError(f"'{owner}' ({agg.name}) has no member '{name}'")

    def type_name(self, t):
        return t.name if t else None

    def byte_size(self, t):
        return t.size if t else None

    def is_signed(self, t):
        return bool(t and t.signed)

    def enumerators(self, t):
        return []

    def variants(self, t):
        return None

    def char_element(self, t):
        return t is not None and t.name == "char"

    def kernel_type(self, t, prefix=None, x_types=True):
        return scalar_fetch_type(t.size if t else None, self.is_signed(t), prefix, x_types)

    def user_memory(self, t):
        return bool(t and t.user)

    def reads_through(self, t):
        return t.name[:1] in ("&", "*")  # (DWARF's rule: pointer types the language names)


MODEL = FakeModel()
INT = T(SCALAR_KIND, "int", 4, signed=True)
LONG = T(SCALAR_KIND, "long", 8, signed=True)
CHAR = T(SCALAR_KIND, "char", 1, signed=True)
CHARP = T(POINTER_KIND, "char *", 8, CHAR)
PAIR = T(AGGREGATE_KIND, "struct pair", 16, members={"a": (LONG, 0), "b": (INT, 8), "name": (CHARP, 8)})
SMALL = T(AGGREGATE_KIND, "struct small", 8, members={
    "x": (INT, 0), "y": (INT, 4), "flags": (INT, 4, Bitfield(4, 3, 5, 32, False)),
    "wide": (INT, 4, Bitfield(4, 30, 40, 64, False))})
PAIRP = T(POINTER_KIND, "struct pair *", 8, PAIR)
INTS = T(ARRAY_KIND, "int[4]", 16, INT)
OPAQUE = T(DECLARED_KIND, "struct opaque")
OPAQUEP = T(POINTER_KIND, "struct opaque *", 8, OPAQUE)
USER_PAIR = T(AGGREGATE_KIND, "struct pair", 16, members=PAIR.members, user=True)
USER_PAIRP = T(POINTER_KIND, "struct pair __user *", 8, USER_PAIR)
DI = Register(5)


def fetch(var_type, place, text_chain, cast=None, **opts):
    name, *accessors = text_chain
    variable = Variable(name, tuple(accessors))
    return fetch_chain(MODEL, var_type, place, variable, cast, RenderOptions(**opts), True)


def test_pointer_member_and_index():
    assert fetch(PAIRP, DI, ["p", Member("b", True)]).fetch == "+8(%di)"
    r = fetch(PAIRP, DI, ["p", Index(2), Member("a", False)])
    assert r.fetch == "+32(%di)"
    with pytest.raises(ValueTooWideError, match=r"'p\[2\]' is a struct pair of 16 bytes"):
        fetch(PAIRP, DI, ["p", Index(2)])  # perf would cut it to its first 64 bits without a word
    r = fetch(PAIRP, DI, ["p", Index(2)], TypeSpec("x", 64))
    assert (r.fetch, r.type) == ("+32(%di)", "x64"), "a cast says which bytes the user wants"
    assert fetch(INTS, Memory(Value(Reg(7), 16)), ["arr", Index(3)]).fetch == "+28(%sp)"
    r = fetch(PAIRP, DI, ["p", Member("name", True)], TypeSpec("string"))
    assert (r.fetch, r.type) == ("+0(+8(%di))", "string")


def test_struct_in_one_register_is_sliced():
    r = fetch(SMALL, DI, ["s", Member("y", False)])
    assert (r.fetch, r.type, r.bits) == ("%di", "b32@32/64", 32)
    r = fetch(SMALL, DI, ["s", Member("flags", False)])
    assert r.type == "b5@35/64"
    with pytest.raises(LocationError, match="straddles two registers"):
        fetch(SMALL, DI, ["s", Member("wide", False)])


def test_struct_in_two_registers():
    """BTF's view of a 16-byte struct passed in %di and %si (or in $arg1/$arg2 at a return)."""
    two = Pieces((Value(Reg(5)), Value(Reg(4))))
    assert fetch(PAIR, two, ["p", Member("a", False)]).fetch == "%di"
    assert fetch(PAIR, two, ["p", Member("b", False)]).type == "s32"  # (the low half of %si, with its sign)
    r = fetch(PAIR, Pieces((Value(Var("$arg1")), Value(Var("$arg2")))), ["p", Member("name", False)],
              TypeSpec("string"))
    assert (r.fetch, r.type) == ("+0($arg2)", "string"), "a pointer at the start of a register is dereferenced"
    with pytest.raises(LocationError, match=r"held in 2 registers \(%di, %si\)"):
        fetch(PAIR, two, ["p"])


def test_a_struct_wider_than_a_register_in_a_register_is_refused():
    with pytest.raises(LocationError, match="larger than one register"):
        fetch(PAIR, DI, ["p", Member("b", False)])


def test_user_memory_follows_the_pointee():
    assert fetch(USER_PAIRP, DI, ["p", Member("b", True)]).fetch == "+u8(%di)"
    assert fetch(PAIRP, DI, ["p", Member("b", True)], user_access=True).fetch == "+u8(%di)"


def test_chain_mistakes():
    with pytest.raises(TypeMismatchError, match="must be referred by '->'"):
        fetch(PAIRP, DI, ["p", Member("b", False)])
    with pytest.raises(TypeMismatchError, match="must be referred by '.'"):
        fetch(SMALL, DI, ["s", Member("x", True)])
    with pytest.raises(TypeMismatchError, match="FAKE only declares"):
        fetch(OPAQUEP, DI, ["o", Member("x", True)])
    with pytest.raises(TypeMismatchError, match="has no member 'zz'"):
        fetch(PAIRP, DI, ["p", Member("zz", True)])
    with pytest.raises(TypeMismatchError, match="cannot be indexed"):
        fetch(INT, DI, ["i", Index(1)])
    with pytest.raises(TypeMismatchError, match="as a string"):
        fetch(INT, DI, ["i"], TypeSpec("string"))
    with pytest.raises(LocationError, match="array that is not in memory"):
        fetch(INTS, DI, ["arr", Index(1)])


def test_truncated_values_are_read_at_their_width():
    r = fetch(LONG, Computed(Value(Reg(3), bits=32, signed=True)), ["n"])
    assert (r.fetch, r.type) == ("%bx", "s32")
    with pytest.raises(LocationError, match="truncated value"):
        fetch(PAIRP, Computed(Value(Reg(3), bits=32)), ["p", Member("b", True)])


def test_offsets_that_the_kernel_would_wrap_are_refused():
    """The kernel keeps a dereference offset in an int: an index computing a larger one used to be
    written, and the probe then read some other object."""
    a = Member("a", False)
    assert fetch(PAIRP, DI, ["p", Index(2**31 // 16 - 1), a]).fetch == "+2147483632(%di)"
    with pytest.raises(LocationError, match="does not fit the kernel's 32-bit dereference offsets"):
        fetch(PAIRP, DI, ["p", Index(2**31 // 16), a])
    with pytest.raises(LocationError, match="32-bit"):
        fetch(PAIRP, DI, ["p", Index(-(2**31) // 16 - 1), a])


def test_a_huge_c_index_is_an_error_end_to_end():
    import subprocess
    import sys

    from tests.helpers import build_fixture

    app = build_fixture("dwarf_structs")
    out = subprocess.run([sys.executable, "-m", "probectl", "add", "-D", "-x", str(app), "paint w->values[536870912]"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == "", out.stdout
    assert "'w->values[536870912]'" in out.stderr and "32-bit dereference offsets" in out.stderr


# -- strings counted by a length (Go, Rust, libstdc++), known by their names and members --------------

U8 = T(SCALAR_KIND, "uint8", 1)
U8P = T(POINTER_KIND, "*uint8", 8, U8)
GO_STRING = T(AGGREGATE_KIND, "struct string", 16, members={"str": (U8P, 0), "len": (LONG, 8)})
RUST_STR = T(AGGREGATE_KIND, "struct &str", 16, members={"data_ptr": (U8P, 0), "length": (LONG, 8)})
# alloc::string::String of rustc 1.63: vec: Vec<u8> {buf: RawVec {ptr: Unique {pointer}, cap}, len}
UNIQUE = T(AGGREGATE_KIND, "struct Unique<u8>", 8, members={"pointer": (U8P, 0)})
RAWVEC = T(AGGREGATE_KIND, "struct RawVec<u8>", 16, members={"cap": (LONG, 8), "ptr": (UNIQUE, 0)})
VEC = T(AGGREGATE_KIND, "struct Vec<u8>", 24, members={"buf": (RAWVEC, 0), "len": (LONG, 16)})
RUST_STRING = T(AGGREGATE_KIND, "struct String", 24, members={"vec": (VEC, 0)})
HIDER = T(AGGREGATE_KIND, "struct _Alloc_hider", 8, members={"_M_p": (CHARP, 0)})
STD_STRING = T(AGGREGATE_KIND, "class basic_string<char>", 32,
               members={"_M_dataplus": (HIDER, 0), "_M_string_length": (LONG, 8)})
STD_STRING_REF = T(REFERENCE_KIND, "string &", 8, STD_STRING)
LABELLED = T(AGGREGATE_KIND, "struct Cart", 48, members={"items": (INT, 0), "label": (STD_STRING, 16)})
LABELLEDP = T(POINTER_KIND, "struct Cart *", 8, LABELLED)


def parts(r):
    return [(p.role, p.fetch, p.type) for p in r.parts]


def test_a_go_string_in_two_registers_is_its_text_bounded_by_its_length():
    """Go's ABI passes s in %ax and %bx: the text from the first, its length the second, its first
    bytes beside it (no NUL follows a Go string)."""
    two = Pieces((Value(Reg(0)), Value(Reg(3))))
    for cast in (None, TypeSpec("string")):
        r = fetch(GO_STRING, two, ["s"], cast)
        assert (r.fetch, r.type) == ("+0(%ax)", "string")
        assert parts(r) == [("length", "%bx", "u64"), ("head", "+0(%ax)", "u8[64]")]
    assert fetch(GO_STRING, two, ["s", Member("len", False)]).fetch == "%bx", "its members stay readable"
    with pytest.raises(LocationError, match="held in 2 registers"):
        fetch(GO_STRING, two, ["s"], TypeSpec("x", 64))


def test_rust_strings_are_found_by_their_members_wherever_the_pointer_is():
    r = fetch(RUST_STR, Memory(Value(Reg(7), 72)), ["key"])
    assert (r.fetch, parts(r)) == ("+0(+72(%sp))", [("length", "+80(%sp)", "u64"), ("head", "+0(+72(%sp))", "u8[64]")])
    r = fetch(RUST_STRING, Memory(Value(Reg(5))), ["name"])
    assert (r.fetch, parts(r)[0]) == ("+0(+0(%di))", ("length", "+16(%di)", "u64"))


def test_a_std_string_through_a_reference_and_a_member_needs_no_head():
    """A std::string's text always has a NUL after it: its length bounds it, no head is read."""
    r = fetch(STD_STRING_REF, Register(5), ["name"])
    assert (r.fetch, r.type, parts(r)) == ("+0(+0(%di))", "string", [("length", "+8(%di)", "u64")])
    assert fetch(STD_STRING_REF, Register(5), ["name", Member("_M_string_length", False)]).fetch == "+8(%di)"
    r = fetch(LABELLEDP, Register(5), ["this", Member("label", True)])
    assert (r.fetch, parts(r), r.default_name) == ("+0(+16(%di))", [("length", "+24(%di)", "u64")], "label")


def test_a_look_alike_without_a_byte_pointer_is_no_string():
    wide = T(AGGREGATE_KIND, "struct string", 16, members={"str": (T(POINTER_KIND, "*int", 8, INT), 0),
                                                           "len": (LONG, 8)})
    with pytest.raises(ValueTooWideError):
        fetch(wide, Memory(Value(Reg(7))), ["s"])


def test_a_named_pointer_reads_members_through_dot_as_its_language_does():
    """``it.id`` of a Rust ``&Item`` (or Go's ``s.polls`` of ``*Server``); C's pointers keep '->'."""
    item = T(AGGREGATE_KIND, "struct Item", 16, members={"id": (INT, 8)})
    ref = T(POINTER_KIND, "&Item", 8, item)
    assert fetch(ref, Register(5), ["it", Member("id", False)]).fetch == "+8(%di)"
    with pytest.raises(TypeMismatchError, match="must be referred by '->'"):
        fetch(PAIRP, DI, ["p", Member("b", False)])


LONGP = T(POINTER_KIND, "*int", 8, LONG)
GO_SLICE = T(AGGREGATE_KIND, "struct []int", 24, members={"array": (LONGP, 0), "len": (LONG, 8), "cap": (LONG, 16)})
RUST_SLICE = T(AGGREGATE_KIND, "struct &[u16]", 16,
               members={"data_ptr": (T(POINTER_KIND, "*const u16", 8, T(SCALAR_KIND, "u16", 2)), 0),
                        "length": (LONG, 8)})


def test_a_slice_is_its_first_elements_bounded_by_its_length():
    three = Pieces((Value(Reg(2)), Value(Reg(5)), Value(Reg(4))))
    r = fetch(GO_SLICE, three, ["xs"])
    assert (r.fetch, r.type, parts(r)) == ("+0(%cx)", "s64[16]", [("length", "%di", "u64")])
    r = fetch(GO_SLICE, three, ["xs"], TypeSpec("x", 32, array=64))
    assert (r.type, parts(r)) == ("x32[64]", [("length", "%di", "u64")]), "a cast says the elements and how many"
    r = fetch(RUST_SLICE, Memory(Value(Reg(7), 8)), ["v"])
    assert (r.fetch, r.type, parts(r)) == ("+0(+8(%sp))", "x16[16]", [("length", "+16(%sp)", "u64")])
    with pytest.raises(LocationError, match="held in 3 registers"):
        fetch(GO_SLICE, three, ["xs"], TypeSpec("x", 64))
    # a slice of structs: its length, and each scalar member of its first 4 elements at the element's size
    of_structs = T(AGGREGATE_KIND, "struct []main.T", 24,
                   members={"array": (PAIRP, 0), "len": (LONG, 8), "cap": (LONG, 16)})
    r = fetch(of_structs, three, ["ts"])
    assert (r.fetch, r.type) == ("%di", "u64")
    assert [(p.role, p.variant, p.value, p.fetch, p.type) for p in r.parts][:4] == [
        ("element", "a", 0, "+0(%cx)", "s64"), ("element", "b", 0, "+8(%cx)", "s32"),
        ("element", "name", 0, "+8(%cx)", "x64"), ("element", "a", 1, "+16(%cx)", "s64")]
    assert len(r.parts) == 12
    with pytest.raises(TypeMismatchError, match="no cast"):
        fetch(of_structs, three, ["ts"], TypeSpec("x", 64, array=4))


def test_a_vec_and_a_reference_to_a_string_are_read_through():
    """Rust's Vec<u32> (its pointer inside buf, as a String's) and a &String: read as what they refer
    to, as Rust prints them."""
    u32p = T(POINTER_KIND, "*const u32", 8, T(SCALAR_KIND, "u32", 4))
    unique = T(AGGREGATE_KIND, "struct Unique<u32>", 8, members={"pointer": (u32p, 0)})
    rawvec = T(AGGREGATE_KIND, "struct RawVec<u32, alloc::alloc::Global>", 16, members={"ptr": (unique, 0),
                                                                                     "cap": (LONG, 8)})
    vec = T(AGGREGATE_KIND, "struct Vec<u32, alloc::alloc::Global>", 24, members={"buf": (rawvec, 0),
                                                                               "len": (LONG, 16)})
    r = fetch(T(POINTER_KIND, "&alloc::vec::Vec<u32, alloc::alloc::Global>", 8, vec), Register(5), ["values"])
    assert (r.fetch, r.type, parts(r)) == ("+0(+0(%di))", "x32[16]", [("length", "+16(%di)", "u64")])
    r = fetch(T(POINTER_KIND, "&alloc::string::String", 8, RUST_STRING), Register(4), ["name"])
    assert (r.fetch, parts(r)[0]) == ("+0(+0(%si))", ("length", "+16(%si)", "u64"))
    assert fetch(PAIRP, DI, ["p"]).fetch == "%di", "a C pointer to a struct stays the pointer"
