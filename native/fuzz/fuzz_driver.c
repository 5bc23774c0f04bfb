// SPDX-License-Identifier: GPL-2.0-only
// fuzz_driver.c - a standalone driver that feeds mutated pages to the decoder (for ASan/UBSan).
//
// Not part of the extension (setup.py builds native/*.c only): tests/test_native.py builds it with
// -fsanitize=address,undefined, together with ringbuf.c and reader.c. Usage:
//
//   rbfuzz CORPUS PAGE_SIZE LONG_SIZE BIG_ENDIAN ITERATIONS SEED
//
// CORPUS holds whole pages. Each iteration copies one page into an exactly sized heap buffer (so
// any overread hits a red zone), mutates it (random bytes, commit sizes, record headers, a cut),
// walks it with rb_page_*, and every few iterations decodes a few mutated pages as CPU streams
// through rb_reader/rb_batch with a table of every field kind, touching every decoded byte, and
// walks the same streams for their event ids (rb_stream_ids).
// Exit 0 and a silent sanitizer mean no bug was found.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzing.h"
#include "ringbuf.h"

static void put32(uint8_t *p, uint32_t v, bool be)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(be ? v >> (24 - 8 * i) : v >> (8 * i));
}

static void mutate(uint8_t *page, size_t *len, const struct rb_layout *l)
{
	size_t doff = 8 + l->long_size;
	int n = 1 + (int)(rnd() % 8);

	for (int i = 0; i < n; i++) {
		size_t at = rnd() % *len;

		switch (rnd() % 8) {
		case 0:	// random byte
			page[at] = (uint8_t)rnd();
			break;
		case 1:	// bit flip
			page[at] ^= (uint8_t)(1U << (rnd() % 8));
			break;
		case 2:	// commit size, with or without missed flags
			put32(page + 8 + (l->big_endian && l->long_size == 8 ? 4 : 0),
			      (uint32_t)(rnd() % (l->page_size + 64)) |
			      (uint32_t)(rnd() % 4) << 30, l->big_endian);
			break;
		case 3:	// a record header with a special type_len
			if (*len >= doff + 4) {
				size_t pos = doff + 4 * (rnd() % ((*len - doff) / 4));
				uint32_t type_len = (uint32_t)(rnd() % 4 ? 28 + rnd() % 4 : rnd() % 32);
				uint32_t hdr = l->big_endian ? type_len << 27 | (uint32_t)(rnd() & 0x7ffffff)
							     : type_len | (uint32_t)rnd() << 5;

				if (pos + 4 <= *len)
					put32(page + pos, hdr, l->big_endian);
			}
			break;
		case 4:	// a length word after a header
			if (at + 4 <= *len)
				put32(page + at, (uint32_t)(rnd() % 8192), l->big_endian);
			break;
		case 5:	// a data_loc word
			if (at + 4 <= *len)
				put32(page + at, (uint32_t)(rnd() % 512) << 16 | (uint32_t)(rnd() % 512),
				      l->big_endian);
			break;
		case 6:	// cut the page
			*len = rnd() % (*len + 1);
			if (!*len)
				*len = 1;
			return;
		default:	// zero a run
			memset(page + at, 0, (size_t)(rnd() % (*len - at + 1)));
			break;
		}
	}
}

static const struct rb_field fields[] = {
	{ .offset = 0, .size = 2, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT },
	{ .offset = 4, .size = 4, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT, .is_signed = 1 },
	{ .offset = 9, .size = 8, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT },
	{ .offset = 13, .size = 1, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT, .is_signed = 1 },
	{ .offset = 8, .size = 4, .loc = RB_LOC_DATA, .kind = RB_KIND_STR },
	{ .offset = 12, .size = 4, .loc = RB_LOC_REL, .kind = RB_KIND_STR },
	// (a counted string: its length and head elsewhere in the record, as probectl.formats links them)
	{ .offset = 8, .size = 4, .loc = RB_LOC_DATA, .kind = RB_KIND_STR, .bound_size = 8, .bound_offset = 16,
	  .head_size = 64, .head_offset = 12 },
	// (a slice: its elements up to the length elsewhere in the record)
	{ .offset = 16, .size = 16, .loc = RB_LOC_FIXED, .kind = RB_KIND_INT_ARRAY, .elem_size = 8,
	  .bound_size = 4, .bound_offset = 8 },
	{ .offset = 16, .size = 4, .loc = RB_LOC_DATA, .kind = RB_KIND_INT_ARRAY, .elem_size = 8 },
	{ .offset = 8, .size = 16, .loc = RB_LOC_FIXED, .kind = RB_KIND_STR },
	{ .offset = 20, .size = 0, .loc = RB_LOC_TAIL, .kind = RB_KIND_INT_ARRAY, .elem_size = 4 },
	{ .offset = 24, .size = 0, .loc = RB_LOC_TAIL, .kind = RB_KIND_STR },
	{ .offset = 100, .size = 4000, .loc = RB_LOC_FIXED, .kind = RB_KIND_BYTES },
	{ .offset = 8, .size = 12, .loc = RB_LOC_DATA, .kind = RB_KIND_STR_ARRAY, .elem_size = 4 },
	{ .offset = 12, .size = 8, .loc = RB_LOC_REL, .kind = RB_KIND_STR_ARRAY, .elem_size = 4 },
};

// The strings of an RB_KIND_STR_ARRAY span (other kinds have none).
static void touch_str_array(const struct rb_field *f, const struct rb_span *sp, bool swap)
{
	struct rb_span item;

	if (f->kind != RB_KIND_STR_ARRAY)
		return;
	for (uint32_t i = 0; i <= f->size / 4; i++)	// (one past the last: must be refused)
		if (rb_str_array_item(f, sp->ptr, sp->len, swap, i, &item) && item.ptr)
			touch(item.ptr, item.len);
}

static void walk_page(const uint8_t *page, size_t len, const struct rb_layout *l)
{
	struct rb_page pg;
	struct rb_event ev;
	int ret;

	if (rb_page_load(&pg, l, page, len))
		return;
	while ((ret = rb_page_next(&pg, &ev)) == 1) {
		touch(ev.data, ev.len);
		for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
			struct rb_span sp;
			int64_t v;

			if (fields[i].kind == RB_KIND_INT) {
				rb_field_int(&fields[i], ev.data, ev.len, pg.swap, &v);
				sink += (uint64_t)v;
			} else if (rb_field_span(&fields[i], ev.data, ev.len, pg.swap, &sp)) {
				touch(sp.ptr, sp.len);
				touch_str_array(&fields[i], &sp, pg.swap);
			}
		}
	}
}

static void decode_streams(uint8_t **pages, size_t *lens, int n, const struct rb_layout *l,
			   struct rb_schema *schema)
{
	struct rb_reader reader;
	struct rb_batch batch;
	static uint8_t seen[65536 / 8];

	for (int i = 0; i < n; i++)
		sink += rb_stream_ids(l, pages[i], lens[i], seen);
	if (rb_reader_init(&reader, l, (size_t)n, rnd() % 2))
		return;
	for (int i = 0; i < n; i++)
		rb_reader_set_stream(&reader, (size_t)i, i, pages[i], lens[i]);
	if (rb_batch_init(&batch, schema, true)) {
		rb_reader_deinit(&reader);
		return;
	}
	for (;;) {
		long got = rb_batch_fill(&batch, &reader, 1 + rnd() % 300);

		if (got <= 0)
			break;
		for (size_t i = 0; i < batch.n; i++) {
			touch(batch.raw[i].ptr, batch.raw[i].len);
			if (batch.row[i] == UINT32_MAX)
				continue;
			for (size_t j = 0; j < sizeof(fields) / sizeof(fields[0]); j++) {
				const struct rb_column *c = &batch.rows[0].cols[j];

				if (fields[j].kind == RB_KIND_INT)
					sink += (uint64_t)c->ints[batch.row[i]];
				else if (c->spans[batch.row[i]].ptr) {
					touch(c->spans[batch.row[i]].ptr, c->spans[batch.row[i]].len);
					touch_str_array(&fields[j], &c->spans[batch.row[i]], reader.swap);
				}
			}
		}
		sink += batch.nlost;
		rb_batch_reset(&batch);
	}
	rb_batch_deinit(&batch);
	rb_reader_deinit(&reader);
}

int main(int argc, char **argv)
{
	struct rb_layout l;
	struct rb_event_format fmt = { .id = 0, .nfields = sizeof(fields) / sizeof(fields[0]),
				       .fields = fields };
	static struct rb_schema schema;
	uint8_t *corpus;
	size_t npages;
	long iterations;
	FILE *f;
	long size;

	if (argc != 7) {
		fprintf(stderr, "usage: %s CORPUS PAGE_SIZE LONG_SIZE BIG_ENDIAN ITERATIONS SEED\n", argv[0]);
		return 2;
	}
	l.page_size = strtoul(argv[2], NULL, 0);
	l.long_size = (unsigned int)strtoul(argv[3], NULL, 0);
	l.big_endian = strtoul(argv[4], NULL, 0) != 0;
	iterations = strtol(argv[5], NULL, 0);
	rng_state = strtoull(argv[6], NULL, 0) | 1;
	if (rb_layout_check(&l)) {
		fprintf(stderr, "bad layout\n");
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < (long)l.page_size) {
		fprintf(stderr, "cannot read a page from %s\n", argv[1]);
		return 2;
	}
	rewind(f);
	npages = (size_t)size / l.page_size;
	corpus = malloc(npages * l.page_size);
	if (!corpus || fread(corpus, l.page_size, npages, f) != npages)
		return 2;
	fclose(f);

	// One format, used for every id: every record goes through every kind of field.
	if (rb_schema_init(&schema, &fmt, 1))
		return 2;
	for (size_t i = 0; i < 65536; i++)
		schema.index[i] = 0;

	for (long it = 0; it < iterations; it++) {
		uint8_t *pages[3];
		size_t lens[3];
		int n = 1 + (int)(rnd() % 3);

		for (int i = 0; i < n; i++) {
			// A stream of one to three pages, each mutated, in one exactly sized buffer.
			int np = 1 + (int)(rnd() % 3);
			size_t total = 0;

			pages[i] = malloc(np * l.page_size);
			for (int p = 0; p < np; p++) {
				size_t len = l.page_size;
				uint8_t *tmp = malloc(len);

				memcpy(tmp, corpus + (rnd() % npages) * l.page_size, len);
				if (rnd() % 8)
					mutate(tmp, &len, &l);
				// Walk the page alone from an exactly sized copy.
				uint8_t *exact = malloc(len);

				memcpy(exact, tmp, len);
				walk_page(exact, len, &l);
				free(exact);
				memcpy(pages[i] + total, tmp, len);
				total += len;
				free(tmp);
				if (len < l.page_size)
					break;	// a cut page ends its stream
			}
			uint8_t *exact = malloc(total ? total : 1);

			memcpy(exact, pages[i], total);
			free(pages[i]);
			pages[i] = exact;
			lens[i] = total;
		}
		decode_streams(pages, lens, n, &l, &schema);
		for (int i = 0; i < n; i++)
			free(pages[i]);
	}
	free(corpus);
	printf("ok %ld iterations\n", iterations);
	return 0;
}
