// SPDX-License-Identifier: GPL-2.0-only
// aggregate.c - keyed counts, sums and latency pairs over ring-buffer records (aggregate.h).

#include <stdlib.h>
#include <string.h>

#include "aggregate.h"

#define AGG_MIN_CAP	1024

static uint64_t agg_hash(const uint8_t *key, uint32_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;
	uint64_t w;

	for (uint32_t i = 0; i < len; i += 8) {
		memcpy(&w, key + i, 8);
		h ^= w;
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
	}
	h ^= h >> 29;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 32;
	return h ? h : 1;	// 0 marks an empty slot
}

static int table_init(struct agg_table *t, uint32_t keylen)
{
	t->keylen = keylen;
	t->stride = sizeof(struct agg_entry) + keylen;
	t->cap = AGG_MIN_CAP;
	t->n = 0;
	t->slots = calloc(t->cap, t->stride);
	return t->slots ? RB_OK : RB_ERR_NOMEM;
}

static struct agg_entry *slot(struct agg_table *t, size_t i)
{
	return (struct agg_entry *)(t->slots + i * t->stride);
}

static int table_grow(struct agg_table *t)
{
	size_t cap = t->cap * 2;
	uint8_t *slots = calloc(cap, t->stride);

	if (!slots)
		return RB_ERR_NOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		struct agg_entry *e = slot(t, i);
		size_t j;

		if (!e->hash)
			continue;
		for (j = e->hash & (cap - 1);; j = (j + 1) & (cap - 1)) {
			if (!((struct agg_entry *)(slots + j * t->stride))->hash)
				break;
		}
		memcpy(slots + j * t->stride, e, t->stride);
	}
	free(t->slots);
	t->slots = slots;
	t->cap = cap;
	return RB_OK;
}

// The entry of @key, created (count 0) when @create; NULL if absent or out of memory.
static struct agg_entry *table_find(struct agg_table *t, const uint8_t *key, bool create)
{
	uint64_t h = agg_hash(key, t->keylen);
	struct agg_entry *e;

	if (create && (t->n + 1) * 10 > t->cap * 7 && table_grow(t))
		return NULL;
	for (size_t i = h & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		e = slot(t, i);
		if (!e->hash)
			break;
		if (e->hash == h && !memcmp(e->key, key, t->keylen))
			return e;
	}
	if (!create)
		return NULL;
	e->hash = h;
	e->count = 0;
	e->sum = 0;
	memcpy(e->key, key, t->keylen);
	t->n++;
	return e;
}

// Remove an entry found by table_find (backward-shift deletion keeps probe runs intact).
static void table_remove(struct agg_table *t, struct agg_entry *e)
{
	size_t i = (size_t)((uint8_t *)e - t->slots) / t->stride;
	size_t mask = t->cap - 1;

	for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
		struct agg_entry *next = slot(t, j);
		size_t home;

		if (!next->hash)
			break;
		home = next->hash & mask;
		// next may move to i if its home is not in (i, j]
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			memcpy(slot(t, i), next, t->stride);
			i = j;
		}
	}
	slot(t, i)->hash = 0;
	t->n--;
}

static uint64_t bucket_of(const struct agg_part *p, uint64_t v)
{
	switch (p->bucket) {
	case AGG_LOG2:
		return v <= 1 ? 0 : 64 - (uint64_t)__builtin_clzll(v - 1);
	case AGG_LINEAR:
		return v / p->step * p->step;
	}
	return v;
}

static bool part_check(const struct agg_part *p, bool is_value)
{
	switch (p->src) {
	case AGG_SRC_NONE:
		return is_value;
	case AGG_SRC_STACK:
		return !is_value && p->bucket == AGG_EXACT && p->width == AGG_STACK_DEPTH * 8;
	case AGG_SRC_PID:
	case AGG_SRC_CPU:
	case AGG_SRC_LATENCY:
	case AGG_SRC_ID:
		break;
	case AGG_SRC_FIELD:
		if (p->field.kind == RB_KIND_INT) {
			if (p->field.loc != RB_LOC_FIXED ||
			    (p->field.size != 1 && p->field.size != 2 && p->field.size != 4 &&
			     p->field.size != 8))
				return false;
		} else if (is_value || p->field.kind != RB_KIND_STR) {
			return false;	// only numbers are summed; only text and numbers are keys
		}
		break;
	default:
		return false;
	}
	if (p->bucket > AGG_LINEAR || (p->bucket == AGG_LINEAR && !p->step))
		return false;
	if (p->src == AGG_SRC_FIELD && p->field.kind == RB_KIND_STR)
		return p->width && p->width % 8 == 0 && p->bucket == AGG_EXACT;
	return is_value || p->width == 8;
}

// kernel_stack: keys[0] the number of frames (an integer), keys[1] the frames (integers of 4 or 8
// bytes, to the end of the record).
static bool stack_plan_check(const struct agg_plan *p)
{
	const struct rb_field *n = &p->keys[0].field, *f = &p->keys[1].field;

	return p->nkeys == 2 && p->keys[0].src == AGG_SRC_FIELD && p->keys[1].src == AGG_SRC_FIELD &&
	       n->kind == RB_KIND_INT && n->loc == RB_LOC_FIXED &&
	       (n->size == 1 || n->size == 2 || n->size == 4 || n->size == 8) &&
	       f->kind == RB_KIND_INT_ARRAY && (f->elem_size == 4 || f->elem_size == 8);
}

static uint32_t key_len(const struct agg_plan *plan)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < plan->nkeys; i++)
		n += plan->keys[i].width;
	return n;
}

int agg_init(struct agg *agg, const struct agg_plan *plans, uint32_t nplans, uint64_t time_div)
{
	uint32_t keylen;
	int ret;

	memset(agg, 0, sizeof(*agg));
	memset(agg->index, -1, sizeof(agg->index));
	agg->stack_plan = -1;
	if (!nplans || nplans > AGG_MAX_PLANS || !time_div || plans[0].role == AGG_ROLE_STACK)
		return RB_ERR_INVAL;
	keylen = key_len(&plans[0]);
	for (uint32_t i = 0; i < nplans; i++) {
		const struct agg_plan *p = &plans[i];

		if (p->role > AGG_ROLE_STACK || agg->index[p->id] >= 0)
			return RB_ERR_INVAL;
		if (p->role == AGG_ROLE_STACK) {
			if (!stack_plan_check(p) || agg->stack_plan >= 0)
				return RB_ERR_INVAL;
			agg->stack_plan = (int32_t)i;
		} else {
			uint32_t off = 0;

			if (p->nkeys > AGG_MAX_KEYS || key_len(p) != keylen || keylen > AGG_MAX_KEY_BYTES)
				return RB_ERR_INVAL;
			for (uint32_t k = 0; k < p->nkeys; k++) {
				if (!part_check(&p->keys[k], false) || p->keys[k].src == AGG_SRC_LATENCY)
					return RB_ERR_INVAL;
				if (p->keys[k].src == AGG_SRC_STACK) {
					// one stack part, in hist plans only (all at one place)
					if (p->role != AGG_ROLE_HIST || (agg->wants_stack && agg->stack_off != off))
						return RB_ERR_INVAL;
					agg->wants_stack = true;
					agg->stack_off = off;
				}
				off += p->keys[k].width;
			}
			if (!part_check(&p->value, true))
				return RB_ERR_INVAL;
		}
		agg->plans[i] = *p;
		agg->index[p->id] = (int16_t)i;
	}
	if (agg->wants_stack && agg->stack_plan < 0)
		return RB_ERR_INVAL;
	agg->nplans = nplans;
	agg->time_div = time_div;
	// The answer's key: the plan's key for hist, the latency's bucket for latency.
	ret = table_init(&agg->table, plans[0].role == AGG_ROLE_HIST ? (keylen ? keylen : 8) : 8);
	if (!ret)
		ret = table_init(&agg->starts, keylen ? keylen : 8);
	if (ret)
		agg_deinit(agg);
	return ret;
}

void agg_deinit(struct agg *agg)
{
	free(agg->pending);
	agg->pending = NULL;
	agg->npending = 0;
	free(agg->table.slots);
	free(agg->starts.slots);
	free(agg->pair_end);
	free(agg->pair_lat);
	agg->table.slots = agg->starts.slots = NULL;
	agg->pair_end = agg->pair_lat = NULL;
	agg->npairs = agg->pairs_cap = 0;
}

size_t agg_pending(const struct agg *agg)
{
	return agg->starts.n;
}

// The integer of a part; false if the record is too short.
static bool part_int(const struct agg_part *p, const struct rb_record *rec, bool swap, uint64_t *ret)
{
	int64_t v;

	switch (p->src) {
	case AGG_SRC_PID:
		if (rec->len < 8)
			return false;
		*ret = (uint64_t)rb_read_int(rec->data + 4, 4, true, swap);
		return true;
	case AGG_SRC_CPU:
		*ret = (uint64_t)rec->cpu;
		return true;
	case AGG_SRC_ID:
		*ret = rb_read_uint(rec->data, 2, swap);	// (agg_feed read it: 2 bytes are there)
		return true;
	}
	if (!rb_field_int(&p->field, rec->data, rec->len, swap, &v))
		return false;
	*ret = (uint64_t)v;
	return true;
}

// Build the key of @rec into @key; false if the record is too short for it.
static bool make_key(const struct agg_plan *plan, const struct rb_record *rec, bool swap, uint8_t *key)
{
	uint8_t *out = key;

	for (uint32_t k = 0; k < plan->nkeys; k++) {
		const struct agg_part *p = &plan->keys[k];

		if (p->src == AGG_SRC_STACK) {
			memset(out, 0, p->width);	// filled by the kernel_stack record
		} else if (p->src == AGG_SRC_FIELD && p->field.kind == RB_KIND_STR) {
			struct rb_span s;

			if (!rb_field_span(&p->field, rec->data, rec->len, swap, &s))
				return false;
			memset(out, 0, p->width);
			memcpy(out, s.ptr, s.len < p->width ? s.len : p->width);
		} else {
			uint64_t v;

			if (!part_int(p, rec, swap, &v))
				return false;
			v = bucket_of(p, v);
			memcpy(out, &v, 8);
		}
		out += p->width;
	}
	return true;
}

static int add_pair(struct agg *agg, uint64_t end, uint64_t lat)
{
	if (agg->npairs == agg->pairs_cap) {
		size_t cap = agg->pairs_cap ? agg->pairs_cap * 2 : 4096;
		uint64_t *e = realloc(agg->pair_end, cap * sizeof(*e));

		if (!e)
			return RB_ERR_NOMEM;
		agg->pair_end = e;
		e = realloc(agg->pair_lat, cap * sizeof(*e));
		if (!e)
			return RB_ERR_NOMEM;
		agg->pair_lat = e;
		agg->pairs_cap = cap;
	}
	agg->pair_end[agg->npairs] = end;
	agg->pair_lat[agg->npairs++] = lat;
	return RB_OK;
}

static void count(struct agg_entry *e, int64_t v)
{
	if (!e->count++) {
		e->min = e->max = v;
	} else {
		if (v < e->min)
			e->min = v;
		if (v > e->max)
			e->max = v;
	}
	e->sum = (int64_t)((uint64_t)e->sum + (uint64_t)v);	// wraps as the kernel's u64 sums do
}

// The pending slot of @cpu: u64 valid, i64 value, key.
static uint8_t *pending_slot(struct agg *agg, int cpu)
{
	size_t stride = 16 + agg->table.keylen;

	if (cpu < 0 || cpu > 65535)
		return NULL;
	if ((size_t)cpu >= agg->npending) {
		size_t n = (size_t)cpu + 1;
		uint8_t *p = realloc(agg->pending, n * stride);

		if (!p)
			return NULL;
		memset(p + agg->npending * stride, 0, (n - agg->npending) * stride);
		agg->pending = p;
		agg->npending = n;
	}
	return agg->pending + (size_t)cpu * stride;
}

static int count_key(struct agg *agg, const uint8_t *key, int64_t v)
{
	struct agg_entry *e = table_find(&agg->table, key, true);

	if (!e)
		return RB_ERR_NOMEM;
	count(e, v);
	return RB_OK;
}

// Count the event waiting in @slot (its stack part as it is) and free the slot.
static int pending_count(struct agg *agg, uint8_t *slot)
{
	uint64_t valid;
	int64_t v;

	memcpy(&valid, slot, 8);
	if (!valid)
		return RB_OK;
	memcpy(&v, slot + 8, 8);
	memset(slot, 0, 8);
	return count_key(agg, slot + 16, v);
}

int agg_flush(struct agg *agg)
{
	size_t stride = 16 + agg->table.keylen;

	for (size_t cpu = 0; cpu < agg->npending; cpu++) {
		int ret = pending_count(agg, agg->pending + cpu * stride);

		if (ret)
			return ret;
	}
	return RB_OK;
}

// A kernel_stack record: the frames of the event waiting on its CPU.
static int stack_record(struct agg *agg, const struct agg_plan *plan, const struct rb_record *rec, bool swap)
{
	uint8_t *slot = pending_slot(agg, rec->cpu);
	const struct rb_field *f = &plan->keys[1].field;
	struct rb_span frames;
	uint64_t valid;
	int64_t n;
	uint8_t *out;

	if (!slot)
		return rec->cpu < 0 || rec->cpu > 65535 ? RB_OK : RB_ERR_NOMEM;
	memcpy(&valid, slot, 8);
	if (!valid)
		return RB_OK;	// the stack of an event that is not counted
	out = slot + 16 + agg->stack_off;
	if (rb_field_int(&plan->keys[0].field, rec->data, rec->len, swap, &n) &&
	    rb_field_span(f, rec->data, rec->len, swap, &frames)) {
		uint32_t have = frames.len / f->elem_size;

		if (n < 0)
			n = 0;
		if ((uint64_t)n > have)
			n = have;
		if (n > AGG_STACK_DEPTH)
			n = AGG_STACK_DEPTH;
		for (int64_t i = 0; i < n; i++) {
			uint64_t addr = rb_read_uint(frames.ptr + i * f->elem_size, f->elem_size, swap);

			memcpy(out + i * 8, &addr, 8);
		}
	} else {
		agg->short_records++;
	}
	return pending_count(agg, slot);
}

static int agg_record(struct agg *agg, const struct agg_plan *plan, const struct rb_record *rec,
		      bool swap)
{
	uint8_t key[AGG_MAX_KEY_BYTES] = { 0 };
	struct agg_entry *e;
	uint64_t v = 0, lat;

	if (!make_key(plan, rec, swap, key)) {
		agg->short_records++;
		return RB_OK;
	}
	switch (plan->role) {
	case AGG_ROLE_HIST:
		if (plan->value.src != AGG_SRC_NONE && !part_int(&plan->value, rec, swap, &v)) {
			agg->short_records++;
			return RB_OK;
		}
		if (agg->wants_stack) {
			uint8_t *slot = pending_slot(agg, rec->cpu);
			uint64_t one = 1;
			int ret;

			if (!slot)
				return RB_ERR_NOMEM;
			ret = pending_count(agg, slot);	// an earlier event whose stack never came
			if (ret)
				return ret;
			memcpy(slot, &one, 8);
			memcpy(slot + 8, &v, 8);
			memcpy(slot + 16, key, agg->table.keylen);
			return RB_OK;
		}
		return count_key(agg, key, (int64_t)v);
	case AGG_ROLE_START:
		e = table_find(&agg->starts, key, true);
		if (!e)
			return RB_ERR_NOMEM;
		if (e->count)
			agg->replaced++;	// a nested call's start, or the start of an end never seen
		e->count = 1;
		e->sum = (int64_t)rec->ts;	// a nested start replaces the outer one, as bpftrace's @start[tid]
		return RB_OK;
	}
	e = table_find(&agg->starts, key, false);
	if (!e || (uint64_t)e->sum > rec->ts) {
		agg->unmatched++;
		return RB_OK;
	}
	v = (rec->ts - (uint64_t)e->sum) / agg->time_div;
	table_remove(&agg->starts, e);
	if (add_pair(agg, rec->ts, v))
		return RB_ERR_NOMEM;
	lat = v;
	v = bucket_of(&plan->value, v);
	e = table_find(&agg->table, (const uint8_t *)&v, true);
	if (!e)
		return RB_ERR_NOMEM;
	count(e, (int64_t)lat);
	return RB_OK;
}

long agg_feed(struct agg *agg, struct rb_reader *reader)
{
	struct rb_record rec;
	long n = 0;
	int ret;

	for (;;) {
		ret = rb_reader_next(reader, &rec);
		if (ret <= 0)
			return ret < 0 ? ret : n;
		n++;
		if (rec.len < 2)
			continue;
		int16_t i = agg->index[rb_read_uint(rec.data, 2, reader->swap)];

		if (i < 0)
			continue;
		if (agg->plans[i].role == AGG_ROLE_STACK) {
			ret = stack_record(agg, &agg->plans[i], &rec, reader->swap);
			if (ret)
				return ret;
			continue;
		}
		agg->events++;
		ret = agg_record(agg, &agg->plans[i], &rec, reader->swap);
		if (ret)
			return ret;
	}
}
