"""Rust functions by their paths (fixtures/rust_shop.rs, built with rustc's legacy mangling and with
v0): demangled without the hash (legacy) or the crates' disambiguators (v0) in funcs, probed by path
with a &str's members fetched, an impl's methods with their arguments; perf -D by the mangled name is
the oracle. The v0 demangler (probectl.debuginfo.rustv0, written from RFC 2603) equals binutils'
c++filt on every v0 symbol of rust_shop and of fixtures/rust_names.rs (names of many shapes)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from probectl.debuginfo.elf import ElfFile
from tests.helpers import build_rust_fixture, fails, missing, probectl


@pytest.fixture(scope="module", params=["legacy", "v0"])
def rshop(request):
    return build_rust_fixture("rust_shop", mangling=request.param)


def mangled(binary, path: str) -> str:
    """The symbol of the function ``path`` (a v0 name, or a legacy one with its hash)."""
    from probectl.debuginfo.demangle import demangle

    (name,) = [s.name for s in ElfFile(binary).functions() if demangle(s.name) == path]
    return name


def test_funcs_lists_paths_without_the_hash(rshop):
    listed = probectl("funcs", "-x", str(rshop), "rust_shop::*").stdout.splitlines()
    assert [n for n in listed if "closure" not in n] == ["rust_shop::main", "rust_shop::shop::Cart::add",
                                                         "rust_shop::shop::label", "rust_shop::shop::lookup",
                                                         "rust_shop::shop::pick", "rust_shop::shop::ship",
                                                         "rust_shop::shop::sum", "rust_shop::shop::total"]
    # (a legacy symbol says {{closure}}, its DWARF {closure#0}, as a v0 symbol does)
    assert [n for n in listed if "closure" in n] == ["rust_shop::main::{closure#0}",
                                                     "rust_shop::main::{closure#1}",
                                                     "rust_shop::shop::pick::{closure#0}",
                                                     "rust_shop::shop::ship::{closure#0}",
                                                     "rust_shop::shop::ship::{closure#1}",
                                                     "rust_shop::shop::sum::{closure#0}",
                                                     "rust_shop::shop::total::{closure#0}",
                                                     "rust_shop::shop::total::{closure#1}"]


def test_a_closure_is_probed_by_the_name_funcs_lists(rshop):
    out = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::sum::{closure#0}").stdout
    from probectl.debuginfo.demangle import demangle

    (symbol,) = [s for s in ElfFile(rshop).functions()
                 if demangle(s.name) in ("rust_shop::shop::sum::{{closure}}", "rust_shop::shop::sum::{closure#0}")]
    assert out.split()[0].endswith("/rust_shop_shop_sum_closure_0")
    assert int(out.split()[1].rsplit(":0x", 1)[1], 16) == ElfFile(rshop).vaddr_to_offset(symbol.value)


def test_a_path_probes_what_perf_probes_by_the_mangled_name(rshop):
    perf = shutil.which("perf")
    if not perf:
        missing("perf (linux-perf) is not installed")
    symbol = mangled(rshop, "rust_shop::shop::lookup")
    theirs = subprocess.run([perf, "probe", "-x", str(rshop), "-D", f"{symbol} key.length"], capture_output=True,
                            text=True, check=True).stdout
    ours = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::lookup key.length").stdout
    assert [line.split()[2:] for line in ours.splitlines()] == [line.split()[2:] for line in theirs.splitlines()]
    assert ours.split()[0].endswith("/rust_shop_shop_lookup")
    # perf probes the entry, where key's place (the frame's stack slot, DW_OP_fbreg off %sp) is not
    # yet the frame's; probectl, as perf does in unoptimised C, the line after the prologue.
    (perf_place,), (our_place,) = ([int(line.split()[1].rsplit(":0x", 1)[1], 16) for line in out.splitlines()]
                                   for out in (theirs, ours))
    assert perf_place < our_place


def test_enums_are_read_by_their_variants(rshop):
    """An Option<u32> (a tag and a payload), an Option<&u64> and an Option<Box<u32>> (niches: the
    pointer is the discriminant, None its 0, Some every other value), a C-like enum and an enum with
    data behind a reference: the discriminant where DWARF's DW_AT_discr says, a hidden part per
    variant naming it (its DW_AT_discr_value in hex, none for the niche's Some) and holding its one
    scalar. perf -D by the mangled name reads n at the same place (as 8 bytes: it knows no variants)."""
    perf = shutil.which("perf")
    if not perf:
        missing("perf (linux-perf) is not installed")
    symbol = mangled(rshop, "rust_shop::shop::lookup")
    theirs = subprocess.run([perf, "probe", "-x", str(rshop), "-D", f"{symbol} n"], capture_output=True,
                            text=True, check=True).stdout
    (perf_n,) = [a for a in theirs.split()[2:]]
    ours = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::lookup n").stdout.split()[2:]
    place = perf_n.split("=", 1)[1].rsplit(":", 1)[0]
    assert place.startswith("+") and place.endswith("(%sp)")
    offset = int(place[1:].split("(")[0])
    assert ours == [f"n={place}:u32", "n__v0_None=\\0:u8", f"n__p1_Some=+{offset + 4}(%sp):u32"]
    pick = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::pick r b c s").stdout.split()[2:]
    names = [a.split("=", 1)[0] for a in pick]
    assert names == ["r", "r__v0_None", "r__p_Some", "b", "b__v0_None", "b__p_Some", "c", "c__v0_Red",
                     "c__v5_Green", "c__v6_Blue", "s", "s__p0_Circle", "s__p1_Square", "s__v2_Empty"]
    args = dict(a.split("=", 1) for a in pick)
    assert args["r"].endswith(":u64") and args["r__p_Some"] == args["r"][:-len(":u64")] + ":x64"
    assert args["c"].endswith(":u8")
    # s: &Shape read through (its tag a u32 at 0, Circle's u32 at 4, Square's side at 8)
    base = args["s"][len("+0("):-len("):u32")]
    assert args["s__p0_Circle"] == f"+4({base}):u32" and args["s__p1_Square"] == f"+8({base}):u64"


def test_a_struct_in_a_slices_elements_is_read_member_by_member(rshop):
    """ship's &[Order] (Order { id: u32, item: Item { id: u32, price: u64 } }, 24 bytes, item first as
    rustc lays it out): each of the first 4 elements' id and item's members, item__id, item__price, at
    the element's size from the slice's pointer."""
    out = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::ship orders").stdout.split()
    args = dict(a.split("=", 1) for a in out[2:])
    pointer = args["orders__e0_id"][len("+16("):-len("):u32")]
    assert list(args)[:4] == ["orders", "orders__e0_id", "orders__e0_item__id", "orders__e0_item__price"]
    assert [args[f"orders__e{i}_{m}"] for i in (0, 3) for m in ("id", "item__id", "item__price")] == [
        f"+{24 * i + o}({pointer}):{t}" for i in (0, 3) for o, t in ((16, "u32"), (8, "u32"), (0, "u64"))]


def test_a_member_of_an_enum_is_refused_with_its_variants(rshop):
    err = fails("add", "-D", "-x", str(rshop), "rust_shop::shop::lookup n.Some")
    assert "'n' is an enum (struct Option<u32>: None, Some), which has no member 'Some'" in err
    assert "Hint: fetch 'n' itself" in err


def test_a_variant_decodes_as_rust_prints_it():
    """The decoders' side of an enum: its parts hidden, its value Name(payload) by the discriminant, a
    pointer's payload in hex as its print format says, a value no variant has as the number."""
    from probectl.formats import EventFormat, variant_text

    fmt = EventFormat.parse("""name: pick
ID: 9
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u32 n;\toffset:16;\tsize:4;\tsigned:0;
\tfield:u8 n__v0_None;\toffset:20;\tsize:1;\tsigned:0;
\tfield:u32 n__p1_Some;\toffset:21;\tsize:4;\tsigned:0;
\tfield:u64 r;\toffset:25;\tsize:8;\tsigned:0;
\tfield:u8 r__v0_None;\toffset:33;\tsize:1;\tsigned:0;
\tfield:u64 r__p_Some;\toffset:34;\tsize:8;\tsigned:0;

print fmt: "(%lx) n=%u n__v0_None=%u n__p1_Some=%u r=%Lu r__v0_None=%u r__p_Some=0x%Lx", REC->__probe_ip, REC->n
""")
    assert [f.name for f in fmt.event_fields] == ["__probe_ip", "n", "r"]
    assert [f.name for f in fmt.composed_parts] == ["n__p1_Some", "r__p_Some"]
    n, r = fmt.field("n"), fmt.field("r")
    assert variant_text(n, 1, {"n__p1_Some": 5}) == "Some(5)" and variant_text(n, 0, {}) == "None"
    assert variant_text(n, 7, {}) == "7" and variant_text(n, None, {}) is None
    assert variant_text(r, 0, {}) == "None" and variant_text(r, 0x1000, {"r__p_Some": 0x1000}) == "Some(0x1000)"


def test_a_method_is_found_by_its_path(rshop):
    out = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::Cart::add")
    assert out.stdout.split()[0].endswith("/rust_shop_shop_Cart_add")


def test_a_methods_arguments_are_perfs_and_take_rusts_dot(rshop):
    """rustc defines an impl's methods inside their type's DIE (Cart's), where a DIE scanner that looks
    in namespaces alone does not find them; the arguments equal perf -D's by the mangled name (at the
    line after the prologue, as for lookup), and '.' reads through a reference as Rust writes it."""
    perf = shutil.which("perf")
    if not perf:
        missing("perf (linux-perf) is not installed")
    symbol = mangled(rshop, "rust_shop::shop::Cart::add")
    chain = "qty it->id self->items self->owner"
    theirs = subprocess.run([perf, "probe", "-x", str(rshop), "-D", f"{symbol} {chain}"], capture_output=True,
                            text=True, check=True).stdout
    ours = probectl("add", "-D", "-x", str(rshop), f"rust_shop::shop::Cart::add {chain}").stdout
    assert [line.split()[2:] for line in ours.splitlines()] == [line.split()[2:] for line in theirs.splitlines()]
    dotted = probectl("add", "-D", "-x", str(rshop), "rust_shop::shop::Cart::add qty it.id self.items self.owner")
    assert dotted.stdout == ours
    listed = probectl("vars", "-x", str(rshop), "rust_shop::shop::Cart::add").stdout
    assert all(name in listed for name in ("\tself", "\tit", "\tqty")), listed


def test_legacy_demangling_equals_cxxfilt_without_the_hash(rshop):
    """binutils' c++filt (libiberty's Rust demangler) is the oracle; probectl leaves the hash out."""
    import re

    from probectl.debuginfo.demangle import demangle

    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        missing("c++filt (binutils) is not installed")
    names = sorted({s.name for s in ElfFile(rshop).symbols() if re.search(r"17h[0-9a-f]{16}E", s.name)})
    # (the v0 build's own functions are v0; its standard library, built before, is legacy)
    theirs = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    assert len(names) > 500
    assert [demangle(n) for n in names] == [re.sub(r"::h[0-9a-f]{16}$", "", t) for t in theirs.splitlines()]


def test_main_is_the_programs_own(rshop):
    """perf -D 'main' probes the Rust runtime's C main; probectl the program's rust_shop::main."""
    (own,) = [s.value for s in ElfFile(rshop).functions() if s.name == mangled(rshop, "rust_shop::main")]
    out = probectl("add", "-D", "-x", str(rshop), "main")
    (line,) = out.stdout.splitlines()
    assert line.split()[0].endswith("/rust_shop_main") and int(line.split()[1].rsplit(":0x", 1)[1], 16) == own
    assert "'main' of a Rust program is its own, rust_shop::main" in out.stderr


@pytest.mark.parametrize("fixture", ["rust_shop", "rust_names"])
def test_v0_demangling_equals_cxxfilt(fixture):
    """Every v0 symbol (crates with their disambiguators, inherent and trait impls, closures and
    shims, generic arguments of every type shape, const generics, dyn traits with associated types,
    fn pointers with binders and ABIs, a punycode name): demangle_v0's verbose spelling is c++filt's;
    the probe-point spelling leaves the disambiguators out and writes an inherent impl as a path."""
    from probectl.debuginfo.rustv0 import demangle_v0

    cxxfilt = shutil.which("c++filt")
    if not cxxfilt:
        missing("c++filt (binutils) is not installed")
    binary = build_rust_fixture(fixture, mangling="v0")
    names = sorted({s.name for s in ElfFile(binary).symbols() if s.name.startswith("_R")})
    assert len(names) > 150
    names += ["_RIC3fooE", "_RNvC3foo3bar.llvm.123"]  # (no disambiguator, no arguments; LLVM's suffix)
    theirs = subprocess.run([cxxfilt], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    assert [demangle_v0(n, verbose=True) for n in names] == theirs.splitlines()
    ours = {demangle_v0(n) for n in names}
    assert {"rust_shop::shop::Cart::add", "rust_names::grüße", "<rust_names::Square as rust_names::Shape>::area",
            "rust_names::main::{closure#0}", "rust_names::sized::<3, true, 'z'>"} & ours
    assert not any("[" in n.split("<")[0] for n in ours if n), "no crate disambiguators"


def test_v0_names_probe_what_legacy_names_probe():
    """One program built both ways: the same paths, the same places in their functions, the same
    arguments (a v0 symbol probed by the name its programmer writes)."""
    legacy, v0 = (build_rust_fixture("rust_shop", mangling=m) for m in ("legacy", "v0"))
    definitions = ["rust_shop::shop::Cart::add it.id qty self.items", "rust_shop::shop::lookup key"]
    lines = [probectl("add", "-D", "-x", str(b), *definitions).stdout.splitlines() for b in (legacy, v0)]
    assert [line.split()[2:] for line in lines[0]] == [line.split()[2:] for line in lines[1]]
    assert [line.split()[0].rsplit("/", 1)[1] for line in lines[1]] == ["rust_shop_shop_Cart_add",
                                                                        "rust_shop_shop_lookup"]


@pytest.mark.parametrize("bad", ["_RNvNtCs82lqZbG5NYX_9rust_shop4shop6lookupX", "_RB_", "_RNvC3foo", "_RC3foo3bar"])
def test_a_v0_name_that_demangles_to_nothing_is_refused(bad):
    from probectl.debuginfo.rustv0 import demangle_v0

    assert demangle_v0(bad) is None
    err = fails("add", "-D", "-x", str(build_rust_fixture("rust_shop", mangling="v0")), bad)
    assert "it is not a valid Rust v0 mangled name" in err and "Hint: list the functions" in err


@pytest.mark.parametrize("mangling", ["legacy", "v0"])
def test_trait_impls_and_generic_functions_by_their_paths(mangling):
    """A trait impl's method by its quoted name (its spaces), with a tuple struct's field; a generic
    function's path names every instance (v0 writes each instance's arguments, legacy none), each at
    its own symbol, under one event; an instance by its arguments on v0."""
    binary = build_rust_fixture("rust_names", mangling=mangling)
    impl = probectl("add", "-D", "-x", str(binary), '"<rust_names::Square as rust_names::Shape>::area" self.__0')
    (line,) = impl.stdout.splitlines()
    assert line.split()[0].endswith("/rust_names_Square_as_rust_names_Shape_area") and "__0=+0(" in line
    shows = sorted(s.value for s in ElfFile(binary).functions() if (demangled := _demangled(s.name))
                   and demangled.split("::<")[0] == "rust_names::show")
    out = probectl("add", "-D", "-x", str(binary), "rust_names::show").stdout.splitlines()
    assert len(shows) >= 8 and sorted(int(line.split()[1].rsplit(":0x", 1)[1], 16) for line in out) == shows
    assert {line.split()[0].rsplit("/", 1)[1] for line in out} == {"rust_names_show"}
    if mangling == "v0":
        (one,) = probectl("add", "-D", "-x", str(binary), "rust_names::show::<&str>").stdout.splitlines()
        assert one.split()[0].endswith("/rust_names_show_str") and one.split()[1] in [line.split()[1] for line in out]


def _demangled(name: str):
    from probectl.debuginfo.demangle import demangle

    return demangle(name)


def test_a_slice_of_structs_decodes_as_its_elements():
    """The decoders' side of a slice of structs: its members' fields hidden, its value the elements
    within its length as Go's %+v writes them, '...' after the last one read when it has more."""
    from probectl.formats import EventFormat, elements_text

    fields = "".join(f"\tfield:s64 items__e{i}_{m};\toffset:{24 + 16 * i + 8 * k};\tsize:8;\tsigned:1;\n"
                     for i in range(2) for k, m in enumerate(("id", "price")))
    fmt = EventFormat.parse(f"""name: spend
ID: 9
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u64 items;\toffset:16;\tsize:8;\tsigned:0;
{fields}
print fmt: "(%lx) items=%Lu", REC->__probe_ip, REC->items
""")
    assert [f.name for f in fmt.event_fields] == ["__probe_ip", "items"]
    items = fmt.field("items")
    values = {"items__e0_id": 101, "items__e0_price": 5, "items__e1_id": 102, "items__e1_price": 10}
    assert elements_text(items, 2, values) == "[{id:101 price:5} {id:102 price:10}]"
    assert elements_text(items, 1, values) == "[{id:101 price:5}]" and elements_text(items, 0, values) == "[]"
    assert elements_text(items, 3, values) == "[{id:101 price:5} {id:102 price:10} ...]"
    assert elements_text(items, None, values) is None
    nested = EventFormat.parse(f"""name: ship
ID: 9
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:u64 orders;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u32 orders__e0_id;\toffset:16;\tsize:4;\tsigned:0;
\tfield:u32 orders__e0_item__id;\toffset:20;\tsize:4;\tsigned:0;
\tfield:u64 orders__e0_item__at;\toffset:24;\tsize:8;\tsigned:0;

print fmt: "orders=%Lu orders__e0_item__at=0x%Lx", REC->orders
""")
    values = {"orders__e0_id": 1, "orders__e0_item__id": 201, "orders__e0_item__at": 4096}
    assert elements_text(nested.field("orders"), 1, values) == "[{id:1 item:{id:201 at:0x1000}}]"
