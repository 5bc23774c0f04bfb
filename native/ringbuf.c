// SPDX-License-Identifier: GPL-2.0-only
// ringbuf.c - one ring-buffer page: header, records, and the fields of a record.
//
// Everything here trusts nothing in the page: each read is checked against the bytes the
// caller said are readable, and a page that lies about its sizes is an error, not a crash.

#include <string.h>

#include "ringbuf.h"

const char *rb_strerror(int err)
{
	switch (err) {
	case RB_OK:
		return "success";
	case RB_ERR_INVAL:
		return "invalid argument";
	case RB_ERR_NOMEM:
		return "out of memory";
	case RB_ERR_SHORT_PAGE:
		return "page shorter than its header or committed size";
	case RB_ERR_COMMIT:
		return "commit size larger than the page";
	case RB_ERR_RECORD:
		return "record runs past the committed data";
	case RB_ERR_LENGTH:
		return "record with an impossible length";
	case RB_ERR_IO:
		return "input/output error";
	}
	return "unknown error";
}

static size_t data_offset(unsigned int long_size)
{
	return 8 + long_size;
}

int rb_layout_check(const struct rb_layout *layout)
{
	if (layout->long_size != 4 && layout->long_size != 8)
		return RB_ERR_INVAL;
	if (layout->page_size <= data_offset(layout->long_size) ||
	    layout->page_size > RB_MAX_PAGE_SIZE)
		return RB_ERR_INVAL;
	return RB_OK;
}

int rb_page_load(struct rb_page *page, const struct rb_layout *layout, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	bool swap = layout->big_endian != HOST_BIG_ENDIAN;
	size_t doff = data_offset(layout->long_size);
	uint32_t commit;

	memset(page, 0, sizeof(*page));
	if (rb_layout_check(layout))
		return RB_ERR_INVAL;
	if (len > layout->page_size)
		len = layout->page_size;
	if (len < doff)
		return RB_ERR_SHORT_PAGE;

	page->buf = p;
	page->len = len;
	page->swap = swap;
	page->big_endian = layout->big_endian;
	page->data_off = doff;
	page->timestamp = rb_read_uint(p, 8, swap);
	// The kernel adds the flags to a long as ints, so on 64-bit they are sign-extended into
	// the upper half; only the low 32 bits carry information.
	if (layout->long_size == 8)
		commit = (uint32_t)rb_read_uint(p + 8, 8, swap);
	else
		commit = (uint32_t)rb_read_uint(p + 8, 4, swap);
	page->flags = commit & (RB_MISSED_EVENTS | RB_MISSED_STORED);
	page->size = commit & RB_COMMIT_MASK;

	if (page->size > layout->page_size - doff)
		return RB_ERR_COMMIT;
	if (doff + page->size > len)
		return RB_ERR_SHORT_PAGE;

	if (page->flags & RB_MISSED_EVENTS) {
		size_t at = doff + page->size;

		page->missed = -1;
		if ((page->flags & RB_MISSED_STORED) && at + layout->long_size <= len) {
			uint64_t count = rb_read_uint(p + at, layout->long_size, swap);

			// A stored count of 0 would mean nothing was lost; keep "unknown" then.
			if (count && count <= INT64_MAX)
				page->missed = (int64_t)count;
		}
	}
	page->pos = doff;
	page->ts = page->timestamp;
	return RB_OK;
}

// ---- fields ----------------------------------------------------------------------------------

int rb_schema_init(struct rb_schema *schema, const struct rb_event_format *formats, uint32_t nformats)
{
	schema->nformats = nformats;
	schema->formats = formats;
	for (size_t i = 0; i < 65536; i++)
		schema->index[i] = -1;

	for (uint32_t i = 0; i < nformats; i++) {
		const struct rb_event_format *fmt = &formats[i];

		if (schema->index[fmt->id] != -1)
			return RB_ERR_INVAL;
		if (fmt->nfields && !fmt->fields)
			return RB_ERR_INVAL;
		for (uint32_t j = 0; j < fmt->nfields; j++) {
			const struct rb_field *f = &fmt->fields[j];

			if (f->loc > RB_LOC_TAIL || f->kind > RB_KIND_STR_ARRAY)
				return RB_ERR_INVAL;
			if (f->kind == RB_KIND_STR_ARRAY &&
			    ((f->loc != RB_LOC_DATA && f->loc != RB_LOC_REL) || f->size % 4))
				return RB_ERR_INVAL;
			if (f->kind == RB_KIND_INT &&
			    (f->loc != RB_LOC_FIXED ||
			     (f->size != 1 && f->size != 2 && f->size != 4 && f->size != 8)))
				return RB_ERR_INVAL;
			if (f->kind == RB_KIND_INT_ARRAY &&
			    f->elem_size != 1 && f->elem_size != 2 && f->elem_size != 4 &&
			    f->elem_size != 8)
				return RB_ERR_INVAL;
			if ((f->bound_size || f->head_size) &&
			    ((f->kind != RB_KIND_STR && f->kind != RB_KIND_INT_ARRAY &&
			      f->kind != RB_KIND_INT) ||
			     (f->kind == RB_KIND_INT && !f->head_size) ||
			     (f->head_size && f->kind == RB_KIND_INT_ARRAY &&
			      f->head_size != 4 && f->head_size != 8) ||
			     (f->bound_size != 1 && f->bound_size != 2 && f->bound_size != 4 &&
			      f->bound_size != 8)))
				return RB_ERR_INVAL;
		}
		schema->index[fmt->id] = (int32_t)i;
	}
	return RB_OK;
}

bool rb_field_span(const struct rb_field *field, const uint8_t *rec, uint32_t len, bool swap,
		   struct rb_span *ret)
{
	uint32_t off, n, word;

	ret->ptr = NULL;
	ret->len = 0;
	if (field->kind == RB_KIND_STR_ARRAY) {
		if (field->offset > len || field->size > len - field->offset)
			return false;
		ret->ptr = rec;
		ret->len = len;
		return true;
	}
	switch (field->loc) {
	case RB_LOC_FIXED:
		off = field->offset;
		n = field->size;
		break;
	case RB_LOC_DATA:
	case RB_LOC_REL:
		if (field->offset > len || 4 > len - field->offset)
			return false;
		word = (uint32_t)rb_read_uint(rec + field->offset, 4, swap);
		off = word & 0xffff;
		n = word >> 16;
		if (field->loc == RB_LOC_REL)
			off += field->offset + 4;
		break;
	case RB_LOC_TAIL:
		off = field->offset;
		if (off > len)
			return false;
		n = len - off;
		break;
	default:
		return false;
	}
	if (off > len || n > len - off)
		return false;

	ret->ptr = rec + off;
	ret->len = n;
	// A slice ends at its length, in elements (a record too short for it keeps the whole array);
	// a C++ vector at the elements between its pointers.
	if (field->kind == RB_KIND_INT_ARRAY && field->bound_size && field->elem_size &&
	    field->bound_offset <= len && field->bound_size <= len - field->bound_offset) {
		uint64_t bound = rb_read_uint(rec + field->bound_offset, field->bound_size, swap);

		if (field->head_size) {
			uint64_t begin;

			if (field->head_offset > len || field->head_size > len - field->head_offset)
				return true;
			begin = rb_read_uint(rec + field->head_offset, field->head_size, swap);
			// (a vector whose end is before its start, read before it was made: none)
			bound = bound < begin ? 0 : (bound - begin) / field->elem_size;
		}
		if (bound < n / field->elem_size)
			ret->len = (uint32_t)bound * field->elem_size;
	}
	if (field->kind == RB_KIND_STR) {
		const uint8_t *nul = memchr(ret->ptr, 0, n);

		if (nul)
			ret->len = (uint32_t)(nul - ret->ptr);
		// A counted string ends at its length: the kernel read on to a NUL past it. (A record
		// too short for its parts keeps the text to the NUL.)
		if (field->bound_size && field->bound_offset <= len &&
		    field->bound_size <= len - field->bound_offset) {
			uint64_t bound = rb_read_uint(rec + field->bound_offset, field->bound_size, swap);
			uint32_t head = field->head_size;

			if (bound < ret->len) {
				ret->len = (uint32_t)bound;
			} else if (head && ret->len < bound && ret->len < head &&
				   field->head_offset <= len && head <= len - field->head_offset) {
				ret->ptr = rec + field->head_offset;
				ret->len = bound < head ? (uint32_t)bound : head;
			}
		}
	}
	return true;
}

bool rb_vector_length(const struct rb_field *field, const uint8_t *rec, uint32_t len, bool swap,
		      int64_t *ret)
{
	uint64_t begin = (uint64_t)*ret, end;

	if (field->bound_offset > len || field->bound_size > len - field->bound_offset) {
		*ret = 0;
		return false;
	}
	end = rb_read_uint(rec + field->bound_offset, field->bound_size, swap);
	// (a vector whose end is before its start, read before it was made: none; a field table that
	// no schema checked may lack the element size)
	*ret = end < begin || !field->head_size ? 0 : (int64_t)((end - begin) / field->head_size);
	return true;
}

bool rb_str_array_item(const struct rb_field *field, const uint8_t *rec, uint32_t len, bool swap,
		       uint32_t i, struct rb_span *ret)
{
	struct rb_field one = *field;

	ret->ptr = NULL;
	ret->len = 0;
	if (i >= field->size / 4)
		return false;
	one.offset = field->offset + 4 * i;
	one.size = 4;
	one.kind = RB_KIND_STR;
	one.bound_size = 0;
	one.head_size = 0;
	if (!rb_field_span(&one, rec, len, swap, ret))
		return false;
	if (!(rb_read_uint(rec + one.offset, 4, swap) >> 16))
		ret->ptr = NULL;	// length 0: the kernel could not read the string
	return true;
}
