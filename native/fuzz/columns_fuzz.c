// SPDX-License-Identifier: GPL-2.0-only
// columns_fuzz.c - a standalone driver for columns.c (for ASan/UBSan), built by
// tests/test_answers.py together with ringbuf.c, reader.c and columns.c. Usage:
//
//   colfuzz ITERATIONS SEED
//
// Each iteration makes a column of random spans (random bytes and lengths, some missing), lays it
// out for a text, bytes or integer-array field of random element size and sign in buffers of the
// exact sizes col_varlen_size() asks for (any overrun hits a red zone), and checks the layout:
// offsets from 0 rising to the data size, the validity bits, text that is valid UTF-8 and equal
// to its source where that was valid, array elements equal to a plain reading. Then it scatters
// a batch of random rows of two formats with col_common() over a random table of threads and
// checks every row's time, thread index and thread group. Exit 0 and "ok": no bug found.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "columns.h"
#include "fuzzing.h"

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

// An independent UTF-8 check: a sequence is valid when it decodes to a scalar value in its
// shortest form.
static size_t valid_utf8_prefix(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint32_t c = p[i], cp, min;
		size_t len;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0)
			len = 2, cp = c & 0x1f, min = 0x80;
		else if ((c & 0xf0) == 0xe0)
			len = 3, cp = c & 0x0f, min = 0x800;
		else if ((c & 0xf8) == 0xf0)
			len = 4, cp = c & 0x07, min = 0x10000;
		else
			return i;
		if (i + len > n)
			return i;
		for (size_t k = 1; k < len; k++) {
			if ((p[i + k] & 0xc0) != 0x80)
				return i;
			cp = cp << 6 | (p[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return i;
		i += len;
	}
	return n;
}

static void *exact(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		FAIL("out of memory");
	return p;
}

static void varlen_round(void)
{
	static const uint8_t kinds[] = { RB_KIND_STR, RB_KIND_BYTES, RB_KIND_INT_ARRAY };
	static const uint8_t sizes[] = { 1, 2, 4, 8 };
	struct rb_field f = { .offset = 0, .size = 0, .loc = 0, .kind = kinds[rnd() % 3], .elem_size = sizes[rnd() % 4], .is_signed = (uint8_t)(rnd() & 1) };
	size_t n = rnd() % 40;
	struct rb_span *spans = exact(n * sizeof(*spans));
	uint8_t **bufs = exact(n * sizeof(*bufs));
	bool swap = rnd() & 1;

	for (size_t r = 0; r < n; r++) {
		uint32_t len = (uint32_t)(rnd() % 24);

		if (f.kind == RB_KIND_INT_ARRAY)
			len -= len % f.elem_size;
		bufs[r] = exact(len);
		for (uint32_t k = 0; k < len; k++)	// (mostly text, some high bytes)
			bufs[r][k] = (uint8_t)(rnd() % 4 ? 0x20 + rnd() % 0x5f : rnd());
		spans[r].ptr = rnd() % 7 ? bufs[r] : NULL;
		spans[r].len = len;
	}
	struct col_size size = col_varlen_size(&f, spans, n);
	int64_t *offsets = exact((n + 1) * sizeof(*offsets));
	uint8_t *data = exact(size.data);
	uint8_t *validity = size.nulls ? exact((n + 7) / 8) : NULL;

	col_varlen_fill(&f, spans, n, swap, offsets, data, validity);
	if (offsets[0] != 0)
		FAIL("first offset %lld", (long long)offsets[0]);
	for (size_t r = 0; r < n; r++) {
		const struct rb_span *sp = &spans[r];
		int64_t a = offsets[r], b = offsets[r + 1];
		bool valid = !validity || (validity[r / 8] >> (r % 8) & 1);

		if (b < a || valid != (sp->ptr != NULL))
			FAIL("row %zu: offsets %lld..%lld, valid %d", r, (long long)a, (long long)b, valid);
		if (!sp->ptr) {
			if (a != b)
				FAIL("row %zu: a missing value with data", r);
			continue;
		}
		if (f.kind == RB_KIND_INT_ARRAY) {
			const int64_t *v = (const int64_t *)data + a;

			if ((size_t)(b - a) != sp->len / f.elem_size)
				FAIL("row %zu: %lld elements of %u bytes", r, (long long)(b - a), sp->len);
			for (int64_t k = 0; k < b - a; k++)
				if (v[k] != rb_read_int(sp->ptr + k * f.elem_size, f.elem_size, f.is_signed, swap))
					FAIL("row %zu: element %lld", r, (long long)k);
			continue;
		}
		touch(data + a, (size_t)(b - a));
		if (f.kind == RB_KIND_BYTES) {
			if ((size_t)(b - a) != sp->len || memcmp(data + a, sp->ptr, sp->len))
				FAIL("row %zu: bytes differ", r);
			continue;
		}
		if (valid_utf8_prefix(data + a, (size_t)(b - a)) != (size_t)(b - a))
			FAIL("row %zu: text is not valid UTF-8", r);
		if (valid_utf8_prefix(sp->ptr, sp->len) == sp->len &&
		    ((size_t)(b - a) != sp->len || memcmp(data + a, sp->ptr, sp->len)))
			FAIL("row %zu: valid text changed", r);
	}
	if (n && (size_t)offsets[n] * (f.kind == RB_KIND_INT_ARRAY ? 8 : 1) != size.data)
		FAIL("last offset %lld for %zu bytes", (long long)offsets[n], size.data);
	for (size_t r = 0; r < n; r++)
		free(bufs[r]);
	free(bufs);
	free(spans);
	free(offsets);
	free(data);
	free(validity);
}

static struct rb_schema schema;

static void common_round(void)
{
	struct rb_event_format formats[2] = { { 10, 0, NULL }, { 11, 0, NULL } };
	size_t nthreads = rnd() % 6, n = 1 + rnd() % 64, rows[2] = { 0, 0 };
	int32_t tids[6], tgids[6];
	struct rb_batch b;
	uint64_t *ts[2];
	int32_t *cpu[2], *pid[2], *thread[2], *tgid[2];

	if (rb_schema_init(&schema, formats, 2))
		FAIL("schema");
	for (size_t i = 0; i < nthreads; i++) {	// ascending, with gaps
		tids[i] = (int32_t)(i ? tids[i - 1] + 1 + rnd() % 3 : rnd() % 3);
		tgids[i] = (int32_t)(1000 + rnd() % 4);
	}
	struct col_threads threads = { nthreads, tids, tgids };

	memset(&b, 0, sizeof(b));
	b.n = n;
	b.schema = &schema;
	b.ts = exact(n * sizeof(*b.ts));
	b.cpu = exact(n * sizeof(*b.cpu));
	b.id = exact(n * sizeof(*b.id));
	b.pid = exact(n * sizeof(*b.pid));
	b.row = exact(n * sizeof(*b.row));
	for (size_t i = 0; i < n; i++) {
		int which = (int)(rnd() % 3);	// 2: an id without a format

		b.ts[i] = i;
		b.cpu[i] = (int32_t)(rnd() % 4);
		b.id[i] = (uint16_t)(which == 2 ? 12 : 10 + which);
		b.pid[i] = (int32_t)(rnd() % 12);
		b.row[i] = which == 2 ? UINT32_MAX : (uint32_t)rows[which]++;
	}
	for (int k = 0; k < 2; k++) {
		ts[k] = rows[k] ? exact(rows[k] * sizeof(uint64_t)) : NULL;
		cpu[k] = exact(rows[k] * sizeof(int32_t));
		pid[k] = exact(rows[k] * sizeof(int32_t));
		thread[k] = exact(rows[k] * sizeof(int32_t));
		tgid[k] = exact(rows[k] * sizeof(int32_t));
	}
	struct col_common_out out = { ts, cpu, pid, thread, tgid };

	col_common(&b, &threads, &out);
	for (size_t i = 0, seen[2] = { 0, 0 }; i < n; i++) {
		int k = b.id[i] - 10;
		size_t r, at = nthreads;

		if (k > 1)
			continue;
		r = seen[k]++;
		for (size_t t = 0; t < nthreads; t++)
			if (tids[t] == b.pid[i])
				at = t;
		if (ts[k][r] != b.ts[i] || cpu[k][r] != b.cpu[i] || pid[k][r] != b.pid[i] ||
		    thread[k][r] != (int32_t)at || tgid[k][r] != (at < nthreads ? tgids[at] : b.pid[i]))
			FAIL("event %zu: row %zu of format %d", i, r, k);
	}
	for (int k = 0; k < 2; k++) {
		free(ts[k]);
		free(cpu[k]);
		free(pid[k]);
		free(thread[k]);
		free(tgid[k]);
	}
	free(b.ts);
	free(b.cpu);
	free(b.id);
	free(b.pid);
	free(b.row);
}

int main(int argc, char **argv)
{
	long iterations;

	if (argc != 3) {
		fprintf(stderr, "usage: colfuzz ITERATIONS SEED\n");
		return 2;
	}
	iterations = strtol(argv[1], NULL, 10);
	rng_state = strtoull(argv[2], NULL, 10) * 0x9E3779B97F4A7C15ULL | 1;
	for (long i = 0; i < iterations; i++) {
		varlen_round();
		if (i % 8 == 0)
			common_round();
	}
	printf("ok %ld\n", iterations);
	return 0;
}
