/* SPDX-License-Identifier: GPL-2.0-only */
// fold.h - a recording's events counted by their thread and stacks, the work of folded stacks
// (flame graphs) without a Python step per event.
//
// Stack records (ftrace's kernel_stack and user_stack, probectl's user_callchain) follow their
// event on the same CPU, of the same thread; each event of a selected id is counted under its key:
// its pid and its stacks (kind, tgid, addresses innermost first), as probectl/script/stacks.py
// joins them: a stack record that follows no event of its thread is left out, and so is the
// kernel stack of a uprobe (its probe address is a user one: the probe's machinery). The caller
// names each distinct key once.
#ifndef PROBECTL_FOLD_H
#define PROBECTL_FOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringbuf.h"

enum fold_kind { FOLD_KERNEL = 0, FOLD_USER = 1 };

// Where a stack record's values are: its first field (kernel_stack's size, the others' tgid) and
// its array of addresses (RB_KIND_INT_ARRAY, fixed or data_loc); has_* false for one it lacks.
struct fold_stack_format {
	uint8_t kind;			// enum fold_kind
	bool has_first, has_array;
	struct rb_field first, array;
};

struct fold_pending;

struct fold {
	uint8_t selected[65536 / 8];	// event ids counted
	int32_t stack_of[65536];	// event id -> index in stacks, -1: not a stack record
	struct fold_stack_format *stacks;
	size_t nstacks;
	int32_t probe_of[65536];	// event id -> index in probe_ips, -1: not a probe
	struct rb_field *probe_ips;
	size_t nprobes;
	struct fold_pending *cpus;	// the event each CPU's stack records may still join
	size_t ncpus;
	// the counts: open addressing of (hash, key offset in keys, key length, count)
	struct fold_slot *slots;
	size_t cap, used;
	uint8_t *keys;
	size_t keys_len, keys_cap;
	uint64_t records;		// records read
	uint64_t events;		// events counted
};

struct fold_slot {
	uint64_t hash;			// 0: empty
	uint64_t count;
	size_t off;
	uint32_t len;
};

// An empty fold; the caller sets selected, stack_of/stacks and probe_of/probe_ips (owned by it).
int fold_init(struct fold *f);

/**
 * fold_feed - join and count every record of @reader
 *
 * Returns the records read, or an rb_error (the reader's, or RB_ERR_NOMEM).
 */
long fold_feed(struct fold *f, struct rb_reader *reader);

// fold_finish - count the events still open; 0 or RB_ERR_NOMEM.
int fold_finish(struct fold *f);

void fold_deinit(struct fold *f);

#endif // PROBECTL_FOLD_H
