/* SPDX-License-Identifier: GPL-2.0-only */
// aggregate.h - counting events by key without a Python call per event: what `probectl hist`
// and `probectl latency` do in user space when the kernel has no hist triggers.
//
// A plan per event id says which bytes of a record make the key (up to AGG_MAX_KEYS parts:
// a field, the pid or the cpu; integers optionally put in log2 or linear buckets, text copied
// NUL-padded) and which field is summed. Records come from an rb_reader (ringbuf.h) and go into
// an open-addressing hash table of fixed-size entries.
//
// A key with an AGG_SRC_STACK part waits, per CPU, for the kernel_stack record the kernel writes
// right after the event (options/stacktrace), whose frames complete it.
//
// Latency plans pair a START and an END event on equal keys: the start's time stamp is kept in
// a second table, the end looks it up, and the difference is both kept (for percentiles and
// completion_time/latency pairs) and counted in the main table under its bucket.
#ifndef PROBECTL_AGGREGATE_H
#define PROBECTL_AGGREGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringbuf.h"

#define AGG_MAX_KEYS		4
#define AGG_MAX_KEY_BYTES	256	// all parts of a key together
#define AGG_MAX_PLANS		256	// a recording's every format (report counts them all at once)
#define AGG_STACK_DEPTH		16	// kernel stack frames kept in a key

enum agg_src {
	AGG_SRC_NONE = 0,	// no value: count only
	AGG_SRC_FIELD = 1,	// a field of the record (struct rb_field)
	AGG_SRC_PID = 2,	// common_pid (the thread)
	AGG_SRC_CPU = 3,	// the CPU the record was written on
	AGG_SRC_LATENCY = 4,	// latency plans: end - start, in the plan's time unit
	AGG_SRC_STACK = 5,	// the kernel stack of the event: the kernel_stack record that follows it
	AGG_SRC_ID = 6,		// the record's event id (common_type): one table counts several events apart
};

enum agg_bucket {
	AGG_EXACT = 0,
	AGG_LOG2 = 1,		// the kernel's .log2: ilog2(roundup_pow_of_two(v)); 0 and 1 -> 0
	AGG_LINEAR = 2,		// the kernel's .buckets=N: v / N * N
};

enum agg_role {
	AGG_ROLE_HIST = 0,	// count (and sum) under the key
	AGG_ROLE_START = 1,	// latency: remember the time under the key
	AGG_ROLE_END = 2,	// latency: pair with the start of the same key
	AGG_ROLE_STACK = 3,	// ftrace's kernel_stack: keys[0] its size field, keys[1] its caller array
};

struct agg_part {
	struct rb_field field;	// AGG_SRC_FIELD
	uint8_t src;		// enum agg_src
	uint8_t bucket;		// enum agg_bucket (integers)
	uint32_t width;		// bytes in the key: 8 for numbers, the text size (multiple of 8) for text
	uint64_t step;		// AGG_LINEAR bucket size
};

struct agg_plan {
	uint16_t id;
	uint8_t role;		// enum agg_role
	uint32_t nkeys;
	struct agg_part keys[AGG_MAX_KEYS];
	struct agg_part value;	// AGG_SRC_NONE: count only
};

// Entries of a table: header then key bytes, stride bytes apart.
struct agg_entry {
	uint64_t hash;		// 0: empty slot
	uint64_t count;
	int64_t sum;
	int64_t min;
	int64_t max;
	uint8_t key[];
};

struct agg_table {
	uint32_t keylen;	// bytes of key (multiple of 8)
	size_t stride;
	size_t cap;		// power of two
	size_t n;
	uint8_t *slots;
};

struct agg {
	uint32_t nplans;
	struct agg_plan plans[AGG_MAX_PLANS];
	int16_t index[65536];	// event id -> plan, -1 none
	uint64_t time_div;	// latency unit: ns per unit (1000: µs)
	struct agg_table table;	// the answer
	struct agg_table starts; // latency: key -> start time (in sum)
	uint64_t *pair_end;	// latency pairs: completion time (ns) and latency (units)
	uint64_t *pair_lat;
	size_t npairs;
	size_t pairs_cap;
	int32_t stack_plan;	// index of the AGG_ROLE_STACK plan, -1 none
	uint32_t stack_off;	// where the stack part is in a key (when a plan has one)
	bool wants_stack;
	uint8_t *pending;	// per CPU: u64 valid, i64 value, key (an event waiting for its stack)
	size_t npending;
	uint64_t events;	// records of planned ids
	uint64_t unmatched;	// ends without a start
	uint64_t replaced;	// starts that replaced a start of their key before its end
	uint64_t short_records;	// records too short for a key or value field (skipped)
};

/**
 * agg_init - check the plans and prepare empty tables
 * @time_div: latency unit in ns (1 for ns, 1000 for µs)
 *
 * All plans of one aggregator share the key layout (same number of parts and widths). Returns
 * 0, RB_ERR_INVAL for bad plans or RB_ERR_NOMEM.
 */
int agg_init(struct agg *agg, const struct agg_plan *plans, uint32_t nplans, uint64_t time_div);

/**
 * agg_feed - aggregate every record of @reader
 *
 * Returns the number of records read, or an rb_error (the reader's, or RB_ERR_NOMEM).
 */
long agg_feed(struct agg *agg, struct rb_reader *reader);

/**
 * agg_flush - count the events still waiting for a stack record, with an empty stack
 *
 * Returns 0 or RB_ERR_NOMEM.
 */
int agg_flush(struct agg *agg);

/**
 * agg_pending - latency starts that have not ended (yet)
 */
size_t agg_pending(const struct agg *agg);

void agg_deinit(struct agg *agg);

static inline const struct agg_entry *agg_table_entry(const struct agg_table *t, size_t i)
{
	return (const struct agg_entry *)(t->slots + i * t->stride);
}

#endif // PROBECTL_AGGREGATE_H
