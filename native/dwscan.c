// SPDX-License-Identifier: GPL-2.0-only
// dwscan.c - the definitions of one DWARF unit listed from its bytes, and its inline instances by
// their abstract origin (see dwscan.h).
//
// Each step is the reference's (probectl/debuginfo/dwarf/diescan.py and dieindex.py), named after
// it: compiled_table, walk, the index visit, and _names with its two ways of finding a name: among
// the DIEs the walk took ("seen", whose names are read as the scanner reads them), else from the
// DIE itself, as die_name and die_linkage_name read a whole DIE. Where the reference would take a
// path this does not model, the unit is given up (DWS_UNSUPPORTED) rather than answered otherwise.

#include <stdlib.h>
#include <string.h>

#include "dwscan.h"

#define TAG_SUBPROGRAM		0x2e
#define TAG_VARIABLE		0x34
#define TAG_NAMESPACE		0x39
#define TAG_MODULE		0x1e
#define TAG_STRUCTURE_TYPE	0x13
#define TAG_UNION_TYPE		0x17
#define TAG_CLASS_TYPE		0x02
#define TAG_INLINED_SUBROUTINE	0x1d
#define TAG_LEXICAL_BLOCK	0x0b

#define AT_SIBLING		0x01
#define AT_LOCATION		0x02
#define AT_NAME			0x03
#define AT_LOW_PC		0x11
#define AT_LANGUAGE		0x13
#define AT_INLINE		0x20
#define AT_ABSTRACT_ORIGIN	0x31
#define AT_DECLARATION		0x3c
#define AT_EXTERNAL		0x3f
#define AT_SPECIFICATION	0x47
#define AT_ENTRY_PC		0x52
#define AT_RANGES		0x55
#define AT_LINKAGE_NAME		0x6e
#define AT_STR_OFFSETS_BASE	0x72
#define AT_MIPS_LINKAGE_NAME	0x2007

#define FORM_ADDR		0x01
#define FORM_BLOCK2		0x03
#define FORM_BLOCK4		0x04
#define FORM_STRING		0x08
#define FORM_BLOCK		0x09
#define FORM_BLOCK1		0x0a
#define FORM_FLAG		0x0c
#define FORM_SDATA		0x0d
#define FORM_STRP		0x0e
#define FORM_UDATA		0x0f
#define FORM_REF_ADDR		0x10
#define FORM_REF1		0x11
#define FORM_REF2		0x12
#define FORM_REF4		0x13
#define FORM_REF8		0x14
#define FORM_REF_UDATA		0x15
#define FORM_INDIRECT		0x16
#define FORM_SEC_OFFSET		0x17
#define FORM_EXPRLOC		0x18
#define FORM_FLAG_PRESENT	0x19
#define FORM_STRX		0x1a
#define FORM_LINE_STRP		0x1f
#define FORM_IMPLICIT_CONST	0x21
#define FORM_STRX1		0x25
#define FORM_STRX4		0x28

#define DW_LANG_RUST		0x1c

// _names follows at most this many DIEs of the walk, die_attr this many DIEs of a chain.
#define SEEN_HOPS		9
#define DIE_HOPS		8
// Abbreviation codes up to this are kept in a table indexed by code; a larger one gives the unit up.
#define MAX_CODE		(1u << 16)

struct spec {
	uint32_t attr, form;
	int64_t implicit;
};

struct abbrev {
	uint32_t tag;
	bool present, children;
	uint32_t first, nspecs;		// in dws_scan.specs
	int64_t fixed;			// the size of its attributes when every form has one, else -1
	int64_t sib_at;			// where a fixed-size DW_AT_sibling is among them, else -1
	uint8_t sib_size;
};

// A reference an abstract origin or specification holds.
enum ref_kind { REF_NONE, REF_UNIT, REF_ADDR };

struct ref {
	uint8_t kind;			// enum ref_kind
	uint64_t offset;		// section offset
};

// The attributes the index reads of a DIE (diescan.py's read_die with want, die_attr's).
struct attrs {
	bool has_name, has_linkage, has_mips;
	struct dws_name name, linkage, mips;
	struct ref origin, specification;
	bool declaration, location, external;
	bool code;		// an address, ranges or DW_AT_inline (diescan.py:CODE_ATTRS)
	bool has_sibling;
	uint64_t sibling;
};

// A function or variable DIE the walk took: what _names reads of it.
struct seen {
	uint64_t offset;
	struct dws_name name, linkage;
	struct ref origin;
};

struct record {
	uint64_t offset;
	bool is_function;
};

struct dws_scan {
	struct spec *specs;
	size_t nspecs, specs_cap;
	struct abbrev *abbrevs;		// by code
	size_t abbrevs_cap;
	bool table_ready;
	uint64_t table_key[4];		// abbrev offset, offset size, address size, version of the table
	struct seen *seen;
	size_t nseen, seen_cap;
	struct record *records;
	size_t nrecords, records_cap;
	struct dws_definition *defs;
	size_t ndefs, defs_cap;
	struct dws_instance *instances;
	size_t ninstances, instances_cap;
	uint64_t *callers;		// dws_instances' caller before each open DIE whose children it walks
	size_t callers_cap;
};

// One unit's reading.
struct ctx {
	struct dws_scan *s;
	const struct dws_sections *sec;
	const struct dws_unit *u;
	const uint8_t *info;
	bool rust;			// a Rust unit: its types are scopes too
	bool has_str_offsets_base;
	uint64_t str_offsets_base;
};

static int grow(void **v, size_t *cap, size_t want, size_t size)
{
	size_t n = *cap ? *cap : 64;
	void *more;

	if (want <= *cap)
		return 0;
	while (n < want)
		n *= 2;
	more = realloc(*v, n * size);
	if (!more)
		return -1;
	*v = more;
	*cap = n;
	return 0;
}

struct dws_scan *dws_scan_new(void)
{
	return calloc(1, sizeof(struct dws_scan));
}

void dws_scan_free(struct dws_scan *s)
{
	if (!s)
		return;
	free(s->specs);
	free(s->abbrevs);
	free(s->seen);
	free(s->records);
	free(s->defs);
	free(s->instances);
	free(s->callers);
	free(s);
}

// ---- numbers ---------------------------------------------------------------------------------

static int read_uleb(const uint8_t *p, uint64_t end, uint64_t *pos, uint64_t *ret)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	for (;;) {
		uint8_t b;

		if (*pos >= end)
			return DWS_UNSUPPORTED;
		b = p[(*pos)++];
		if (shift >= 64 || (shift == 63 && (b & 0x7f) > 1))
			return DWS_UNSUPPORTED;	// (more than 64 bits: the reference's numbers are unbounded)
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80))
			break;
	}
	*ret = v;
	return 0;
}

// A LEB128 number passed over, whatever its length.
static int skip_leb(const uint8_t *p, uint64_t end, uint64_t *pos)
{
	while (*pos < end)
		if (!(p[(*pos)++] & 0x80))
			return 0;
	return DWS_UNSUPPORTED;
}

static int read_sleb(const uint8_t *p, uint64_t end, uint64_t *pos, int64_t *ret)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (*pos >= end || shift >= 63)
			return DWS_UNSUPPORTED;
		b = p[(*pos)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	*ret = (int64_t)v;
	return 0;
}

// A little-endian number of @n bytes at @pos of the unit.
static int read_le(const struct ctx *c, uint64_t pos, unsigned int n, uint64_t *ret)
{
	uint64_t v = 0;

	if (pos > c->u->end || n > c->u->end - pos)
		return DWS_UNSUPPORTED;
	for (unsigned int i = 0; i < n; i++)
		v |= (uint64_t)c->info[pos + i] << (8 * i);
	*ret = v;
	return 0;
}

// ---- forms -----------------------------------------------------------------------------------

// The size of a form every unit gives one size (forms.py:CONSTANT_SIZE), or -1.
static int constant_size(uint32_t form)
{
	switch (form) {
	case 0x0b: case 0x11: case 0x0c: case 0x25: case 0x29:
		return 1;
	case 0x05: case 0x12: case 0x26: case 0x2a:
		return 2;
	case 0x27: case 0x2b:
		return 3;
	case 0x06: case 0x13: case 0x28: case 0x2c: case 0x1c:
		return 4;
	case 0x07: case 0x14: case 0x20: case 0x24:
		return 8;
	case 0x1e:
		return 16;
	case 0x19: case 0x21:
		return 0;
	default:
		return -1;
	}
}

// The size of a form of the unit's offset size (forms.py:OFFSET_SIZED), or -1.
static int offset_sized(const struct dws_unit *u, uint32_t form)
{
	switch (form) {
	case FORM_REF_ADDR:
		return u->version <= 2 ? u->address_size : u->offset_size;
	case 0x0e: case 0x1f: case 0x17: case 0x1d: case 0x1f20: case 0x1f21:
		return u->offset_size;
	default:
		return -1;
	}
}

static bool is_uleb_form(uint32_t form)
{
	switch (form) {
	case 0x0f: case 0x15: case 0x1a: case 0x1b: case 0x22: case 0x23: case 0x1f01: case 0x1f02:
		return true;
	default:
		return false;
	}
}

static int unit_ref_size(uint32_t form)
{
	switch (form) {
	case FORM_REF1:
		return 1;
	case FORM_REF2:
		return 2;
	case FORM_REF4:
		return 4;
	case FORM_REF8:
		return 8;
	default:
		return 0;
	}
}

// ---- abbreviations (diescan.py:compiled_table) ---------------------------------------------------

static void plan(struct dws_scan *s, struct abbrev *a, const struct dws_unit *u)
{
	int64_t size = 0;

	a->fixed = -1;
	a->sib_at = -1;
	for (uint32_t i = 0; i < a->nspecs; i++) {
		const struct spec *sp = &s->specs[a->first + i];
		int n = constant_size(sp->form);

		if (n < 0)
			n = offset_sized(u, sp->form);
		if (n < 0 && sp->form == FORM_ADDR)
			n = u->address_size;
		if (n < 0)
			return;
		if (sp->attr == AT_SIBLING && unit_ref_size(sp->form) && a->sib_at < 0) {
			a->sib_at = size;
			a->sib_size = (uint8_t)n;
		}
		size += n;
	}
	a->fixed = size;
}

// Whether two NUL bytes follow each other somewhere in @p from @pos to @end.
static bool has_double_nul(const uint8_t *p, uint64_t pos, uint64_t end)
{
	while (pos + 1 < end) {
		const uint8_t *nul = memchr(p + pos, 0, end - pos - 1);

		if (!nul)
			return false;
		pos = (uint64_t)(nul - p);
		if (!p[pos + 1])
			return true;
		pos++;
	}
	return false;
}

static int compile_table(struct dws_scan *s, const struct dws_sections *sec, const struct dws_unit *u)
{
	const uint8_t *p = sec->abbrev;
	uint64_t end = sec->abbrev_size, pos = u->abbrev_offset;
	uint64_t key[4] = { u->abbrev_offset, u->offset_size, u->address_size, u->version };

	if (s->table_ready && !memcmp(key, s->table_key, sizeof(key)))
		return 0;
	s->table_ready = false;
	s->nspecs = 0;
	if (s->abbrevs_cap)
		memset(s->abbrevs, 0, s->abbrevs_cap * sizeof(*s->abbrevs));
	for (;;) {
		uint64_t code, tag, attr, form;
		struct abbrev a = { 0 };
		int err;

		if ((err = read_uleb(p, end, &pos, &code)))
			return err;
		if (!code)
			break;
		// (the reference looks for the "0 0" that may end the entry first, and fails without one)
		if (!has_double_nul(p, pos, end))
			return DWS_UNSUPPORTED;
		if (code >= MAX_CODE)
			return DWS_UNSUPPORTED;
		if ((err = read_uleb(p, end, &pos, &tag)))
			return err;
		if (pos >= end || tag > UINT32_MAX)
			return DWS_UNSUPPORTED;
		a.tag = (uint32_t)tag;
		a.children = p[pos++] != 0;
		a.first = (uint32_t)s->nspecs;
		for (;;) {
			struct spec sp = { 0 };

			if ((err = read_uleb(p, end, &pos, &attr)) || (err = read_uleb(p, end, &pos, &form)))
				return err;
			if (!attr && !form)
				break;
			if (attr > UINT32_MAX || form > UINT32_MAX)
				return DWS_UNSUPPORTED;
			sp.attr = (uint32_t)attr;
			sp.form = (uint32_t)form;
			if (form == FORM_IMPLICIT_CONST && (err = read_sleb(p, end, &pos, &sp.implicit)))
				return err;
			if (grow((void **)&s->specs, &s->specs_cap, s->nspecs + 1, sizeof(*s->specs)))
				return -1;
			s->specs[s->nspecs++] = sp;
		}
		a.nspecs = (uint32_t)(s->nspecs - a.first);
		a.present = true;
		if (code >= s->abbrevs_cap) {
			size_t old = s->abbrevs_cap;

			if (grow((void **)&s->abbrevs, &s->abbrevs_cap, code + 1, sizeof(*s->abbrevs)))
				return -1;
			memset(s->abbrevs + old, 0, (s->abbrevs_cap - old) * sizeof(*s->abbrevs));
		}
		s->abbrevs[code] = a;
	}
	for (size_t code = 0; code < s->abbrevs_cap; code++)
		if (s->abbrevs[code].present)
			plan(s, &s->abbrevs[code], u);
	memcpy(s->table_key, key, sizeof(key));
	s->table_ready = true;
	return 0;
}

static const struct abbrev *abbrev_at(const struct ctx *c, uint64_t code)
{
	if (code >= c->s->abbrevs_cap || !c->s->abbrevs[code].present)
		return NULL;
	return &c->s->abbrevs[code];
}

// ---- attributes (diescan.py:CUScanner.read_die) --------------------------------------------------

// A string attribute's place: @form's value @value (an offset, an index, or where an inline string is).
static int string_at(const struct ctx *c, uint32_t form, uint64_t value, struct dws_name *ret)
{
	const struct dws_sections *sec = c->sec;
	unsigned int width = c->u->offset_size;

	switch (form) {
	case FORM_STRP:
		if (value >= sec->str_size)
			return DWS_UNSUPPORTED;
		*ret = (struct dws_name){ .where = DWS_STR, .offset = value };
		return 0;
	case FORM_LINE_STRP:
		if (value >= sec->line_str_size)
			return DWS_UNSUPPORTED;
		*ret = (struct dws_name){ .where = DWS_LINE_STR, .offset = value };
		return 0;
	case FORM_STRING:
		*ret = (struct dws_name){ .where = DWS_INFO, .offset = value };
		return 0;
	default:	// strx: an index into the unit's string offsets
		if (!c->has_str_offsets_base || !sec->str_offsets_size || value > (UINT64_MAX - c->str_offsets_base) / width)
			return DWS_UNSUPPORTED;
		uint64_t at = c->str_offsets_base + value * width, off = 0;

		if (at > sec->str_offsets_size || width > sec->str_offsets_size - at)
			return DWS_UNSUPPORTED;
		for (unsigned int i = 0; i < width; i++)
			off |= (uint64_t)sec->str_offsets[at + i] << (8 * i);
		if (off >= sec->str_size)
			return DWS_UNSUPPORTED;
		*ret = (struct dws_name){ .where = DWS_STR, .offset = off };
		return 0;
	}
}

static bool is_empty(const struct ctx *c, const struct dws_name *n)
{
	const struct dws_sections *sec = c->sec;

	switch (n->where) {
	case DWS_STR:
		return sec->str[n->offset] == 0;
	case DWS_LINE_STR:
		return sec->line_str[n->offset] == 0;
	case DWS_INFO:
		return c->info[n->offset] == 0;
	default:
		return true;
	}
}

static int take_name(const struct ctx *c, uint32_t form, uint64_t value, bool *has, struct dws_name *ret)
{
	int err;

	if (form != FORM_STRP && form != FORM_LINE_STRP && form != FORM_STRING && form != FORM_STRX &&
	    !(form >= FORM_STRX1 && form <= FORM_STRX4))
		return DWS_UNSUPPORTED;	// (a name that is no string: the reference has its own answer)
	if ((err = string_at(c, form, value, ret)))
		return err;
	if (is_empty(c, ret))
		ret->where = DWS_NOWHERE;
	*has = true;
	return 0;
}

static int take_ref(const struct ctx *c, uint32_t form, uint64_t value, struct ref *ret)
{
	if (unit_ref_size(form) || form == FORM_REF_UDATA) {
		// (a reference to the unit's first byte is what the reference's truth test takes for none)
		if (!value || value > UINT64_MAX - c->u->offset)
			return DWS_UNSUPPORTED;
		*ret = (struct ref){ .kind = REF_UNIT, .offset = c->u->offset + value };
		return 0;
	}
	if (form == FORM_REF_ADDR) {
		*ret = (struct ref){ .kind = REF_ADDR, .offset = value };
		return 0;
	}
	return DWS_UNSUPPORTED;
}

// The attributes take() reads the value of.
static bool is_taken(uint32_t attr)
{
	switch (attr) {
	case AT_NAME: case AT_LINKAGE_NAME: case AT_MIPS_LINKAGE_NAME: case AT_ABSTRACT_ORIGIN:
	case AT_SPECIFICATION: case AT_DECLARATION:
		return true;
	default:
		return false;
	}
}

// One attribute's value @value (a number read, or where a string or block starts) of form @form
// into @a.
static int take(const struct ctx *c, uint32_t attr, uint32_t form, uint64_t value, struct attrs *a)
{
	switch (attr) {
	case AT_NAME:
		return take_name(c, form, value, &a->has_name, &a->name);
	case AT_LINKAGE_NAME:
		return take_name(c, form, value, &a->has_linkage, &a->linkage);
	case AT_MIPS_LINKAGE_NAME:
		return take_name(c, form, value, &a->has_mips, &a->mips);
	case AT_ABSTRACT_ORIGIN:
		return take_ref(c, form, value, &a->origin);
	case AT_SPECIFICATION:
		return take_ref(c, form, value, &a->specification);
	case AT_DECLARATION:
		if (form == FORM_FLAG)
			a->declaration = value != 0;
		else if (form == FORM_FLAG_PRESENT)
			a->declaration = true;
		else
			return DWS_UNSUPPORTED;
		return 0;
	case AT_LOCATION:
		a->location = true;
		return 0;
	case AT_EXTERNAL:
		a->external = true;
		return 0;
	case AT_LOW_PC: case AT_RANGES: case AT_ENTRY_PC: case AT_INLINE:
		a->code = true;
		return 0;
	default:
		return 0;
	}
}

/*
 * One attribute of form @sp->form at *@pos, *@pos moved past it. With @want, its number is read into
 * *@value (a constant, an address, an offset, a reference, a LEB128 number, an implicit constant;
 * where an inline string starts); without, a LEB128 number is passed whatever its length.
 */
static int read_form(const struct ctx *c, const struct spec *sp, bool want, uint64_t *pos, uint64_t *value)
{
	const struct dws_unit *u = c->u;
	const uint8_t *p = c->info;
	uint64_t end = u->end, at = *pos;
	uint32_t form = sp->form;
	int n, err;

	*value = 0;
	if (form == FORM_INDIRECT)
		return DWS_UNSUPPORTED;
	if ((n = constant_size(form)) >= 0 || (n = offset_sized(u, form)) >= 0 ||
	    (form == FORM_ADDR && (n = u->address_size))) {
		if (n <= 8) {
			if ((err = read_le(c, at, (unsigned int)n, value)))
				return err;
		} else if (at > end || (uint64_t)n > end - at) {
			return DWS_UNSUPPORTED;
		}
		if (form == FORM_IMPLICIT_CONST)
			*value = (uint64_t)sp->implicit;
		*pos = at + (uint64_t)n;
		return 0;
	}
	if (is_uleb_form(form) || form == FORM_SDATA)
		return want && form != FORM_SDATA ? read_uleb(p, end, pos, value) : skip_leb(p, end, pos);
	if (form == FORM_STRING) {
		const uint8_t *nul = at < end ? memchr(p + at, 0, end - at) : NULL;

		if (!nul)
			return DWS_UNSUPPORTED;
		*value = at;
		*pos = (uint64_t)(nul - p) + 1;
		return 0;
	}
	if (form == FORM_EXPRLOC || form == FORM_BLOCK || form == FORM_BLOCK1 || form == FORM_BLOCK2 ||
	    form == FORM_BLOCK4) {
		uint64_t length;

		if (form == FORM_EXPRLOC || form == FORM_BLOCK)
			err = read_uleb(p, end, pos, &length);
		else {
			unsigned int w = form == FORM_BLOCK1 ? 1 : form == FORM_BLOCK2 ? 2 : 4;

			err = read_le(c, *pos, w, &length);
			*pos += w;
		}
		if (err)
			return err;
		if (length > end - *pos)
			return DWS_UNSUPPORTED;
		*pos += length;
		return 0;
	}
	return DWS_UNSUPPORTED;
}

// Whether a form read_form takes is a number's (diescan.py:CUScanner.read_values gives its value).
static bool is_number_form(uint32_t form)
{
	return form != FORM_STRING && form != FORM_EXPRLOC && form != FORM_BLOCK && form != FORM_BLOCK1 &&
	       form != FORM_BLOCK2 && form != FORM_BLOCK4;
}

/*
 * The attributes of @ab from *@pos (after the DIE's code), *@pos moved past them. With @a, the ones
 * the index reads are taken; a DW_AT_sibling is always taken (into @sibling when @a is NULL).
 */
static int read_attrs(const struct ctx *c, const struct abbrev *ab, uint64_t *pos, struct attrs *a,
		      bool *has_sibling, uint64_t *sibling)
{
	const struct dws_unit *u = c->u;
	int err;

	for (uint32_t i = 0; i < ab->nspecs; i++) {
		const struct spec *sp = &c->s->specs[ab->first + i];
		uint32_t form = sp->form;
		uint64_t value;

		// (only a reference's, a string index's or a sibling's number is used: the others, of
		// any length, are passed)
		if ((err = read_form(c, sp, sp->attr == AT_SIBLING || (a && is_taken(sp->attr)), pos, &value)))
			return err;
		if (sp->attr == AT_SIBLING) {
			if (!unit_ref_size(form) && form != FORM_REF_UDATA)
				return DWS_UNSUPPORTED;
			if (value > UINT64_MAX - u->offset)
				return DWS_UNSUPPORTED;
			if (a) {
				a->has_sibling = true;
				a->sibling = u->offset + value;
			} else {
				*has_sibling = true;
				*sibling = u->offset + value;
			}
		} else if (a && (err = take(c, sp->attr, form, value, a))) {
			return err;
		}
	}
	return 0;
}

// diescan.py:forward: a sibling must move forward.
static int forward(uint64_t target, uint64_t pos, uint64_t *ret)
{
	if (target <= pos)
		return DWS_UNSUPPORTED;
	*ret = target;
	return 0;
}

// ---- the walk (diescan.py:CUScanner.walk, index and _skip_children) --------------------------------

static bool is_scope(const struct ctx *c, uint32_t tag)
{
	if (tag == TAG_NAMESPACE || tag == TAG_MODULE)
		return true;
	return c->rust && (tag == TAG_STRUCTURE_TYPE || tag == TAG_UNION_TYPE || tag == TAG_CLASS_TYPE);
}

static int walk(struct ctx *c, uint64_t pos, bool index, uint64_t *after);

// The index's visit of a function or variable DIE (CUScanner._index_children's index).
static int visit(struct ctx *c, uint64_t die, const struct abbrev *ab, uint64_t *pos)
{
	struct dws_scan *s = c->s;
	struct attrs a = { 0 };
	struct seen *sn;
	int err;

	if ((err = read_attrs(c, ab, pos, &a, NULL, NULL)))
		return err;
	if (grow((void **)&s->seen, &s->seen_cap, s->nseen + 1, sizeof(*s->seen)))
		return -1;
	sn = &s->seen[s->nseen++];
	sn->offset = die;
	sn->name = a.name;
	// (the linkage name, else the MIPS one: an empty one counts as none)
	sn->linkage = a.linkage.where != DWS_NOWHERE ? a.linkage : a.mips;
	sn->origin = a.origin.kind != REF_NONE ? a.origin : a.specification;
	if (!a.declaration && (ab->tag == TAG_SUBPROGRAM ? a.code : a.location || a.external)) {
		if (grow((void **)&s->records, &s->records_cap, s->nrecords + 1, sizeof(*s->records)))
			return -1;
		s->records[s->nrecords++] = (struct record){ .offset = die, .is_function = ab->tag == TAG_SUBPROGRAM };
	}
	if (!ab->children)
		return 0;
	if (a.has_sibling)
		return forward(a.sibling, *pos, pos);
	return walk(c, *pos, false, pos);
}

/*
 * The DIEs from @pos to the 0 code that ends their parent's children (*@after: the position after
 * it, or where the unit ends). With @index, the functions and variables are visited and namespaces
 * and modules (a Rust unit's types too) walked into; else every DIE is passed.
 */
static int walk(struct ctx *c, uint64_t pos, bool index, uint64_t *after)
{
	const uint8_t *p = c->info;
	uint64_t end = c->u->end;
	uint64_t entered = 0, skipping = 0;
	int err;

	while (pos < end) {
		uint64_t die = pos, code;
		const struct abbrev *ab;

		if ((err = read_uleb(p, end, &pos, &code)))
			return err;
		if (!code) {
			if (skipping)
				skipping--;
			else if (entered)
				entered--;
			else {
				*after = pos;
				return 0;
			}
			continue;
		}
		ab = abbrev_at(c, code);
		if (!ab)
			return DWS_UNSUPPORTED;
		if (index && !skipping) {
			if (ab->tag == TAG_SUBPROGRAM || ab->tag == TAG_VARIABLE) {
				if ((err = visit(c, die, ab, &pos)))
					return err;
				continue;
			}
			if (ab->children && is_scope(c, ab->tag)) {
				bool has_sibling = false;
				uint64_t sibling;

				if ((err = read_attrs(c, ab, &pos, NULL, &has_sibling, &sibling)))
					return err;
				entered++;
				continue;
			}
		}
		if (ab->children) {
			if (ab->sib_at >= 0) {
				uint64_t v;

				if ((err = read_le(c, pos + (uint64_t)ab->sib_at, ab->sib_size, &v)))
					return err;
				if (v > UINT64_MAX - c->u->offset)
					return DWS_UNSUPPORTED;
				if ((err = forward(c->u->offset + v, pos, &pos)))
					return err;
				continue;
			}
		} else if (ab->fixed >= 0) {
			pos += (uint64_t)ab->fixed;
			continue;
		}
		bool has_sibling = false;
		uint64_t sibling = 0;

		if ((err = read_attrs(c, ab, &pos, NULL, &has_sibling, &sibling)))
			return err;
		if (ab->children) {
			if (has_sibling) {
				if ((err = forward(sibling, pos, &pos)))
					return err;
			} else {
				skipping++;
			}
		}
	}
	*after = pos;
	return 0;
}

// ---- names (dieindex.py:_names, die.py:die_attr) ---------------------------------------------------

static const struct seen *seen_at(const struct dws_scan *s, uint64_t offset)
{
	size_t lo = 0, hi = s->nseen;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->seen[mid].offset < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->nseen && s->seen[lo].offset == offset ? &s->seen[lo] : NULL;
}

// The attributes of the DIE at section offset @die, which must be in the unit.
static int die_attrs(const struct ctx *c, uint64_t die, struct attrs *a)
{
	const struct abbrev *ab;
	uint64_t pos = die, code;
	int err;

	if (die < c->u->die_offset || die >= c->u->end)
		return DWS_UNSUPPORTED;	// (in another unit, or not a DIE)
	if ((err = read_uleb(c->info, c->u->end, &pos, &code)))
		return err;
	ab = abbrev_at(c, code);
	if (!code || !ab)
		return DWS_UNSUPPORTED;
	*a = (struct attrs){ 0 };
	return read_attrs(c, ab, &pos, a, NULL, NULL);
}

/*
 * die_name and die_linkage_name of the DIE at @die: each attribute from the first DIE of the chain
 * of abstract origins, else specifications, that has it (DIE_HOPS at most); the linkage name, when
 * empty or missing, the MIPS one found the same way. Only what is asked for (@name, @linkage not
 * NULL) is looked for.
 */
static int die_names(const struct ctx *c, uint64_t die, struct dws_name *name, struct dws_name *linkage)
{
	bool need_name = name != NULL, need_linkage = linkage != NULL, need_mips = linkage != NULL;
	struct dws_name found_linkage = { DWS_NOWHERE, 0 }, found_mips = { DWS_NOWHERE, 0 };
	struct attrs a;
	int err;

	if (name)
		name->where = DWS_NOWHERE;
	for (int hop = 0; hop < DIE_HOPS && (need_name || need_linkage || need_mips); hop++) {
		const struct ref *link;

		if ((err = die_attrs(c, die, &a)))
			return err;
		if (need_name && a.has_name) {
			*name = a.name;
			need_name = false;
		}
		if (need_linkage && a.has_linkage) {
			found_linkage = a.linkage;
			need_linkage = false;
			if (found_linkage.where != DWS_NOWHERE)
				need_mips = false;
		}
		if (need_mips && a.has_mips) {
			found_mips = a.mips;
			need_mips = false;
		}
		link = a.origin.kind != REF_NONE ? &a.origin : &a.specification;
		if (link->kind == REF_NONE)
			break;
		die = link->offset;
	}
	if (linkage)
		*linkage = found_linkage.where != DWS_NOWHERE ? found_linkage : found_mips;
	return 0;
}

// _names: (name, linkage name) of the definition the walk took at @die.
static int definition_names(const struct ctx *c, uint64_t die, struct dws_name *name, struct dws_name *linkage)
{
	struct ref ref = { .kind = REF_UNIT, .offset = die };

	name->where = linkage->where = DWS_NOWHERE;
	for (int hop = 0; hop < SEEN_HOPS; hop++) {
		const struct seen *sn = ref.kind == REF_UNIT ? seen_at(c->s, ref.offset) : NULL;

		if (!sn) {	// a DIE the walk did not take (a declaration in a class), or a ref_addr
			struct dws_name n, l;
			int err = die_names(c, ref.offset, name->where == DWS_NOWHERE ? &n : NULL,
					    linkage->where == DWS_NOWHERE ? &l : NULL);

			if (err)
				return err;
			if (name->where == DWS_NOWHERE)
				*name = n;
			if (linkage->where == DWS_NOWHERE)
				*linkage = l;
			return 0;
		}
		if (name->where == DWS_NOWHERE)
			*name = sn->name;
		if (linkage->where == DWS_NOWHERE)
			*linkage = sn->linkage;
		if ((name->where != DWS_NOWHERE && linkage->where != DWS_NOWHERE) || sn->origin.kind == REF_NONE)
			break;
		ref = sn->origin;
	}
	return 0;
}

// ---- a unit (diescan.py:CUScanner.scan) ----------------------------------------------------------

/*
 * The start of unit @c->u: its abbreviation table compiled, its unit DIE's abbreviation into *@ab
 * (NULL when the unit has no DIE) and *@pos after the DIE's code.
 */
static int unit_start(struct ctx *c, uint64_t *pos, const struct abbrev **ab)
{
	const struct dws_unit *u = c->u;
	uint64_t code;
	int err;

	*ab = NULL;
	*pos = u->die_offset;
	if (u->end > c->sec->info_size || u->die_offset < u->offset || u->die_offset >= u->end ||
	    (u->offset_size != 4 && u->offset_size != 8) || !u->address_size || u->address_size > 8)
		return DWS_UNSUPPORTED;
	if ((err = compile_table(c->s, c->sec, u)) || (err = read_uleb(c->info, u->end, pos, &code)))
		return err;
	if (!code)
		return 0;
	*ab = abbrev_at(c, code);
	return *ab ? 0 : DWS_UNSUPPORTED;
}

// The unit DIE's DW_AT_str_offsets_base and language, and the position after it.
static int unit_die(struct ctx *c, const struct abbrev *ab, uint64_t pos, uint64_t *after)
{
	bool seen_language = false;
	int err;

	for (uint32_t i = 0; i < ab->nspecs; i++) {
		const struct spec *sp = &c->s->specs[ab->first + i];
		struct abbrev one = { .nspecs = 1, .first = ab->first + i };
		bool has_sibling = false;
		uint64_t sibling, value;
		int n;

		if (sp->attr == AT_STR_OFFSETS_BASE && !c->has_str_offsets_base) {
			if (sp->form != FORM_SEC_OFFSET || (err = read_le(c, pos, c->u->offset_size, &value)))
				return err ? err : DWS_UNSUPPORTED;
			c->has_str_offsets_base = true;
			c->str_offsets_base = value;
		}
		if (sp->attr == AT_LANGUAGE && !seen_language) {
			seen_language = true;
			if (sp->form == FORM_INDIRECT)
				return DWS_UNSUPPORTED;
			if (sp->form == FORM_IMPLICIT_CONST) {
				value = (uint64_t)sp->implicit;
			} else if (sp->form == FORM_UDATA) {
				uint64_t at = pos;

				if ((err = read_uleb(c->info, c->u->end, &at, &value)))
					return err;
			} else if ((n = constant_size(sp->form)) >= 0 && n <= 8) {
				if ((err = read_le(c, pos, (unsigned int)n, &value)))
					return err;
			} else if (is_uleb_form(sp->form) || sp->form == FORM_SDATA || n > 8) {
				return DWS_UNSUPPORTED;
			} else {
				value = 0;	// (the reference leaves a language of another form unread: not Rust)
			}
			c->rust = value == DW_LANG_RUST;
		}
		if ((err = read_attrs(c, &one, &pos, NULL, &has_sibling, &sibling)))
			return err;
	}
	*after = pos;
	return 0;
}

static int names_of_records(struct ctx *c)
{
	struct dws_scan *s = c->s;
	int err;

	s->ndefs = 0;
	if (grow((void **)&s->defs, &s->defs_cap, s->nrecords, sizeof(*s->defs)))
		return -1;
	for (size_t i = 0; i < s->nrecords; i++) {
		struct dws_definition *d = &s->defs[s->ndefs];

		d->die_offset = s->records[i].offset;
		d->is_function = s->records[i].is_function;
		if ((err = definition_names(c, d->die_offset, &d->name, &d->linkage)))
			return err;
		if (d->name.where != DWS_NOWHERE || d->linkage.where != DWS_NOWHERE)
			s->ndefs++;
	}
	return 0;
}

int dws_definitions(struct dws_scan *s, const struct dws_sections *sec, const struct dws_unit *u,
		    const struct dws_definition **defs, size_t *count)
{
	struct ctx c = { .s = s, .sec = sec, .u = u, .info = sec->info };
	const struct abbrev *ab;
	uint64_t pos, after;
	int err;

	*defs = NULL;
	*count = 0;
	s->nseen = s->nrecords = s->ndefs = 0;
	if ((err = unit_start(&c, &pos, &ab)) || !ab)
		return err;
	if ((err = unit_die(&c, ab, pos, &pos)))
		return err;
	if (ab->children && (err = walk(&c, pos, true, &after)))
		return err;
	if ((err = names_of_records(&c)))
		return err;
	*defs = s->defs;
	*count = s->ndefs;
	return 0;
}

// ---- inline instances (diescan.py:CUScanner.instances_by_origin) ---------------------------------

// What the instances' walk reads of a subprogram or inline instance (read_values of ORIGIN_ATTRS).
struct origin_attrs {
	bool code;		// a low pc, an entry pc or ranges
	bool has_origin;
	uint32_t origin_form;
	uint64_t origin;
};

static int read_origin_attrs(const struct ctx *c, const struct abbrev *ab, uint64_t *pos, struct origin_attrs *o)
{
	int err;

	*o = (struct origin_attrs){ 0 };
	for (uint32_t i = 0; i < ab->nspecs; i++) {
		const struct spec *sp = &c->s->specs[ab->first + i];
		bool origin = sp->attr == AT_ABSTRACT_ORIGIN;
		uint64_t value;

		if ((err = read_form(c, sp, origin, pos, &value)))
			return err;
		// (the reference takes an attribute of a number's form only: the last one of an origin)
		if (!is_number_form(sp->form))
			continue;
		if (origin) {
			o->has_origin = true;
			o->origin_form = sp->form;
			o->origin = value;
		} else if (sp->attr == AT_LOW_PC || sp->attr == AT_ENTRY_PC || sp->attr == AT_RANGES) {
			o->code = true;
		}
	}
	return 0;
}

// The position of @o's origin when it is a DIE's of the unit (a reference into it, or a ref_addr there).
static bool origin_in_unit(const struct ctx *c, const struct origin_attrs *o, uint64_t unit_base, uint64_t *at)
{
	const struct dws_unit *u = c->u;

	if (unit_ref_size(o->origin_form) || o->origin_form == FORM_REF_UDATA) {
		if (o->origin >= u->end - u->offset)
			return false;
		*at = u->offset + o->origin;
		return true;
	}
	if (o->origin_form != FORM_REF_ADDR || o->origin < unit_base)
		return false;
	*at = o->origin - unit_base;
	return *at >= u->offset && *at < u->end;
}

static int push_caller(struct dws_scan *s, size_t *depth, uint64_t caller)
{
	if (grow((void **)&s->callers, &s->callers_cap, *depth + 1, sizeof(*s->callers)))
		return -1;
	s->callers[(*depth)++] = caller;
	return 0;
}

/*
 * The DIEs from @pos to the 0 code that ends the unit DIE's children: walked into subprograms, inline
 * instances, lexical blocks, namespaces and modules, the others passed with their children.
 */
static int walk_instances(struct ctx *c, uint64_t pos, uint64_t unit_base)
{
	struct dws_scan *s = c->s;
	uint64_t end = c->u->end, caller = DWS_NO_CALLER;
	size_t depth = 0;
	int err;

	while (pos < end) {
		uint64_t die = pos, code;
		const struct abbrev *ab;

		if ((err = read_uleb(c->info, end, &pos, &code)))
			return err;
		if (!code) {
			if (!depth)
				return 0;
			caller = s->callers[--depth];
			continue;
		}
		ab = abbrev_at(c, code);
		if (!ab)
			return DWS_UNSUPPORTED;
		if (ab->tag == TAG_SUBPROGRAM || ab->tag == TAG_INLINED_SUBROUTINE) {
			struct origin_attrs o;
			uint64_t at;

			if ((err = read_origin_attrs(c, ab, &pos, &o)))
				return err;
			if (o.code && o.has_origin && origin_in_unit(c, &o, unit_base, &at)) {
				if (grow((void **)&s->instances, &s->instances_cap, s->ninstances + 1, sizeof(*s->instances)))
					return -1;
				s->instances[s->ninstances++] = (struct dws_instance){
					.origin = at, .die_offset = die,
					.caller = ab->tag == TAG_INLINED_SUBROUTINE ? caller : DWS_NO_CALLER };
			}
			if (ab->children) {
				if (push_caller(s, &depth, caller))
					return -1;
				if (o.code)
					caller = die;
			}
			continue;
		}
		bool has_sibling = false;
		uint64_t sibling = 0;

		if (ab->tag == TAG_LEXICAL_BLOCK || ab->tag == TAG_NAMESPACE || ab->tag == TAG_MODULE) {
			if (ab->fixed >= 0)
				pos += (uint64_t)ab->fixed;
			else if ((err = read_attrs(c, ab, &pos, NULL, &has_sibling, &sibling)))
				return err;
			if (ab->children && push_caller(s, &depth, caller))
				return -1;
		} else if (ab->children) {
			if ((err = read_attrs(c, ab, &pos, NULL, &has_sibling, &sibling)))
				return err;
			err = has_sibling ? forward(sibling, pos, &pos) : walk(c, pos, false, &pos);
			if (err)
				return err;
		} else if (ab->fixed >= 0) {
			pos += (uint64_t)ab->fixed;
		} else if ((err = read_attrs(c, ab, &pos, NULL, &has_sibling, &sibling))) {
			return err;
		}
	}
	return 0;
}

int dws_instances(struct dws_scan *s, const struct dws_sections *sec, const struct dws_unit *u, uint64_t unit_base,
		  const struct dws_instance **found, size_t *count)
{
	struct ctx c = { .s = s, .sec = sec, .u = u, .info = sec->info };
	const struct abbrev *ab;
	uint64_t pos, sibling;
	bool has_sibling = false;
	int err;

	*found = NULL;
	*count = 0;
	s->ninstances = 0;
	if ((err = unit_start(&c, &pos, &ab)) || !ab)
		return err;
	if ((err = read_attrs(&c, ab, &pos, NULL, &has_sibling, &sibling)))
		return err;
	if (ab->children && (err = walk_instances(&c, pos, unit_base)))
		return err;
	*found = s->instances;
	*count = s->ninstances;
	return 0;
}
