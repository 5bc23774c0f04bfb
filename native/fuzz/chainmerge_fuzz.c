// SPDX-License-Identifier: GPL-2.0-only
// chainmerge_fuzz.c - cm_stacks(), cm_write(), cm_names() and a cm_stream (chainmerge.h) on random perf records: samples of
// every kind the recorder asks for (raw records, an entry uprobe's stack word, user registers and a
// stack copy), exec and mmap records, then a share of them with flipped bytes, cut short or with
// wrong sizes; random replacement callchains, some pointing out of their pool. Built by the tests
// with the sanitizers (tests/test_callchain.py); prints "ok N".
//
//   chainmerge_fuzz ITERATIONS SEED

#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chainmerge.h"
#include "fuzzing.h"

#define NREGS	17
#define BUF_MAX	(256 * 1024)

static size_t put(uint8_t *buf, size_t at, const void *p, size_t n)
{
	if (at + n > BUF_MAX)
		return at;
	memcpy(buf + at, p, n);
	return at + n;
}

static size_t put64(uint8_t *buf, size_t at, uint64_t v)
{
	return put(buf, at, &v, 8);
}

// One sample of perf event @id (flags @flags) at @at; its size in its header.
static size_t sample(uint8_t *buf, size_t at, uint64_t id, unsigned flags)
{
	size_t start = at;
	struct perf_event_header h = { .type = PERF_RECORD_SAMPLE };
	uint64_t nr = rnd() % 8;

	at = put(buf, at, &h, sizeof(h));
	at = put64(buf, at, id);
	at = put64(buf, at, rnd() % 4 ? (uint64_t)(rnd() % 4 + 1) << 32 | (rnd() % 4 + 1) : rnd());	// (many threads)
	at = put64(buf, at, rnd() % 100000);
	at = put64(buf, at, 0);
	at = put64(buf, at, nr);
	for (uint64_t i = 0; i < nr; i++)
		at = put64(buf, at, i == 0 ? (uint64_t)-512 : 0x400000 + rnd() % 0x10000);
	if (flags & CM_RAW) {
		uint32_t len = 12 + 8 * (uint32_t)(rnd() % 4);
		uint8_t raw[44] = { 11, 0 };

		at = put(buf, at, &len, 4);
		at = put(buf, at, raw, len);
	}
	if (flags & (CM_ENTRY | CM_STACK)) {
		uint32_t nregs = flags & CM_STACK ? NREGS : 1;
		uint64_t size = flags & CM_STACK ? 8 * (rnd() % 64) : 8;

		at = put64(buf, at, rnd() % 5 ? 2 : 0);
		for (uint32_t i = 0; i < nregs; i++)
			at = put64(buf, at, rnd());
		at = put64(buf, at, size);
		for (uint64_t i = 0; size && i < size / 8; i++)
			at = put64(buf, at, rnd());
		if (size)
			at = put64(buf, at, rnd() % (size + 16));
	}
	h.size = (uint16_t)(at - start);
	memcpy(buf + start, &h, sizeof(h));
	return at;
}

static size_t other(uint8_t *buf, size_t at)
{
	size_t start = at;
	struct perf_event_header h = { .type = rnd() % 2 ? PERF_RECORD_COMM : PERF_RECORD_MMAP2 };
	uint8_t body[120];

	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = rnd() % 3 ? (uint8_t)('a' + rnd() % 26) : (uint8_t)rnd();
	at = put(buf, at, &h, sizeof(h));
	at = put(buf, at, body, 8 * (1 + rnd() % 15));
	h.size = (uint16_t)(at - start);
	memcpy(buf + start, &h, sizeof(h));
	return at;
}

int main(int argc, char **argv)
{
	static uint8_t buf[BUF_MAX];
	struct cm_event_map map[3] = {
		{ .perf_id = 1, .event = 11, .flags = CM_RAW },
		{ .perf_id = 2, .event = 12, .flags = CM_RAW | CM_ENTRY },
		{ .perf_id = 3, .event = 13, .flags = CM_RAW | CM_STACK },
	};
	long iterations;
	int out;

	if (argc != 3)
		return 2;
	iterations = atol(argv[1]);
	rng_state = (uint64_t)atoll(argv[2]) * 0x9E3779B97F4A7C15ULL | 1;
	out = open("/dev/null", O_WRONLY);
	if (out < 0)
		return 2;
	for (long it = 0; it < iterations; it++) {
		size_t len = 0, nrec = 1 + rnd() % 40;

		for (size_t i = 0; i < nrec; i++) {
			uint64_t id = 1 + rnd() % 4;	// (4: a perf event of no map entry)

			len = rnd() % 5 ? sample(buf, len, id, id <= 3 ? map[id - 1].flags : 0) : other(buf, len);
		}
		if (rnd() % 3 == 0) {
			for (int k = 0; k < 1 + (int)(rnd() % 8); k++)
				if (len)
					buf[rnd() % len] ^= (uint8_t)(1 + rnd() % 255);
		}
		if (rnd() % 4 == 0 && len)
			len = rnd() % len;

		struct cm_args a = {
			.layout = { .page_size = 4096, .long_size = 8 },
			.perf = buf, .perf_len = len, .map = map, .nmap = 3, .callchain_id = 99,
			.window_ns = 1000000, .out_fd = out, .stack_nregs = NREGS,
		};
		struct cm_result res;
		struct cm_stack *st = NULL;
		size_t count = 0;

		if (cm_stacks(&a, &st, &count, &res))
			return 1;
		for (size_t i = 0; i < count; i++) {
			touch(st[i].regs, 8 * NREGS);
			touch(st[i].stack, st[i].stack_len);
		}
		for (size_t i = 0; i < res.nmmaps; i++)
			touch((const uint8_t *)res.mmaps[i].path, strlen(res.mmaps[i].path));
		free(res.comms);
		free(res.mmaps);

		// replacement chains for the stack samples, some of them out of their pool
		struct cm_chain *chains = calloc(count + 1, sizeof(*chains));
		uint64_t pool[256];

		if (!chains)
			return 1;
		for (size_t i = 0; i < 256; i++)
			pool[i] = rnd();
		for (size_t i = 0; i < count; i++) {
			chains[i].offset = st[i].offset;
			chains[i].start = rnd() % 300;
			chains[i].count = rnd() % 10 ? rnd() % 140 : (uint64_t)-1;
		}
		a.chains = chains;
		a.nchains = count;
		a.chain_pool = pool;
		a.chain_pool_len = 256;
		if (cm_write(&a, &res) == 0) {
			free(res.comms);
			free(res.mmaps);
		}
		free(chains);
		free(st);

		if (cm_names(&a, &res))
			return 1;
		free(res.comms);
		free(res.mmaps);

		// the records one by one into a stream, as the ring copier hands them (whole, by their size)
		struct cm_stream *s;
		struct cm_stream_stats ss;

		struct cm_rules *rules = rnd() % 2 ? cm_rules_new(NREGS, 8, 7, 6, 1 + (uint32_t)(rnd() % 130)) : NULL;

		if (cm_stream_create(&s, &a.layout, map, 3, 99, out, out, NULL) != RB_ERR_INVAL ||
		    cm_stream_create(&s, &a.layout, map, rules ? 3 : 2, 99, out, out, rules))
			return 1;
		for (int k = 0; rules && k < 4; k++) {	// some rules known, some wanted
			uint32_t pids[8];
			uint64_t addresses[8];
			struct uw_rule rule = { .kind = (uint8_t)(rnd() % 3), .cfa_reg = (uint8_t)(rnd() % 2),
						.bp_rule = (uint8_t)(rnd() % 3), .cfa_off = (int64_t)(rnd() % 64),
						.ra_off = -8, .bp_off = -16 };

			if (cm_rules_put(rules, (uint32_t)(rnd() % 5), rnd() % 2 ? rnd() : 0x400000 + rnd() % 0x10000, &rule))
				return 1;
			for (size_t n = cm_rules_wanted(rules, pids, addresses, 8), j = 0; j < n; j++)
				touch((const uint8_t *)&addresses[j], 8);
		}
		for (size_t pos = 0; pos + 8 <= len;) {
			struct perf_event_header h;

			memcpy(&h, buf + pos, sizeof(h));
			if (h.size < 8 || pos + h.size > len)
				break;
			if (cm_stream_record(s, buf + pos, h.size))
				return 1;
			pos += h.size;
		}
		if (cm_stream_finish(s))
			return 1;
		cm_stream_get_stats(s, &ss);
		touch((const uint8_t *)ss.tids, ss.ntids * sizeof(*ss.tids));
		cm_stream_destroy(s);
		cm_rules_free(rules);
	}
	close(out);
	printf("ok %ld\n", iterations);
	return 0;
}
