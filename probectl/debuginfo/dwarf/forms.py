"""How each DWARF attribute form is encoded in a DIE (DWARF 5, 7.5.6, and the GNU forms gcc and dwz
emit): how many bytes it takes, which are LEB128 numbers, which are blocks after a length, which
refer into the unit or index a table.

Both DIE readers decode forms, each for its own purpose: the byte scanner that builds the indexes
(:mod:`.diescan`: skip fast, take a few attributes) and the reader of whole DIEs (:mod:`.units`).
The facts they share are here, once; their names for the forms are :data:`.names.FORM`.
"""
from __future__ import annotations

FORM_ADDR = 0x01
FORM_DATA4 = 0x06
FORM_DATA8 = 0x07
FORM_STRING = 0x08
FORM_BLOCK = 0x09
FORM_FLAG = 0x0C
FORM_SDATA = 0x0D
FORM_STRP = 0x0E
FORM_REF_ADDR = 0x10
FORM_REF_UDATA = 0x15
FORM_INDIRECT = 0x16
FORM_SEC_OFFSET = 0x17
FORM_EXPRLOC = 0x18
FORM_FLAG_PRESENT = 0x19
FORM_STRX = 0x1A
FORM_DATA16 = 0x1E
FORM_LINE_STRP = 0x1F
FORM_IMPLICIT_CONST = 0x21
FORM_LOCLISTX = 0x22
FORM_RNGLISTX = 0x23

# The forms of one size in every unit (flag_present and implicit_const take no bytes: the value is in
# the abbreviation).
CONSTANT_SIZE: dict[int, int] = {
    0x0B: 1, 0x11: 1, 0x0C: 1, 0x25: 1, 0x29: 1,  # data1 ref1 flag strx1 addrx1
    0x05: 2, 0x12: 2, 0x26: 2, 0x2A: 2,  # data2 ref2 strx2 addrx2
    0x27: 3, 0x2B: 3,  # strx3 addrx3
    0x06: 4, 0x13: 4, 0x28: 4, 0x2C: 4, 0x1C: 4,  # data4 ref4 strx4 addrx4 ref_sup4
    0x07: 8, 0x14: 8, 0x20: 8, 0x24: 8,  # data8 ref8 ref_sig8 ref_sup8
    0x1E: 16,  # data16
    0x19: 0, 0x21: 0,  # flag_present implicit_const
}
# The forms of the unit's offset size (4 bytes in 32-bit DWARF, 8 in 64-bit): strp line_strp
# sec_offset ref_addr strp_sup GNU_ref_alt GNU_strp_alt. (ref_addr is address-sized in DWARF 2.)
OFFSET_SIZED = frozenset({0x0E, 0x1F, 0x17, 0x10, 0x1D, 0x1F20, 0x1F21})
# Unsigned LEB128: udata ref_udata strx addrx loclistx rnglistx GNU_addr_index GNU_str_index.
ULEB128 = frozenset({0x0F, 0x15, 0x1A, 0x1B, 0x22, 0x23, 0x1F01, 0x1F02})
LEB128 = ULEB128 | {FORM_SDATA}
# Blocks after a length of a fixed size: block1 block2 block4 (block and exprloc: a ULEB128 length).
BLOCK_LENGTH_SIZE: dict[int, int] = {0x0A: 1, 0x03: 2, 0x04: 4}
# References within the unit, as an offset from its start: ref1 ref2 ref4 ref8 (and ref_udata).
UNIT_REF_SIZE: dict[int, int] = {0x11: 1, 0x12: 2, 0x13: 4, 0x14: 8}
UNIT_REFS = frozenset(UNIT_REF_SIZE) | {FORM_REF_UDATA}
# Indexes into the unit's tables of string offsets and of addresses.
STRX_SIZE: dict[int, int] = {0x25: 1, 0x26: 2, 0x27: 3, 0x28: 4}
STRX = frozenset(STRX_SIZE) | {FORM_STRX, 0x1F02}
ADDRX = frozenset({0x1B, 0x29, 0x2A, 0x2B, 0x2C, 0x1F01})


def fixed_sizes(offset_size: int, address_size: int, version: int) -> dict[int, int]:
    """form → size in bytes of every form whose size a unit of these sizes and version fixes."""
    sizes = dict(CONSTANT_SIZE)
    sizes.update(dict.fromkeys(OFFSET_SIZED, offset_size))
    sizes[FORM_ADDR] = address_size
    if version <= 2:
        sizes[FORM_REF_ADDR] = address_size
    return sizes
