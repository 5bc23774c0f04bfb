// SPDX-License-Identifier: GPL-2.0-only
// chainmerge.c - callchain records written into one CPU's pages (see chainmerge.h).

#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chainmerge.h"

#define CONTEXT_MAX	((uint64_t)-4095)	// callchain entries at or above: PERF_CONTEXT_*
#define CHAIN_HEADER	16			// common fields, tgid, the caller's data_loc word
#define DELTA_MAX	((1ULL << 27) - 1)
#define STAMP_MAX	((1ULL << 59) - 1)

struct sample {
	uint64_t ts;
	uint32_t pid, tid;
	uint16_t event;
	bool raw;
	bool chain;			// a callchain record follows the event (not CM_BARE)
	const uint8_t *record;		// the event's record (raw samples)
	uint32_t record_len;
	uint64_t *addrs;		// user addresses, innermost first
	uint32_t naddrs;
	size_t order;			// position in the file (ties keep it)
};

struct ftrace_event {
	uint64_t ts;
	uint32_t tid;
	uint16_t type;
	int64_t sample;			// index of the joined sample, or -1
};

#define OUT_PAGES	64	// pages written with one write(2)

struct writer {
	const struct rb_layout *layout;
	int fd;
	uint8_t *out;			// OUT_PAGES pages waiting for write(2)
	size_t out_used;
	uint8_t *page;			// the page being filled: the next one of @out
	size_t data_off, room, used;
	uint64_t base, last;
	int64_t missed;
	uint64_t pages;
	bool failed;
};

static const struct cm_event_map *find_map(const struct cm_args *a, uint64_t id)
{
	for (size_t i = 0; i < a->nmap; i++)
		if (a->map[i].perf_id == id)
			return &a->map[i];
	return NULL;
}

static bool pid_kept(const struct cm_args *a, uint32_t pid, uint32_t tid)
{
	size_t lo = 0, hi = a->npids;

	if (!a->pids)
		return true;
	for (int pass = 0; pass < 2; pass++) {
		int32_t want = (int32_t)(pass ? pid : tid);

		lo = 0;
		hi = a->npids;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (a->pids[mid] < want)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < a->npids && a->pids[lo] == want)
			return true;
	}
	return false;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static int add_comm(struct cm_result *res, size_t *cap, const uint8_t *r, size_t size)
{
	struct cm_comm *c;
	size_t len;

	if (size < 8 + 8 + 1)
		return RB_OK;
	if (res->ncomms == *cap) {
		size_t bigger = *cap ? 2 * *cap : 16;
		struct cm_comm *more = realloc(res->comms, bigger * sizeof(*more));

		if (!more)
			return RB_ERR_NOMEM;
		res->comms = more;
		*cap = bigger;
	}
	c = &res->comms[res->ncomms++];
	c->pid = rd32(r + 8);
	c->tid = rd32(r + 12);
	len = strnlen((const char *)r + 16, size - 16);
	if (len > sizeof(c->name) - 1)
		len = sizeof(c->name) - 1;
	memcpy(c->name, r + 16, len);
	c->name[len] = '\0';
	return RB_OK;
}

static int add_mmap(struct cm_result *res, size_t *cap, const uint8_t *r, size_t size)
{
	struct cm_mmap *m;
	size_t len;

	if (size < 72 + 1)
		return RB_OK;
	if (res->nmmaps == *cap) {
		size_t bigger = *cap ? 2 * *cap : 16;
		struct cm_mmap *more = realloc(res->mmaps, bigger * sizeof(*more));

		if (!more)
			return RB_ERR_NOMEM;
		res->mmaps = more;
		*cap = bigger;
	}
	m = &res->mmaps[res->nmmaps++];
	m->pid = rd32(r + 8);
	m->tid = rd32(r + 12);
	m->addr = rd64(r + 16);
	m->len = rd64(r + 24);
	m->pgoff = rd64(r + 32);
	m->maj = rd32(r + 40);
	m->min = rd32(r + 44);
	m->ino = rd64(r + 48);
	m->prot = rd32(r + 64);
	m->flags = rd32(r + 68);
	len = strnlen((const char *)r + 72, size - 72);
	if (len > sizeof(m->path) - 1)
		len = sizeof(m->path) - 1;
	memcpy(m->path, r + 72, len);
	m->path[len] = '\0';
	return RB_OK;
}

// The user registers and stack copy after a sample's callchain and raw record (@after): abi, @nregs
// registers; size, the copy, dyn_size. False if the sample has none or is cut short.
static bool user_regs_stack(const uint8_t *after, const uint8_t *end, uint32_t nregs, const uint8_t **regs,
			    const uint8_t **stack, uint64_t *stack_len)
{
	uint64_t size, dyn;

	if (after + 8 > end || !rd64(after))
		return false;	// (PERF_SAMPLE_REGS_ABI_NONE: a kernel thread's sample)
	after += 8;
	if ((uint64_t)(end - after) / 8 < (uint64_t)nregs + 1)
		return false;
	*regs = after;
	after += 8 * (size_t)nregs;
	size = rd64(after);
	after += 8;
	if (!size || (uint64_t)(end - after) < size || (uint64_t)(end - after) - size < 8)
		return false;
	dyn = rd64(after + size);
	*stack = after;
	*stack_len = dyn < size ? dyn : size;
	return true;
}

// The chain @a->chains has for the record at @offset, or NULL.
static const struct cm_chain *find_chain(const struct cm_args *a, uint64_t offset)
{
	size_t lo = 0, hi = a->nchains;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->chains[mid].offset < offset)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < a->nchains && a->chains[lo].offset == offset && a->chains[lo].start <= a->chain_pool_len &&
	    a->chains[lo].count <= a->chain_pool_len - a->chains[lo].start)
		return &a->chains[lo];
	return NULL;
}

// One perf sample record @r of @size bytes: its fields into @x (addresses into @pool), its user
// registers and stack copy into @st when its event is CM_STACK. False if it is cut short.
static bool parse_sample(const struct cm_args *a, const uint8_t *r, size_t size, uint64_t offset,
			 const struct cm_event_map *m, struct sample *x, uint64_t *pool, struct cm_stack *st,
			 bool *has_stack)
{
	const uint8_t *end = r + size;
	uint64_t nr = rd64(r + 40);
	const uint8_t *regs, *stack;
	uint64_t stack_len;

	*has_stack = false;
	if ((uint64_t)(end - (r + 48)) / 8 < nr)
		return false;
	const uint8_t *after = r + 48 + 8 * nr;

	x->pid = rd32(r + 16);
	x->tid = rd32(r + 20);
	x->ts = rd64(r + 24);
	x->event = m ? m->event : 0;
	x->raw = m && (m->flags & CM_RAW);
	x->chain = !(m && (m->flags & CM_BARE));
	x->record = NULL;
	x->record_len = 0;
	x->addrs = pool;
	x->naddrs = 0;
	for (uint64_t i = 0; i < nr; i++) {
		uint64_t addr = rd64(r + 48 + 8 * i);

		if (addr < CONTEXT_MAX)
			x->addrs[x->naddrs++] = addr;
	}
	if (x->raw) {
		if (after + 4 > end)
			return false;
		uint32_t len = rd32(after);

		if ((size_t)(end - after - 4) < len)
			return false;
		x->record = after + 4;
		x->record_len = len;
		after += 4 + len;
	}
	if (!m)
		return true;
	// An entry uprobe: sp, and the word at sp. The return address goes second unless the kernel's
	// callchain has it there (a `push %rbp` it fixed up).
	if ((m->flags & CM_ENTRY) && x->naddrs && user_regs_stack(after, end, 1, &regs, &stack, &stack_len) &&
	    stack_len >= 8) {
		uint64_t caller = rd64(stack);

		if (x->naddrs < 2 || x->addrs[1] != caller) {
			memmove(x->addrs + 2, x->addrs + 1, (x->naddrs - 1) * sizeof(uint64_t));
			x->addrs[1] = caller;
			x->naddrs++;
		}
	}
	if ((m->flags & CM_STACK) && user_regs_stack(after, end, a->stack_nregs, &regs, &stack, &stack_len)) {
		st->offset = offset;
		st->pid = x->pid;
		st->tid = x->tid;
		st->ts = x->ts;
		st->regs = regs;
		st->stack = stack;
		st->stack_len = stack_len;
		*has_stack = true;
	}
	if ((m->flags & CM_STACK) && a->chains) {
		const struct cm_chain *c = find_chain(a, offset);
		uint64_t room = (size - 48) / 8;	// (the pool holds as many words as the records)

		if (c) {
			x->naddrs = (uint32_t)(c->count < room ? c->count : room);
			memcpy(x->addrs, a->chain_pool + c->start, 8 * (size_t)x->naddrs);
		}
	}
	return true;
}

// Walks the perf records: the samples into @s (their addresses in @pool) or, with @stacks, the
// samples of CM_STACK events into @stacks; the command names and mappings into @res.
static int walk_records(const struct cm_args *a, struct sample *s, size_t *count, uint64_t *pool,
			struct cm_stack *stacks, struct cm_result *res)
{
	size_t comm_cap = 0, mmap_cap = 0, n = 0, used = 0;
	size_t pos = 0;
	struct sample scratch;

	while (pos + 8 <= a->perf_len) {
		const uint8_t *r = a->perf + pos;
		struct perf_event_header h;
		uint64_t offset = pos;

		memcpy(&h, r, sizeof(h));
		if (h.size < 8 || pos + h.size > a->perf_len)
			break;
		pos += h.size;
		if ((h.type == PERF_RECORD_COMM && add_comm(res, &comm_cap, r, h.size)) ||
		    (h.type == PERF_RECORD_MMAP2 && add_mmap(res, &mmap_cap, r, h.size)))
			return RB_ERR_NOMEM;
		if (h.type != PERF_RECORD_SAMPLE || h.size < 48)
			continue;
		const struct cm_event_map *m = find_map(a, rd64(r + 8));
		struct sample *x = stacks ? &scratch : &s[n];
		bool has_stack;

		if (!parse_sample(a, r, h.size, offset, m, x, pool + used, stacks ? &stacks[n] : &(struct cm_stack){ 0 },
				  &has_stack))
			break;
		if (!m || (x->raw && x->record_len < 8) || !pid_kept(a, x->pid, x->tid))
			continue;
		if (stacks) {
			n += has_stack;
			continue;
		}
		x->order = n;
		used += x->naddrs;
		n++;
	}
	*count = n;
	return RB_OK;
}

// The samples of the perf records, their addresses in @pool (as many words as the records have), and
// the command names into @res.
static int read_samples(const struct cm_args *a, struct sample **ret, size_t *count, uint64_t **pool_ret,
			struct cm_result *res)
{
	struct sample *s = malloc((a->perf_len / 48 + 1) * sizeof(*s));
	uint64_t *pool = malloc((a->perf_len / 8 + 2) * sizeof(*pool));
	int err;

	if (!s || !pool) {
		free(s);
		free(pool);
		return RB_ERR_NOMEM;
	}
	err = walk_records(a, s, count, pool, NULL, res);
	if (err) {
		free(s);
		free(pool);
		return err;
	}
	*ret = s;
	*pool_ret = pool;
	return RB_OK;
}

int cm_stacks(const struct cm_args *a, struct cm_stack **ret, size_t *count, struct cm_result *res)
{
	struct cm_stack *st = malloc((a->perf_len / 48 + 1) * sizeof(*st));
	uint64_t *pool = malloc((a->perf_len / 8 + 2) * sizeof(*pool));
	int err;

	memset(res, 0, sizeof(*res));
	if (!st || !pool) {
		free(st);
		free(pool);
		return RB_ERR_NOMEM;
	}
	err = walk_records(a, NULL, count, pool, st, res);
	free(pool);
	if (err) {
		free(st);
		free(res->comms);
		free(res->mmaps);
		memset(res, 0, sizeof(*res));
		return err;
	}
	*ret = st;
	return RB_OK;
}

static int by_time(const void *pa, const void *pb)
{
	const struct sample *a = pa, *b = pb;

	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->order < b->order ? -1 : a->order > b->order;
}

static void write_out(struct writer *w)
{
	for (size_t off = 0; off < w->out_used && !w->failed;) {
		ssize_t n = write(w->fd, w->out + off, w->out_used - off);

		if (n < 0) {
			if (errno != EINTR)
				w->failed = true;
			continue;
		}
		off += (size_t)n;
	}
	w->out_used = 0;
}

static void flush(struct writer *w)
{
	size_t size = w->layout->page_size, ls = w->layout->long_size;
	uint64_t commit = w->used;

	if (w->failed || (!w->used && !w->missed))
		return;
	if (w->missed > 0) {
		uint64_t missed = (uint64_t)w->missed;

		commit |= RB_MISSED_EVENTS | RB_MISSED_STORED;
		if (ls == 8) {
			memcpy(w->page + w->data_off + w->used, &missed, 8);
		} else {
			uint32_t m32 = (uint32_t)missed;

			memcpy(w->page + w->data_off + w->used, &m32, 4);
		}
	} else if (w->missed < 0) {
		commit |= RB_MISSED_EVENTS;
	}
	memcpy(w->page, &w->base, 8);
	if (ls == 8) {
		memcpy(w->page + 8, &commit, 8);
	} else {
		uint32_t c32 = (uint32_t)commit;

		memcpy(w->page + 8, &c32, 4);
	}
	// (zeros after the data: the lost count, if any, was written there above)
	size_t end = w->data_off + w->used + (w->missed > 0 ? ls : 0);

	memset(w->page + end, 0, size - end);
	w->out_used += size;
	if (w->out_used == OUT_PAGES * size)
		write_out(w);
	w->page = w->out + w->out_used;
	w->pages++;
	w->used = 0;
	w->missed = 0;
}

static void put_word(struct writer *w, uint32_t word)
{
	memcpy(w->page + w->data_off + w->used, &word, 4);
	w->used += 4;
}

static uint32_t header(uint32_t type_len, uint32_t delta)
{
	return HOST_BIG_ENDIAN ? type_len << 27 | delta : delta << 5 | type_len;
}

// One record of @len payload bytes (the head, then the tail) at time @ts.
static void add(struct writer *w, uint64_t ts, const uint8_t *head, size_t hlen, const uint8_t *tail,
		size_t tlen)
{
	size_t len = hlen + tlen, padded = (len + 3) & ~(size_t)3;
	bool small = padded <= 4 * RB_TYPE_DATA_MAX;
	size_t need = (small ? 4 : 8) + padded + 8;

	if (w->failed || need > w->room)
		return;
	if (w->used && w->used + need > w->room)
		flush(w);
	if (!w->used)
		w->base = w->last = ts;
	uint64_t delta = ts - w->last;

	if (ts < w->last || delta > DELTA_MAX) {
		if (ts > w->last && delta <= STAMP_MAX) {
			put_word(w, header(RB_TYPE_TIME_EXTEND, (uint32_t)(delta & DELTA_MAX)));
			put_word(w, (uint32_t)(delta >> 27));
		} else {
			put_word(w, header(RB_TYPE_TIME_STAMP, (uint32_t)(ts & DELTA_MAX)));
			put_word(w, (uint32_t)((ts & STAMP_MAX) >> 27));
		}
		delta = 0;
	}
	if (small) {
		put_word(w, header((uint32_t)(padded / 4), (uint32_t)delta));
	} else {
		put_word(w, header(0, (uint32_t)delta));
		put_word(w, (uint32_t)(padded + 4));
	}
	uint8_t *p = w->page + w->data_off + w->used;

	memcpy(p, head, hlen);
	if (tlen)
		memcpy(p + hlen, tail, tlen);
	memset(p + len, 0, padded - len);
	w->used += padded;
	w->last = ts;
}

static void add_chain(struct writer *w, uint64_t ts, const struct sample *s, uint16_t id)
{
	uint8_t head[CHAIN_HEADER] = { 0 };
	int32_t tid = (int32_t)s->tid, tgid = (int32_t)s->pid;
	uint32_t loc = (uint32_t)(8 * s->naddrs) << 16 | CHAIN_HEADER;

	if (!s->chain)
		return;
	memcpy(head, &id, 2);
	memcpy(head + 4, &tid, 4);
	memcpy(head + 8, &tgid, 4);
	memcpy(head + 12, &loc, 4);
	add(w, ts, head, sizeof(head), (const uint8_t *)s->addrs, 8 * (size_t)s->naddrs);
}

// The ftrace events of the source, in order (as many as decode).
static int read_events(const struct cm_args *a, struct ftrace_event **ret, size_t *count, size_t *pages)
{
	size_t cap = 1024, n = 0, p = 0;
	struct ftrace_event *e = malloc(cap * sizeof(*e));

	if (!e)
		return RB_ERR_NOMEM;
	for (size_t off = 0; a->src && off + a->layout.page_size <= a->src_len; off += a->layout.page_size, p++) {
		struct rb_page page;
		struct rb_event ev;
		int r;

		if (rb_page_load(&page, &a->layout, a->src + off, a->layout.page_size))
			break;
		while ((r = rb_page_next(&page, &ev)) == 1) {
			if (n == cap) {
				struct ftrace_event *bigger = realloc(e, 2 * cap * sizeof(*e));

				if (!bigger) {
					free(e);
					return RB_ERR_NOMEM;
				}
				e = bigger;
				cap *= 2;
			}
			e[n].ts = ev.ts;
			e[n].type = ev.len >= 2 ? (uint16_t)(ev.data[0] | ev.data[1] << 8) : 0;
			if (HOST_BIG_ENDIAN && ev.len >= 2)
				e[n].type = (uint16_t)(ev.data[0] << 8 | ev.data[1]);
			e[n].tid = ev.len >= 8 ? rd32(ev.data + 4) : 0;
			e[n].sample = -1;
			n++;
		}
		if (r < 0) {
			p++;	// (its records before the damage are written)
			break;
		}
	}
	*ret = e;
	*count = n;
	*pages = p;
	return RB_OK;
}

// Each sample without its own record to the nearest event of its thread and type, within the window.
static uint64_t join(const struct cm_args *a, struct sample *s, size_t ns, struct ftrace_event *e, size_t ne)
{
	uint64_t joined = 0;

	for (size_t i = 0; i < ns; i++) {
		if (s[i].raw)
			continue;
		uint64_t from = s[i].ts > a->window_ns ? s[i].ts - a->window_ns : 0;
		size_t lo = 0, hi = ne;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (e[mid].ts < from)
				lo = mid + 1;
			else
				hi = mid;
		}
		int64_t best = -1;
		uint64_t best_dt = 0;

		for (size_t j = lo; j < ne && e[j].ts <= s[i].ts + a->window_ns; j++) {
			if (e[j].sample >= 0 || e[j].tid != s[i].tid || e[j].type != s[i].event)
				continue;
			uint64_t dt = e[j].ts > s[i].ts ? e[j].ts - s[i].ts : s[i].ts - e[j].ts;

			if (best < 0 || dt < best_dt) {
				best = (int64_t)j;
				best_dt = dt;
			}
		}
		if (best >= 0) {
			e[best].sample = (int64_t)i;
			joined++;
		}
	}
	return joined;
}

int cm_write(const struct cm_args *a, struct cm_result *res)
{
	struct sample *s = NULL;
	struct ftrace_event *e = NULL;
	uint64_t *pool = NULL;
	size_t ns = 0, ne = 0, npages = 0, next = 0, k = 0;
	struct writer w = { 0 };
	int err;

	memset(res, 0, sizeof(*res));
	if (a->layout.big_endian != HOST_BIG_ENDIAN || rb_layout_check(&a->layout))
		return RB_ERR_INVAL;
	err = read_samples(a, &s, &ns, &pool, res);
	if (!err)
		err = read_events(a, &e, &ne, &npages);
	w.out = malloc(OUT_PAGES * a->layout.page_size);
	w.page = w.out;
	if (err || !w.out) {
		err = err ? err : RB_ERR_NOMEM;
		goto out;
	}
	qsort(s, ns, sizeof(*s), by_time);
	uint64_t joined = join(a, s, ns, e, ne);

	w.layout = &a->layout;
	w.fd = a->out_fd;
	w.data_off = 8 + a->layout.long_size;
	w.room = a->layout.page_size - w.data_off - a->layout.long_size;
	for (size_t off = 0, p = 0; p < npages; off += a->layout.page_size, p++) {
		struct rb_page page;
		struct rb_event ev;

		if (rb_page_load(&page, &a->layout, a->src + off, a->layout.page_size))
			break;
		if (page.missed) {
			flush(&w);
			w.missed = page.missed;
		}
		while (k < ne && rb_page_next(&page, &ev) == 1) {
			for (; next < ns && (!s[next].raw || s[next].ts < ev.ts); next++) {
				if (!s[next].raw)
					continue;
				add(&w, s[next].ts, s[next].record, s[next].record_len, NULL, 0);
				add_chain(&w, s[next].ts, &s[next], a->callchain_id);
				res->written++;
			}
			add(&w, ev.ts, ev.data, ev.len, NULL, 0);
			if (e[k].sample >= 0)
				add_chain(&w, ev.ts, &s[e[k].sample], a->callchain_id);
			k++;
		}
	}
	for (; next < ns; next++) {
		if (!s[next].raw)
			continue;
		add(&w, s[next].ts, s[next].record, s[next].record_len, NULL, 0);
		add_chain(&w, s[next].ts, &s[next], a->callchain_id);
		res->written++;
	}
	flush(&w);
	write_out(&w);
	res->written += joined;
	res->left = ns - res->written;
	res->pages = w.pages;
	if (w.failed) {
		err = RB_ERR_IO;
		goto out;
	}
out:;
	int saved = errno;

	if (err) {
		free(res->comms);
		res->comms = NULL;
		res->ncomms = 0;
		free(res->mmaps);
		res->mmaps = NULL;
		res->nmmaps = 0;
	}
	free(s);
	free(e);
	free(pool);
	free(w.out);
	errno = saved;
	return err;
}

int cm_names(const struct cm_args *a, struct cm_result *res)
{
	size_t comm_cap = 0, mmap_cap = 0;

	memset(res, 0, sizeof(*res));
	for (size_t pos = 0; pos + 8 <= a->perf_len;) {
		const uint8_t *r = a->perf + pos;
		struct perf_event_header h;

		memcpy(&h, r, sizeof(h));
		if (h.size < 8 || pos + h.size > a->perf_len)
			break;
		pos += h.size;
		if ((h.type == PERF_RECORD_COMM && add_comm(res, &comm_cap, r, h.size)) ||
		    (h.type == PERF_RECORD_MMAP2 && add_mmap(res, &mmap_cap, r, h.size))) {
			free(res->comms);
			free(res->mmaps);
			memset(res, 0, sizeof(*res));
			return RB_ERR_NOMEM;
		}
	}
	return RB_OK;
}

#define RECORD_WORDS	(65536 / 8 + 2)	// a record's size is a u16: its addresses, and the entry's caller

struct want {
	uint32_t pid;
	uint64_t address;
};

struct cm_rules {
	pthread_mutex_t lock;		// over all of it: the streams' thread walks, the caller's puts
	struct uw_cache *cache;		// the rules known
	struct uw_cache *asked;		// the pairs wanted already (their rules unused)
	struct want *wanted;		// wanted, not yet handed to the caller
	size_t nwanted, cap;
	uint32_t nregs, max_frames;
	int ip, sp, bp;
};

#define WANTED_MAX	65536	// pairs waiting for the caller (more: those stacks go whole)

struct cm_rules *cm_rules_new(uint32_t nregs, int ip, int sp, int bp, uint32_t max_frames)
{
	struct cm_rules *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	r->cache = uw_cache_new();
	r->asked = uw_cache_new();
	if (!r->cache || !r->asked || !nregs || ip < 0 || sp < 0 || (uint32_t)ip >= nregs || (uint32_t)sp >= nregs ||
	    (bp >= 0 && (uint32_t)bp >= nregs) || !max_frames) {
		cm_rules_free(r);
		return NULL;
	}
	r->nregs = nregs;
	r->ip = ip;
	r->sp = sp;
	r->bp = bp;
	r->max_frames = max_frames;
	return r;
}

void cm_rules_free(struct cm_rules *r)
{
	if (!r)
		return;
	uw_cache_free(r->cache);
	uw_cache_free(r->asked);
	free(r->wanted);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

size_t cm_rules_wanted(struct cm_rules *r, uint32_t *pids, uint64_t *addresses, size_t max)
{
	size_t n;

	pthread_mutex_lock(&r->lock);
	n = r->nwanted < max ? r->nwanted : max;
	for (size_t i = 0; i < n; i++) {
		pids[i] = r->wanted[r->nwanted - n + i].pid;
		addresses[i] = r->wanted[r->nwanted - n + i].address;
	}
	r->nwanted -= n;
	pthread_mutex_unlock(&r->lock);
	return n;
}

int cm_rules_put(struct cm_rules *r, uint32_t pid, uint64_t address, const struct uw_rule *rule)
{
	int err;

	pthread_mutex_lock(&r->lock);
	err = uw_cache_put(r->cache, pid, address, rule);
	pthread_mutex_unlock(&r->lock);
	return err;
}

// The rule callback of a walk in the streams' thread (the lock held): a rule not known is wanted.
static int want_rule(void *ctx, uint32_t pid, uint64_t address, struct uw_rule *ret)
{
	struct cm_rules *r = ctx;
	static const struct uw_rule none = { .kind = UW_RULE_OTHER };

	(void)ret;
	if (uw_cache_has(r->asked, pid, address) || r->nwanted >= WANTED_MAX)
		return UW_RULE_LATER;
	if (r->nwanted == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 256;
		struct want *more = realloc(r->wanted, cap * sizeof(*more));

		if (!more)
			return UW_RULE_LATER;
		r->wanted = more;
		r->cap = cap;
	}
	if (uw_cache_put(r->asked, pid, address, &none))
		return UW_RULE_LATER;
	r->wanted[r->nwanted++] = (struct want){ pid, address };
	return UW_RULE_LATER;
}

struct cm_stream {
	struct cm_args args;		// the layout, the map (owned), the callchain id
	struct writer w;
	int rest_fd;
	struct cm_rules *rules;		// (the caller's) CM_STACK samples' walks, or NULL
	uint64_t *pool;			// RECORD_WORDS: the addresses of the sample at hand
	uint64_t *walked;		// rules->max_frames: the frames of a walk
	uint64_t nwalked, whole;
	uint64_t written;
	uint32_t *tid_set;		// open addressing by tid + 1 (0: empty), a power of two long
	size_t tid_cap;
	uint32_t *tids;			// the same tids, in the order first seen
	size_t ntids, tids_cap;
};

void cm_stream_destroy(struct cm_stream *s)
{
	if (!s)
		return;
	free((void *)s->args.map);
	free(s->w.out);
	free(s->pool);
	free(s->walked);
	free(s->tid_set);
	free(s->tids);
	free(s);
}

int cm_stream_create(struct cm_stream **ret, const struct rb_layout *layout, const struct cm_event_map *map,
		     size_t nmap, uint16_t callchain_id, int pages_fd, int rest_fd, struct cm_rules *rules)
{
	struct cm_stream *s;
	struct cm_event_map *own;

	*ret = NULL;
	if (layout->big_endian != HOST_BIG_ENDIAN || rb_layout_check(layout))
		return RB_ERR_INVAL;
	for (size_t i = 0; i < nmap; i++)
		if (!(map[i].flags & CM_RAW) || ((map[i].flags & CM_STACK) && !rules))
			return RB_ERR_INVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return RB_ERR_NOMEM;
	own = malloc((nmap ? nmap : 1) * sizeof(*own));
	s->args.map = own;
	s->w.out = malloc(OUT_PAGES * layout->page_size);
	s->w.page = s->w.out;
	s->pool = malloc(RECORD_WORDS * sizeof(*s->pool));
	s->tid_cap = 64;
	s->tid_set = calloc(s->tid_cap, sizeof(*s->tid_set));
	s->rules = rules;
	if (rules) {
		s->walked = malloc(rules->max_frames * sizeof(*s->walked));
		s->args.stack_nregs = rules->nregs;
	}
	if (!own || !s->w.out || !s->pool || !s->tid_set || (rules && !s->walked)) {
		cm_stream_destroy(s);
		return RB_ERR_NOMEM;
	}
	memcpy(own, map, nmap * sizeof(*own));
	s->args.layout = *layout;
	s->args.nmap = nmap;
	s->args.callchain_id = callchain_id;
	s->w.layout = &s->args.layout;
	s->w.fd = pages_fd;
	s->w.data_off = 8 + layout->long_size;
	s->w.room = layout->page_size - s->w.data_off - layout->long_size;
	s->rest_fd = rest_fd;
	*ret = s;
	return RB_OK;
}

static size_t tid_slot(const uint32_t *set, size_t cap, uint32_t key)
{
	size_t i = (key * 2654435761U) & (cap - 1);

	while (set[i] && set[i] != key)
		i = (i + 1) & (cap - 1);
	return i;
}

static int add_tid(struct cm_stream *s, uint32_t tid)
{
	uint32_t key = tid + 1;	// (tid 0xffffffff is no thread)
	size_t i = tid_slot(s->tid_set, s->tid_cap, key);

	if (s->tid_set[i] || !key)
		return RB_OK;
	if (s->ntids == s->tids_cap) {
		size_t bigger = s->tids_cap ? 2 * s->tids_cap : 64;
		uint32_t *more = realloc(s->tids, bigger * sizeof(*more));

		if (!more)
			return RB_ERR_NOMEM;
		s->tids = more;
		s->tids_cap = bigger;
	}
	if (2 * (s->ntids + 1) > s->tid_cap) {
		size_t cap = 2 * s->tid_cap;
		uint32_t *set = calloc(cap, sizeof(*set));

		if (!set)
			return RB_ERR_NOMEM;
		for (size_t j = 0; j < s->ntids; j++)
			set[tid_slot(set, cap, s->tids[j] + 1)] = s->tids[j] + 1;
		free(s->tid_set);
		s->tid_set = set;
		s->tid_cap = cap;
		i = tid_slot(set, cap, key);
	}
	s->tid_set[i] = key;
	s->tids[s->ntids++] = tid;
	return RB_OK;
}

static int write_rest(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return RB_ERR_IO;
		}
		buf += n;
		len -= (size_t)n;
	}
	return RB_OK;
}

// The stack of a CM_STACK sample walked by the rules known now, its frames into @x; false when the
// copy is missing or a rule is not known yet or not simple (the sample then goes whole).
static bool walk(struct cm_stream *s, const struct cm_stack *copy, bool has_stack, struct sample *x)
{
	struct cm_rules *rules = s->rules;
	struct uw_sample u = { .pid = copy->pid, .stack = copy->stack, .stack_len = copy->stack_len };
	uint32_t n = 0;
	enum uw_result got;

	if (!has_stack)
		return false;
	memcpy(&u.ip, copy->regs + 8 * rules->ip, 8);
	memcpy(&u.sp, copy->regs + 8 * rules->sp, 8);
	if (rules->bp >= 0) {
		memcpy(&u.bp, copy->regs + 8 * rules->bp, 8);
		u.bp_known = true;
	}
	pthread_mutex_lock(&rules->lock);
	got = uw_unwind(&u, rules->max_frames, rules->cache, want_rule, rules, s->walked, &n);
	pthread_mutex_unlock(&rules->lock);
	if (got != UW_DONE || n > RECORD_WORDS)
		return false;
	memcpy(x->addrs, s->walked, 8 * (size_t)n);
	x->naddrs = n;
	return true;
}

int cm_stream_record(struct cm_stream *s, const uint8_t *r, size_t size)
{
	struct perf_event_header h;
	const struct cm_event_map *m;
	struct sample x;
	struct cm_stack copy;
	bool has_stack;

	if (size < sizeof(h) || size > 0xffff)
		return RB_OK;
	memcpy(&h, r, sizeof(h));
	if (h.type != PERF_RECORD_SAMPLE)
		return write_rest(s->rest_fd, r, size);
	if (size < 48)
		return RB_OK;
	m = find_map(&s->args, rd64(r + 8));
	if (!m || !parse_sample(&s->args, r, size, 0, m, &x, s->pool, &copy, &has_stack) || x.record_len < 8)
		return RB_OK;
	if (m->flags & CM_STACK) {
		if (!walk(s, &copy, has_stack, &x)) {
			s->whole++;	// (unwound when the recording ends, and put in the pages by time)
			return write_rest(s->rest_fd, r, size);
		}
		s->nwalked++;
	}
	add(&s->w, x.ts, x.record, x.record_len, NULL, 0);
	add_chain(&s->w, x.ts, &x, s->args.callchain_id);
	if (s->w.failed)
		return RB_ERR_IO;
	s->written++;
	return add_tid(s, x.tid);
}

int cm_stream_finish(struct cm_stream *s)
{
	flush(&s->w);
	write_out(&s->w);
	return s->w.failed ? RB_ERR_IO : RB_OK;
}

void cm_stream_get_stats(struct cm_stream *s, struct cm_stream_stats *ret)
{
	ret->written = s->written;
	ret->whole = s->whole;
	ret->walked = s->nwalked;
	ret->pages = s->w.pages;
	ret->tids = s->tids;
	ret->ntids = s->ntids;
}
