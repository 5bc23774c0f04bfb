// SPDX-License-Identifier: GPL-2.0-only
// demangle_fuzz.c - dmg_demangler(), dmg_demangle() and dmg_signature_start() (demangle.h) on a list of
// names, then on damaged copies of them: bytes changed at random, cut short, bytes of another name
// spliced in. Every text given back is read to its end, its signature found (in the text) and read, and
// the text freed; the damaged names are also taken as demangled texts themselves. The undamaged pass
// prints how many names were demangled and the sum of where their signatures start, which the test
// compares with the ctypes call and demangle.signature. Built by the tests with the sanitizers
// (tests/test_native_demangle.py).
//
//   demangle_fuzz INPUT ITERATIONS SEED
//
// INPUT (written by the test): the names, each ended by a NUL.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "fuzzing.h"

// Where the signature of @text starts (read from there to its end).
static size_t signature_of(const char *text)
{
	size_t len = strlen(text), at = dmg_signature_start(text, len);

	if (at > len)
		abort();
	touch((const uint8_t *)text + at, len - at);
	return at;
}

// Whether @name was demangled; *@starts grows by where the signature of its text starts.
static size_t demangle_one(dmg_cxa_demangle_fn *fn, const char *name, size_t *starts)
{
	char *out = dmg_demangle(fn, name);

	if (!out)
		return 0;
	touch((const uint8_t *)out, strlen(out) + 1);
	*starts += signature_of(out);
	free(out);
	return 1;
}

int main(int argc, char **argv)
{
	dmg_cxa_demangle_fn *fn;
	size_t size = 0, cap = 1 << 16, count = 0, demangled = 0, max_len = 0, starts = 0, ignored = 0;
	char *data, **names, *copy;
	unsigned long iterations;
	FILE *f;

	if (argc != 4)
		return 2;
	fn = dmg_demangler();
	if (!fn || dmg_demangler() != fn) {
		fprintf(stderr, "no __cxa_demangle\n");
		return 1;
	}
	f = fopen(argv[1], "rb");
	if (!f)
		return 1;
	data = malloc(cap + 1);
	for (size_t got; data && (got = fread(data + size, 1, cap - size, f)) > 0;) {
		size += got;
		if (size == cap) {
			cap *= 2;
			char *grown = realloc(data, cap + 1);

			if (!grown)
				free(data);
			data = grown;
		}
	}
	fclose(f);
	if (!data)
		return 1;
	data[size] = 0;
	for (size_t i = 0; i < size; i++)
		count += data[i] == 0;
	names = calloc(count + 1, sizeof(*names));
	if (!names)
		return 1;
	count = 0;
	for (size_t i = 0; i < size; i += strlen(data + i) + 1) {
		names[count++] = data + i;
		if (strlen(data + i) > max_len)
			max_len = strlen(data + i);
	}
	for (size_t i = 0; i < count; i++)
		demangled += demangle_one(fn, names[i], &starts);
	printf("names %zu demangled %zu signatures %zu\n", count, demangled, starts);

	iterations = strtoul(argv[2], NULL, 10);
	rng_state = strtoull(argv[3], NULL, 10) * 0x9E3779B97F4A7C15ULL | 1;
	copy = malloc(2 * max_len + 2);
	if (!copy || !count)
		return 1;
	for (unsigned long it = 0; it < iterations; it++) {
		const char *name = names[rnd() % count], *other = names[rnd() % count];
		size_t len = strlen(name), olen = strlen(other), at;

		memcpy(copy, name, len + 1);
		switch (rnd() % 4) {
		case 0:	// a few bytes changed, any byte but NUL
			for (unsigned k = 1 + rnd() % 4; k && len; k--)
				copy[rnd() % len] = (char)(1 + rnd() % 255);
			break;
		case 1:	// cut short
			copy[len ? rnd() % len : 0] = 0;
			break;
		case 2:	// the tail of another name spliced in
			at = len ? rnd() % len : 0;
			strcpy(copy + at, other + (olen ? rnd() % olen : 0));
			break;
		default: // a byte changed to a substitution or template mark, or a bracket of a demangled text
			if (len)
				copy[rnd() % len] = "SIEKT_0123456789()<> []"[rnd() % 23];
			break;
		}
		demangle_one(fn, copy, &ignored);
		signature_of(copy);
	}
	printf("ok %lu\n", iterations);
	free(copy);
	free(names);
	free(data);
	return 0;
}
