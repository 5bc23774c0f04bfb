// SPDX-License-Identifier: GPL-2.0-only
// unwind.c - user stacks unwound from their copies by simple call-frame rules (see unwind.h).

#include <stdlib.h>
#include <string.h>

#include "unwind.h"

struct uw_slot {
	uint64_t address;
	uint32_t pid;
	bool used;
	struct uw_rule rule;
};

struct uw_cache {
	struct uw_slot *slots;	// open addressing, a power of two long
	size_t cap, used;
};

struct uw_cache *uw_cache_new(void)
{
	struct uw_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->cap = 256;
	c->slots = calloc(c->cap, sizeof(*c->slots));
	if (!c->slots) {
		free(c);
		return NULL;
	}
	return c;
}

void uw_cache_free(struct uw_cache *c)
{
	if (!c)
		return;
	free(c->slots);
	free(c);
}

static size_t slot_of(const struct uw_slot *slots, size_t cap, uint32_t pid, uint64_t address)
{
	size_t i = (size_t)(((address ^ (uint64_t)pid << 40) * 0x9E3779B97F4A7C15ULL) >> 20) & (cap - 1);

	while (slots[i].used && (slots[i].address != address || slots[i].pid != pid))
		i = (i + 1) & (cap - 1);
	return i;
}

static int grow(struct uw_cache *c)
{
	size_t cap = 2 * c->cap;
	struct uw_slot *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -1;
	for (size_t i = 0; i < c->cap; i++)
		if (c->slots[i].used)
			slots[slot_of(slots, cap, c->slots[i].pid, c->slots[i].address)] = c->slots[i];
	free(c->slots);
	c->slots = slots;
	c->cap = cap;
	return 0;
}

// The rule of @address of @pid, asked of @fn once; NULL if @fn failed or no memory.
static const struct uw_rule *rule_at(struct uw_cache *c, uint32_t pid, uint64_t address, uw_rule_fn fn, void *ctx)
{
	size_t i = slot_of(c->slots, c->cap, pid, address);

	if (c->slots[i].used)
		return &c->slots[i].rule;
	if (2 * (c->used + 1) > c->cap) {
		if (grow(c))
			return NULL;
		i = slot_of(c->slots, c->cap, pid, address);
	}
	struct uw_rule rule = { .kind = UW_RULE_OTHER };
	int got = fn(ctx, pid, address, &rule);

	if (got == UW_RULE_LATER) {
		static const struct uw_rule later = { .kind = UW_RULE_OTHER };

		return &later;
	}
	if (got)
		return NULL;
	c->slots[i].address = address;
	c->slots[i].pid = pid;
	c->slots[i].rule = rule;
	c->slots[i].used = true;
	c->used++;
	return &c->slots[i].rule;
}

// The word at @address of the copy into *@ret; false outside it.
static bool word_at(const struct uw_sample *s, uint64_t address, uint64_t *ret)
{
	if (address < s->sp || s->stack_len < 8 || address - s->sp > s->stack_len - 8)
		return false;
	memcpy(ret, s->stack + (address - s->sp), 8);
	return true;
}

enum uw_result uw_unwind(const struct uw_sample *s, uint32_t max_frames, struct uw_cache *cache, uw_rule_fn fn,
			 void *ctx, uint64_t *out, uint32_t *nout)
{
	uint64_t ip = s->ip, sp = s->sp, bp = s->bp, lookup = s->ip;
	bool bp_known = s->bp_known;
	uint32_t n = 0;

	*nout = 0;
	if (!max_frames)
		return UW_OTHER;
	out[n++] = ip;
	for (;;) {
		const struct uw_rule *r;
		uint64_t cfa, ra, saved_bp;

		if (n >= max_frames)
			return UW_OTHER;	// (the caller's unwinder says where the limit cut the stack)
		r = rule_at(cache, s->pid, lookup, fn, ctx);
		if (!r)
			return UW_FAIL;
		if (r->kind == UW_RULE_OUTERMOST)
			break;
		if (r->kind != UW_RULE_STEP || (r->cfa_reg == UW_BP && !bp_known))
			return UW_OTHER;
		cfa = (r->cfa_reg == UW_SP ? sp : bp) + (uint64_t)r->cfa_off;
		if (!word_at(s, cfa + (uint64_t)r->ra_off, &ra))
			return UW_OTHER;
		if (r->bp_rule == UW_BP_SAVED)
			bp_known = word_at(s, cfa + (uint64_t)r->bp_off, &saved_bp) ? (bp = saved_bp, true) : false;
		else if (r->bp_rule == UW_BP_LOST)
			bp_known = false;
		if (!ra)
			break;	// (a zeroed return address ends a thread's stack)
		if (cfa <= sp)
			return UW_OTHER;
		sp = cfa;
		ip = ra;
		out[n++] = ip;
		lookup = ip - 1;
	}
	*nout = n;
	return UW_DONE;
}

int uw_cache_put(struct uw_cache *c, uint32_t pid, uint64_t address, const struct uw_rule *rule)
{
	size_t i = slot_of(c->slots, c->cap, pid, address);

	if (!c->slots[i].used) {
		if (2 * (c->used + 1) > c->cap) {
			if (grow(c))
				return -1;
			i = slot_of(c->slots, c->cap, pid, address);
		}
		c->used++;
	}
	c->slots[i].address = address;
	c->slots[i].pid = pid;
	c->slots[i].rule = *rule;
	c->slots[i].used = true;
	return 0;
}

bool uw_cache_has(const struct uw_cache *c, uint32_t pid, uint64_t address)
{
	return c->slots[slot_of(c->slots, c->cap, pid, address)].used;
}
