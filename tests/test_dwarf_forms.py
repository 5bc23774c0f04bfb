"""The plain-Python form readers (debuginfo/forms.py) against pyelftools' own ``construct`` parsers.

They replace pyelftools' parsers for speed only, so every test is differential: the same bytes,
abbreviation tables and whole compilation units read both ways must give the same values, the
same stream positions and the same errors.
"""
from __future__ import annotations

import io
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from elftools.construct import ConstructError
from elftools.dwarf.abbrevtable import AbbrevTable
from elftools.dwarf.structs import DWARFStructs
from hypothesis import given, settings
from hypothesis import strategies as st

from probectl.debuginfo.dwarf import DebugInfo
from probectl.debuginfo.dwarf.forms import DIEStructs, die_structs, form_readers, read_abbrev_table
from probectl.errors import DebugInfoError

from conftest import build_fixture, kernel_testdata_dir

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
STRUCTS = [DWARFStructs(little_endian=le, dwarf_format=fmt, address_size=addr, dwarf_version=version)
           for le in (True, False) for fmt in (32, 64) for addr in (4, 8) for version in (2, 4, 5)]


def _parse(reader, data: bytes):
    """(value, bytes consumed) or the ConstructError class raised."""
    stream = io.BytesIO(data)
    try:
        value = reader.parse_stream(stream)
    except ConstructError:
        return "error"
    return value, stream.tell()


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=24), which=st.integers(min_value=0, max_value=len(STRUCTS) - 1))
def test_scalar_forms_read_like_pyelftools(data, which):
    structs = STRUCTS[which]
    for form, reader in form_readers(structs).items():
        reference = structs.Dwarf_dw_form.get(form)
        if reference is None:
            continue
        assert _parse(reader, data) == _parse(reference, data), form


@pytest.mark.parametrize("data", [b"\x80\x80\x80\x01", b"\xff\xff\xff\xff\x0f", b"\x7f", b"\x80\x7f", b"\x80",
                                  b"\xc0\xbb\x78", b"abc\0def", b"\0", b"no terminator"])
def test_leb128_and_strings_at_the_edges(data):
    structs = STRUCTS[1]
    for form in ("DW_FORM_udata", "DW_FORM_sdata", "DW_FORM_string"):
        assert _parse(form_readers(structs)[form], data) == _parse(structs.Dwarf_dw_form[form], data), form


def test_die_structs_leave_the_shared_structs_alone():
    structs = STRUCTS[3]
    before = dict(structs.Dwarf_dw_form)
    fast = die_structs(structs)
    assert isinstance(fast, DIEStructs) and die_structs(structs) is fast and die_structs(fast) is fast
    assert structs.Dwarf_dw_form == before
    # Lists (blocks) and what pyelftools builds parsers from stay pyelftools' own.
    assert fast.Dwarf_dw_form["DW_FORM_exprloc"] is structs.Dwarf_dw_form["DW_FORM_exprloc"]
    assert fast.Dwarf_lineprog_header is structs.Dwarf_lineprog_header


def _abbrev_rows(table) -> dict:
    return {code: (decl["tag"], decl.has_children(),
                   [(s.name, s.form, getattr(s, "value", None)) for s in decl["attr_spec"]],
                   list(decl.iter_attr_specs()))
            for code, decl in table._abbrev_map.items()}


def _debug_files() -> list[tuple[Path, int]]:
    """(file, about how many of its DIEs to read, in whole CUs): fixtures at DWARF 5 and 4, libc's separate debug
    file (libc6-dbg) and the cloud kernel's vmlinux, where there are."""
    files = [(build_fixture("dwarf_structs", "-O2"), 10**6), (build_fixture("dwarf_inline", "-O2", ("-gdwarf-4",)), 10**6)]
    try:
        files.append((Path(DebugInfo.open(LIBC).path), 20000))
    except DebugInfoError:
        pass
    kernel = kernel_testdata_dir()
    if kernel is not None:
        files.append((kernel / "vmlinux", 20000))
    return files


def test_abbreviation_tables_read_like_pyelftools():
    for path, _count in _debug_files():
        di = DebugInfo(path)
        offsets = sorted({cu["debug_abbrev_offset"] for cu in itertools.islice(di.dwarf.iter_CUs(), 50)})
        sec = di.dwarf.debug_abbrev_sec
        for offset in offsets:
            ours = read_abbrev_table(di.dwarf.structs, sec.stream, offset)
            theirs = AbbrevTable(di.dwarf.structs, sec.stream, offset)
            assert _abbrev_rows(ours) == _abbrev_rows(theirs), (path, offset)


def test_truncated_abbreviation_table_is_an_error():
    structs = STRUCTS[1]
    with pytest.raises(ConstructError):
        read_abbrev_table(structs, io.BytesIO(b"\x01\x11\x01\x03"), 0)  # ends inside an attribute spec
    with pytest.raises(ConstructError):
        read_abbrev_table(structs, io.BytesIO(b"\x01\x11\x07\0\0\0"), 0)  # children flag 7


# Every DIE of a file, as (offset, tag, size, attributes), read by a fresh interpreter — with the
# readers, or with them turned off — so the two runs share no pyelftools state.
_DUMP = """
import json, sys
from probectl.debuginfo import dwarf
from probectl.debuginfo.dwarf import forms
if sys.argv[2] == "plain":
    forms.accelerate = lambda dwarfinfo: None
    dwarf.accelerate = forms.accelerate
di = dwarf.DebugInfo(sys.argv[1])
out = []
limit = int(sys.argv[3])
for cu in di.dwarf.iter_CUs():
    if len(out) >= limit:
        break
    for die in cu.iter_DIEs():
        attrs = [(a.name, a.form, repr(a.value), repr(a.raw_value), a.offset) for a in die.attributes.values()]
        out.append((die.offset, die.tag, die.size, die.has_children, attrs))
print(json.dumps(out))
"""


def _dump(path: Path, mode: str, limit: int) -> list:
    out = subprocess.run([sys.executable, "-c", _DUMP, str(path), mode, str(limit)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_every_die_reads_like_pyelftools():
    for path, count in _debug_files():
        plain, fast = _dump(path, "plain", count), _dump(path, "fast", count)
        assert len(plain) > 100, path
        assert fast == plain, path
