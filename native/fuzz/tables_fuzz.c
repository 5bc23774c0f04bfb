// SPDX-License-Identifier: GPL-2.0-only
// tables_fuzz.c - a standalone driver for tables.c (for ASan/UBSan, and TSan for its threads),
// built by tests/test_native_slices.py with ringbuf.c, reader.c, columns.c and tables.c. Usage:
//
//   tabfuzz ITERATIONS SEED
//
// Each iteration writes 1-4 CPUs of small pages of random records (two formats, one with an
// integer field, one with a __data_loc string; unknown ids; time extends; padding; lost-event
// flags; time stamps that never go back), and one time in three mutates a few of their bytes. It
// cuts them into 1-8 slices, decodes them all on as many threads, and checks the promise of
// tables.h: when no slice reports an error, the merged reader reads the same pages without one,
// and the slices' rows, in order, are its rows (time, cpu, tid, thread and thread group, values,
// strings and nulls; the header columns a random skip mask leaves out are not there). Exit 0 and
// "ok N": no bug found.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tables.h"
#include "fuzzing.h"

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

#define PAGE_SIZE	512
#define MAX_STREAMS	4
#define MAX_PAGES	24

static const struct rb_field int_fields[] = { { .offset = 8, .size = 8, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT, .elem_size = 0, .is_signed = 0 } };
static const struct rb_field str_fields[] = { { .offset = 8, .size = 4, .loc = RB_LOC_DATA, .kind = RB_KIND_STR, .elem_size = 0, .is_signed = 0 } };
static const struct rb_event_format formats[] = { { 1, 1, int_fields }, { 2, 1, str_fields } };

static size_t put_u32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
	return 4;
}

// One record at @p (room bytes left); its length, or 0 when it does not fit.
static size_t put_record(uint8_t *p, size_t room, uint32_t delta)
{
	uint32_t kind = (uint32_t)(rnd() % 10);
	uint8_t payload[40] = { 0 };
	size_t len;
	uint16_t id = kind < 4 ? 1 : kind < 8 ? 2 : 3;
	int32_t tid = (int32_t)(rnd() % 6) - 1;

	if (kind == 9) {	// a padding record of 8 bytes
		if (room < 8)
			return 0;
		put_u32(p, 29 | delta << 5);
		put_u32(p + 4, 4);
		return 8;
	}
	memcpy(payload, &id, 2);
	memcpy(payload + 4, &tid, 4);
	if (id == 2) {
		uint32_t n = (uint32_t)(rnd() % 12);

		for (uint32_t i = 0; i < n; i++)
			payload[12 + i] = (uint8_t)("ab\xc3\xff\0z"[rnd() % 6]);
		put_u32(payload + 8, n << 16 | 12);
		len = 12 + n;
	} else {
		uint64_t v = rnd();

		memcpy(payload + 8, &v, 8);
		len = 16;
	}
	len = (len + 3) & ~(size_t)3;
	if (rnd() % 16 == 0)
		len = 4;	// (too short for its fields)
	if (4 + len > room)
		return 0;
	put_u32(p, (uint32_t)(len / 4) | delta << 5);
	memcpy(p + 4, payload, len);
	return 4 + len;
}

// Pages of records whose time stamps never go back, from @ts on.
static size_t make_stream(uint8_t *buf, uint64_t ts)
{
	size_t npages = rnd() % MAX_PAGES, size = 0;

	for (size_t pg = 0; pg < npages; pg++) {
		uint8_t *page = buf + pg * PAGE_SIZE;
		size_t pos = 16, nrec = rnd() % 30;
		uint64_t commit;

		memset(page, 0, PAGE_SIZE);
		memcpy(page, &ts, 8);
		for (size_t r = 0; r < nrec; r++) {
			uint32_t delta = rnd() % 4 ? (uint32_t)(rnd() % 50) : 0;
			size_t got;

			if (rnd() % 400 == 0 && PAGE_SIZE - pos >= 8) {	// a time extend (rare: the CPUs' times overlap)
				uint64_t big = (1ULL << 27) + rnd() % 1000;

				put_u32(page + pos, 30 | (uint32_t)(big & ((1U << 27) - 1)) << 5);
				put_u32(page + pos + 4, (uint32_t)(big >> 27));
				pos += 8;
				ts += big;
			}
			got = put_record(page + pos, PAGE_SIZE - 8 - pos, delta);
			if (!got)
				break;
			pos += got;
			ts += delta;
		}
		commit = pos - 16;
		if (rnd() % 8 == 0)
			commit |= 1ULL << 31;	// (events lost before the page, count unknown)
		memcpy(page + 8, &commit, 8);
		size = (pg + 1) * PAGE_SIZE;
		ts += rnd() % 100;
	}
	if (size && rnd() % 4 == 0)
		size -= rnd() % (PAGE_SIZE - 300);	// (the last page cut after its data, nearly)
	return size;
}

static size_t expected_text(const struct rb_span *sp, uint8_t *out)
{
	int64_t offsets[2];

	col_varlen_fill(&str_fields[0], sp, 1, false, offsets, out, NULL);
	return (size_t)offsets[1];
}

// The slices' rows against the merged reader's.
static void check(struct tab_slice *slices, size_t nslices, const struct rb_schema *schema,
		  const struct tab_stream *streams, size_t nstreams, const struct col_threads *threads,
		  unsigned int skip)
{
	const struct rb_layout layout = { 8, false, PAGE_SIZE };
	struct rb_reader reader;
	struct rb_batch batch;
	size_t at[2] = { 0, 0 }, slice_of[2] = { 0, 0 };
	uint64_t events = 0;
	long n;

	if (rb_reader_init(&reader, &layout, nstreams, true) || rb_batch_init(&batch, schema, false))
		FAIL("out of memory");
	for (size_t i = 0; i < nstreams; i++)
		rb_reader_set_stream(&reader, i, streams[i].cpu, streams[i].data, streams[i].size);
	n = rb_batch_fill(&batch, &reader, SIZE_MAX);
	if (n < 0 || rb_batch_fill(&batch, &reader, 1) < 0)
		FAIL("the slices read pages that the merged reader refuses (%s)", rb_strerror((int)n));
	for (size_t k = 0; k < nslices; k++)
		events += slices[k].events;
	if (events != (uint64_t)n)
		FAIL("%llu events in the slices, %ld merged", (unsigned long long)events, n);
	for (long i = 0; i < n; i++) {
		int32_t fi = schema->index[batch.id[i]];
		const struct tab_rows *r;
		size_t row;
		uint32_t mrow = batch.row[i];

		if (fi < 0)
			continue;
		while (slice_of[fi] < nslices && at[fi] >= slices[slice_of[fi]].rows[fi].n) {
			slice_of[fi]++;
			at[fi] = 0;
		}
		if (slice_of[fi] == nslices)
			FAIL("format %d: fewer rows in the slices", fi);
		r = &slices[slice_of[fi]].rows[fi];
		row = at[fi]++;
		if (!(r->ts == NULL) != !(skip & TAB_SKIP_TS) || !(r->cpu == NULL) != !(skip & TAB_SKIP_CPU) ||
		    !(r->tid == NULL) != !(skip & TAB_SKIP_TID) ||
		    !(r->thread == NULL) != !(skip & TAB_SKIP_THREAD) || !(r->tgid == NULL) != !(skip & TAB_SKIP_TGID))
			FAIL("event %ld: a header column skipped is there, or one not skipped is not", i);
		if ((r->ts && r->ts[row] != batch.ts[i]) || (r->cpu && r->cpu[row] != batch.cpu[i]) ||
		    (r->tid && r->tid[row] != batch.pid[i]))
			FAIL("event %ld: time, cpu or tid differ", i);
		size_t t = col_thread_index(threads, batch.pid[i]);

		if ((r->thread && (size_t)r->thread[row] != t) ||
		    (r->tgid && r->tgid[row] != (t < threads->n ? threads->tgids[t] : batch.pid[i])))
			FAIL("event %ld: thread or thread group differ", i);
		if (fi == 0) {
			if (r->ints[0][row] != batch.rows[0].cols[0].ints[mrow])
				FAIL("event %ld: value differs", i);
		} else {
			const struct rb_span *sp = &batch.rows[1].cols[0].spans[mrow];
			const struct tab_varlen *v = &r->var[0];
			bool valid = !v->validity || (v->validity[row / 8] >> (row % 8) & 1);
			uint8_t want[64];

			if (valid != (sp->ptr != NULL))
				FAIL("event %ld: null differs", i);
			if (valid) {
				size_t len = expected_text(sp, want);

				if ((size_t)(v->offsets[row + 1] - v->offsets[row]) != len ||
				    memcmp(v->data + v->offsets[row], want, len))
					FAIL("event %ld: text differs", i);
			}
		}
	}
	for (int fi = 0; fi < 2; fi++) {
		while (slice_of[fi] < nslices && at[fi] >= slices[slice_of[fi]].rows[fi].n) {
			slice_of[fi]++;
			at[fi] = 0;
		}
		if (slice_of[fi] != nslices)
			FAIL("format %d: more rows in the slices", fi);
	}
	rb_batch_deinit(&batch);
	rb_reader_deinit(&reader);
}

int main(int argc, char **argv)
{
	static const int32_t tids[] = { 0, 1, 3 }, tgids[] = { 0, 1, 1 };
	const struct col_threads threads = { 3, tids, tgids };
	const struct rb_layout layout = { 8, false, PAGE_SIZE };
	static struct rb_schema schema;
	static uint8_t bufs[MAX_STREAMS][MAX_PAGES * PAGE_SIZE];
	long iterations;
	size_t cut = 0, clean = 0, inside = 0;	// (files read cleanly; cut; cut inside a page)

	if (argc != 3)
		FAIL("usage: tabfuzz ITERATIONS SEED");
	iterations = atol(argv[1]);
	rng_state = strtoull(argv[2], NULL, 0) * 0x9E3779B97F4A7C15ULL | 1;
	if (rb_schema_init(&schema, formats, 2))
		FAIL("schema");
	for (long it = 0; it < iterations; it++) {
		struct tab_stream streams[MAX_STREAMS];
		size_t nstreams = 1 + rnd() % MAX_STREAMS, nslices = 1 + rnd() % 8;
		struct tab_plan plan;
		struct tab_slice slices[8];
		unsigned int skip = rnd() % 2 ? 0 : (unsigned int)(rnd() % 32);	// (header columns left out)
		bool ok = true;

		for (size_t i = 0; i < nstreams; i++) {
			streams[i].cpu = (int)i;
			streams[i].data = bufs[i];
			streams[i].size = make_stream(bufs[i], rnd() % 1000);
		}
		if (rnd() % 3 == 0) {
			for (int m = 0; m < 4; m++) {
				size_t i = rnd() % nstreams;

				if (streams[i].size)
					bufs[i][rnd() % streams[i].size] ^= (uint8_t)(1U << (rnd() % 8));
			}
		}
		if (tab_plan_make(&plan, &layout, streams, nstreams, nslices) < 0)
			continue;
		memset(slices, 0, sizeof(slices));
		for (size_t k = 0; k < plan.nslices; k++) {
			slices[k].schema = &schema;
			slices[k].threads = &threads;
			slices[k].skip = skip;
		}
		tab_decode_all(slices, &plan, streams, &layout, 0, plan.nslices);
		for (size_t k = 0; k < plan.nslices; k++) {
			ok &= !slices[k].err;
			for (uint32_t fi = 0; slices[k].rows && fi < 2; fi++)
				if (slices[k].rows[fi].ts)
					touch((const uint8_t *)slices[k].rows[fi].ts,
					      slices[k].rows[fi].n * sizeof(uint64_t));
		}
		if (ok) {
			check(slices, plan.nslices, &schema, streams, nstreams, &threads, skip);
			clean++;
			cut += plan.nslices > 1;
			for (size_t c = nstreams; c < plan.nslices * nstreams; c++)
				inside += plan.cuts[c].record > 0;
		}
		for (size_t k = 0; k < plan.nslices; k++)
			tab_slice_free(&slices[k]);
		tab_plan_free(&plan);
	}
	if (!cut || !inside)
		FAIL("no file was cut into slices, inside a page (%zu read, %zu cut)", clean, cut);
	printf("ok %ld\n", iterations);
	fprintf(stderr, "%zu files read, %zu cut into slices, %zu cuts inside a page\n", clean, cut, inside);
	return 0;
}
