// SPDX-License-Identifier: GPL-2.0-only
// aggregate_fuzz.c - a standalone driver that feeds random records to the aggregator and to the
// stack folder (fold.h), for ASan/UBSan.
//
// Not part of the extension (setup.py builds native/*.c only): tests/test_aggregate.py builds it with
// -fsanitize=address,undefined, together with ringbuf.c, reader.c and aggregate.c. Usage:
//
//   aggfuzz ITERATIONS SEED
//
// Each iteration picks plans at random (hist keys of numbers, text and __data_loc text, pid, cpu,
// stacks with log2/linear buckets; or latency start/end pairs keyed the same way), writes random
// records of the planned ids and others (lengths cut anywhere, data_loc words pointing anywhere,
// stack records with any frame count) into pages of one to three CPU streams in exactly sized heap
// buffers, feeds them in one to three calls, then flushes and walks every table entry and pair.
// Exit 0 and a silent sanitizer mean no bug was found.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "fold.h"
#include "fuzzing.h"

#define PAGE	4096
#define ID_A	100
#define ID_B	101
#define ID_STACK 4

static size_t stream_sizes[3];

// Record payload: common header (8 bytes), u64 at 8, s32 at 16, char[12] at 20, data_loc at 32.
static const struct rb_field f_u64 = { .offset = 8, .size = 8, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT, .elem_size = 0, .is_signed = 0 };
static const struct rb_field f_s32 = { .offset = 16, .size = 4, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT, .elem_size = 0, .is_signed = 1 };
static const struct rb_field f_comm = { .offset = 20, .size = 12, .loc = RB_LOC_FIXED, .kind = RB_KIND_STR, .elem_size = 0, .is_signed = 0 };
static const struct rb_field f_name = { .offset = 32, .size = 4, .loc = RB_LOC_DATA, .kind = RB_KIND_STR, .elem_size = 0, .is_signed = 0 };
static const struct rb_field f_size = { .offset = 8, .size = 4, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT, .elem_size = 0, .is_signed = 1 };
static const struct rb_field f_caller = { .offset = 16, .size = 64, .loc = RB_LOC_TAIL, .kind = RB_KIND_INT_ARRAY, .elem_size = 8, .is_signed = 0 };

static struct agg_part random_key(bool allow_stack)
{
	struct agg_part p = { 0 };

	switch (rnd() % (allow_stack ? 7 : 6)) {
	case 0: p.src = AGG_SRC_FIELD; p.field = f_u64; p.width = 8; break;
	case 1: p.src = AGG_SRC_FIELD; p.field = f_s32; p.width = 8; break;
	case 2: p.src = AGG_SRC_FIELD; p.field = f_comm; p.width = 16; return p;
	case 3: p.src = AGG_SRC_FIELD; p.field = f_name; p.width = 64; return p;
	case 4: p.src = AGG_SRC_PID; p.width = 8; break;
	case 5: p.src = AGG_SRC_CPU; p.width = 8; break;
	default: p.src = AGG_SRC_STACK; p.width = AGG_STACK_DEPTH * 8; return p;
	}
	p.bucket = (uint8_t)(rnd() % 3);
	p.step = p.bucket == AGG_LINEAR ? 1 + rnd() % 1000 : 0;
	return p;
}

static uint32_t make_plans(struct agg_plan *plans)
{
	bool latency = rnd() % 3 == 0;
	uint32_t nkeys = 1 + (uint32_t)(rnd() % 3);

	memset(plans, 0, 3 * sizeof(*plans));
	plans[0].id = ID_A;
	plans[1].id = ID_B;
	plans[0].nkeys = plans[1].nkeys = nkeys;
	for (uint32_t k = 0; k < nkeys; k++)
		plans[0].keys[k] = plans[1].keys[k] = random_key(!latency && k == 0);
	if (latency) {
		plans[0].role = AGG_ROLE_START;
		plans[1].role = AGG_ROLE_END;
		plans[1].value.src = AGG_SRC_LATENCY;
		plans[1].value.bucket = (uint8_t)(rnd() % 3);
		plans[1].value.step = 1 + rnd() % 100;
		return 2;
	}
	plans[1].role = AGG_ROLE_HIST;
	if (rnd() % 2) {
		plans[0].value.src = AGG_SRC_FIELD;
		plans[0].value.field = rnd() % 2 ? f_u64 : f_s32;
	}
	plans[1].value = plans[0].value;
	plans[2].id = ID_STACK;
	plans[2].role = AGG_ROLE_STACK;
	plans[2].nkeys = 2;
	plans[2].keys[0].src = plans[2].keys[1].src = AGG_SRC_FIELD;
	plans[2].keys[0].field = f_size;
	plans[2].keys[1].field = f_caller;
	return 3;
}

// One record of random content and length; returns its size (header included).
static size_t write_record(uint8_t *p, size_t room)
{
	static const uint16_t ids[] = { ID_A, ID_B, ID_STACK, 7 };
	uint32_t len = 4 * (uint32_t)(1 + rnd() % 28);	// payload: 4..112 bytes
	uint16_t id = ids[rnd() % 4];
	uint32_t header;

	if (len + 4 > room)
		return 0;
	header = (len / 4) | (uint32_t)(rnd() % 1000) << 5;
	memcpy(p, &header, 4);
	for (uint32_t i = 0; i < len; i++)
		p[4 + i] = (uint8_t)rnd();
	if (len >= 2)
		memcpy(p + 4, &id, 2);
	if (len >= 36 && rnd() % 2) {	// a data_loc that points inside the record, sometimes
		uint32_t off = 36 + (uint32_t)(rnd() % 8), n = (uint32_t)(rnd() % 16);
		uint32_t word = n << 16 | off;

		memcpy(p + 4 + 32, &word, 4);
	}
	if (id == ID_STACK && len >= 12 && rnd() % 2) {
		int32_t frames = (int32_t)(rnd() % 40) - 4;

		memcpy(p + 4 + 8, &frames, 4);
	}
	return 4 + len;
}

static uint8_t *make_stream(size_t *size)
{
	size_t pages = 1 + rnd() % 3;
	uint8_t *buf = malloc(pages * PAGE);

	for (size_t pg = 0; pg < pages; pg++) {
		uint8_t *page = buf + pg * PAGE;
		uint64_t ts = 1000000 * (pg + 1) + rnd() % 1000;
		size_t pos = 16, n;

		memset(page, 0, PAGE);
		memcpy(page, &ts, 8);
		while ((n = write_record(page + pos, PAGE - pos)) && rnd() % 64)
			pos += n;
		uint64_t commit = pos - 16;

		memcpy(page + 8, &commit, 8);
	}
	*size = pages * PAGE - (rnd() % 4 == 0 ? rnd() % PAGE : 0);	// sometimes cut short
	uint8_t *exact = malloc(*size ? *size : 1);

	memcpy(exact, buf, *size);
	free(buf);
	return exact;
}

// The same pages folded: ID_STACK a kernel stack (or a user one), ID_B its user callchain by a
// data_loc array, ID_A a probe whose address is the u64 at 8, both selected or not.
static void fold_random(uint8_t **bufs, size_t nstreams)
{
	struct rb_layout layout = { 8, false, PAGE };
	struct fold *f = malloc(sizeof(*f));
	struct fold_stack_format stacks[2] = {
		{ .kind = (uint8_t)(rnd() % 2), .has_first = rnd() % 4 != 0, .has_array = rnd() % 4 != 0,
		  .first = f_size, .array = f_caller },
		{ .kind = FOLD_USER, .has_first = true, .has_array = true, .first = f_s32,
		  .array = { .offset = 32, .size = 4, .loc = RB_LOC_DATA, .kind = RB_KIND_INT_ARRAY, .elem_size = 8 } },
	};
	struct rb_field probe = f_u64;
	struct rb_reader reader;

	if (!f || fold_init(f))
		exit(1);
	f->stacks = stacks;
	f->nstacks = 2;
	f->stack_of[ID_STACK] = 0;
	if (rnd() % 2)
		f->stack_of[ID_B] = 1;
	f->probe_ips = &probe;
	f->nprobes = 1;
	f->probe_of[ID_A] = 0;
	if (rnd() % 2)
		f->selected[ID_A / 8] |= 1 << (ID_A % 8);
	if (rnd() % 2)
		f->selected[ID_B / 8] |= 1 << (ID_B % 8);
	rb_reader_init(&reader, &layout, nstreams, rnd() % 2);
	for (size_t s = 0; s < nstreams; s++)
		rb_reader_set_stream(&reader, s, (int)(rnd() % 5), bufs[s], stream_sizes[s]);
	fold_feed(f, &reader);
	fold_finish(f);
	for (size_t i = 0; i < f->cap; i++)
		if (f->slots[i].hash)
			touch(f->keys + f->slots[i].off, f->slots[i].len);
	rb_reader_deinit(&reader);
	fold_deinit(f);
	free(f);
}

int main(int argc, char **argv)
{
	struct rb_layout layout = { 8, false, PAGE };
	long iterations;

	if (argc != 3) {
		fprintf(stderr, "usage: aggfuzz ITERATIONS SEED\n");
		return 2;
	}
	iterations = atol(argv[1]);
	rng_state = strtoull(argv[2], NULL, 0) | 1;
	for (long it = 0; it < iterations; it++) {
		struct agg_plan plans[3];
		uint32_t n = make_plans(plans);
		struct agg *agg = malloc(sizeof(*agg));

		if (agg_init(agg, plans, n, 1 + rnd() % 1000)) {
			fprintf(stderr, "iteration %ld: valid plans refused (%u plans, %u keys: src %d %d %d, value %d)\n", it, n,
				plans[0].nkeys, plans[0].keys[0].src, plans[0].keys[1].src, plans[0].keys[2].src, plans[1].value.src);
			return 1;
		}
		for (int feed = 0, feeds = 1 + (int)(rnd() % 3); feed < feeds; feed++) {
			struct rb_reader reader;
			size_t nstreams = 1 + rnd() % 3;
			uint8_t *bufs[3];

			rb_reader_init(&reader, &layout, nstreams, rnd() % 2);
			for (size_t s = 0; s < nstreams; s++) {
				size_t size;

				bufs[s] = make_stream(&size);
				stream_sizes[s] = size;
				rb_reader_set_stream(&reader, s, (int)(rnd() % 5), bufs[s], size);
			}
			agg_feed(agg, &reader);
			rb_reader_deinit(&reader);
			fold_random(bufs, nstreams);
			for (size_t s = 0; s < nstreams; s++)
				free(bufs[s]);
		}
		agg_flush(agg);
		for (size_t i = 0; i < agg->table.cap; i++) {
			const struct agg_entry *e = agg_table_entry(&agg->table, i);

			if (e->hash)
				touch(e->key, agg->table.keylen);
		}
		touch((const uint8_t *)agg->pair_lat, agg->npairs * 8);
		touch((const uint8_t *)agg->pair_end, agg->npairs * 8);
		agg_deinit(agg);
		free(agg);
	}
	printf("ok %ld\n", iterations);
	return 0;
}
