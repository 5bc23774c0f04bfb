"""Rust enums of fixtures/rust_enums.rs (rustc's legacy mangling and v0), offline: the arguments that
show a variant holding several values (one hidden argument per scalar, NAME__m<value>_<Variant>__<path>),
a C-like enum past 16 variants, the refusal of an enum whose variants take more arguments than an event
has (with the cast that reads it as a number), and the decoders' side. perf -D by the mangled name is
the oracle of where the enums are. The live side: tests/live/test_rust_enums.py."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.helpers import build_rust_fixture, fails, missing, probectl
from tests.test_rust_names import mangled


@pytest.fixture(scope="module", params=["legacy", "v0"])
def renums(request):
    return build_rust_fixture("rust_enums", mangling=request.param)


def test_variants_holding_several_values_are_read_member_by_member(renums):
    """Figure::Rect { w: u32, h: u32 } and Pair(u16, i64) behind a reference (its discriminant a u16
    at 0: Pair's u16 after it, the other values at 4 and 8), Option<(u32, u32)> (a tag, then the tuple),
    and a C-like enum of 20 variants; perf -D puts the probe where probectl does and reads f (the
    reference) and k where probectl reads them."""
    perf = shutil.which("perf")
    if not perf:
        missing("perf (linux-perf) is not installed")
    ours = probectl("add", "-D", "-x", str(renums), "rust_enums::shapes::draw:1 f p k").stdout.split()
    args = dict(a.split("=", 1) for a in ours[2:])
    assert list(args)[:10] == ["f", "f__m0_Rect__w", "f__m0_Rect__h", "f__m1_Pair__0", "f__m1_Pair__1", "f__v2_Dot",
                               "f__p3_Line", "p", "p__v0_None", "p__m1_Some__0__0"]
    assert list(args)[10:] == ["p__m1_Some__0__1", "k"] + [f"k__v{i:x}_K{i}" for i in range(20)]
    theirs = subprocess.run([perf, "probe", "-x", str(renums), "-D",
                             f"{mangled(renums, 'rust_enums::shapes::draw')}:1 f k"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert theirs[1].rsplit(":", 1)[1] == ours[1].rsplit(":", 1)[1]
    perf_args = dict(a.split("=", 1) for a in theirs[2:])
    f = perf_args["f"]  # (the reference: probectl reads the enum it refers to)
    assert args["f"] == f"+0({f}):u16"
    assert [args[n] for n in ("f__m0_Rect__w", "f__m0_Rect__h", "f__m1_Pair__0", "f__m1_Pair__1", "f__p3_Line")] == \
           [f"+4({f}):u32", f"+8({f}):u32", f"+2({f}):u16", f"+8({f}):s64", f"+8({f}):u64"]
    assert args["k"] == perf_args["k"].rsplit(":", 1)[0] + ":u8"
    base = args["p"][len("+0("):-len("):u32")]
    assert (args["p__m1_Some__0__0"], args["p__m1_Some__0__1"]) == (f"+4({base}):u32", f"+8({base}):u32")


def test_an_unoptimised_function_whose_argument_is_passed_by_reference_is_probed_past_its_prologue(renums):
    """At opt-level 0 rustc passes Option<(u32, u32)> by reference and gives p a location list: the
    address in rsi from a few instructions in, then on the stack; every variable of draw is in memory,
    as unoptimised code keeps them, so the probe goes past the prologue as for C at -O0 (where p is
    found: at the entry it is not yet), the same place as the function's first line; at -O2 p is in a
    register at the entry, which stays the probe's place."""
    plain = probectl("add", "-D", "-x", str(renums), "rust_enums::shapes::draw f p k")
    first_line = probectl("add", "-D", "-x", str(renums), "rust_enums::shapes::draw:1 f p k").stdout
    assert plain.stdout.split()[1:] == first_line.split()[1:]  # (all but the event's name, draw_L1 there)
    assert "Skipping prologue" in plain.stderr
    entry = probectl("add", "-D", "-x", str(renums), "rust_enums::shapes::draw f k").stdout.split()[1]
    assert entry.rsplit(":", 1)[1] == plain.stdout.split()[1].rsplit(":", 1)[1]  # (past the prologue for f and k too)
    optimised = build_rust_fixture("rust_enums", opt="2", mangling="legacy")
    at_entry = probectl("add", "-D", "-x", str(optimised), "rust_enums::shapes::draw f p k")
    assert "Skipping prologue" not in at_entry.stderr and "p=+0(%si):u32" in at_entry.stdout


def test_an_enum_of_more_variants_than_an_event_has_arguments_is_refused(renums):
    """130 variants take 131 arguments; the kernel's events have at most 128: refused, never cut, with
    the cast that reads the discriminant as a number, which works."""
    err = fails("add", "-D", "-x", str(renums), "rust_enums::shapes::many m")
    assert "'m' (enum Many) is an enum of 130 variants, which take 131 arguments to show by variant; an event " \
           "has at most 128" in err
    assert "Hint: fetch its discriminant as a number: m:u8" in err
    out = probectl("add", "-D", "-x", str(renums), "rust_enums::shapes::many m:u8").stdout.split()
    assert [a.split("=", 1)[0] for a in out[2:]] == ["m_u8"] and out[2].endswith(":u8")


def test_several_enums_past_the_kernels_arguments_are_refused_by_its_rule(renums):
    """Each enum fits, all of them together do not (7 draws' f, p and k: 7 * 32 arguments): the
    kernel's rule on an event's arguments refuses the definition and says what to do."""
    err = fails("add", "-D", "-x", str(renums), "rust_enums::shapes::draw:1 " + " ".join(
        f"f{i}=f p{i}=p k{i}=k" for i in range(7)))
    assert "arguments; the kernel takes at most 128" in err
    assert "Hint: split them over several events; the enum k0 takes 21 arguments, one a variant: cast it (:u8) " \
           "to read it as a number" in err


def test_an_enum_of_more_names_than_a_definition_line_holds_is_refused(renums):
    """120 variants named AVeryLongVariant0000..0119 fit the 128 arguments but not the kernel's line
    of 4094 characters: refused by the kernel's rule, the hint naming the enum and its cast."""
    run = probectl("add", "-D", "-x", str(renums), "rust_enums::shapes::wide w", check=False)
    err = run.stderr  # (after perf's warning on a program built without optimization)
    assert run.returncode == 1 and "Traceback" not in err and "\nError: " in err
    assert "characters long; the kernel takes lines of at most 4094" in err
    assert "the enum w takes 121 arguments, one a variant: cast it (:u8) to read it as a number" in err


def test_rustc_describes_a_niche_of_two_variants_by_values_not_ranges(renums):
    """Niche::Set(Level) keeps Unset and Gone in the values Level does not use (2 and 3): Debian's
    rustc (LLVM) gives each its DW_AT_discr_value and the dataful variant none; it writes no
    DW_AT_discr_list (a variant chosen by ranges) anywhere in the program, the standard library's
    enums included, so probectl has none to read. Set's Level (and an Option<Level>'s) is named by
    markers after it."""
    readelf = shutil.which("readelf") or missing("readelf (binutils) is not installed")
    info = subprocess.run([readelf, "--debug-dump=info", str(renums)], capture_output=True, text=True,
                          check=True).stdout
    assert "DW_TAG_variant_part" in info and "DW_AT_discr_list" not in info
    out = probectl("add", "-D", "-x", str(renums), "rust_enums::shapes::niche n o").stdout.split()
    # (Set and Some hold a C-like enum: its names follow, by value)
    assert [a.split("=", 1)[0] for a in out[2:]] == ["n", "n__p_Set", "n__n0_Low", "n__n1_High", "n__v2_Unset",
                                                     "n__v3_Gone", "o", "o__v2_None", "o__p_Some", "o__n0_Low",
                                                     "o__n1_High"]


def test_a_variant_of_several_values_decodes_as_rust_and_script_write_them():
    """The decoders' side: a struct variant as script writes a struct (Rect{w:3 h:4}), a tuple
    variant and an Option of a tuple as Rust's {:?} (Pair(7, -9), Some((1, 2))), a pointer in hex as
    the print format says, a member not read as '?'; the parts are hidden."""
    from probectl.formats import EventFormat, variant_text

    fmt = EventFormat.parse("""name: draw
ID: 9
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u16 f;\toffset:16;\tsize:2;\tsigned:0;
\tfield:u32 f__m0_Rect__w;\toffset:18;\tsize:4;\tsigned:0;
\tfield:u32 f__m0_Rect__h;\toffset:22;\tsize:4;\tsigned:0;
\tfield:u16 f__m1_Pair__0;\toffset:26;\tsize:2;\tsigned:0;
\tfield:s64 f__m1_Pair__1;\toffset:28;\tsize:8;\tsigned:1;
\tfield:u8 f__v2_Dot;\toffset:36;\tsize:1;\tsigned:0;
\tfield:u64 f__m_Ptr__at;\toffset:37;\tsize:8;\tsigned:0;
\tfield:u32 p;\toffset:45;\tsize:4;\tsigned:0;
\tfield:u8 p__v0_None;\toffset:49;\tsize:1;\tsigned:0;
\tfield:u32 p__m1_Some__0__0;\toffset:50;\tsize:4;\tsigned:0;
\tfield:u32 p__m1_Some__0__1;\toffset:54;\tsize:4;\tsigned:0;

print fmt: "(%lx) f=%u f__m_Ptr__at=0x%Lx p=%u", REC->__probe_ip, REC->f
""")
    assert [f.name for f in fmt.event_fields] == ["__probe_ip", "f", "p"]
    f, p = fmt.field("f"), fmt.field("p")
    values = {"f__m0_Rect__w": 3, "f__m0_Rect__h": 4, "f__m1_Pair__0": 7, "f__m1_Pair__1": -9, "f__m_Ptr__at": 4096,
              "p__m1_Some__0__0": 1, "p__m1_Some__0__1": 2}
    assert [variant_text(f, tag, values) for tag in (0, 1, 2, 9)] == ["Rect{w:3 h:4}", "Pair(7, -9)", "Dot",
                                                                      "Ptr{at:0x1000}"]
    assert variant_text(f, 0, {}) == "Rect{w:? h:?}"
    assert [variant_text(p, tag, values) for tag in (0, 1)] == ["None", "Some((1, 2))"]


def test_query_columns_of_enums_equal_the_text_script_shows():
    """query's and Parquet's enum columns are made by Arrow's kernels a column at a time: equal, row by
    row, to formats.variant_text (script's), for variants holding several values (a signed one among
    them), a niche's variant of every other value holding one (a C-like enum's value: named), a C-like
    enum and a discriminant no variant has (its number), a niche's pointer in hex."""
    import random

    import pyarrow as pa

    from probectl.analysis.columns import variant_array
    from probectl.formats import EventFormat, variant_text

    fmt = EventFormat.parse("""name: draw
ID: 9
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:u16 f;\toffset:8;\tsize:2;\tsigned:0;
\tfield:u32 f__m0_Rect__w;\toffset:10;\tsize:4;\tsigned:0;
\tfield:u32 f__m0_Rect__h;\toffset:14;\tsize:4;\tsigned:0;
\tfield:s64 f__m1_Pair__1;\toffset:18;\tsize:8;\tsigned:1;
\tfield:u8 f__v2_Dot;\toffset:26;\tsize:1;\tsigned:0;
\tfield:u8 n;\toffset:27;\tsize:1;\tsigned:0;
\tfield:u8 n__p_Set;\toffset:28;\tsize:1;\tsigned:0;
\tfield:u8 n__n0_Low;\toffset:29;\tsize:1;\tsigned:0;
\tfield:u8 n__v2_Unset;\toffset:29;\tsize:1;\tsigned:0;
\tfield:u8 k;\toffset:30;\tsize:1;\tsigned:0;
\tfield:u8 k__v0_Red;\toffset:31;\tsize:1;\tsigned:0;
\tfield:u8 k__v5_Green;\toffset:32;\tsize:1;\tsigned:0;
\tfield:u64 r;\toffset:33;\tsize:8;\tsigned:0;
\tfield:u8 r__v0_None;\toffset:41;\tsize:1;\tsigned:0;
\tfield:u64 r__p_Some;\toffset:42;\tsize:8;\tsigned:0;

print fmt: "f=%u r__p_Some=0x%Lx", REC->f
""")
    rng = random.Random(7)
    rows = 500
    parts = {p.name: [rng.randrange(-9, 9) if p.signed else rng.randrange(300) for _ in range(rows)]
             for p in fmt.composed_parts}
    arrays = {n: pa.array(v, pa.int64() if min(v) < 0 else pa.uint64()) for n, v in parts.items()}
    for name, tags, shown in (("f", range(4), {"Rect", "Pair", "Dot", "3"}), ("n", range(4), {"Set", "Unset"}),
                              ("k", (0, 5, 6, 99), {"Red", "Green", "6", "99"})):
        field = fmt.field(name)
        column = [rng.choice(tags) for _ in range(rows)]
        want = [variant_text(field, t, {n: v[i] for n, v in parts.items()}) for i, t in enumerate(column)]
        assert {w.split("(")[0].split("{")[0] for w in want} == shown
        got = variant_array(field, pa.array(column, pa.uint64()), arrays)
        assert got is not None and got.to_pylist() == want
    n = fmt.field("n")  # (Set holds a C-like enum: Set(Low) for its 0, the number for a value of no name)
    assert [variant_text(n, 0, {"n__p_Set": v}) for v in (0, 1)] == ["Set(Low)", "Set(1)"]
    assert variant_array(n, pa.array([0, 0, 2], pa.uint64()), {"n__p_Set": pa.array([0, 1, 0], pa.uint64())}
                         ).to_pylist() == ["Set(Low)", "Set(1)", "Unset"]
    r = variant_array(fmt.field("r"), pa.array([0, 4096, 1], pa.uint64()),
                      {"r__p_Some": pa.array([0, 0x7ffd25a137b8, 1], pa.uint64())})
    assert r.to_pylist() == ["None", "Some(0x7ffd25a137b8)", "Some(0x1)"]
