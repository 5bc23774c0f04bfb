/* SPDX-License-Identifier: GPL-2.0-only */
// elfsym.h - the entries of an ELF symbol table (.symtab, .dynsym) read from its bytes, and their names
// found in its string table: what probectl/debuginfo/symtab.py's decoder of a whole table reads for
// each of its entries (a large C++ library's two tables hold 19,000).
#ifndef PROBECTL_ELFSYM_H
#define PROBECTL_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// One entry, its fields in the host's byte order.
struct esym_entry {
	uint32_t name;		// offset in the string table
	uint8_t info;		// type (low 4 bits) and binding (high 4 bits)
	uint8_t other;
	uint16_t shndx;
	uint64_t value;
	uint64_t size;
};

// The size of an entry: 24 bytes in a 64-bit file, 16 in a 32-bit one.
size_t esym_entry_size(bool is64);

// Entry @index of the table @table (at least (@index + 1) entries long) into *@e.
void esym_read(const uint8_t *table, size_t index, bool is64, bool big_endian, struct esym_entry *e);

// The name at @offset of the string table @strtab (@size bytes): its length into *@len; 0, or -1 when
// it does not lie in the table (at or past its end, or without a NUL before its end).
int esym_name(const uint8_t *strtab, size_t size, uint32_t offset, size_t *len);

#endif
