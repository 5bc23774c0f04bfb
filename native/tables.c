// SPDX-License-Identifier: GPL-2.0-only
// tables.c - a trace file decoded into per-format columns, a time slice per thread (see tables.h).

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tables.h"

// ---- the plan -----------------------------------------------------------------------------------

static size_t npages(const struct rb_layout *layout, const struct tab_stream *s)
{
	return (s->size + layout->page_size - 1) / layout->page_size;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

// The base time of every page of @s into @bases; 0 or the error of a page that does not load.
static int page_bases(const struct rb_layout *layout, const struct tab_stream *s, uint64_t *bases)
{
	struct rb_page page;

	for (size_t j = 0, off = 0; off < s->size; j++, off += layout->page_size) {
		int ret = rb_page_load(&page, layout, s->data + off, s->size - off);

		if (ret < 0)
			return ret;
		bases[j] = page.timestamp;
	}
	return RB_OK;
}

// The first record of @s at or after @bound, found from the page before the first page based at
// or after it (records are never before their page's base time).
static int find_cut(const struct rb_layout *layout, const struct tab_stream *s,
		    const uint64_t *bases, size_t n, uint64_t bound, struct tab_cut *cut)
{
	size_t lo = 0, hi = n;
	struct rb_page page;
	struct rb_event ev;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (bases[mid] < bound)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t j = lo ? lo - 1 : 0; j < n; j++) {
		size_t off = j * layout->page_size, k = 0;
		int ret = rb_page_load(&page, layout, s->data + off, s->size - off);

		if (ret < 0)
			return ret;
		while ((ret = rb_page_next(&page, &ev)) == 1) {
			if (ev.ts >= bound) {
				cut->page = off;
				cut->record = k;
				return RB_OK;
			}
			k++;
		}
		if (ret < 0)
			return ret;
	}
	cut->page = s->size;
	cut->record = 0;
	return RB_OK;
}

int tab_plan_make(struct tab_plan *plan, const struct rb_layout *layout,
		  const struct tab_stream *streams, size_t nstreams, size_t nslices)
{
	uint64_t **bases = NULL, *all = NULL;
	size_t total = 0, k;
	int ret = RB_ERR_NOMEM;

	memset(plan, 0, sizeof(*plan));
	if (rb_layout_check(layout))
		return RB_ERR_INVAL;
	if (!nslices)
		nslices = 1;
	plan->nstreams = nstreams;
	plan->bounds = calloc(nslices + 1, sizeof(*plan->bounds));
	plan->cuts = calloc((nslices + 1) * (nstreams ? nstreams : 1), sizeof(*plan->cuts));
	bases = calloc(nstreams ? nstreams : 1, sizeof(*bases));
	if (!plan->bounds || !plan->cuts || !bases)
		goto out;
	for (size_t i = 0; i < nstreams; i++)
		total += npages(layout, &streams[i]);
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all)
		goto out;
	total = 0;
	for (size_t i = 0; nslices > 1 && i < nstreams; i++) {
		size_t n = npages(layout, &streams[i]);

		bases[i] = malloc((n ? n : 1) * sizeof(**bases));
		if (!bases[i])
			goto out;
		ret = page_bases(layout, &streams[i], bases[i]);
		if (ret < 0)
			goto out;
		memcpy(all + total, bases[i], n * sizeof(*all));
		total += n;
	}
	qsort(all, total, sizeof(*all), cmp_u64);

	// Bounds at quantiles of the base times (each slice about as many pages), strictly rising.
	plan->nslices = 1;
	for (k = 1; k < nslices && total; k++) {
		uint64_t q = all[k * total / nslices];

		if (q > plan->bounds[plan->nslices - 1])
			plan->bounds[plan->nslices++] = q;
	}
	plan->bounds[plan->nslices] = UINT64_MAX;
	for (size_t i = 0; i < nstreams; i++) {
		plan->cuts[i] = (struct tab_cut){ 0, 0 };
		plan->cuts[plan->nslices * nstreams + i] = (struct tab_cut){ streams[i].size, 0 };
		for (k = 1; k < plan->nslices; k++) {
			ret = find_cut(layout, &streams[i], bases[i], npages(layout, &streams[i]),
				       plan->bounds[k], &plan->cuts[k * nstreams + i]);
			if (ret < 0)
				goto out;
		}
	}
	ret = RB_OK;
out:
	for (size_t i = 0; bases && i < nstreams; i++)
		free(bases[i]);
	free(bases);
	free(all);
	if (ret < 0)
		tab_plan_free(plan);
	return ret;
}

void tab_plan_free(struct tab_plan *plan)
{
	free(plan->bounds);
	free(plan->cuts);
	memset(plan, 0, sizeof(*plan));
}

// ---- a slice ------------------------------------------------------------------------------------

static bool grow_unless(bool skip, void **array, size_t size, size_t cap)
{
	return skip || rb_grow(array, size, cap);
}

static int rows_grow(struct tab_rows *r, const struct rb_event_format *fmt, bool threads, unsigned int skip)
{
	size_t cap = r->cap ? 2 * r->cap : 1024;

	if (!r->ints) {
		r->ints = calloc(fmt->nfields ? fmt->nfields : 1, sizeof(*r->ints));
		r->spans = calloc(fmt->nfields ? fmt->nfields : 1, sizeof(*r->spans));
		if (!r->ints || !r->spans)
			return RB_ERR_NOMEM;
	}
	if (!grow_unless(skip & TAB_SKIP_TS, (void **)&r->ts, sizeof(*r->ts), cap) ||
	    !grow_unless(skip & TAB_SKIP_CPU, (void **)&r->cpu, sizeof(*r->cpu), cap) ||
	    !grow_unless(skip & TAB_SKIP_TID, (void **)&r->tid, sizeof(*r->tid), cap) ||
	    (threads && (!grow_unless(skip & TAB_SKIP_THREAD, (void **)&r->thread, sizeof(*r->thread), cap) ||
			 !grow_unless(skip & TAB_SKIP_TGID, (void **)&r->tgid, sizeof(*r->tgid), cap))))
		return RB_ERR_NOMEM;
	for (uint32_t j = 0; j < fmt->nfields; j++) {
		if (fmt->fields[j].kind == RB_KIND_INT) {
			if (!rb_grow((void **)&r->ints[j], sizeof(**r->ints), cap))
				return RB_ERR_NOMEM;
		} else if (!rb_grow((void **)&r->spans[j], sizeof(**r->spans), cap)) {
			return RB_ERR_NOMEM;
		}
	}
	r->cap = cap;
	return RB_OK;
}

// The last thread lookups, by tid modulo THREAD_CACHE (several threads usually take turns).
#define THREAD_CACHE	64

struct thread_cache {
	int32_t tid[THREAD_CACHE];
	int32_t index[THREAD_CACHE];
	int32_t tgid[THREAD_CACHE];
	bool used[THREAD_CACHE];
};

static void thread_lookup(struct thread_cache *c, const struct col_threads *t, int32_t tid,
			  int32_t *index, int32_t *tgid)
{
	unsigned int k = (uint32_t)tid % THREAD_CACHE;

	if (!c->used[k] || c->tid[k] != tid) {
		size_t i = col_thread_index(t, tid);

		c->used[k] = true;
		c->tid[k] = tid;
		c->index[k] = (int32_t)i;
		c->tgid[k] = i < t->n ? t->tgids[i] : tid;
	}
	*index = c->index[k];
	*tgid = c->tgid[k];
}

// One record into its format's rows (as rb_batch_add decodes it).
static int add_record(struct tab_slice *slice, const struct rb_record *rec, bool swap,
		      struct thread_cache *cache)
{
	const struct rb_schema *s = slice->schema;
	const uint8_t *p = rec->data;
	uint32_t len = rec->len;
	uint16_t id = len >= 2 ? (uint16_t)rb_read_uint(p, 2, swap) : 0;
	int32_t tid = len >= 8 ? (int32_t)rb_read_int(p + 4, 4, true, swap) : -1;
	int32_t fi = s->index[id];
	const struct rb_event_format *fmt;
	struct tab_rows *r;
	bool complete = len >= 8;
	size_t row;

	slice->events++;
	if (fi < 0) {
		slice->short_records += !complete;
		return RB_OK;
	}
	fmt = &s->formats[fi];
	r = &slice->rows[fi];
	if (r->n == r->cap && rows_grow(r, fmt, slice->threads, slice->skip))
		return RB_ERR_NOMEM;
	row = r->n++;
	if (r->ts)
		r->ts[row] = rec->ts;
	if (r->cpu)
		r->cpu[row] = rec->cpu;
	if (r->tid)
		r->tid[row] = tid;
	if (slice->threads) {
		int32_t index, tgid;

		thread_lookup(cache, slice->threads, tid, &index, &tgid);
		if (r->thread)
			r->thread[row] = index;
		if (r->tgid)
			r->tgid[row] = tgid;
	}
	for (uint32_t j = 0; j < fmt->nfields; j++) {
		const struct rb_field *f = &fmt->fields[j];

		if (f->kind == RB_KIND_INT)
			complete &= rb_field_int(f, p, len, swap, &r->ints[j][row]);
		else
			complete &= rb_field_span(f, p, len, swap, &r->spans[j][row]);
	}
	slice->short_records += !complete;
	return RB_OK;
}

// The spans of the non-integer fields as Arrow columns (the pages stay mapped meanwhile).
static int finish_varlen(struct tab_rows *r, const struct rb_event_format *fmt, bool swap)
{
	r->var = calloc(fmt->nfields ? fmt->nfields : 1, sizeof(*r->var));
	if (!r->var)
		return RB_ERR_NOMEM;
	for (uint32_t j = 0; j < fmt->nfields; j++) {
		const struct rb_field *f = &fmt->fields[j];
		struct tab_varlen *v = &r->var[j];
		struct col_size size;

		if (f->kind == RB_KIND_INT)
			continue;
		size = col_varlen_size(f, r->spans[j], r->n);
		v->offsets = malloc((r->n + 1) * sizeof(*v->offsets));
		v->data = malloc(size.data ? size.data : 1);
		v->validity = size.nulls ? malloc((r->n + 7) / 8) : NULL;
		v->nulls = size.nulls;
		if (!v->offsets || !v->data || (size.nulls && !v->validity))
			return RB_ERR_NOMEM;
		col_varlen_fill(f, r->spans[j], r->n, swap, v->offsets, v->data, v->validity);
		free(r->spans[j]);
		r->spans[j] = NULL;
	}
	return RB_OK;
}

void tab_decode(struct tab_slice *slice, const struct tab_plan *plan,
		const struct tab_stream *streams, const struct rb_layout *layout, size_t k)
{
	const struct rb_schema *s = slice->schema;
	uint64_t lo = plan->bounds[k], hi = plan->bounds[k + 1];
	struct thread_cache *cache = calloc(1, sizeof(*cache));
	struct rb_reader reader;
	struct rb_record rec;
	int ret;

	slice->rows = calloc(s->nformats ? s->nformats : 1, sizeof(*slice->rows));
	if (!slice->rows || !cache) {
		free(cache);
		slice->err = RB_ERR_NOMEM;
		return;
	}
	ret = rb_reader_init(&reader, layout, plan->nstreams, true);
	if (ret < 0) {
		free(cache);
		slice->err = ret;
		return;
	}
	for (size_t i = 0; i < plan->nstreams; i++) {
		const struct tab_cut *from = &plan->cuts[k * plan->nstreams + i];
		const struct tab_cut *to = &plan->cuts[(k + 1) * plan->nstreams + i];

		rb_reader_set_range(&reader, i, streams[i].cpu, streams[i].data, streams[i].size,
				    from->page, from->record,
				    to->page < streams[i].size ? to->page : SIZE_MAX, to->record);
	}
	while ((ret = rb_reader_next(&reader, &rec)) == 1) {
		if (rec.ts < lo || rec.ts >= hi) {
			ret = TAB_ERR_ORDER;
			break;
		}
		ret = add_record(slice, &rec, reader.swap, cache);
		if (ret < 0)
			break;
	}
	for (size_t i = 0; !ret && i < plan->nstreams; i++)
		if (reader.streams[i].disordered)
			ret = TAB_ERR_ORDER;
	for (uint32_t fi = 0; !ret && fi < s->nformats; fi++)
		if (slice->rows[fi].n)
			ret = finish_varlen(&slice->rows[fi], &s->formats[fi], reader.swap);
	rb_reader_deinit(&reader);
	free(cache);
	slice->err = ret;
}

struct job {
	struct tab_slice *slice;
	const struct tab_plan *plan;
	const struct tab_stream *streams;
	const struct rb_layout *layout;
	size_t k;
};

static void *run_job(void *arg)
{
	struct job *j = arg;

	tab_decode(j->slice, j->plan, j->streams, j->layout, j->k);
	return NULL;
}

void tab_decode_all(struct tab_slice *slices, const struct tab_plan *plan,
		    const struct tab_stream *streams, const struct rb_layout *layout,
		    size_t first, size_t count)
{
	pthread_t *threads = calloc(count ? count : 1, sizeof(*threads));
	bool *started = calloc(count ? count : 1, sizeof(*started));
	struct job *jobs = calloc(count ? count : 1, sizeof(*jobs));

	for (size_t i = 0; i < count; i++) {
		if (jobs)
			jobs[i] = (struct job){ &slices[i], plan, streams, layout, first + i };
		// (slice 0 on this thread, the others on their own when they can start)
		if (i && jobs && threads && started)
			started[i] = !pthread_create(&threads[i], NULL, run_job, &jobs[i]);
	}
	for (size_t i = 0; i < count; i++)
		if (!started || !started[i])
			tab_decode(&slices[i], plan, streams, layout, first + i);
	for (size_t i = 1; started && i < count; i++)
		if (started[i])
			pthread_join(threads[i], NULL);
	free(threads);
	free(started);
	free(jobs);
}

void tab_slice_free(struct tab_slice *slice)
{
	const struct rb_schema *s = slice->schema;

	for (uint32_t fi = 0; slice->rows && fi < s->nformats; fi++) {
		struct tab_rows *r = &slice->rows[fi];

		for (uint32_t j = 0; j < s->formats[fi].nfields; j++) {
			if (r->ints)
				free(r->ints[j]);
			if (r->spans)
				free(r->spans[j]);
			if (r->var) {
				free(r->var[j].offsets);
				free(r->var[j].data);
				free(r->var[j].validity);
			}
		}
		free(r->ints);
		free(r->spans);
		free(r->var);
		free(r->ts);
		free(r->cpu);
		free(r->tid);
		free(r->thread);
		free(r->tgid);
	}
	free(slice->rows);
	slice->rows = NULL;
}
