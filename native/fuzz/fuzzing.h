/* SPDX-License-Identifier: GPL-2.0-only */
// fuzzing.h - what the standalone fuzz drivers (fuzz_driver.c, textfmt_fuzz.c, aggregate_fuzz.c) share: a seeded
// xorshift64* generator and a sink that every decoded byte is added to, so that the compiler
// cannot drop a read and the sanitizers see each one. Included by those drivers only, which are
// built by the tests, not into the extension.
#ifndef PROBECTL_FUZZING_H
#define PROBECTL_FUZZING_H

#include <stddef.h>
#include <stdint.h>

static uint64_t rng_state;	// seeded by the driver (never 0)

static uint64_t rnd(void)
{
	// xorshift64*
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1DULL;
}

static volatile uint64_t sink;

static void touch(const uint8_t *p, size_t n)
{
	uint64_t s = 0;

	for (size_t i = 0; i < n; i++)
		s += p[i];
	sink += s;
}

#endif
