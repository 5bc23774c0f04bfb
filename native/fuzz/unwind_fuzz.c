// SPDX-License-Identifier: GPL-2.0-only
// unwind_fuzz.c - uw_unwind() (unwind.h) on random stack copies and random rules: offsets that point
// anywhere (inside the copy, past either end, wrapping around), rules of every kind, frame pointers
// known or not, limits from 1 frame up, and a rule callback that fails now and then. Checks that a
// complete stack's return addresses are words of the copy, that its length is within the limit, and
// that each address's rule is asked once. Built by the tests with the sanitizers
// (tests/test_unwind.py); prints "ok N".
//
//   unwind_fuzz ITERATIONS SEED

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzing.h"
#include "unwind.h"

#define ASKED_MAX	4096

static uint64_t asked[ASKED_MAX];
static uint32_t asked_pid[ASKED_MAX];
static size_t nasked;
static int fail_one_in;

static int random_rule(void *ctx, uint32_t pid, uint64_t address, struct uw_rule *ret)
{
	(void)ctx;
	for (size_t i = 0; i < nasked; i++)
		if (asked[i] == address && asked_pid[i] == pid)
			abort();	// (the cache must answer a second time)
	if (fail_one_in && rnd() % (uint64_t)fail_one_in == 0)
		return -1;	// (not kept: asked again next time)
	if (nasked < ASKED_MAX) {
		asked[nasked] = address;
		asked_pid[nasked++] = pid;
	}
	ret->kind = rnd() % 10 == 0 ? UW_RULE_OUTERMOST : rnd() % 10 == 0 ? UW_RULE_OTHER : UW_RULE_STEP;
	ret->cfa_reg = rnd() % 3 ? UW_SP : UW_BP;
	ret->cfa_off = rnd() % 4 ? (int64_t)(rnd() % 64) : (int64_t)rnd();
	ret->ra_off = rnd() % 4 ? -8 : (int64_t)rnd();
	ret->bp_rule = (uint8_t)(rnd() % 3);
	ret->bp_off = rnd() % 4 ? -16 : (int64_t)rnd();
	return 0;
}

int main(int argc, char **argv)
{
	static uint8_t stack[4096];
	uint64_t out[200];
	long iterations;

	if (argc != 3)
		return 2;
	iterations = atol(argv[1]);
	rng_state = (uint64_t)atoll(argv[2]) * 0x9E3779B97F4A7C15ULL | 1;
	for (long it = 0; it < iterations; it++) {
		struct uw_cache *cache = uw_cache_new();
		uint64_t sp = rnd() % 3 ? 0x7ffc00000000ULL + 8 * (rnd() % 1000) : rnd();
		size_t len = rnd() % 5 ? rnd() % sizeof(stack) : rnd() % 16;
		uint32_t limit = 1 + (uint32_t)(rnd() % 200);

		if (!cache)
			return 1;
		nasked = 0;
		fail_one_in = rnd() % 4 ? 0 : 50;
		// a stack of plausible frames (return addresses among a few, saved frame pointers up it) and noise
		for (size_t i = 0; i + 8 <= sizeof(stack); i += 8) {
			uint64_t w = rnd() % 3 ? 0x400000 + rnd() % 64 : rnd() % 2 ? sp + i + 16 : rnd();

			memcpy(stack + i, &w, 8);
		}
		for (int run = 0; run < 4; run++) {
			struct uw_sample s = { .pid = (uint32_t)(rnd() % 3), .stack = stack, .stack_len = len, .sp = sp,
					       .ip = 0x400000 + rnd() % 64, .bp = sp + rnd() % 512, .bp_known = rnd() % 2 };
			uint32_t n = 7;
			enum uw_result r = uw_unwind(&s, limit, cache, random_rule, NULL, out, &n);

			if (r == UW_DONE) {
				if (n < 1 || n > limit || out[0] != s.ip)
					return 1;
				touch((const uint8_t *)out, 8 * n);
				for (uint32_t i = 1; i < n; i++) {
					int found = 0;

					for (size_t j = 0; j + 8 <= len && !found; j += 8)
						found = !memcmp(stack + j, &out[i], 8);
					for (size_t j = 0; j + 8 <= len && !found; j++)
						found = !memcmp(stack + j, &out[i], 8);
					if (!found)
						return 1;
				}
			} else if (n != 0) {
				return 1;
			}
		}
		uw_cache_free(cache);
	}
	printf("ok %ld\n", iterations);
	return 0;
}
