// SPDX-License-Identifier: GPL-2.0-only
// elfsym_fuzz.c - esym_read() and esym_name() (elfsym.h) on a real symbol table and its string table,
// then on damaged copies of them: bytes changed at random, either table cut short. Every name found
// must lie in its string table and is read to its NUL; the undamaged pass prints how many entries have
// a name and how many of those names are not empty, which the test compares with the Python decoder's.
// Built by the tests with the sanitizers (tests/test_native_elfsym.py).
//
//   elfsym_fuzz INPUT ITERATIONS SEED
//
// INPUT (written by the test): u64 little-endian: 1 for a 64-bit table, 1 for big-endian, the table's
// size, the string table's size; then the two tables' bytes.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"
#include "fuzzing.h"

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

// The entries of @table (@size bytes) with a name, into *@named; those whose name is not empty, into
// *@nonempty; stops at the first name outside @strtab, as the decoder does.
static void walk(const uint8_t *table, size_t size, const uint8_t *strtab, size_t strsize, bool is64,
		 bool big_endian, size_t *named, size_t *nonempty)
{
	size_t count = size / esym_entry_size(is64), len;

	*named = *nonempty = 0;
	for (size_t i = 0; i < count; i++) {
		struct esym_entry e;

		esym_read(table, i, is64, big_endian, &e);
		touch((const uint8_t *)&e.value, sizeof(e.value));
		if (!e.name)
			continue;
		if (esym_name(strtab, strsize, e.name, &len))
			return;
		if (e.name >= strsize || len >= strsize - e.name || strtab[e.name + len])
			abort();
		touch(strtab + e.name, len + 1);
		(*named)++;
		*nonempty += len != 0;
	}
}

int main(int argc, char **argv)
{
	uint8_t head[32], *table, *strtab, *copy;
	size_t named, nonempty, size, strsize;
	unsigned long iterations;
	bool is64, big_endian;
	FILE *f;

	if (argc != 4)
		return 2;
	f = fopen(argv[1], "rb");
	if (!f || fread(head, 1, sizeof(head), f) != sizeof(head))
		return 1;
	is64 = le64(head) != 0;
	big_endian = le64(head + 8) != 0;
	size = le64(head + 16);
	strsize = le64(head + 24);
	if (size > (1 << 28) || strsize > (1 << 28))
		return 1;
	table = malloc(size + 1);
	strtab = malloc(strsize + 1);
	copy = malloc((size > strsize ? size : strsize) + 1);
	if (!table || !strtab || !copy || fread(table, 1, size, f) != size || fread(strtab, 1, strsize, f) != strsize)
		return 1;
	fclose(f);
	walk(table, size, strtab, strsize, is64, big_endian, &named, &nonempty);
	printf("named %zu nonempty %zu\n", named, nonempty);

	iterations = strtoul(argv[2], NULL, 10);
	rng_state = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ULL | 1;
	for (unsigned long it = 0; it < iterations; it++) {
		bool damage_strings = rnd() & 1;
		const uint8_t *src = damage_strings ? strtab : table;
		size_t n = damage_strings ? strsize : size;
		uint8_t *cut;

		if (!n)
			continue;
		memcpy(copy, src, n);
		for (unsigned k = 1 + rnd() % 8; k; k--)
			copy[rnd() % n] = (uint8_t)rnd();
		if (rnd() % 4 == 0)
			n = rnd() % n;
		// (a copy of exactly n bytes, so that the sanitizer sees a read past its end)
		cut = malloc(n ? n : 1);
		if (!cut)
			return 1;
		memcpy(cut, copy, n);
		if (damage_strings)
			walk(table, size, cut, n, is64, big_endian, &named, &nonempty);
		else
			walk(cut, n, strtab, strsize, is64, big_endian, &named, &nonempty);
		free(cut);
	}
	printf("ok %lu\n", iterations);
	free(copy);
	free(strtab);
	free(table);
	return 0;
}
