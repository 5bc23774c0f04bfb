// SPDX-License-Identifier: GPL-2.0-only
// columns.c - a decoded rb_batch as Arrow columns (see columns.h).

#include <string.h>

#include "columns.h"

size_t col_thread_index(const struct col_threads *threads, int32_t tid)
{
	size_t lo = 0, hi = threads->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (threads->tids[mid] < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < threads->n && threads->tids[lo] == tid ? lo : threads->n;
}

void col_common(const struct rb_batch *batch, const struct col_threads *threads,
		const struct col_common_out *out)
{
	const struct rb_schema *s = batch->schema;
	int32_t last_tid = 0;
	size_t last = threads ? col_thread_index(threads, 0) : 0;	// (runs of one thread are common)

	for (size_t i = 0; i < batch->n; i++) {
		int32_t fi = s->index[batch->id[i]];
		uint32_t row = batch->row[i];
		int32_t tid = batch->pid[i];

		if (fi < 0 || row == UINT32_MAX || !out->ts[fi])
			continue;
		out->ts[fi][row] = batch->ts[i];
		out->cpu[fi][row] = batch->cpu[i];
		out->pid[fi][row] = tid;
		if (!threads)
			continue;
		if (tid != last_tid) {
			last = col_thread_index(threads, tid);
			last_tid = tid;
		}
		out->thread[fi][row] = (int32_t)last;
		out->tgid[fi][row] = last < threads->n ? threads->tgids[last] : tid;
	}
}

// The length of a valid UTF-8 sequence at @p (at most @n bytes), or 0 if it is not one.
static size_t utf8_seq(const uint8_t *p, size_t n)
{
	uint8_t c = p[0];
	size_t len;
	uint32_t cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2, cp = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	// overlong forms, surrogates, past U+10FFFF
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

static const uint8_t replacement[3] = { 0xef, 0xbf, 0xbd };	// U+FFFD

// Bytes of @p[0..n) as valid UTF-8; writes them to @out when it is not NULL.
static size_t utf8_copy(const uint8_t *p, size_t n, uint8_t *out)
{
	size_t size = 0, i = 0;

	while (i < n) {
		size_t len = utf8_seq(p + i, n - i);

		if (len) {
			if (out)
				memcpy(out + size, p + i, len);
			size += len;
			i += len;
		} else {
			if (out)
				memcpy(out + size, replacement, sizeof(replacement));
			size += sizeof(replacement);
			i++;
		}
	}
	return size;
}

struct col_size col_varlen_size(const struct rb_field *f, const struct rb_span *spans, size_t n)
{
	struct col_size size = { 0, 0 };

	for (size_t r = 0; r < n; r++) {
		const struct rb_span *sp = &spans[r];

		if (!sp->ptr) {
			size.nulls++;
			continue;
		}
		switch (f->kind) {
		case RB_KIND_STR:
			size.data += utf8_copy(sp->ptr, sp->len, NULL);
			break;
		case RB_KIND_INT_ARRAY:
			size.data += sp->len / f->elem_size * sizeof(int64_t);
			break;
		default:
			size.data += sp->len;
		}
	}
	return size;
}

void col_varlen_fill(const struct rb_field *f, const struct rb_span *spans, size_t n, bool swap,
		     int64_t *offsets, uint8_t *data, uint8_t *validity)
{
	int64_t pos = 0;	// in bytes, or in elements for an integer array

	if (validity)
		memset(validity, 0, (n + 7) / 8);
	offsets[0] = 0;
	for (size_t r = 0; r < n; r++) {
		const struct rb_span *sp = &spans[r];

		if (sp->ptr) {
			if (validity)
				validity[r / 8] |= (uint8_t)(1U << (r % 8));
			switch (f->kind) {
			case RB_KIND_STR:
				pos += (int64_t)utf8_copy(sp->ptr, sp->len, data + pos);
				break;
			case RB_KIND_INT_ARRAY: {
				size_t count = sp->len / f->elem_size;
				int64_t *values = (int64_t *)data + pos;

				for (size_t k = 0; k < count; k++)
					values[k] = rb_read_int(sp->ptr + k * f->elem_size,
								f->elem_size, f->is_signed, swap);
				pos += (int64_t)count;
				break;
			}
			default:
				memcpy(data + pos, sp->ptr, sp->len);
				pos += sp->len;
			}
		}
		offsets[r + 1] = pos;
	}
}
