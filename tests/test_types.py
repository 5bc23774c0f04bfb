"""C types from DWARF: names, sizes, kernel types, member chains, enums and bitfields.

Type names are compared with ``perf probe -V``. Bitfields are where perf fails (DWARF 5:
"Failed to get the offset of ...") or is wrong (DWARF 4 ``DW_AT_bit_offset`` counts from the
most significant bit, perf uses it as a little-endian shift), so their placement is checked
against the compiler itself: a program sets each field to all ones in a zeroed struct and
prints which bits changed.
"""
from __future__ import annotations

import re
import subprocess

import pytest

from probectl.debuginfo.dwarf import types as T
from probectl.debuginfo.elf import ElfFile
from probectl.resolve.dwarf_fetch import available_variables, fetch_variable, retval_type
from probectl.spec import TypeSpec, parse_probe

from tests.helpers import BUILD_DIR, FIXTURES
from tests.test_dwarf import fixture_bins, perf_oracle, probe_points  # noqa: F401
from tests.test_location import _first_op_only

BITFIELDS = {
    "struct flags": ["ready", "mode", "delta", "big", "wide"],
    "struct packed_bits": ["straddle", "high"],
}


def expr(text: str):
    return parse_probe(f"x {text}").args[0].expr


def struct_type(di, name: str):
    """The DIE of ``struct name`` in the fixture's CU."""
    for cu in di.compile_units():
        for die in cu.get_top_DIE().iter_children():
            if die.tag == "DW_TAG_structure_type" and T.type_name(die) == name:
                return die
    raise AssertionError(name)


# --- names, sizes, kernel types ------------------------------------------------------------------


def test_type_names_and_sizes(fixture_bins):
    di = fixture_bins.di("dwarf_structs", "-O0")
    widget = struct_type(di, "struct widget")
    assert T.byte_size(widget) == 200
    cases = {
        "id": ("int", 4, True, "s32"),
        "depth": ("short int", 2, True, "s16"),
        "name": ("char*", 16, False, ""),  # perf: an array is named like a pointer and has no type
        "label": ("cstr", 8, False, "x64"),  # typedefs keep their name
        "corner": ("struct point*", 8, False, "x64"),
        "pts": ("struct point*", 24, False, ""),
        "mode": ("enum mode", 4, False, "x32"),
        "level": ("enum level", 4, True, "s32"),  # gcc gives an enum with negative values a signed type
        "size": ("size_type", 8, False, "x64"),
        "sc": ("signed char", 1, True, "s8"),
        "uc": ("unsigned char", 1, False, "x8"),
        "ok": ("_Bool", 1, False, "x8"),
        "ratio": ("double", 8, False, "x64"),
        "cv": ("int", 4, True, "s32"),  # qualifiers are dropped
        "next": ("struct widget*", 8, False, "x64"),
    }
    for member, (name, size, signed, ktype) in cases.items():
        m = T.find_member(widget, member)
        t = T.type_of(m.die)
        assert (T.type_name(t), T.byte_size(t), T.is_signed(t), T.kernel_type(t)) == (name, size, signed, ktype), member
    assert T.kernel_type(T.type_of(T.find_member(widget, "id").die), x_types=False) == "s32"
    assert T.kernel_type(T.type_of(T.find_member(widget, "corner").die), x_types=False) == "u64"
    assert T.kernel_type(T.type_of(T.find_member(widget, "corner").die), prefix="s") == "s64"


def test_arrays_enums_and_anonymous_members(fixture_bins):
    di = fixture_bins.di("dwarf_structs", "-O0")
    widget = struct_type(di, "struct widget")
    info = T.array_info(T.real_type(T.find_member(widget, "pts").die))
    assert (T.type_name(info.element), info.element_size, info.count) == ("struct point", 8, 3)
    assert T.enumerators(T.type_of(T.find_member(widget, "mode").die)) == [
        ("MODE_OFF", 0), ("MODE_READ", 1), ("MODE_WRITE", 2), ("MODE_RW", 3)]
    assert T.enumerators(T.type_of(T.find_member(widget, "level").die)) == [
        ("LEVEL_LOW", -1), ("LEVEL_MID", 5), ("LEVEL_HIGH", 100)]
    # Members of the anonymous union and struct are found through them, at their real offsets.
    layout = _layout(fixture_bins)
    assert T.find_member(widget, "tag").offset == layout["offsetof(struct widget, tag)"]
    assert T.find_member(widget, "cookie").offset == layout["offsetof(struct widget, tag)"]
    assert T.find_member(widget, "hi").offset == layout["offsetof(struct widget, hi)"]
    for member in ("name", "label", "origin", "corner", "pts", "values", "u", "fl", "next", "ratio"):
        assert T.find_member(widget, member).offset == layout[f"offsetof(struct widget, {member})"], member
    assert "cookie" in T.members(widget) and "lo" in T.members(widget)


def _layout(fixture_bins) -> dict[str, int]:
    binary = fixture_bins.path("dwarf_structs", "-O0")
    out = subprocess.run([str(binary), "layout"], capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in (line[len("LAYOUT "):].rsplit("=", 1) for line in out.splitlines())}


# --- member chains ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text, message, hint", [
    ("w.id", "id must be referred by '->'", "w->id"),
    ("w->origin->x", "x must be referred by '.'", "w->origin.x"),
    ("w->nam", "'w' (struct widget) has no member 'nam'", "did you mean 'name'?"),
    ("w->corner->z", "'w->corner' (struct point) has no member 'z'", "point has: x, y"),
    ("scale->x", "'scale' (int) is not a struct or union", ""),
    ("scale[1]", "'scale' (int) is not a pointer nor an array", ""),
    ("w->fl.mode.x", "'w->fl.mode' is a bitfield", ""),
])
def test_member_chain_errors(fixture_bins, text, message, hint):
    di = fixture_bins.di("dwarf_structs", "-O0")
    (fn,) = di.find_functions("paint")
    with pytest.raises(T.TypeMismatchError) as exc:
        fetch_variable(di, fn, fn.entry, expr(text))
    assert message in exc.value.message and hint in exc.value.hint


@pytest.mark.parametrize("text, cast, message", [
    ("scale", "string", "not a pointer nor an array"),
    ("w", "string", re.escape("not (unsigned) char *")),
    ("w->pts", "string", re.escape("not (unsigned) char *")),
])
def test_string_cast_errors(fixture_bins, text, cast, message):
    di = fixture_bins.di("dwarf_structs", "-O0")
    (fn,) = di.find_functions("paint")
    with pytest.raises(T.TypeMismatchError, match=message):
        fetch_variable(di, fn, fn.entry, expr(text), TypeSpec(cast))


def test_default_names_and_casts(fixture_bins):
    di = fixture_bins.di("dwarf_structs", "-O2")
    (fn,) = di.find_functions("paint")
    cases = {
        ("w->corner->y", None): ("y", "+4(+40(%di))", "s32"),
        ("w->values[3]", TypeSpec("x")): ("values", "+96(%di)", "x64"),
        ("w->raw[2]", TypeSpec("u", 16)): ("raw", "+190(%di)", "u16"),
        ("w->name", TypeSpec("string")): ("name", "+6(%di)", "string"),
        ("w->label", TypeSpec("ustring")): ("label", "+0(+24(%di))", "ustring"),
        ("scale", TypeSpec("x")): ("scale_x", "%si", "x32"),
        ("scale", TypeSpec("u", 8)): ("scale_u8", "%si", "u8"),
        ("w", TypeSpec("symbol")): ("w_symbol", "%di", "symbol"),
        ("w->mode", None): ("mode", "+136(%di)", "x32"),
    }
    for (text, cast), expected in cases.items():
        r = fetch_variable(di, fn, fn.entry, expr(text), cast)
        assert (r.default_name, r.fetch, r.type) == expected, text
    r = fetch_variable(di, fn, fn.entry, expr("w->mode"))
    assert r.enumerators[3] == ("MODE_RW", 3) and r.c_type == "enum mode"
    assert retval_type(di, fn) == ("s32", "int")
    (vla,) = di.find_functions("print_layout")
    assert retval_type(di, vla) == ("", "void")


# --- bitfields -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def bitfield_truth() -> dict[tuple[str, str], tuple[int, int]]:
    """(struct, field) → (first bit, width), as the compiler lays the field out."""
    src = BUILD_DIR / "bitfield_truth.c"
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    lines = [f'#define main fixture_main\n#include "{FIXTURES / "dwarf_structs.c"}"\n#undef main\n',
             "static void dump(const char *s, const char *f, const unsigned char *p, unsigned long n) {\n"
             "  int first = -1, count = 0;\n"
             "  for (unsigned long i = 0; i < n * 8; i++) if ((p[i / 8] >> (i % 8)) & 1) {"
             " if (first < 0) first = (int)i; count++; }\n"
             '  printf("%s %s %d %d\\n", s, f, first, count);\n}\n',
             "int main(void) {\n"]
    for struct, fields in BITFIELDS.items():
        for f in fields:
            lines.append(f"  {{ {struct} v; memset(&v, 0, sizeof v); v.{f} = -1;"
                         f' dump("{struct}", "{f}", (const unsigned char *)&v, sizeof v); }}\n')
    lines.append("  return 0;\n}\n")
    src.write_text("".join(lines))
    exe = BUILD_DIR / "bitfield_truth"
    subprocess.run(["gcc", "-w", "-o", str(exe), str(src)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    truth = {}
    for line in out.splitlines():
        *name, field, first, width = line.split()
        truth[(" ".join(name), field)] = (int(first), int(width))
    return truth


@pytest.mark.parametrize("dwarf", [(), ("-gdwarf-4",)], ids=["dwarf5", "dwarf4"])
def test_bitfield_placement_matches_the_compiler(fixture_bins, bitfield_truth, dwarf):
    di = fixture_bins.di("dwarf_structs", "-O2", dwarf)
    for struct, fields in BITFIELDS.items():
        agg = struct_type(di, struct)
        for f in fields:
            bf = T.find_member(agg, f).bitfield
            first, width = bitfield_truth[(struct, f)]
            assert (bf.byte_offset * 8 + bf.shift, bf.bits) == (first, width), (struct, f)
            assert bf.shift + bf.bits <= bf.container and bf.container in (8, 16, 32, 64)
    signed = T.find_member(struct_type(di, "struct flags"), "delta").bitfield
    assert signed.signed


@pytest.mark.perf
@pytest.mark.parametrize("dwarf", [(), ("-gdwarf-4",)], ids=["dwarf5", "dwarf4"])
def test_bitfield_fetch_where_perf_fails(fixture_bins, perf_oracle, bitfield_truth, dwarf):
    binary = fixture_bins.path("dwarf_structs", "-O2", dwarf)
    di = fixture_bins.di("dwarf_structs", "-O2", dwarf)
    (fn,) = di.find_functions("paint")
    fl = _layout(fixture_bins)["offsetof(struct widget, fl)"]
    for f in BITFIELDS["struct flags"]:
        r = fetch_variable(di, fn, fn.entry, expr(f"w->fl.{f}"))
        m = re.fullmatch(r"\+(\d+)\(%di\)", r.fetch)
        shift, rest = r.type[1:].split("@")
        bits = int(shift)
        at, container = map(int, rest.split("/"))
        first, width = bitfield_truth[("struct flags", f)]
        assert m and (int(m.group(1)) - fl) * 8 + at == first and bits == width, (f, r)
        theirs, err = perf_oracle.definitions(binary, f"paint w->fl.{f}")
        if dwarf:
            # DWARF 4: perf takes DW_AT_bit_offset (counted from the most significant bit) as the
            # shift, which reads other bits unless the field is centred in its word.
            (_, (parg,)) = theirs[0]
            pshift = int(parg.type.split("@")[1].split("/")[0])
            assert pshift == 32 - (first % 32) - width or pshift == at, (f, parg)
            if first % 32 != 32 - (first % 32) - width:
                assert pshift != at
        else:
            assert not theirs and "Failed to get the offset" in err
    r = fetch_variable(di, *_check_bits(di), expr("pb->straddle"))
    assert r.type.startswith("b30@") and r.signed is False


def _check_bits(di):
    (fn,) = di.find_functions("check_bits")
    return fn, fn.entry


# --- -V listings ---------------------------------------------------------------------------------

VAR_POINTS = {
    "dwarf_structs": ["paint", "check_bits", "by_value", "use_globals", "vla_sum", "main", "paint:30",
                      "dwarf_structs.c:160", "vla_sum:9"],
    "dwarf_inline": ["process", "process:7", "main", "rare_path"],
    "dwarf_static": ["helper", "helper_b_entry"],
}


@pytest.mark.perf
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
@pytest.mark.parametrize("fixture", sorted(VAR_POINTS))
def test_variable_listing_matches_perf(fixture_bins, perf_oracle, fixture, opt):
    binary = fixture_bins.path(fixture, opt)
    di = fixture_bins.di(fixture, opt)
    elf = ElfFile(binary)
    for point in VAR_POINTS[fixture]:
        for externs in (False, True):
            theirs = perf_oracle.variables(binary, point, externs)
            if not theirs:
                continue  # perf could not resolve the point (a .cold function, a shared line)
            try:
                points = probe_points(di, point, with_args=False)
            except Exception as exc:  # noqa: BLE001 - a refusal perf did not make is a failure
                raise AssertionError(f"{point}: perf lists variables, probectl raised {exc!r}")
            assert len(points) == len(theirs), point
            for (address, scope), (where, pvars) in zip(points, theirs):
                func, off = where.rsplit("+", 1)
                assert address in [s.value + int(off) for s in elf.find_functions(func)], (point, where)
                mine = [(v.c_type, v.name) for v in available_variables(di, scope, address, externs)]
                for item in set(mine) ^ set(pvars):
                    # Allowed: perf's unnamed artificial variables ("(null)"), and variables whose
                    # location has several operations (perf lists them on the first one's say-so).
                    assert item[1] == "(null)" or _first_op_only(di, scope, address, item[1]), (point, item)
                assert mine == sorted(mine, key=lambda v: f"{v[0]}\t{v[1]}")
