// SPDX-License-Identifier: GPL-2.0-only
// textfmt_fuzz.c - a standalone driver that runs random plans over random events (for ASan/UBSan).
//
// Not part of the extension (setup.py builds native/*.c only): tests/test_textfmt.py builds it with
// -fsanitize=address,undefined, together with ringbuf.c, reader.c, textfmt.c and textfmt_run.c.
// Usage:
//
//   tffuzz ITERATIONS SEED
//
// Each iteration writes random records (every field kind, random integers, long strings of random
// bytes: invalid UTF-8, controls, quotes; data_loc words pointing anywhere; records cut short)
// into pages of one to three CPU streams, decodes them with rb_reader/rb_batch in batches of
// random size, and formats each batch with tf_format() under random plans (valid and invalid ops,
// widths, precisions, casts, elements, CSV marks), answering every TF_NEED_* with random names
// (invalid UTF-8 too) and random caller text; then formats the same streams record by record
// with tf_format_records() (output taken in chunks of random size), given the same answers, and
// checks that both print the same bytes. tf_put_int() and tf_put_text() also get random
// arguments directly. Exit 0 with "ok" and a silent sanitizer mean no bug was found.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzing.h"
#include "ringbuf.h"
#include "textfmt.h"

#define PAGE_SIZE	65536
#define FIXED_END	77

static uint64_t n_events, n_bytes, n_plans, n_refused, n_needs;

// The fields of event id 1 (offsets from the payload start, after the 8 common bytes).
static const struct rb_field fields[] = {
	{ .offset = 8, .size = 1, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT, .is_signed = 1 },
	{ .offset = 9, .size = 2, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT },
	{ .offset = 11, .size = 4, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT, .is_signed = 1 },
	{ .offset = 15, .size = 8, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT },
	{ .offset = 23, .size = 8, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT, .is_signed = 1 },
	{ .offset = 31, .size = 16, .loc = RB_LOC_FIXED, .kind = RB_KIND_STR },
	{ .offset = 47, .size = 4, .loc = RB_LOC_DATA, .kind = RB_KIND_STR },
	{ .offset = 51, .size = 4, .loc = RB_LOC_REL, .kind = RB_KIND_STR },
	{ .offset = 55, .size = 12, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT_ARRAY, .elem_size = 4 },
	{ .offset = 67, .size = 4, .loc = RB_LOC_DATA, .kind = RB_KIND_INT_ARRAY, .elem_size = 2,
	  .is_signed = 1 },
	{ .offset = 71, .size = 6, .loc = RB_LOC_FIXED, .kind = RB_KIND_BYTES },
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static void put16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

// Random text: printable ASCII, controls, quotes and backslashes, valid UTF-8, stray high bytes.
static size_t random_text(uint8_t *p, size_t max)
{
	static const char *const pieces[] = { "\"", "\\", ",", "\n", "\t", "\r", "\x7f", "\xc3\xa9",
					      "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xed\xa0\x80",
					      "\xc0\xaf", "\xf4\x90\x80\x80", "\xe2\x82", "%" };
	size_t n = 0, want = rnd() % 8 ? rnd() % 64 : rnd() % (max + 1);

	while (n < want && n < max) {
		uint64_t r = rnd() % 10;

		if (r < 4) {
			p[n++] = (uint8_t)(0x20 + rnd() % 95);
		} else if (r < 5) {
			p[n++] = (uint8_t)(rnd() % 32);
		} else if (r < 6) {
			p[n++] = (uint8_t)(0x80 + rnd() % 128);
		} else {
			const char *s = pieces[rnd() % (sizeof(pieces) / sizeof(pieces[0]))];
			size_t l = strlen(s);

			if (n + l > max)
				break;
			memcpy(p + n, s, l);
			n += l;
		}
	}
	return n;
}

// One record's payload into @p (room for PAGE_SIZE / 4 bytes); returns its length.
static size_t random_payload(uint8_t *p)
{
	uint16_t id = (uint16_t)(1 + rnd() % 3);	// 1: all fields, 2: no fields, 3: unknown
	size_t len = FIXED_END, n;

	memset(p, 0, FIXED_END);
	put16(p, id);
	p[2] = (uint8_t)rnd();
	p[3] = (uint8_t)rnd();
	put32(p + 4, (uint32_t)(rnd() % 4 ? rnd() % 5000 : rnd()));
	for (size_t i = 8; i < 31; i++)
		p[i] = (uint8_t)rnd();
	random_text(p + 31, 16);
	// __data_loc string, __rel_loc string, __data_loc s16[]: valid, or anywhere
	for (int k = 0; k < 3; k++) {
		size_t at = k == 0 ? 47 : k == 1 ? 51 : 67;

		if (rnd() % 6 == 0) {
			put32(p + at, (uint32_t)rnd());
			continue;
		}
		if (k == 2) {
			n = 2 * (rnd() % 40);
			for (size_t i = 0; i < n; i++)
				p[len + i] = (uint8_t)rnd();
		} else {
			n = random_text(p + len, 6000);
			if (rnd() % 2)
				p[len + n++] = 0;
		}
		put32(p + at, (uint32_t)n << 16 | (uint32_t)(k == 1 ? len - (51 + 4) : len));
		len += n;
	}
	for (size_t i = 55; i < FIXED_END; i++)
		p[i] = (uint8_t)rnd();
	if (id != 1 || rnd() % 10 == 0)
		len = rnd() % (len + 1);	// short records: fields read as missing
	return len < 8 ? 8 : len;
}

// A stream of one to three pages of random records.
static uint8_t *random_stream(size_t *size)
{
	int npages = 1 + (int)(rnd() % 3);
	uint8_t *data = calloc((size_t)npages, PAGE_SIZE), *payload = malloc(PAGE_SIZE / 4);

	for (int pg = 0; pg < npages; pg++) {
		uint8_t *page = data + (size_t)pg * PAGE_SIZE;
		size_t pos = 16;
		uint64_t ts = 1000000000ULL * (1 + rnd() % 100000) + (uint64_t)pg * 1000000;

		memcpy(page, &ts, 8);
		while (rnd() % 40) {
			size_t n = random_payload(payload), padded = (n + 3) & ~(size_t)3;
			uint32_t delta = (uint32_t)(rnd() % 100000);

			if (pos + 8 + padded > PAGE_SIZE)
				break;
			if (padded <= 112) {
				put32(page + pos, (uint32_t)(padded / 4) | delta << 5);
				pos += 4;
			} else {
				put32(page + pos, delta << 5);
				put32(page + pos + 4, (uint32_t)padded + 4);
				pos += 8;
			}
			memcpy(page + pos, payload, n);
			pos += padded;
		}
		uint64_t commit = pos - 16;

		memcpy(page + 8, &commit, 8);
	}
	free(payload);
	*size = (size_t)npages * PAGE_SIZE;
	return data;
}

static void lit_op(struct tf_op *op, uint8_t *lits, size_t *lits_len)
{
	memset(op, 0, sizeof(*op));
	op->prec = -1;
	op->letter = 's';
	op->src = TF_SRC_LIT;
	op->index = (uint32_t)*lits_len;
	op->len = (uint32_t)random_text(lits + *lits_len, 40);
	*lits_len += op->len;
	if (rnd() % 50 == 0)
		op->len += 5;	// past the literals: must be refused
}

static void random_op(struct tf_op *op, uint8_t *lits, size_t *lits_len)
{
	static const char letters[] = "doxXs";

	if (rnd() % 3 == 0) {
		lit_op(op, lits, lits_len);
		return;
	}
	memset(op, 0, sizeof(*op));
	op->prec = -1;
	op->letter = 's';
	op->src = (uint8_t)(rnd() % (TF_SRC_MAX + 2));
	op->conv = (uint8_t)(rnd() % (TF_CONV_MAX + 2));
	if (rnd() % 16) {	// mostly ops that fit: a field and a conversion of its kind
		static const uint8_t by_kind[4][4] = {
			[RB_KIND_INT] = { TF_CONV_INT, TF_CONV_CHAR, TF_CONV_SYM, TF_CONV_INT },
			[RB_KIND_STR] = { TF_CONV_STR, TF_CONV_RAW, TF_CONV_JSON_STR, TF_CONV_STR },
			[RB_KIND_BYTES] = { TF_CONV_HEX_BYTES, TF_CONV_JSON_BYTES, TF_CONV_HEX_BYTES,
					    TF_CONV_JSON_BYTES },
			[RB_KIND_INT_ARRAY] = { TF_CONV_HEX_LIST, TF_CONV_DEC_LIST, TF_CONV_JSON_LIST,
						TF_CONV_INT },
		};
		size_t j = rnd() % NFIELDS;

		op->field = (uint32_t)j;
		op->conv = by_kind[fields[j].kind][rnd() % 4];
		op->src = TF_SRC_FIELD;
		if (fields[j].kind == RB_KIND_INT_ARRAY && op->conv == TF_CONV_INT)
			op->src = TF_SRC_ELEM;
		if (rnd() % 3 == 0) {	// or a header value
			op->src = (uint8_t)(TF_SRC_COMM + rnd() % 6);
			static const uint8_t comm_convs[] = { TF_CONV_STR, TF_CONV_RAW, TF_CONV_JSON_STR };

			op->conv = op->src == TF_SRC_COMM ? comm_convs[rnd() % 3] :
				   (uint8_t)(rnd() % 4 ? TF_CONV_INT : TF_CONV_CHAR);
		}
		if (rnd() % 10 == 0)
			op->src = (uint8_t)(TF_SRC_CELL_BEGIN + rnd() % 3);
	}
	op->flags = (uint8_t)(rnd() % 8 ? rnd() % 32 : rnd());
	op->letter = rnd() % 40 ? letters[rnd() % (sizeof(letters) - 1)] : (char)rnd();
	op->width = rnd() % 3 ? 0 : (int32_t)(rnd() % 300);
	op->prec = rnd() % 3 ? -1 : (int32_t)(rnd() % 40);
	if (rnd() % 100 == 0)
		op->width = TF_MAX_WIDTH + 1;
	op->cast_size = (uint8_t)("\0\0\1\2\4\x08\3"[rnd() % 7]);
	op->cast_signed = (uint8_t)(rnd() % 2);
	if (rnd() % 30 == 0)
		op->field = (uint32_t)(rnd() % (NFIELDS + 3));
	op->index = (uint32_t)(rnd() % 6);
}

static void mark_op(struct tf_op *op, uint8_t src)
{
	memset(op, 0, sizeof(*op));
	op->src = src;
	op->letter = 's';
	op->prec = -1;
}

// The start of a plan shaped like a JSON or CSV line: the time, then a thread part (thread and
// CPU values, literals, CSV cells of them, stray cell ends) in the middle of the line, then an
// integer cell that empties when its value is missing (and maybe another before the thread
// part, with no cell end before it). Returns the ops written (at most 33).
static uint32_t shaped_ops(struct tf_op *ops, uint8_t *lits, size_t *lits_len)
{
	static const uint8_t values[] = { TF_SRC_CPU, TF_SRC_TGID, TF_SRC_TID, TF_SRC_COMM };
	static const uint8_t comm_convs[] = { TF_CONV_STR, TF_CONV_RAW, TF_CONV_JSON_STR };
	uint32_t n = 0, nvalues = 2 + (uint32_t)(rnd() % 4);

	mark_op(&ops[n], TF_SRC_SECS);
	ops[n++].letter = 'd';
	lit_op(&ops[n++], lits, lits_len);
	mark_op(&ops[n], TF_SRC_NSECS);
	ops[n].letter = 'd';
	ops[n].flags = TF_F_ZERO;
	ops[n++].width = rnd() % 4 ? 9 : (int32_t)(rnd() % 12);
	if (rnd() % 4 == 0) {	// (a missing value whose empty cell ends after the thread values)
		mark_op(&ops[n], TF_SRC_ELEM);
		ops[n].field = 9;
		ops[n++].flags = TF_F_EMPTY_CELL;
	}
	for (uint32_t v = 0; v < nvalues; v++) {
		bool cell = rnd() % 3 == 0;
		struct tf_op *op;

		if (rnd() % 2)
			lit_op(&ops[n++], lits, lits_len);
		if (rnd() % 8 == 0)	// (a cell end that quotes from before the part)
			mark_op(&ops[n++], TF_SRC_CELL_END);
		if (cell)
			mark_op(&ops[n++], TF_SRC_CELL_BEGIN);
		op = &ops[n++];
		mark_op(op, values[rnd() % 4]);
		op->conv = op->src == TF_SRC_COMM ? comm_convs[rnd() % 3] : TF_CONV_INT;
		op->letter = "sd"[rnd() % 2];
		if (rnd() % 4 == 0)
			op->flags = (uint8_t)(rnd() % 32);
		if (rnd() % 4 == 0)
			op->width = (int32_t)(rnd() % 20);
		if (cell)
			mark_op(&ops[n++], TF_SRC_CELL_END);
	}
	if (rnd() % 3)	// (or the empty cell starts where the last cell started)
		mark_op(&ops[n++], TF_SRC_CELL_BEGIN);
	lit_op(&ops[n++], lits, lits_len);
	mark_op(&ops[n], rnd() % 2 ? TF_SRC_ELEM : TF_SRC_FIELD);
	ops[n].field = ops[n].src == TF_SRC_ELEM ? 9 : (uint32_t)(rnd() % 5);
	ops[n].index = (uint32_t)(rnd() % 4);
	ops[n].letter = "sdx"[rnd() % 3];
	ops[n++].flags = TF_F_EMPTY_CELL;
	mark_op(&ops[n++], TF_SRC_CELL_END);
	return n;
}

static void random_plan(struct tf_formatter *f, uint16_t id)
{
	struct tf_op ops[64];
	uint8_t lits[64 * 40];

	for (int attempt = 0; attempt < 8; attempt++) {
		size_t lits_len = 0;
		uint32_t n = (uint32_t)(rnd() % (rnd() % 4 ? 12 : 32)), k = 0;
		int kind = rnd() % 10 == 0 ? TF_PLAN_CALLER : rnd() % 10 == 0 ? TF_PLAN_SKIP : TF_PLAN_OPS;

		if (rnd() % 3 == 0) {	// (then a few random ops: each may be refused)
			k = shaped_ops(ops, lits, &lits_len);
			n = k + (uint32_t)(rnd() % 4);
		}
		for (; k < n; k++)
			random_op(&ops[k], lits, &lits_len);
		if (!tf_set_plan(f, id, kind, ops, n, lits, lits_len)) {
			n_plans++;
			return;
		}
		n_refused++;
	}
	tf_set_plan(f, id, TF_PLAN_SKIP, NULL, 0, NULL, 0);
}

// The answer to a TF_NEED_* (or TF_ERR_PLAN), random but a function of what is asked (and of
// @ordinal, the event's position in the stream, for caller text), so that the batch and the
// record paths get the same answers. 0, or -1 for a status that is not a need.
static uint64_t answer_seed;

static int answer(struct tf_formatter *f, int status, const struct tf_need *need, uint64_t ordinal)
{
	uint64_t saved = rng_state, key = (uint64_t)status * 0x9e3779b97f4a7c15ULL;
	uint8_t name[300];
	int ret = 0;

	switch (status) {
	case TF_NEED_PLAN:
	case TF_ERR_PLAN:
		key ^= need->id;
		break;
	case TF_NEED_THREAD:
		key ^= (uint32_t)need->tid;
		break;
	case TF_NEED_SYMBOL:
		key ^= need->addr * 31 + (uint64_t)need->tgid * 7 + need->neg;
		break;
	case TF_NEED_CALLER:
		key ^= ordinal;
		break;
	}
	rng_state = (answer_seed ^ key) * 0xff51afd7ed558ccdULL | 1;
	switch (status) {
	case TF_NEED_PLAN:
		random_plan(f, need->id);
		break;
	case TF_NEED_THREAD:
		tf_add_thread(f, need->tid, name, random_text(name, sizeof(name)),
			      (int64_t)rnd() >> (rnd() % 64), (int64_t)rnd() >> (rnd() % 64));
		break;
	case TF_NEED_SYMBOL:
		tf_add_symbol(f, need->tgid, need->addr, need->neg, name,
			      random_text(name, sizeof(name)));
		break;
	case TF_NEED_CALLER:
		tf_buf_append(&f->out, name, random_text(name, sizeof(name)));
		break;
	case TF_ERR_PLAN:	// (a plan naming a field its event lacks: print it no more)
		tf_set_plan(f, need->id, TF_PLAN_SKIP, NULL, 0, NULL, 0);
		break;
	default:
		ret = -1;
	}
	rng_state = saved;
	return ret;
}

// Format a batch (its events are at @base on in the stream), appending the text to @all.
static void format_batch(struct tf_formatter *f, const struct rb_batch *batch,
			 const struct rb_schema *schema, uint64_t serial, uint64_t base,
			 struct tf_buf *all)
{
	struct tf_input in = { .batch = batch, .schema = schema, .serial = serial, .swap = false };
	struct tf_need need;
	size_t pos = 0;
	int status;

	f->out.len = 0;
	for (int rounds = 0; rounds < 100000; rounds++) {
		memset(&need, 0, sizeof(need));
		status = tf_format(f, &in, &pos, &need);
		if (status == TF_DONE)
			break;
		n_needs++;
		if (answer(f, status, &need, base + need.index)) {
			fprintf(stderr, "tf_format failed: %d\n", status);
			exit(1);
		}
		if (status == TF_NEED_CALLER)
			pos = need.index + 1;
	}
	if (f->out.len > f->out.cap) {
		fprintf(stderr, "output past its buffer\n");
		exit(1);
	}
	touch(f->out.p, f->out.len);
	tf_buf_append(all, f->out.p, f->out.len);
	n_events += batch->n;
	n_bytes += f->out.len;
}

// The same streams through tf_format_records (output taken in random chunks), appended to @all.
// @uncached: with the plans' thread parts turned off (each op run for every event), which the
// cached parts must print the same as.
static void format_records(const struct rb_layout *layout, uint8_t **streams, size_t *sizes,
			   int n, const struct rb_schema *schema, uint64_t serial, struct tf_buf *all,
			   bool uncached)
{
	struct tf_formatter *f = tf_formatter_new();
	struct rb_reader reader;
	struct tf_records r = { .schema = schema, .serial = serial };
	struct tf_need need;
	int status;

	if (!f || rb_reader_init(&reader, layout, (size_t)n, false))
		exit(2);
	for (int i = 0; i < n; i++)
		rb_reader_set_stream(&reader, (size_t)i, i, streams[i], sizes[i]);
	r.reader = &reader;
	for (long rounds = 0; rounds < 10000000; rounds++) {
		memset(&need, 0, sizeof(need));
		for (uint16_t id = 0; uncached && id <= 3; id++)	// (random_payload's ids)
			if (f->plans[id])
				f->plans[id]->head_end = 0;
		status = tf_format_records(f, &r, uncached ? f->out.len + 1 : 1 + rnd() % 3000,
					   &need);
		if (status == TF_DONE || status == TF_MORE) {
			if (f->out.len > f->out.cap) {
				fprintf(stderr, "output past its buffer\n");
				exit(1);
			}
			tf_buf_append(all, f->out.p, f->out.len);
			f->out.len = 0;
			if (status == TF_DONE)
				break;
			continue;
		}
		if (status == TF_NEED_CALLER && !r.pending) {
			fprintf(stderr, "a caller's record that is not held\n");
			exit(1);
		}
		if (answer(f, status, &need, r.events)) {
			fprintf(stderr, "tf_format_records failed: %d\n", status);
			exit(1);
		}
		if (status == TF_NEED_CALLER) {
			r.pending = false;
			r.events++;
		}
	}
	rb_reader_deinit(&reader);
	tf_formatter_free(f);
}

static void direct_calls(void)
{
	struct tf_buf buf = { 0 };
	uint8_t text[7000];
	size_t n = random_text(text, sizeof(text));

	tf_put_int(&buf, rnd() % 2, rnd() >> (rnd() % 64), "doxXs"[rnd() % 5], (unsigned int)rnd() % 32,
		   (int32_t)(rnd() % 200), (int32_t)(rnd() % 50) - 1);
	tf_put_text(&buf, text, n, (int)(rnd() % 3));
	touch(buf.p, buf.len);
	free(buf.p);
}

int main(int argc, char **argv)
{
	struct rb_layout layout = { .long_size = 8, .big_endian = false, .page_size = PAGE_SIZE };
	struct rb_event_format formats[2] = {
		{ .id = 1, .nfields = NFIELDS, .fields = fields },
		{ .id = 2, .nfields = 0, .fields = fields },
	};
	static struct rb_schema schema;
	struct tf_buf by_batch = { 0 }, by_record = { 0 };
	long iterations;

	if (argc != 3) {
		fprintf(stderr, "usage: %s ITERATIONS SEED\n", argv[0]);
		return 2;
	}
	iterations = strtol(argv[1], NULL, 0);
	rng_state = strtoull(argv[2], NULL, 0) << 1 | 1;
	if (rb_schema_init(&schema, formats, 2))
		return 2;

	for (long it = 0; it < iterations; it++) {
		struct tf_formatter *f = tf_formatter_new();
		struct rb_reader reader;
		struct rb_batch batch;
		uint8_t *streams[3];
		size_t sizes[3];
		int n = 1 + (int)(rnd() % 3);

		if (!f)
			return 2;
		for (int i = 0; i < n; i++)
			streams[i] = random_stream(&sizes[i]);
		if (rb_reader_init(&reader, &layout, (size_t)n, false) ||
		    rb_batch_init(&batch, &schema, false))
			return 2;
		for (int i = 0; i < n; i++)
			rb_reader_set_stream(&reader, (size_t)i, i, streams[i], sizes[i]);
		answer_seed = rnd();
		for (uint64_t base = 0;;) {
			long got = rb_batch_fill(&batch, &reader, 1 + rnd() % 500);

			if (got <= 0)
				break;
			format_batch(f, &batch, &schema, (uint64_t)it % 3, base, &by_batch);	// (0: no serial)
			base += batch.n;
			rb_batch_reset(&batch);
		}
		rb_batch_deinit(&batch);
		rb_reader_deinit(&reader);
		// the record path prints the same bytes, with and without the cached thread parts
		for (int uncached = 0; uncached < 2; uncached++) {
			format_records(&layout, streams, sizes, n, &schema, (uint64_t)it % 3,
				       &by_record, uncached);
			if (by_batch.len != by_record.len ||
			    memcmp(by_batch.p, by_record.p, by_batch.len)) {
				fprintf(stderr, "iteration %ld: the record path%s printed %zu bytes, "
					"the batches %zu, not the same\n", it,
					uncached ? " (uncached)" : "", by_record.len, by_batch.len);
				return 1;
			}
			by_record.len = 0;
		}
		by_batch.len = 0;
		for (int i = 0; i < n; i++)
			free(streams[i]);
		tf_formatter_free(f);
		direct_calls();
	}
	free(by_batch.p);
	free(by_record.p);
	printf("ok %ld iterations: %llu events, %llu bytes out, %llu plans (%llu refused), %llu stops\n",
	       iterations, (unsigned long long)n_events, (unsigned long long)n_bytes,
	       (unsigned long long)n_plans, (unsigned long long)n_refused, (unsigned long long)n_needs);
	return 0;
}
