// SPDX-License-Identifier: GPL-2.0-only
// elfsym.c - ELF symbol table entries and their names (elfsym.h).

#include <string.h>

#include "elfsym.h"

size_t esym_entry_size(bool is64)
{
	return is64 ? 24 : 16;
}

static uint64_t get(const uint8_t *p, unsigned n, bool big_endian)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[big_endian ? n - 1 - i : i] << (8 * i);
	return v;
}

void esym_read(const uint8_t *table, size_t index, bool is64, bool big_endian, struct esym_entry *e)
{
	const uint8_t *p = table + index * esym_entry_size(is64);

	e->name = (uint32_t)get(p, 4, big_endian);
	if (is64) {	// name:4 info:1 other:1 shndx:2 value:8 size:8
		e->info = p[4];
		e->other = p[5];
		e->shndx = (uint16_t)get(p + 6, 2, big_endian);
		e->value = get(p + 8, 8, big_endian);
		e->size = get(p + 16, 8, big_endian);
	} else {	// name:4 value:4 size:4 info:1 other:1 shndx:2
		e->value = get(p + 4, 4, big_endian);
		e->size = get(p + 8, 4, big_endian);
		e->info = p[12];
		e->other = p[13];
		e->shndx = (uint16_t)get(p + 14, 2, big_endian);
	}
}

int esym_name(const uint8_t *strtab, size_t size, uint32_t offset, size_t *len)
{
	const uint8_t *nul;

	if (offset >= size)
		return -1;
	nul = memchr(strtab + offset, 0, size - offset);
	if (!nul)
		return -1;
	*len = (size_t)(nul - (strtab + offset));
	return 0;
}
