/* SPDX-License-Identifier: GPL-2.0-only */
// dwscan.h - the definitions of one DWARF unit listed from its bytes, for the name index; its inline
// instances by their abstract origin.
//
// probectl's name index (probectl/debuginfo/dwarf/dieindex.py:build_indexes) lists every function and
// variable defined at a unit's top level, in its namespaces and modules (and, in a Rust unit, its
// types), under its name and its linkage name, taken from its abstract origin or specification when
// it has none. Its byte scanner (diescan.py:CUScanner.scan and dieindex.py:_names) is the reference;
// this does the same work without a Python step per DIE. It takes only the shapes of DWARF it can
// answer exactly as the reference does: any other (a form it does not read, an indirect form, a
// reference into another unit, a name that is not a string, damaged bytes) makes it give the unit up
// (DWS_UNSUPPORTED), and the caller reads that unit with the reference scanner.
#ifndef PROBECTL_DWSCAN_H
#define PROBECTL_DWSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The sections a unit's names are read from (absent ones empty).
struct dws_sections {
	const uint8_t *info;		// all of .debug_info: positions are section offsets
	size_t info_size;
	const uint8_t *abbrev;
	size_t abbrev_size;
	const uint8_t *str;
	size_t str_size;
	const uint8_t *line_str;
	size_t line_str_size;
	const uint8_t *str_offsets;
	size_t str_offsets_size;
};

// One compilation or partial unit, as dieindex.read_unit_headers gives it.
struct dws_unit {
	uint64_t offset;		// of its header
	uint64_t end;			// of its last byte + 1
	uint64_t die_offset;		// of its unit DIE
	uint64_t abbrev_offset;
	uint8_t offset_size;		// 4 or 8
	uint8_t address_size;
	uint16_t version;
};

// Where a name's bytes are: a string ending with a NUL (or the section's end) at .offset of a section.
enum dws_where { DWS_NOWHERE, DWS_STR, DWS_LINE_STR, DWS_INFO };

struct dws_name {
	uint8_t where;			// enum dws_where; DWS_NOWHERE: no name (or an empty one)
	uint64_t offset;
};

// One definition, under its name and its linkage name (either may be absent; the same string twice
// is given once, as name).
struct dws_definition {
	uint64_t die_offset;		// section offset
	bool is_function;
	struct dws_name name, linkage;
};

struct dws_scan;

struct dws_scan *dws_scan_new(void);
void dws_scan_free(struct dws_scan *s);

// One subprogram or inline instance with code whose abstract origin is in its unit (dws_instances).
struct dws_instance {
	uint64_t origin;		// the origin's offset
	uint64_t die_offset;
	uint64_t caller;		// an inline instance's nearest enclosing DIE with code, else DWS_NO_CALLER
};

#define DWS_NO_CALLER	UINT64_MAX

#define DWS_UNSUPPORTED	1

/**
 * dws_definitions - the definitions of unit @u, in DIE order
 * @defs: set to the scan's array of them (valid until the next call with @s); *@count how many
 *
 * Returns 0, DWS_UNSUPPORTED when the unit must be read by the reference scanner, or -1 (no memory).
 */
int dws_definitions(struct dws_scan *s, const struct dws_sections *sec, const struct dws_unit *u,
		    const struct dws_definition **defs, size_t *count);

/**
 * dws_instances - the subprograms and inline instances with code of unit @u, in DIE order, each with
 *	the abstract origin it is an instance of, when that is in @u (diescan.py:CUScanner.instances_by_origin)
 * @unit_base: what a DW_FORM_ref_addr origin (a section offset) must lose to be a position of
 *	@sec->info: 0 when it holds the whole section, the unit's section offset when it holds the unit alone
 *	(@u's positions then start at 0)
 * @found: set to the scan's array of them (valid until the next call with @s); *@count how many
 *
 * Offsets are positions of @sec->info. Returns 0, DWS_UNSUPPORTED when the unit must be read by the
 * reference scanner, or -1 (no memory).
 */
int dws_instances(struct dws_scan *s, const struct dws_sections *sec, const struct dws_unit *u, uint64_t unit_base,
		  const struct dws_instance **found, size_t *count);

#endif // PROBECTL_DWSCAN_H
