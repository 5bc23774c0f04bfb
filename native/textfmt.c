// SPDX-License-Identifier: GPL-2.0-only
// textfmt.c - text output by precompiled per-event plans (see textfmt.h): buffers, numbers, text,
// the name tables and the plans. The formatting loops are in textfmt_run.c.

#include <stdlib.h>
#include <string.h>

#include "textfmt.h"
#include "textfmt_int.h"

// ---- buffers -----------------------------------------------------------------------------------

int tf_buf_grow(struct tf_buf *b, size_t need)
{
	size_t cap = b->cap ? b->cap : 1 << 16;
	uint8_t *p;

	while (cap - b->len < need) {
		if (cap > SIZE_MAX / 4)
			return TF_ERR_NOMEM;
		cap *= 2;
	}
	p = realloc(b->p, cap);
	if (!p)
		return TF_ERR_NOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

int tf_buf_append(struct tf_buf *b, const void *p, size_t n)
{
	if (reserve(b, n))
		return TF_ERR_NOMEM;
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

static int pool_add(struct tf_pool *pool, const uint8_t *p, size_t n, uint32_t *off)
{
	if (n > UINT32_MAX || pool->len > UINT32_MAX - n)
		return TF_ERR_NOMEM;
	if (pool->cap - pool->len < n || !pool->p) {
		size_t cap = pool->cap ? pool->cap : 4096;
		uint8_t *q;

		while (cap - pool->len < n)
			cap *= 2;
		q = realloc(pool->p, cap);
		if (!q)
			return TF_ERR_NOMEM;
		pool->p = q;
		pool->cap = cap;
	}
	if (n)
		memcpy(pool->p + pool->len, p, n);
	*off = (uint32_t)pool->len;
	pool->len += n;
	return 0;
}

// ---- integers ----------------------------------------------------------------------------------

static const char hex_lower[] = "0123456789abcdef";

int tf_put_int(struct tf_buf *out, bool neg, uint64_t mag, char letter, unsigned int flags,
	       int32_t width, int32_t prec)
{
	if (width < 0 || width > TF_MAX_WIDTH || prec > TF_MAX_WIDTH)
		return TF_ERR_PLAN;
	if (reserve(out, int_room(width, prec)))
		return TF_ERR_NOMEM;
	out->len += put_int(out->p + out->len, neg, mag, letter, flags, width, prec);
	return 0;
}

// ---- text --------------------------------------------------------------------------------------

// The length of the valid UTF-8 sequence at @p (Python's decoder: no overlongs, no surrogates,
// nothing above U+10FFFF), or 0 when the byte at @p does not start one.
static size_t utf8_len(const uint8_t *p, size_t avail)
{
	uint8_t c = p[0], lo = 0x80, hi = 0xbf;
	size_t n;

	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else {
		return 0;
	}
	if (avail < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

#define BYTES_01	0x0101010101010101ULL
#define BYTES_80	0x8080808080808080ULL

// Has one of the 8 bytes of @x the value @b? Below @b (at most 0x80)? (Exact as yes/no answers.)
static inline uint64_t has_byte(uint64_t x, uint8_t b)
{
	uint64_t v = x ^ (BYTES_01 * b);

	return (v - BYTES_01) & ~v & BYTES_80;
}

static inline uint64_t has_below(uint64_t x, uint8_t b)
{
	return (x - BYTES_01 * b) & ~x & BYTES_80;
}

// Are the 8 bytes at @s printable ASCII other than quote and backslash (copied as they are in
// every mode)?
static inline bool plain8(const uint8_t *s)
{
	uint64_t x;

	memcpy(&x, s, 8);
	return !((x & BYTES_80) | has_below(x, 0x20) | has_byte(x, 0x7f) | has_byte(x, '"') |
		 has_byte(x, '\\'));
}

long tf_put_text(struct tf_buf *out, const uint8_t *s, size_t n, int mode)
{
	uint8_t *o, *start;
	long ncp = 0;
	size_t i = 0;

	// at most 6 bytes out per byte in (\u00XX)
	if (n > (SIZE_MAX - 16) / 6 || reserve(out, 6 * n))
		return TF_ERR_NOMEM;
	o = start = out->p + out->len;
	while (i < n) {
		uint8_t c;

		for (; n - i >= 8 && plain8(s + i); i += 8, o += 8, ncp += 8)
			memcpy(o, s + i, 8);	// (room: 6 bytes for each of these 8)
		if (i == n)
			break;
		c = s[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			*o++ = c;
			ncp++;
			i++;
			continue;
		}
		if (c < 0x80) {
			uint8_t *e = o;

			i++;
			if (mode == TF_TEXT_RAW || (mode == TF_TEXT_JSON && c == 0x7f)) {
				*o++ = c;
			} else if (c == '"' || c == '\\') {
				*o++ = '\\';
				*o++ = c;
			} else if (c == '\n' || c == '\t' || (mode == TF_TEXT_JSON &&
				   (c == '\r' || c == '\b' || c == '\f'))) {
				*o++ = '\\';
				*o++ = c == '\n' ? 'n' : c == '\t' ? 't' : c == '\r' ? 'r' : c == '\b' ? 'b' : 'f';
			} else if (mode == TF_TEXT_JSON) {
				memcpy(o, "\\u00", 4);
				o[4] = (uint8_t)hex_lower[c >> 4];
				o[5] = (uint8_t)hex_lower[c & 15];
				o += 6;
			} else {
				o[0] = '\\';
				o[1] = 'x';
				o[2] = (uint8_t)hex_lower[c >> 4];
				o[3] = (uint8_t)hex_lower[c & 15];
				o += 4;
			}
			ncp += o - e;
			continue;
		}
		size_t l = utf8_len(s + i, n - i);

		if (l) {
			memcpy(o, s + i, l);
			o += l;
			i += l;
			ncp++;
			continue;
		}
		// Python's "backslashreplace": \xNN, whose backslash is then escaped like any other
		uint8_t *e = o;

		*o++ = '\\';
		if (mode != TF_TEXT_RAW)
			*o++ = '\\';
		*o++ = 'x';
		*o++ = (uint8_t)hex_lower[c >> 4];
		*o++ = (uint8_t)hex_lower[c & 15];
		ncp += o - e;
		i++;
	}
	out->len += (size_t)(o - start);
	return ncp;
}

// Pad what was appended since @from (@ncp code points) to the op's width, as Python pads %s.
// Cut the text appended since @from to @prec code points (Python's "%.Ns"); returns its code
// points after the cut. (The text is UTF-8, or the caller's bytes: any byte not a continuation
// byte starts a code point.)
static size_t cut_text(struct tf_buf *out, size_t from, size_t ncp, int32_t prec)
{
	size_t i = from, k = 0;

	if (prec < 0 || ncp <= (size_t)prec)
		return ncp;
	for (; i < out->len; i++) {
		if ((out->p[i] & 0xc0) != 0x80 && k++ == (size_t)prec)
			break;
	}
	out->len = i;
	return (size_t)prec;
}

int tf_pad_text(struct tf_buf *out, size_t from, size_t ncp, const struct tf_op *op)
{
	size_t pad, n;

	ncp = cut_text(out, from, ncp, op->prec);
	if (op->width <= 0 || (size_t)op->width <= ncp)
		return 0;
	pad = (size_t)op->width - ncp;
	if (reserve(out, pad))
		return TF_ERR_NOMEM;
	n = out->len - from;
	if (!(op->flags & TF_F_LEFT)) {
		memmove(out->p + from + pad, out->p + from, n);
		memset(out->p + from, ' ', pad);
	} else {
		memset(out->p + out->len, ' ', pad);
	}
	out->len += pad;
	return 0;
}

// CSV (Python's csv module, QUOTE_MINIMAL): a cell with a comma, quote or newline is quoted,
// its quotes doubled.
int tf_csv_quote(struct tf_buf *out, size_t from)
{
	size_t quotes = 0, n = out->len - from, i = from;
	bool need = false;
	uint8_t *src, *dst;

	for (; out->len - i >= 8; i += 8) {	// (most cells need nothing: look 8 bytes at a time)
		uint64_t x;

		memcpy(&x, out->p + i, 8);
		if (has_byte(x, ',') | has_byte(x, '"') | has_byte(x, '\n'))
			break;
	}
	for (; i < out->len; i++) {
		uint8_t c = out->p[i];

		if (c == ',' || c == '"' || c == '\n')
			break;
	}
	if (i == out->len)
		return 0;
	for (i = from; i < out->len; i++) {
		uint8_t c = out->p[i];

		if (c == '"') {
			quotes++;
			need = true;
		} else if (c == ',' || c == '\n') {
			need = true;
		}
	}
	if (!need)
		return 0;
	if (reserve(out, quotes + 2))
		return TF_ERR_NOMEM;
	// shift right, from the end, doubling quotes
	src = out->p + from + n;
	dst = out->p + from + n + quotes + 2;
	*--dst = '"';
	while (src > out->p + from) {
		uint8_t c = *--src;

		*--dst = c;
		if (c == '"')
			*--dst = '"';
	}
	*--dst = '"';
	out->len += quotes + 2;
	return 0;
}

// ---- tables ------------------------------------------------------------------------------------

// Code points of text that is valid UTF-8, or SIZE_MAX when it is not.
static size_t count_code_points(const uint8_t *p, size_t n)
{
	size_t ncp = 0;

	for (size_t i = 0; i < n; ncp++) {
		size_t l = p[i] < 0x80 ? 1 : utf8_len(p + i, n - i);

		if (!l)
			return SIZE_MAX;
		i += l;
	}
	return ncp;
}

// (UINT32_MAX: not valid UTF-8, or too long to count on)
static uint32_t clamp_ncp(size_t ncp)
{
	return ncp >= UINT32_MAX ? UINT32_MAX : (uint32_t)ncp;
}

struct tf_thread *tf_thread_find(const struct tf_formatter *f, int32_t tid)
{
	size_t mask, i;

	if (!f->threads_cap)
		return NULL;
	mask = f->threads_cap - 1;
	for (i = hash64((uint32_t)tid) & mask; f->threads[i].used; i = (i + 1) & mask)
		if (f->threads[i].tid == tid)
			return &f->threads[i];
	return NULL;
}

int tf_add_thread(struct tf_formatter *f, int32_t tid, const uint8_t *comm, size_t len,
		  int64_t tgid, int64_t nspid)
{
	struct tf_thread *t = tf_thread_find(f, tid);
	uint32_t off;
	size_t mask, i;

	if (pool_add(&f->pool, comm, len, &off))
		return TF_ERR_NOMEM;
	if (t) {	// (a new name: the cached line starts may hold the old one)
		memset(f->heads, 0, sizeof(f->heads));
	} else {
		if (2 * (f->nthreads + 1) > f->threads_cap) {
			size_t cap = f->threads_cap ? 2 * f->threads_cap : 256;
			struct tf_thread *old = f->threads, *tab = calloc(cap, sizeof(*tab));

			if (!tab)
				return TF_ERR_NOMEM;
			for (size_t k = 0; k < f->threads_cap; k++) {
				if (!old[k].used)
					continue;
				for (i = hash64((uint32_t)old[k].tid) & (cap - 1); tab[i].used;
				     i = (i + 1) & (cap - 1))
					;
				tab[i] = old[k];
			}
			free(old);
			f->threads = tab;
			f->threads_cap = cap;
		}
		mask = f->threads_cap - 1;
		for (i = hash64((uint32_t)tid) & mask; f->threads[i].used; i = (i + 1) & mask)
			;
		t = &f->threads[i];
		t->used = true;
		t->tid = tid;
		f->nthreads++;
	}
	t->tgid = tgid;
	t->nspid = nspid;
	t->comm_off = off;
	t->comm_len = (uint32_t)len;
	t->comm_ncp = clamp_ncp(count_code_points(comm, len));
	return 0;
}

static size_t symbol_hash(int64_t tgid, uint64_t addr, bool neg)
{
	return hash64(addr ^ hash64((uint64_t)tgid * 2 + neg));
}

struct tf_symbol *tf_symbol_find(const struct tf_formatter *f, int64_t tgid, uint64_t addr,
				  bool neg)
{
	size_t mask, i;

	if (!f->symbols_cap)
		return NULL;
	mask = f->symbols_cap - 1;
	for (i = symbol_hash(tgid, addr, neg) & mask; f->symbols[i].used; i = (i + 1) & mask) {
		const struct tf_symbol *s = &f->symbols[i];

		if (s->addr == addr && s->tgid == tgid && s->neg == neg)
			return &f->symbols[i];
	}
	return NULL;
}

int tf_add_symbol(struct tf_formatter *f, int64_t tgid, uint64_t addr, bool neg,
		  const uint8_t *name, size_t len)
{
	struct tf_symbol *s = tf_symbol_find(f, tgid, addr, neg);
	uint32_t off;
	size_t mask, i;

	if (pool_add(&f->pool, name, len, &off))
		return TF_ERR_NOMEM;
	if (!s) {
		if (2 * (f->nsymbols + 1) > f->symbols_cap) {
			size_t cap = f->symbols_cap ? 2 * f->symbols_cap : 256;
			struct tf_symbol *old = f->symbols, *tab = calloc(cap, sizeof(*tab));

			if (!tab)
				return TF_ERR_NOMEM;
			for (size_t k = 0; k < f->symbols_cap; k++) {
				if (!old[k].used)
					continue;
				for (i = symbol_hash(old[k].tgid, old[k].addr, old[k].neg) & (cap - 1);
				     tab[i].used; i = (i + 1) & (cap - 1))
					;
				tab[i] = old[k];
			}
			free(old);
			f->symbols = tab;
			f->symbols_cap = cap;
		}
		mask = f->symbols_cap - 1;
		for (i = symbol_hash(tgid, addr, neg) & mask; f->symbols[i].used; i = (i + 1) & mask)
			;
		s = &f->symbols[i];
		s->used = true;
		s->tgid = tgid;
		s->addr = addr;
		s->neg = neg;
		f->nsymbols++;
	}
	s->name_off = off;
	s->name_len = (uint32_t)len;
	s->name_ncp = clamp_ncp(count_code_points(name, len));
	return 0;
}

// ---- plans -------------------------------------------------------------------------------------

struct tf_formatter *tf_formatter_new(void)
{
	return calloc(1, sizeof(struct tf_formatter));
}

static void plan_free(struct tf_plan *p)
{
	if (!p)
		return;
	free(p->ops);
	free(p->lits);
	free(p);
}

void tf_formatter_free(struct tf_formatter *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < 65536; i++)
		plan_free(f->plans[i]);
	free(f->threads);
	free(f->symbols);
	free(f->pool.p);
	free(f->out.p);
	free(f);
}

int tf_check_op(const struct tf_op *op)
{
	if (op->src > TF_SRC_MAX || op->conv > TF_CONV_MAX)
		return TF_ERR_PLAN;
	if (op->letter != 'd' && op->letter != 'o' && op->letter != 'x' && op->letter != 'X' &&
	    op->letter != 's')
		return TF_ERR_PLAN;
	if (op->width < 0 || op->width > TF_MAX_WIDTH || op->prec < -1 || op->prec > TF_MAX_WIDTH)
		return TF_ERR_PLAN;
	if (op->cast_size != 0 && op->cast_size != 1 && op->cast_size != 2 && op->cast_size != 4 &&
	    op->cast_size != 8)
		return TF_ERR_PLAN;
	if (op->flags & ~(TF_F_LEFT | TF_F_PLUS | TF_F_SPACE | TF_F_ALT | TF_F_ZERO | TF_F_EMPTY_CELL))
		return TF_ERR_PLAN;
	if ((op->flags & TF_F_EMPTY_CELL) && op->src != TF_SRC_ELEM && op->src != TF_SRC_FIELD)
		return TF_ERR_PLAN;
	switch (op->src) {
	case TF_SRC_FIELD:
		return 0;
	case TF_SRC_ELEM:
		return op->conv == TF_CONV_INT || op->conv == TF_CONV_CHAR ? 0 : TF_ERR_PLAN;
	case TF_SRC_COMM:
		return op->conv == TF_CONV_RAW || op->conv == TF_CONV_STR ||
		       op->conv == TF_CONV_JSON_STR ? 0 : TF_ERR_PLAN;
	case TF_SRC_TGID:
	case TF_SRC_NSPID:
	case TF_SRC_TID:
	case TF_SRC_CPU:
	case TF_SRC_SECS:
	case TF_SRC_USECS:
	case TF_SRC_NSECS:
		return op->conv == TF_CONV_INT || op->conv == TF_CONV_CHAR ? 0 : TF_ERR_PLAN;
	}
	return 0;
}

static bool thread_value(uint8_t src)
{
	return src == TF_SRC_COMM || src == TF_SRC_TGID || src == TF_SRC_NSPID || src == TF_SRC_TID ||
	       src == TF_SRC_CPU;
}

// The thread part of a plan (see struct tf_plan): the first run of ops that print only
// literals, thread and CPU values (two or more) and whole CSV cells of them, so that its
// output, cached per event id, thread and CPU, is the same wherever the line starts. A cell
// end whose cell starts before the run would quote bytes outside it: the run stops there.
// Nor does it start where a missing value's empty cell skips to its end (the skip must not
// pass over the part). Literals after its last value join it while short (long ones are copied
// cheaply anyway, and would make the part too long to cache).
static void plan_head(struct tf_plan *p)
{
	uint32_t begin = 0, values = 0, end = 0, k;
	bool in_run = false, cell = false, skip = false;
	size_t trail;

	for (k = 0; k < p->nops; k++) {
		uint8_t src = p->ops[k].src;
		bool member = src == TF_SRC_LIT || src == TF_SRC_CELL_BEGIN || thread_value(src) ||
			      (src == TF_SRC_CELL_END && in_run && cell);

		if (!member || (!in_run && skip)) {
			if (end)
				break;
			in_run = false;
			if (p->ops[k].flags & TF_F_EMPTY_CELL)
				skip = true;
			else if (src == TF_SRC_CELL_END)
				skip = false;
			continue;
		}
		if (!in_run) {
			in_run = true;
			begin = k;
			values = 0;
			cell = false;
		}
		if (src == TF_SRC_CELL_BEGIN)
			cell = true;
		else if (thread_value(src))
			values++;
		if (values >= 2 && src != TF_SRC_LIT && src != TF_SRC_CELL_BEGIN)
			end = k + 1;
	}
	if (!end)
		return;
	for (trail = 0; end < p->nops && p->ops[end].src == TF_SRC_LIT; end++) {
		trail += p->ops[end].len;
		if (trail > TF_LIT_SLACK)
			break;
	}
	p->head_begin = begin;
	p->head_end = end;
}

// An integer value printed as a number (the marks have conversion 0 too).
static bool int_value(const struct tf_op *op)
{
	return op->conv == TF_CONV_INT && op->src != TF_SRC_LIT && op->src != TF_SRC_CELL_BEGIN &&
	       op->src != TF_SRC_CELL_END && op->src != TF_SRC_EMPTY_QUOTE &&
	       op->src != TF_SRC_COMM;
}

// Does every byte an op prints keep a CSV cell free of quotes? (Integers print digits, signs,
// spaces and 0x/0o prefixes only.)
static bool plain_in_cell(const struct tf_op *op, const uint8_t *lits)
{
	if (op->src == TF_SRC_LIT) {
		for (uint32_t i = 0; i < op->len; i++) {
			uint8_t c = lits[op->index + i];

			if (c == ',' || c == '"' || c == '\n')
				return false;
		}
		return true;
	}
	return int_value(op);
}

// Precompute what a plan's ops can know before any event: "%s" of an integer is "%d" (Python's
// %s ignores the sign, alternate and zero flags), and a CSV cell of plain ops is never quoted.
static void plan_simplify(struct tf_plan *p)
{
	for (uint32_t k = 0; k < p->nops; k++) {
		struct tf_op *op = &p->ops[k];

		if (int_value(op) && op->letter == 's' && op->prec < 0) {
			op->letter = 'd';
			op->flags &= TF_F_LEFT | TF_F_EMPTY_CELL;
		}
		if (op->src != TF_SRC_CELL_BEGIN)
			continue;
		for (uint32_t j = k + 1; j < p->nops; j++) {
			struct tf_op *end = &p->ops[j];

			if (end->src == TF_SRC_CELL_END)
				end->flags |= TF_F_PLAIN_CELL;
			if (end->src == TF_SRC_CELL_END || end->src == TF_SRC_CELL_BEGIN ||
			    !plain_in_cell(end, p->lits))
				break;
		}
	}
}

int tf_set_plan(struct tf_formatter *f, uint16_t id, int kind, const struct tf_op *ops,
		uint32_t nops, const uint8_t *lits, size_t lits_len)
{
	struct tf_plan *p;

	if (kind != TF_PLAN_SKIP && kind != TF_PLAN_OPS && kind != TF_PLAN_CALLER)
		return TF_ERR_PLAN;
	if (kind != TF_PLAN_OPS)
		nops = 0;
	for (uint32_t k = 0; k < nops; k++) {
		if (tf_check_op(&ops[k]))
			return TF_ERR_PLAN;
		if (ops[k].src == TF_SRC_LIT &&
		    ((size_t)ops[k].index > lits_len || ops[k].len > lits_len - ops[k].index))
			return TF_ERR_PLAN;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return TF_ERR_NOMEM;
	p->kind = (uint8_t)kind;
	p->nops = nops;
	p->fixed = TF_LIT_SLACK;	// (literals are copied TF_LIT_SLACK bytes at a time)
	for (uint32_t k = 0; k < nops; k++) {
		const struct tf_op *op = &ops[k];

		if (op->src == TF_SRC_LIT)
			p->fixed += op->len;
		else if (op->src == TF_SRC_EMPTY_QUOTE)
			p->fixed += 2;
		else if (op->conv == TF_CONV_INT && op->src != TF_SRC_CELL_BEGIN &&
			 op->src != TF_SRC_CELL_END && op->src != TF_SRC_COMM)
			p->fixed += int_room(op->width, op->prec);
	}
	p->ops = malloc((nops ? nops : 1) * sizeof(*ops));
	p->lits = calloc(1, lits_len + TF_LIT_SLACK);
	if (!p->ops || !p->lits) {
		plan_free(p);
		return TF_ERR_NOMEM;
	}
	if (nops)
		memcpy(p->ops, ops, nops * sizeof(*ops));
	if (lits_len)
		memcpy(p->lits, lits, lits_len);
	plan_simplify(p);
	plan_head(p);
	if (p->head_end)
		p->fixed += TF_HEAD_MAX;	// (a cached thread part is copied whole)
	plan_free(f->plans[id]);
	f->plans[id] = p;
	memset(f->heads, 0, sizeof(f->heads));
	return 0;
}

