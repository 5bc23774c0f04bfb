// SPDX-License-Identifier: GPL-2.0-only
// dwscan_fuzz.c - dws_definitions() and dws_instances() (dwscan.h) on the units of a real file's DWARF,
// then on damaged copies of it: bytes of .debug_info and .debug_abbrev changed at random (a few, or a
// run), unit ends and abbreviation offsets moved, sections cut short. Every name given must lie in its
// section, every instance, origin and caller in its unit; the undamaged pass prints the count of
// definitions and of instances it lists, which the test compares with the Python scanner's, and finds
// the same instances in a unit's bytes alone as in the whole section. Built by the tests with the
// sanitizers (tests/test_native_dwscan.py).
//
//   dwscan_fuzz INPUT ITERATIONS SEED
//
// INPUT (written by the test): u64 little-endian counts: the unit count, then the sizes of .debug_info,
// .debug_abbrev, .debug_str, .debug_line_str, .debug_str_offsets; then per unit seven u64 (offset, end,
// DIE offset, abbrev offset, offset size, address size, version); then the five sections' bytes.

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dwscan.h"
#include "fuzzing.h"

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static const uint8_t *section_of(const struct dws_sections *sec, uint8_t where, size_t *size)
{
	switch (where) {
	case DWS_STR:
		*size = sec->str_size;
		return sec->str;
	case DWS_LINE_STR:
		*size = sec->line_str_size;
		return sec->line_str;
	default:
		*size = sec->info_size;
		return sec->info;
	}
}

static void check_name(const struct dws_sections *sec, const struct dws_name *n)
{
	const uint8_t *p;
	size_t size;

	if (n->where == DWS_NOWHERE)
		return;
	if (n->where > DWS_INFO)
		abort();
	p = section_of(sec, n->where, &size);
	if (n->offset >= size)
		abort();
	touch(p + n->offset, strnlen((const char *)p + n->offset, size - n->offset));
}

// Whether two names are both there and the same text (the glue lists such a pair once).
static bool same_text(const struct dws_sections *sec, const struct dws_name *a, const struct dws_name *b)
{
	const uint8_t *pa, *pb;
	size_t sa, sb, la, lb;

	if (a->where == DWS_NOWHERE || b->where == DWS_NOWHERE)
		return false;
	pa = section_of(sec, a->where, &sa) + a->offset;
	pb = section_of(sec, b->where, &sb) + b->offset;
	la = strnlen((const char *)pa, sa - a->offset);
	lb = strnlen((const char *)pb, sb - b->offset);
	return la == lb && !memcmp(pa, pb, la);
}

// The definitions of every unit; their count (units given up count nothing).
static size_t run(struct dws_scan *s, const struct dws_sections *sec, const struct dws_unit *units, size_t nunits,
		  size_t *given_up)
{
	size_t total = 0;

	for (size_t i = 0; i < nunits; i++) {
		const struct dws_definition *defs;
		size_t count;
		int err = dws_definitions(s, sec, &units[i], &defs, &count);

		if (err < 0)
			abort();	// (no memory: not expected here)
		if (err == DWS_UNSUPPORTED) {
			(*given_up)++;
			continue;
		}
		for (size_t k = 0; k < count; k++) {
			if (defs[k].name.where == DWS_NOWHERE && defs[k].linkage.where == DWS_NOWHERE)
				abort();
			if (defs[k].die_offset < units[i].die_offset || defs[k].die_offset >= units[i].end)
				abort();
			check_name(sec, &defs[k].name);
			check_name(sec, &defs[k].linkage);
			total += (defs[k].name.where != DWS_NOWHERE) + (defs[k].linkage.where != DWS_NOWHERE) -
				 same_text(sec, &defs[k].name, &defs[k].linkage);
		}
	}
	return total;
}

// A copy of @n bytes at @p in a buffer of its own (so the sanitizers see any read past its end).
static uint8_t *copy(const uint8_t *p, size_t n)
{
	uint8_t *c = malloc(n ? n : 1);

	if (!c)
		abort();
	memcpy(c, p, n);
	return c;
}

// The instances of unit @u (dws_instances) in @sec's positions, each checked to lie in the unit, an
// inline instance's caller before it; their count (a unit given up counts nothing).
static size_t instances(struct dws_scan *s, const struct dws_sections *sec, const struct dws_unit *u,
			uint64_t unit_base, const struct dws_instance **found, size_t *given_up)
{
	size_t count;
	int err = dws_instances(s, sec, u, unit_base, found, &count);

	if (err < 0)
		abort();
	if (err == DWS_UNSUPPORTED) {
		(*given_up)++;
		return 0;
	}
	for (size_t k = 0; k < count; k++) {
		const struct dws_instance *in = &(*found)[k];

		if (in->die_offset < u->die_offset || in->die_offset >= u->end || in->origin < u->offset ||
		    in->origin >= u->end)
			abort();
		if (in->caller != DWS_NO_CALLER && (in->caller < u->die_offset || in->caller >= in->die_offset))
			abort();
		touch(sec->info + in->die_offset, 1);
	}
	return count;
}

// The instances of every unit, each also found in a copy of the unit's bytes alone (positions from 0,
// ref_addr origins relative to the unit's offset) the same; their count.
static size_t run_instances(struct dws_scan *s, struct dws_scan *alone, const struct dws_sections *sec,
			    const struct dws_unit *units, size_t nunits, size_t *given_up)
{
	size_t total = 0;

	for (size_t i = 0; i < nunits; i++) {
		const struct dws_unit *u = &units[i];
		const struct dws_instance *found, *found_alone;
		size_t whole_given_up = 0, alone_given_up = 0, count_alone;
		size_t count = instances(s, sec, u, 0, &found, &whole_given_up);
		struct dws_sections own = *sec;
		struct dws_unit unit = *u;
		uint8_t *bytes;

		total += count;
		*given_up += whole_given_up;
		if (u->end > sec->info_size || u->offset > u->die_offset || u->die_offset >= u->end)
			continue;
		bytes = copy(sec->info + u->offset, u->end - u->offset);
		own.info = bytes;
		own.info_size = u->end - u->offset;
		unit.offset = 0;
		unit.end -= u->offset;
		unit.die_offset -= u->offset;
		count_alone = instances(alone, &own, &unit, u->offset, &found_alone, &alone_given_up);
		if (count_alone != count || alone_given_up != whole_given_up)
			abort();
		for (size_t k = 0; k < count; k++)
			if (found_alone[k].origin + u->offset != found[k].origin ||
			    found_alone[k].die_offset + u->offset != found[k].die_offset ||
			    (found[k].caller == DWS_NO_CALLER ? found_alone[k].caller != DWS_NO_CALLER :
			     found_alone[k].caller + u->offset != found[k].caller))
				abort();
		free(bytes);
	}
	return total;
}

int main(int argc, char **argv)
{
	uint8_t *input, *sections[5];
	size_t len, sizes[5], nunits;
	struct dws_unit *units, *damaged_units;
	struct dws_sections sec;
	struct dws_scan *s, *alone;
	size_t given_up = 0, instances_given_up = 0, total, total_instances;
	long iterations;
	FILE *f;

	if (argc != 4)
		return 2;
	f = fopen(argv[1], "rb");
	if (!f)
		return 2;
	fseek(f, 0, SEEK_END);
	len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	input = malloc(len);
	if (!input || fread(input, 1, len, f) != len)
		return 2;
	fclose(f);
	iterations = atol(argv[2]);
	rng_state = (uint64_t)atoll(argv[3]) * 0x9E3779B97F4A7C15ULL | 1;

	nunits = le64(input);
	size_t pos = 8 * 6 + 56 * nunits;

	if (len < 48 || nunits > len / 56)
		return 2;
	units = calloc(nunits ? nunits : 1, sizeof(*units));
	damaged_units = calloc(nunits ? nunits : 1, sizeof(*units));
	if (!units || !damaged_units)
		return 2;
	for (size_t i = 0; i < nunits; i++) {
		const uint8_t *u = input + 48 + 56 * i;

		units[i] = (struct dws_unit){ .offset = le64(u), .end = le64(u + 8), .die_offset = le64(u + 16),
					      .abbrev_offset = le64(u + 24), .offset_size = (uint8_t)le64(u + 32),
					      .address_size = (uint8_t)le64(u + 40), .version = (uint16_t)le64(u + 48) };
	}
	for (int k = 0; k < 5; k++) {
		sizes[k] = le64(input + 8 + 8 * k);
		if (sizes[k] > len - pos)
			return 2;
		sections[k] = copy(input + pos, sizes[k]);
		pos += sizes[k];
	}
	sec = (struct dws_sections){ sections[0], sizes[0], sections[1], sizes[1], sections[2], sizes[2],
				     sections[3], sizes[3], sections[4], sizes[4] };
	s = dws_scan_new();
	alone = dws_scan_new();
	if (!s || !alone)
		return 2;
	total = run(s, &sec, units, nunits, &given_up);
	total_instances = run_instances(s, alone, &sec, units, nunits, &instances_given_up);
	printf("definitions %zu given up %zu\n", total, given_up);
	printf("instances %zu given up %zu\n", total_instances, instances_given_up);

	for (long it = 0; it < iterations && nunits; it++) {
		size_t info_size = sizes[0], abbrev_size = sizes[1];
		uint8_t *info, *abbrev;

		if (rnd() % 8 == 0)
			info_size = rnd() % (info_size + 1);
		if (rnd() % 8 == 0)
			abbrev_size = rnd() % (abbrev_size + 1);
		info = copy(sections[0], info_size);
		abbrev = copy(sections[1], abbrev_size);
		for (int n = 1 + (int)(rnd() % 8); n-- && info_size;)
			info[rnd() % info_size] = (uint8_t)rnd();
		if (abbrev_size && rnd() % 2)
			for (int n = 1 + (int)(rnd() % 4); n--;)
				abbrev[rnd() % abbrev_size] = (uint8_t)rnd();
		if (info_size && rnd() % 4 == 0) {	// a run of one byte (0, 0xff: codes and lengths)
			size_t at = rnd() % info_size, run_len = 1 + rnd() % 64;

			memset(info + at, rnd() % 2 ? 0xff : 0, run_len < info_size - at ? run_len : info_size - at);
		}
		memcpy(damaged_units, units, nunits * sizeof(*units));
		if (rnd() % 4 == 0) {
			struct dws_unit *u = &damaged_units[rnd() % nunits];

			switch (rnd() % 4) {
			case 0:
				u->end = rnd() % (sizes[0] + 64);
				break;
			case 1:
				u->abbrev_offset = rnd() % (sizes[1] + 16);
				break;
			case 2:
				u->die_offset = u->offset + rnd() % 64;
				break;
			default:
				u->version = (uint16_t)(2 + rnd() % 4);
				u->offset_size = rnd() % 2 ? 4 : 8;
				break;
			}
		}
		struct dws_sections damaged = sec;

		damaged.info = info;
		damaged.info_size = info_size;
		damaged.abbrev = abbrev;
		damaged.abbrev_size = abbrev_size;
		given_up = 0;
		run(s, &damaged, damaged_units, nunits, &given_up);
		run_instances(s, alone, &damaged, damaged_units, nunits, &given_up);
		free(info);
		free(abbrev);
	}
	printf("ok %ld\n", iterations);
	dws_scan_free(s);
	dws_scan_free(alone);
	for (int k = 0; k < 5; k++)
		free(sections[k]);
	free(units);
	free(damaged_units);
	free(input);
	return 0;
}
