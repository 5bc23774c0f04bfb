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
	case AGG_SRC_PID:
	case AGG_SRC_CPU:
	case AGG_SRC_LATENCY:
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
	if (!nplans || nplans > AGG_MAX_PLANS || !time_div)
		return RB_ERR_INVAL;
	keylen = key_len(&plans[0]);
	for (uint32_t i = 0; i < nplans; i++) {
		const struct agg_plan *p = &plans[i];

		if (p->nkeys > AGG_MAX_KEYS || p->role > AGG_ROLE_END || agg->index[p->id] >= 0 ||
		    key_len(p) != keylen || keylen > AGG_MAX_KEY_BYTES)
			return RB_ERR_INVAL;
		for (uint32_t k = 0; k < p->nkeys; k++) {
			if (!part_check(&p->keys[k], false) || p->keys[k].src == AGG_SRC_LATENCY)
				return RB_ERR_INVAL;
		}
		if (!part_check(&p->value, true))
			return RB_ERR_INVAL;
		agg->plans[i] = *p;
		agg->index[p->id] = (int8_t)i;
	}
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

		if (p->src == AGG_SRC_FIELD && p->field.kind == RB_KIND_STR) {
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
	e->sum += v;
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
		e = table_find(&agg->table, key, true);
		if (!e)
			return RB_ERR_NOMEM;
		count(e, (int64_t)v);
		return RB_OK;
	case AGG_ROLE_START:
		e = table_find(&agg->starts, key, true);
		if (!e)
			return RB_ERR_NOMEM;
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
		int8_t i = agg->index[rb_read_uint(rec.data, 2, reader->swap)];

		if (i < 0)
			continue;
		agg->events++;
		ret = agg_record(agg, &agg->plans[i], &rec, reader->swap);
		if (ret)
			return ret;
	}
}
