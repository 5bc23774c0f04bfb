// SPDX-License-Identifier: GPL-2.0-only
// reader.c - the pages of several CPUs merged by time, decoded into columnar batches.

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ringbuf.h"

int rb_reader_init(struct rb_reader *reader, const struct rb_layout *layout, size_t nstreams,
		   bool strict)
{
	memset(reader, 0, sizeof(*reader));
	if (rb_layout_check(layout))
		return RB_ERR_INVAL;
	reader->layout = *layout;
	reader->swap = layout->big_endian != HOST_BIG_ENDIAN;
	reader->strict = strict;
	reader->err_cpu = -1;
	if (!nstreams)
		return RB_OK;
	reader->streams = calloc(nstreams, sizeof(*reader->streams));
	reader->heap = calloc(nstreams, sizeof(*reader->heap));
	if (!reader->streams || !reader->heap) {
		rb_reader_deinit(reader);
		return RB_ERR_NOMEM;
	}
	reader->nstreams = nstreams;
	return RB_OK;
}

void rb_reader_set_stream(struct rb_reader *reader, size_t i, int cpu, const void *data,
			  size_t size)
{
	struct rb_stream *s = &reader->streams[i];

	memset(s, 0, sizeof(*s));
	s->cpu = cpu;
	s->data = data;
	s->size = data ? size : 0;
	s->stop_page = SIZE_MAX;
}

void rb_reader_set_range(struct rb_reader *reader, size_t i, int cpu, const void *data,
			 size_t size, size_t start_page, size_t skip, size_t stop_page,
			 size_t stop_record)
{
	struct rb_stream *s = &reader->streams[i];

	rb_reader_set_stream(reader, i, cpu, data, size);
	s->next_page = start_page;
	s->skip = skip;
	s->stop_page = stop_page;
	s->stop_record = stop_record;
}

void rb_reader_deinit(struct rb_reader *reader)
{
	free(reader->streams);
	free(reader->heap);
	reader->streams = NULL;
	reader->heap = NULL;
	reader->nstreams = 0;
	reader->nheap = 0;
}

static int stream_error(struct rb_reader *reader, struct rb_stream *s, int err, size_t pos)
{
	reader->err_cpu = s->cpu;
	reader->err_offset = s->page_off;
	reader->err_pos = pos;
	return err;
}

// Find the stream's next record; s->live tells whether there is one.
static int stream_advance(struct rb_reader *reader, struct rb_stream *s)
{
	size_t psize = reader->layout.page_size;
	int ret;

	s->live = false;
	while (!s->done) {
		if (s->page_loaded) {
			ret = rb_page_next(&s->page, &s->ev);
			if (ret == 1) {
				size_t k = s->page_records++;

				if (s->page_off == s->stop_page && k >= s->stop_record) {
					s->done = true;
					break;
				}
				if (k < s->skip)
					continue;
				if (s->ev.ts < s->last_ts)
					s->disordered = true;
				s->last_ts = s->ev.ts;
				s->live = true;
				s->events++;
				return RB_OK;
			}
			s->page_loaded = false;
			s->skip = 0;	// (only the first page of a range starts inside)
			if (ret < 0) {
				if (reader->strict)
					return stream_error(reader, s, ret, s->page.pos);
				s->bad_pages++;
			}
			continue;
		}
		if (s->next_page >= s->size || s->next_page > s->stop_page) {
			s->done = true;
			break;
		}
		s->page_off = s->next_page;
		s->next_page += psize < s->size - s->page_off ? psize : s->size - s->page_off;
		ret = rb_page_load(&s->page, &reader->layout, s->data + s->page_off,
				   s->size - s->page_off);
		if (ret < 0) {
			if (reader->strict)
				return stream_error(reader, s, ret, 0);
			s->bad_pages++;
			continue;
		}
		s->page_loaded = true;
		s->page_records = 0;
		s->pages++;
		if (s->page.missed) {
			if (s->page.missed < 0) {
				s->missed_unknown++;
				s->pending_missed = -1;
			} else {
				s->missed_events += (uint64_t)s->page.missed;
				if (s->pending_missed >= 0)
					s->pending_missed += s->page.missed;
			}
		}
	}
	return RB_OK;
}

static bool stream_before(const struct rb_reader *reader, uint32_t a, uint32_t b)
{
	const struct rb_stream *sa = &reader->streams[a], *sb = &reader->streams[b];

	if (sa->ev.ts != sb->ev.ts)
		return sa->ev.ts < sb->ev.ts;
	return a < b;
}

static void heap_down(struct rb_reader *reader, size_t i)
{
	uint32_t *h = reader->heap;
	size_t n = reader->nheap;

	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < n && stream_before(reader, h[l], h[m]))
			m = l;
		if (r < n && stream_before(reader, h[r], h[m]))
			m = r;
		if (m == i)
			return;
		uint32_t t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

static int reader_start(struct rb_reader *reader)
{
	for (size_t i = 0; i < reader->nstreams; i++) {
		int ret = stream_advance(reader, &reader->streams[i]);

		if (ret < 0)
			return ret;
		if (reader->streams[i].live)
			reader->heap[reader->nheap++] = (uint32_t)i;
	}
	for (size_t i = reader->nheap / 2; i-- > 0;)
		heap_down(reader, i);
	reader->started = true;
	return RB_OK;
}

int rb_reader_next(struct rb_reader *reader, struct rb_record *rec)
{
	struct rb_stream *s;
	int ret;

	if (reader->pending_err) {
		ret = reader->pending_err;
		reader->pending_err = 0;
		return ret;
	}
	if (!reader->started) {
		ret = reader_start(reader);
		if (ret < 0)
			return ret;
	}
	if (!reader->nheap)
		return 0;

	s = &reader->streams[reader->heap[0]];
	rec->ts = s->ev.ts;
	rec->cpu = s->cpu;
	rec->data = s->ev.data;
	rec->len = s->ev.len;
	rec->missed = s->pending_missed;
	s->pending_missed = 0;

	// The record points into the caller's buffer, not into s, so advancing is safe.
	ret = stream_advance(reader, s);
	if (ret < 0) {
		// Hand out this record; report the error on the next call.
		reader->pending_err = ret;
		s->live = false;
	}
	if (!s->live)
		reader->heap[0] = reader->heap[--reader->nheap];
	// (the stream read from is usually still first, or the other of two: no walk down the heap)
	if (reader->nheap == 2 && stream_before(reader, reader->heap[1], reader->heap[0])) {
		uint32_t t = reader->heap[0];

		reader->heap[0] = reader->heap[1];
		reader->heap[1] = t;
	} else if (reader->nheap > 2) {
		heap_down(reader, 0);
	}
	return 1;
}

uint64_t rb_stream_ids(const struct rb_layout *layout, const void *data, size_t size,
		       uint8_t *seen)
{
	const uint8_t *p = data;
	bool swap = layout->big_endian != HOST_BIG_ENDIAN;
	uint64_t n = 0;
	struct rb_page page;
	struct rb_event ev;

	if (rb_layout_check(layout) || !p)
		return 0;
	for (size_t off = 0; off < size; off += layout->page_size) {
		size_t len = size - off < layout->page_size ? size - off : layout->page_size;

		if (rb_page_load(&page, layout, p + off, len) < 0)
			continue;
		while (rb_page_next(&page, &ev) == 1) {
			// (as rb_batch_fill reads it: 0 for a record too short to hold one)
			uint16_t id = ev.len >= 2 ? (uint16_t)rb_read_uint(ev.data, 2, swap) : 0;

			seen[id >> 3] |= (uint8_t)(1U << (id & 7));
			n++;
		}
	}
	return n;
}

// ---- batches -----------------------------------------------------------------------------------

int rb_batch_init(struct rb_batch *batch, const struct rb_schema *schema, bool want_raw)
{
	memset(batch, 0, sizeof(*batch));
	batch->schema = schema;
	batch->want_raw = want_raw;
	if (!schema->nformats)
		return RB_OK;
	batch->rows = calloc(schema->nformats, sizeof(*batch->rows));
	if (!batch->rows)
		return RB_ERR_NOMEM;
	for (uint32_t i = 0; i < schema->nformats; i++) {
		uint32_t nf = schema->formats[i].nfields;

		if (!nf)
			continue;
		batch->rows[i].cols = calloc(nf, sizeof(struct rb_column));
		if (!batch->rows[i].cols) {
			rb_batch_deinit(batch);
			return RB_ERR_NOMEM;
		}
	}
	return RB_OK;
}

void rb_batch_reset(struct rb_batch *batch)
{
	batch->n = 0;
	batch->nlost = 0;
	batch->short_records = 0;
	if (batch->rows)
		for (uint32_t i = 0; i < batch->schema->nformats; i++)
			batch->rows[i].nrows = 0;
}

void rb_batch_deinit(struct rb_batch *batch)
{
	free(batch->ts);
	free(batch->cpu);
	free(batch->id);
	free(batch->pid);
	free(batch->flags);
	free(batch->preempt);
	free(batch->row);
	free(batch->raw);
	free(batch->lost);
	if (batch->rows) {
		for (uint32_t i = 0; i < batch->schema->nformats; i++) {
			struct rb_format_rows *fr = &batch->rows[i];

			if (!fr->cols)
				continue;
			for (uint32_t j = 0; j < batch->schema->formats[i].nfields; j++) {
				free(fr->cols[j].ints);
				free(fr->cols[j].spans);
			}
			free(fr->cols);
		}
		free(batch->rows);
	}
	memset(batch, 0, sizeof(*batch));
}

static int batch_grow(struct rb_batch *b)
{
	size_t cap = b->cap ? 2 * b->cap : 1024;

	if (!rb_grow((void **)&b->ts, sizeof(*b->ts), cap) ||
	    !rb_grow((void **)&b->cpu, sizeof(*b->cpu), cap) ||
	    !rb_grow((void **)&b->id, sizeof(*b->id), cap) ||
	    !rb_grow((void **)&b->pid, sizeof(*b->pid), cap) ||
	    !rb_grow((void **)&b->flags, sizeof(*b->flags), cap) ||
	    !rb_grow((void **)&b->preempt, sizeof(*b->preempt), cap) ||
	    !rb_grow((void **)&b->row, sizeof(*b->row), cap) ||
	    (b->want_raw && !rb_grow((void **)&b->raw, sizeof(*b->raw), cap)))
		return RB_ERR_NOMEM;
	b->cap = cap;
	return RB_OK;
}

static int rows_grow(struct rb_format_rows *fr, const struct rb_event_format *fmt)
{
	size_t cap = fr->cap ? 2 * fr->cap : 256;

	for (uint32_t j = 0; j < fmt->nfields; j++) {
		struct rb_column *c = &fr->cols[j];

		if (fmt->fields[j].kind == RB_KIND_INT) {
			if (!rb_grow((void **)&c->ints, sizeof(*c->ints), cap))
				return RB_ERR_NOMEM;
		} else if (!rb_grow((void **)&c->spans, sizeof(*c->spans), cap)) {
			return RB_ERR_NOMEM;
		}
	}
	fr->cap = cap;
	return RB_OK;
}

static int add_lost(struct rb_batch *b, size_t index, int cpu, int64_t count)
{
	if (b->nlost == b->lost_cap) {
		size_t cap = b->lost_cap ? 2 * b->lost_cap : 16;

		if (!rb_grow((void **)&b->lost, sizeof(*b->lost), cap))
			return RB_ERR_NOMEM;
		b->lost_cap = cap;
	}
	b->lost[b->nlost].index = index;
	b->lost[b->nlost].cpu = cpu;
	b->lost[b->nlost].count = count;
	b->nlost++;
	return RB_OK;
}

// The common header of every record (unchanged since Linux 2.6.32): u16 common_type,
// u8 common_flags, u8 common_preempt_count, s32 common_pid.
static void decode_common(struct rb_batch *b, size_t i, const uint8_t *p, uint32_t len, bool swap)
{
	b->id[i] = len >= 2 ? (uint16_t)rb_read_uint(p, 2, swap) : 0;
	b->flags[i] = len >= 3 ? p[2] : 0;
	b->preempt[i] = len >= 4 ? p[3] : 0;
	b->pid[i] = len >= 8 ? (int32_t)rb_read_int(p + 4, 4, true, swap) : -1;
	if (len < 8)
		b->short_records++;
}

static int decode_fields(struct rb_batch *b, size_t i, const uint8_t *p, uint32_t len, bool swap)
{
	const struct rb_schema *s = b->schema;
	int32_t fi = s->index[b->id[i]];
	const struct rb_event_format *fmt;
	struct rb_format_rows *fr;
	bool complete = true;
	size_t r;

	if (fi < 0) {
		b->row[i] = UINT32_MAX;
		return RB_OK;
	}
	fmt = &s->formats[fi];
	fr = &b->rows[fi];
	if (fr->nrows == fr->cap && rows_grow(fr, fmt))
		return RB_ERR_NOMEM;
	r = fr->nrows++;
	b->row[i] = (uint32_t)r;

	for (uint32_t j = 0; j < fmt->nfields; j++) {
		const struct rb_field *f = &fmt->fields[j];

		if (f->kind == RB_KIND_INT)
			complete &= rb_field_int(f, p, len, swap, &fr->cols[j].ints[r]);
		else
			complete &= rb_field_span(f, p, len, swap, &fr->cols[j].spans[r]);
	}
	if (!complete)
		b->short_records++;
	return RB_OK;
}

int rb_batch_add(struct rb_batch *batch, const struct rb_record *rec, bool swap)
{
	size_t i = batch->n;
	int ret;

	if (i == batch->cap && batch_grow(batch))
		return RB_ERR_NOMEM;
	if (rec->missed && add_lost(batch, i, rec->cpu, rec->missed))
		return RB_ERR_NOMEM;
	batch->ts[i] = rec->ts;
	batch->cpu[i] = rec->cpu;
	if (batch->want_raw) {
		batch->raw[i].ptr = rec->data;
		batch->raw[i].len = rec->len;
	}
	decode_common(batch, i, rec->data, rec->len, swap);
	ret = decode_fields(batch, i, rec->data, rec->len, swap);
	if (ret < 0)
		return ret;
	batch->n++;
	return RB_OK;
}

long rb_batch_fill(struct rb_batch *batch, struct rb_reader *reader, size_t max)
{
	struct rb_record rec;
	long added = 0;
	int ret;

	while ((size_t)added < max) {
		ret = rb_reader_next(reader, &rec);
		if (ret < 0) {
			// Hand out what came before the bad page; the error comes next time.
			if (added)
				reader->pending_err = ret;
			return added ? added : ret;
		}
		if (!ret)
			break;
		ret = rb_batch_add(batch, &rec, reader->swap);
		if (ret < 0)
			return ret;
		added++;
	}
	return added;
}
