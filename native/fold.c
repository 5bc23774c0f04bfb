// SPDX-License-Identifier: GPL-2.0-only
// fold.c - events counted by thread and stacks (see fold.h).

#include <stdlib.h>
#include <string.h>

#include "fold.h"

#define WORD_MAX	UINT64_MAX

// The key being built for a CPU's last event: pid (u32), then per stack kind, tgid, count (u32
// each) and the addresses (u64 each).
struct fold_pending {
	bool open;			// an event that stack records may still join
	bool counted;			// of a selected id
	bool user_probe;
	uint32_t pid;
	uint8_t *key;
	size_t len, cap;
};

int fold_init(struct fold *f)
{
	memset(f, 0, sizeof(*f));
	memset(f->stack_of, 0xff, sizeof(f->stack_of));
	memset(f->probe_of, 0xff, sizeof(f->probe_of));
	f->cap = 1024;
	f->slots = calloc(f->cap, sizeof(*f->slots));
	return f->slots ? RB_OK : RB_ERR_NOMEM;
}

void fold_deinit(struct fold *f)
{
	for (size_t i = 0; i < f->ncpus; i++)
		free(f->cpus[i].key);
	free(f->cpus);
	free(f->slots);
	free(f->keys);
	f->cpus = NULL;
	f->slots = NULL;
	f->keys = NULL;
}

static int append(struct fold_pending *p, const void *data, size_t n)
{
	if (p->len + n > p->cap) {
		size_t cap = p->cap ? p->cap : 256;

		while (cap < p->len + n)
			cap *= 2;
		uint8_t *more = realloc(p->key, cap);

		if (!more)
			return RB_ERR_NOMEM;
		p->key = more;
		p->cap = cap;
	}
	memcpy(p->key + p->len, data, n);
	p->len += n;
	return RB_OK;
}

static uint64_t hash_bytes(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;	// FNV-1a, then mixed

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	h ^= h >> 31;
	return h ? h : 1;
}

static size_t slot_of(const struct fold *f, const struct fold_slot *slots, size_t cap, uint64_t hash,
		      const uint8_t *key, size_t len)
{
	size_t i = (size_t)hash & (cap - 1);

	while (slots[i].hash && !(slots[i].hash == hash && slots[i].len == len &&
				  (!key || !memcmp(f->keys + slots[i].off, key, len))))
		i = (i + 1) & (cap - 1);
	return i;
}

static int count_key(struct fold *f, const uint8_t *key, size_t len)
{
	uint64_t hash = hash_bytes(key, len);
	size_t i = slot_of(f, f->slots, f->cap, hash, key, len);

	if (f->slots[i].hash) {
		f->slots[i].count++;
		return RB_OK;
	}
	if (2 * (f->used + 1) > f->cap) {
		size_t cap = 2 * f->cap;
		struct fold_slot *slots = calloc(cap, sizeof(*slots));

		if (!slots)
			return RB_ERR_NOMEM;
		for (size_t j = 0; j < f->cap; j++) {
			if (!f->slots[j].hash)
				continue;
			size_t k = (size_t)f->slots[j].hash & (cap - 1);

			while (slots[k].hash)
				k = (k + 1) & (cap - 1);
			slots[k] = f->slots[j];
		}
		free(f->slots);
		f->slots = slots;
		f->cap = cap;
		i = slot_of(f, f->slots, f->cap, hash, key, len);
	}
	if (f->keys_len + len > f->keys_cap) {
		size_t cap = f->keys_cap ? f->keys_cap : 4096;

		while (cap < f->keys_len + len)
			cap *= 2;
		uint8_t *more = realloc(f->keys, cap);

		if (!more)
			return RB_ERR_NOMEM;
		f->keys = more;
		f->keys_cap = cap;
	}
	memcpy(f->keys + f->keys_len, key, len);
	f->slots[i] = (struct fold_slot){ .hash = hash, .count = 1, .off = f->keys_len, .len = (uint32_t)len };
	f->keys_len += len;
	f->used++;
	return RB_OK;
}

static int close_pending(struct fold *f, struct fold_pending *p)
{
	int err = RB_OK;

	if (p->open && p->counted && p->len > 4) {	// (an event without stacks is not folded)
		err = count_key(f, p->key, p->len);
		f->events++;
	}
	p->open = false;
	return err;
}

// A stack record's values appended to the key of @p.
static int add_stack(struct fold_pending *p, const struct fold_stack_format *sf, const uint8_t *data,
		     uint32_t len, bool swap)
{
	int64_t first = -1;
	uint32_t head[3] = { sf->kind, 0, 0 };
	size_t at = p->len, n = 0;
	struct rb_span span = { 0 };
	int err;

	if (sf->has_first && (sf->first.kind != RB_KIND_INT || !rb_field_int(&sf->first, data, len, swap, &first)))
		first = -1;	// (a count that is not a number: no count, as for none)
	if (sf->kind == FOLD_USER && first > 0)
		head[1] = (uint32_t)first;
	err = append(p, head, sizeof(head));
	if (err)
		return err;
	if (sf->has_array && (sf->array.kind == RB_KIND_INT_ARRAY || sf->array.kind == RB_KIND_INT) &&
	    rb_field_span(&sf->array, data, len, swap, &span) && span.ptr) {
		// (a scalar where the array should be: one address)
		unsigned int es = sf->array.kind == RB_KIND_INT ? sf->array.size : sf->array.elem_size;

		if (es != 1 && es != 2 && es != 4 && es != 8)
			es = 8;
		size_t count = span.len / es;

		if (sf->kind == FOLD_KERNEL && first >= 0 && (uint64_t)first < count)
			count = (size_t)first;
		for (size_t i = 0; i < count; i++) {
			uint64_t a = rb_read_uint(span.ptr + i * es, es, swap);

			if (a == 0) {
				if (sf->kind == FOLD_USER)
					break;
				continue;
			}
			if (a == WORD_MAX)
				break;
			err = append(p, &a, 8);
			if (err)
				return err;
			n++;
		}
	}
	head[2] = (uint32_t)n;
	memcpy(p->key + at, head, sizeof(head));
	return RB_OK;
}

static uint16_t record_id(const uint8_t *data, uint32_t len, bool swap)
{
	return len >= 2 ? (uint16_t)rb_read_uint(data, 2, swap) : 0;
}

long fold_feed(struct fold *f, struct rb_reader *reader)
{
	struct rb_record rec;
	long n = 0;
	int ret;

	while ((ret = rb_reader_next(reader, &rec)) == 1) {
		n++;
		f->records++;
		if (rec.len < 8 || rec.cpu < 0)
			continue;
		uint16_t id = record_id(rec.data, rec.len, reader->swap);
		uint32_t pid = (uint32_t)rb_read_uint(rec.data + 4, 4, reader->swap);

		if ((size_t)rec.cpu >= f->ncpus) {
			size_t ncpus = (size_t)rec.cpu + 1;
			struct fold_pending *more = realloc(f->cpus, ncpus * sizeof(*more));

			if (!more)
				return RB_ERR_NOMEM;
			memset(more + f->ncpus, 0, (ncpus - f->ncpus) * sizeof(*more));
			f->cpus = more;
			f->ncpus = ncpus;
		}
		struct fold_pending *p = &f->cpus[rec.cpu];
		int32_t s = f->stack_of[id];

		if (s >= 0) {
			const struct fold_stack_format *sf = &f->stacks[s];

			if (!p->open || p->pid != pid || (sf->kind == FOLD_KERNEL && p->user_probe))
				continue;	// (an orphan, or the machinery of a uprobe)
			int err = add_stack(p, sf, rec.data, rec.len, reader->swap);

			if (err)
				return err;
			continue;
		}
		int err = close_pending(f, p);

		if (err)
			return err;
		p->open = true;
		p->counted = f->selected[id / 8] >> (id % 8) & 1;
		p->pid = pid;
		p->len = 0;
		p->user_probe = false;
		if (f->probe_of[id] >= 0) {
			int64_t ip;

			p->user_probe = rb_field_int(&f->probe_ips[f->probe_of[id]], rec.data, rec.len, reader->swap, &ip) &&
					ip > 0;	// (a kernel address is negative as an i64)
		}
		err = append(p, &pid, 4);
		if (err)
			return err;
	}
	return ret < 0 ? ret : n;
}

int fold_finish(struct fold *f)
{
	for (size_t i = 0; i < f->ncpus; i++) {
		int err = close_pending(f, &f->cpus[i]);

		if (err)
			return err;
	}
	return RB_OK;
}
