// SPDX-License-Identifier: GPL-2.0-only
// textfmt.c - text output of decoded batches by precompiled per-event plans (see textfmt.h).

#include <stdlib.h>
#include <string.h>

#include "textfmt.h"

#define TF_LIT_SLACK	16	// literals this short are copied as a whole block

// ---- buffers -----------------------------------------------------------------------------------

static int buf_grow(struct tf_buf *b, size_t need)
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

// Make room for @n more bytes.
static inline int reserve(struct tf_buf *b, size_t n)
{
	if (b->cap - b->len >= n && b->p)
		return 0;
	return buf_grow(b, n);
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

static const char digit_pairs[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
	"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
	"8081828384858687888990919293949596979899";

static const uint64_t powers_of_10[20] = {
	1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL,
	1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL,
	100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
	1000000000000000000ULL, 10000000000000000000ULL,
};

// How many digits @v has in the base of @letter (d o x X; s: decimal).
static inline unsigned int num_len(uint64_t v, char letter)
{
	unsigned int bits = 64 - (unsigned int)__builtin_clzll(v | 1), t;

	switch (letter) {
	case 'x':
	case 'X':
		return (bits + 3) / 4;
	case 'o':
		return (bits + 2) / 3;
	}
	t = (bits * 1233) >> 12;	// about bits * log10(2)
	return v ? t + (v >= powers_of_10[t]) : 1;
}

static const char hex_lower[] = "0123456789abcdef";

// The two hex digits of every byte, "00" to "ff" (and "FF").
#define HEX_ROW(h, a, b, c, d, e, f)								\
	h "0" h "1" h "2" h "3" h "4" h "5" h "6" h "7" h "8" h "9" h a h b h c h d h e h f
#define HEX_PAIRS(a, b, c, d, e, f)								\
	HEX_ROW("0", a, b, c, d, e, f) HEX_ROW("1", a, b, c, d, e, f)				\
	HEX_ROW("2", a, b, c, d, e, f) HEX_ROW("3", a, b, c, d, e, f)				\
	HEX_ROW("4", a, b, c, d, e, f) HEX_ROW("5", a, b, c, d, e, f)				\
	HEX_ROW("6", a, b, c, d, e, f) HEX_ROW("7", a, b, c, d, e, f)				\
	HEX_ROW("8", a, b, c, d, e, f) HEX_ROW("9", a, b, c, d, e, f)				\
	HEX_ROW(a, a, b, c, d, e, f) HEX_ROW(b, a, b, c, d, e, f)				\
	HEX_ROW(c, a, b, c, d, e, f) HEX_ROW(d, a, b, c, d, e, f)				\
	HEX_ROW(e, a, b, c, d, e, f) HEX_ROW(f, a, b, c, d, e, f)
static const char hex_pairs_lower[513] = HEX_PAIRS("a", "b", "c", "d", "e", "f");
static const char hex_pairs_upper[513] = HEX_PAIRS("A", "B", "C", "D", "E", "F");

// Write the @nd digits of @v (num_len) in the base of @letter backwards, ending at @end.
static inline void put_digits(uint8_t *end, uint64_t v, unsigned int nd, char letter)
{
	uint8_t *p = end;

	switch (letter) {
	case 'x':
	case 'X': {
		const char *pairs = letter == 'x' ? hex_pairs_lower : hex_pairs_upper;

		for (; nd >= 2; nd -= 2, v >>= 8) {
			p -= 2;
			memcpy(p, pairs + 2 * (v & 0xff), 2);
		}
		if (nd)
			*--p = (uint8_t)pairs[2 * (v & 15) + 1];
		return;
	}
	case 'o':
		for (unsigned int k = 0; k < nd; k++, v >>= 3)
			*--p = (uint8_t)('0' + (v & 7));
		return;
	}
	while (v >= 10000) {	// (four digits a step: two independent pairs)
		unsigned int r = (unsigned int)(v % 10000);

		v /= 10000;
		p -= 4;
		memcpy(p, digit_pairs + 2 * (r / 100), 2);
		memcpy(p + 2, digit_pairs + 2 * (r % 100), 2);
	}
	while (v >= 100) {
		unsigned int r = (unsigned int)(v % 100);

		v /= 100;
		p -= 2;
		memcpy(p, digit_pairs + 2 * r, 2);
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, digit_pairs + 2 * v, 2);
	} else {
		*--p = (uint8_t)('0' + v);
	}
}

// @n bytes of @c at @o, where at least 16 bytes are writable.
static inline void put_fill(uint8_t *o, char c, size_t n)
{
	if (n <= 16)
		memset(o, c, 16);	// (one block; what follows overwrites the rest)
	else
		memset(o, c, n);
}

// The most an integer op writes: sign, prefix and 22 octal digits, or its width or precision.
static inline size_t int_room(int32_t width, int32_t prec)
{
	return (size_t)(width > prec ? width : prec) + 32;
}

// tf_put_int into room the caller reserved (int_room); returns the bytes written.
static inline __attribute__((always_inline)) size_t put_int(uint8_t *o, bool neg, uint64_t mag,
							    char letter, unsigned int flags,
							    int32_t width, int32_t prec)
{
	unsigned int nd = num_len(mag, letter == 's' ? 'd' : letter);
	size_t plen = 0, zeros, len, pad;
	uint8_t *start = o;
	char sign;

	if (!neg && prec < 0 && !(flags & ~TF_F_ZERO) && letter != 's') {	// the common case
		pad = width > (int32_t)nd ? (size_t)width - nd : 0;
		put_fill(o, flags ? '0' : ' ', pad);
		put_digits(o + pad + nd, mag, nd, letter);
		return pad + nd;
	}
	if (letter == 's') {	// str(value), cut to the precision, padded; no sign flags, no zeros
		uint8_t tmp[24];

		put_digits(tmp + sizeof(tmp), mag, nd, 'd');
		if (neg)
			tmp[sizeof(tmp) - ++nd] = '-';
		len = prec >= 0 && (unsigned int)prec < nd ? (size_t)prec : nd;
		pad = width > 0 && (size_t)width > len ? (size_t)width - len : 0;
		if (!(flags & TF_F_LEFT)) {
			memset(o, ' ', pad);
			o += pad;
		}
		memcpy(o, tmp + sizeof(tmp) - nd, len);
		o += len;
		if (flags & TF_F_LEFT) {
			memset(o, ' ', pad);
			o += pad;
		}
		return (size_t)(o - start);
	}
	if ((flags & TF_F_ALT) && letter != 'd')
		plen = 2;
	zeros = prec > (int32_t)nd ? (size_t)prec - nd : 0;
	sign = neg ? '-' : (flags & TF_F_PLUS) ? '+' : (flags & TF_F_SPACE) ? ' ' : 0;
	len = (sign != 0) + plen + zeros + nd;
	pad = width > 0 && (size_t)width > len ? (size_t)width - len : 0;
	if (!(flags & (TF_F_LEFT | TF_F_ZERO)) && pad) {
		memset(o, ' ', pad);
		o += pad;
	}
	if (sign)
		*o++ = (uint8_t)sign;
	if (plen) {
		*o++ = '0';
		*o++ = letter == 'o' ? 'o' : letter;
	}
	if ((flags & (TF_F_LEFT | TF_F_ZERO)) == TF_F_ZERO)
		zeros += pad;
	memset(o, '0', zeros);
	o += zeros;
	put_digits(o + nd, mag, nd, letter);
	o += nd;
	if (flags & TF_F_LEFT) {
		memset(o, ' ', pad);
		o += pad;
	}
	return (size_t)(o - start);
}

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
		uint8_t c = s[i];

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {	// a run of plain characters
			size_t j = i + 1;

			while (j < n && s[j] >= 0x20 && s[j] < 0x7f && s[j] != '"' && s[j] != '\\')
				j++;
			memcpy(o, s + i, j - i);
			o += j - i;
			ncp += (long)(j - i);
			i = j;
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

static int pad_text(struct tf_buf *out, size_t from, size_t ncp, const struct tf_op *op)
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
static int csv_quote(struct tf_buf *out, size_t from)
{
	size_t quotes = 0, n = out->len - from;
	bool need = false;
	uint8_t *src, *dst;

	for (size_t i = from; i < out->len; i++) {
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

static inline size_t hash64(uint64_t v)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return (size_t)v;
}

static struct tf_thread *thread_find(const struct tf_formatter *f, int32_t tid)
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
		  int64_t tgid)
{
	struct tf_thread *t = thread_find(f, tid);
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
	t->comm_off = off;
	t->comm_len = (uint32_t)len;
	t->comm_ncp = clamp_ncp(count_code_points(comm, len));
	return 0;
}

static size_t symbol_hash(int64_t tgid, uint64_t addr, bool neg)
{
	return hash64(addr ^ hash64((uint64_t)tgid * 2 + neg));
}

static struct tf_symbol *symbol_find(const struct tf_formatter *f, int64_t tgid, uint64_t addr,
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
	struct tf_symbol *s = symbol_find(f, tgid, addr, neg);
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
	case TF_SRC_TID:
	case TF_SRC_CPU:
	case TF_SRC_SECS:
	case TF_SRC_USECS:
	case TF_SRC_NSECS:
		return op->conv == TF_CONV_INT || op->conv == TF_CONV_CHAR ? 0 : TF_ERR_PLAN;
	}
	return 0;
}

// How many leading ops depend only on the thread and the CPU (0 unless two of them are values).
static uint32_t plan_head(const struct tf_op *ops, uint32_t nops)
{
	uint32_t k, values = 0;

	for (k = 0; k < nops; k++) {
		uint8_t src = ops[k].src;

		if (src == TF_SRC_COMM || src == TF_SRC_TGID || src == TF_SRC_TID || src == TF_SRC_CPU)
			values++;
		else if (src != TF_SRC_LIT && src != TF_SRC_CELL_BEGIN && src != TF_SRC_CELL_END)
			break;
	}
	return values >= 2 ? k : 0;
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
	p->fixed = TF_LIT_SLACK;	// (short literals are copied TF_LIT_SLACK bytes at a time)
	p->nhead = plan_head(ops, nops);
	if (p->nhead)
		p->fixed += TF_HEAD_MAX;	// (a cached start is copied whole)
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
	plan_free(f->plans[id]);
	f->plans[id] = p;
	memset(f->heads, 0, sizeof(f->heads));
	return 0;
}

// ---- formatting --------------------------------------------------------------------------------

// A value as Python holds it: -mag when neg, else mag.
struct pyint {
	bool neg;
	uint64_t mag;
};

static inline struct pyint pyint_of(int64_t v, bool is_signed)
{
	struct pyint r;

	r.neg = is_signed && v < 0;
	r.mag = r.neg ? 0 - (uint64_t)v : (uint64_t)v;
	return r;
}

// What printf's cast to a C integer of @size bytes does to the value (Python's _fit).
static inline struct pyint cast(struct pyint v, unsigned int size, bool is_signed)
{
	uint64_t bits = v.neg ? 0 - v.mag : v.mag;
	uint64_t mask = size >= 8 ? ~0ULL : (1ULL << (8 * size)) - 1;
	struct pyint r;

	bits &= mask;
	r.neg = is_signed && (bits >> (8 * size - 1)) & 1;
	r.mag = r.neg ? ((~bits) & mask) + 1 : bits;
	return r;
}

static inline uint64_t bits_of(struct pyint v)
{
	return v.neg ? 0 - v.mag : v.mag;
}

// The int list of an array span: "0x1,0x2" / "1,2" / "[1, 2]".
static int put_list(struct tf_buf *out, const struct rb_field *fd, const struct rb_span *sp,
		    bool swap, int conv)
{
	size_t n = sp->len / fd->elem_size;
	bool json = conv == TF_CONV_JSON_LIST;

	if (json && tf_buf_append(out, "[", 1))
		return TF_ERR_NOMEM;
	for (size_t k = 0; k < n; k++) {
		struct pyint v = pyint_of(rb_read_int(sp->ptr + k * fd->elem_size, fd->elem_size,
						      fd->is_signed, swap), fd->is_signed);

		if (k && tf_buf_append(out, json ? ", " : ",", json ? 2 : 1))
			return TF_ERR_NOMEM;
		if (tf_put_int(out, v.neg, v.mag, conv == TF_CONV_HEX_LIST ? 'x' : 'd',
			       conv == TF_CONV_HEX_LIST ? TF_F_ALT : 0, 0, -1))
			return TF_ERR_NOMEM;
	}
	if (json && tf_buf_append(out, "]", 1))
		return TF_ERR_NOMEM;
	return 0;
}

static int put_hex_bytes(struct tf_buf *out, const uint8_t *p, size_t n)
{
	uint8_t *o;

	if (n > SIZE_MAX / 2 - 8 || reserve(out, 2 * n))
		return TF_ERR_NOMEM;
	o = out->p + out->len;
	for (size_t k = 0; k < n; k++) {
		*o++ = (uint8_t)hex_lower[p[k] >> 4];
		*o++ = (uint8_t)hex_lower[p[k] & 15];
	}
	out->len += 2 * n;
	return 0;
}

// Does field kind @kind suit conversion @conv?
static bool conv_fits(int conv, int kind)
{
	switch (conv) {
	case TF_CONV_INT:
	case TF_CONV_CHAR:
	case TF_CONV_SYM:
		return kind == RB_KIND_INT;
	case TF_CONV_HEX_LIST:
	case TF_CONV_DEC_LIST:
	case TF_CONV_JSON_LIST:
		return kind == RB_KIND_INT_ARRAY;
	case TF_CONV_STR:
	case TF_CONV_RAW:
	case TF_CONV_JSON_STR:
		return kind == RB_KIND_STR;
	case TF_CONV_HEX_BYTES:
	case TF_CONV_JSON_BYTES:
		return kind == RB_KIND_BYTES;
	}
	return false;
}

// Text (a comm or a symbol, UTF-8 from Python, of @known code points when valid) in a
// conversion's mode, padded.
static int put_named(struct tf_buf *out, const uint8_t *p, size_t n, uint32_t known,
		     const struct tf_op *op)
{
	size_t from = out->len;
	long ncp;
	int mode = op->conv == TF_CONV_STR ? TF_TEXT_ESC :
		   op->conv == TF_CONV_JSON_STR ? TF_TEXT_JSON : TF_TEXT_RAW;

	if (mode == TF_TEXT_RAW && known != UINT32_MAX && op->prec < 0) {	// as it is: pad, copy
		size_t pad = op->width > 0 && (size_t)op->width > known ? (size_t)op->width - known : 0;
		uint8_t *o;

		if (reserve(out, n + pad))
			return TF_ERR_NOMEM;
		o = out->p + out->len;
		if (!(op->flags & TF_F_LEFT)) {
			memset(o, ' ', pad);
			o += pad;
		}
		memcpy(o, p, n);
		o += n;
		if (op->flags & TF_F_LEFT) {
			memset(o, ' ', pad);
			o += pad;
		}
		out->len = (size_t)(o - out->p);
		return 0;
	}

	if (mode == TF_TEXT_JSON && tf_buf_append(out, "\"", 1))
		return TF_ERR_NOMEM;
	ncp = tf_put_text(out, p, n, mode);
	if (ncp < 0)
		return TF_ERR_NOMEM;
	if (mode == TF_TEXT_JSON) {
		if (tf_buf_append(out, "\"", 1))
			return TF_ERR_NOMEM;
		ncp += 2;
	}
	return pad_text(out, from, (size_t)ncp, op);
}

#define EMPTY_CELL	100	// (run_op: empty the CSV cell, skip to its end)

// What the ops of one event share. The field values come from the batch's columns (row), or in
// record mode (rec set) from the record's bytes.
struct event_ctx {
	struct tf_formatter *f;
	const struct tf_input *in;
	const struct tf_plan *plan;
	const struct rb_event_format *fmt;	// NULL: the event has no decoded fields
	int32_t fi;
	uint32_t row;
	const uint8_t *rec;			// record mode: the payload
	uint32_t rec_len;
	uint64_t ts;
	int32_t cpu;
	int32_t pid;
	size_t line;				// where its line starts
	size_t cell;				// where the current CSV cell starts
	const struct tf_thread *th;		// its thread, once looked up
	const struct tf_thread *last;		// the previous event's thread
	bool fits;				// the plan's field ops fit the event's format
	struct tf_need *need;
};

static int find_thread(struct event_ctx *c)
{
	int32_t tid = c->pid;

	if (c->last && c->last->tid == tid) {
		c->th = c->last;
		return 0;
	}
	c->th = thread_find(c->f, tid);
	if (!c->th) {
		c->need->tid = tid;
		return TF_NEED_THREAD;
	}
	c->last = c->th;
	return 0;
}

// Does the field op fit format @fmt: a field it has, of a kind the conversion takes?
static bool op_fits(const struct tf_op *op, const struct rb_event_format *fmt)
{
	return fmt && op->field < fmt->nfields &&
	       (op->src == TF_SRC_FIELD ? conv_fits(op->conv, fmt->fields[op->field].kind) :
		fmt->fields[op->field].kind == RB_KIND_INT_ARRAY);
}

// Do all the field ops of @plan fit the format of the event in @c? Remembered per plan.
static bool plan_fits(struct tf_plan *plan, const struct event_ctx *c)
{
	if (c->in->serial && plan->fits_serial == c->in->serial && plan->fits_index == c->fi)
		return true;
	for (uint32_t k = 0; k < plan->nops; k++) {
		const struct tf_op *op = &plan->ops[k];

		if ((op->src == TF_SRC_FIELD || op->src == TF_SRC_ELEM) && !op_fits(op, c->fmt))
			return false;
	}
	plan->fits_serial = c->in->serial;
	plan->fits_index = c->fi;
	return true;
}

// The value of a field or element op (an integer, or the span of a field of another kind);
// TF_ERR_PLAN when the event's format does not have it.
static inline __attribute__((always_inline)) int field_value(struct event_ctx *c,
							     const struct tf_op *op,
							     const struct rb_field **fd,
							     struct rb_span *sp, struct pyint *v)
{
	const struct rb_event_format *fmt = c->fmt;
	const struct rb_column *col;

	if (!c->fits && !op_fits(op, fmt)) {
		c->need->field = op->field;
		return TF_ERR_PLAN;
	}
	*fd = &fmt->fields[op->field];
	if ((*fd)->kind == RB_KIND_INT) {
		int64_t x;

		if (c->rec)	// (rb_field_int, inline)
			x = (*fd)->offset <= c->rec_len && (*fd)->size <= c->rec_len - (*fd)->offset ?
			    rb_read_int(c->rec + (*fd)->offset, (*fd)->size, (*fd)->is_signed,
					c->in->swap) : 0;
		else
			x = c->in->batch->rows[c->fi].cols[op->field].ints[c->row];
		*v = pyint_of(x, (*fd)->is_signed);
		return 0;
	}
	if (c->rec) {
		rb_field_span(*fd, c->rec, c->rec_len, c->in->swap, sp);
	} else {
		col = &c->in->batch->rows[c->fi].cols[op->field];
		*sp = col->spans[c->row];
	}
	if (!sp->ptr && (op->flags & TF_F_EMPTY_CELL))
		return EMPTY_CELL;
	if (op->src == TF_SRC_ELEM) {
		unsigned int es = (*fd)->elem_size;

		if (sp->ptr && op->index < sp->len / es)
			*v = pyint_of(rb_read_int(sp->ptr + (size_t)op->index * es, es, (*fd)->is_signed,
						  c->in->swap), (*fd)->is_signed);
	}
	return 0;
}

// A field's bytes in a text conversion (string, list, hex bytes; "null" in JSON when missing).
static int put_span(struct tf_buf *out, const struct tf_op *op, const struct rb_field *fd,
		    const struct rb_span *sp, bool swap)
{
	size_t from = out->len;
	long ncp;
	int mode, ret;

	if (!sp->ptr) {
		ret = 0;
		if (op->conv == TF_CONV_JSON_STR || op->conv == TF_CONV_JSON_LIST ||
		    op->conv == TF_CONV_JSON_BYTES)
			ret = tf_buf_append(out, "null", 4);
		return ret ? ret : pad_text(out, from, out->len - from, op);
	}
	switch (op->conv) {
	case TF_CONV_STR:
	case TF_CONV_RAW:
	case TF_CONV_JSON_STR:
		mode = op->conv == TF_CONV_STR ? TF_TEXT_ESC :
		       op->conv == TF_CONV_RAW ? TF_TEXT_RAW : TF_TEXT_JSON;
		if (mode == TF_TEXT_JSON && tf_buf_append(out, "\"", 1))
			return TF_ERR_NOMEM;
		ncp = tf_put_text(out, sp->ptr, sp->len, mode);
		if (ncp < 0)
			return TF_ERR_NOMEM;
		if (mode == TF_TEXT_JSON) {
			if (tf_buf_append(out, "\"", 1))
				return TF_ERR_NOMEM;
			ncp += 2;
		}
		return pad_text(out, from, (size_t)ncp, op);
	case TF_CONV_HEX_BYTES:
	case TF_CONV_JSON_BYTES:
		ret = op->conv == TF_CONV_JSON_BYTES ? tf_buf_append(out, "\"", 1) : 0;
		if (!ret)
			ret = put_hex_bytes(out, sp->ptr, sp->len);
		if (!ret && op->conv == TF_CONV_JSON_BYTES)
			ret = tf_buf_append(out, "\"", 1);
		return ret ? ret : pad_text(out, from, out->len - from, op);
	default:	// the lists
		ret = put_list(out, fd, sp, swap, op->conv);
		return ret ? ret : pad_text(out, from, out->len - from, op);
	}
}

// One op of an event: 0, a TF_NEED_* status or a TF_ERR_*. Literals and numbers write into
// the room reserved for the plan (plan->fixed); everything else reserves its own, then the
// plan's room again.
static inline __attribute__((always_inline)) int run_op(struct event_ctx *c, const struct tf_op *op)
{
	struct tf_buf *out = &c->f->out;
	const struct rb_field *fd = NULL;
	struct rb_span sp = { NULL, 0 };
	struct pyint v = { false, 0 };
	int ret = 0;

	switch (op->src) {
	case TF_SRC_LIT:
		memcpy(out->p + out->len, c->plan->lits + op->index, op->len);
		out->len += op->len;
		return 0;
	case TF_SRC_CELL_BEGIN:
		c->cell = out->len;
		return 0;
	case TF_SRC_CELL_END:
		ret = csv_quote(out, c->cell);
		goto texts;
	case TF_SRC_EMPTY_QUOTE:
		if (out->len == c->line) {
			memcpy(out->p + out->len, "\"\"", 2);
			out->len += 2;
		}
		return 0;
	case TF_SRC_FIELD:
	case TF_SRC_ELEM:
		ret = field_value(c, op, &fd, &sp, &v);
		if (ret)
			return ret;
		break;
	case TF_SRC_COMM:
	case TF_SRC_TGID:
		if (!c->th && (ret = find_thread(c)))
			return ret;
		if (op->src == TF_SRC_COMM) {
			ret = put_named(out, c->f->pool.p + c->th->comm_off, c->th->comm_len,
					c->th->comm_ncp, op);
			goto texts;
		}
		v = pyint_of(c->th->tgid, true);
		break;
	case TF_SRC_TID:
		v = pyint_of(c->pid, true);
		break;
	case TF_SRC_CPU:
		v = pyint_of(c->cpu, true);
		break;
	case TF_SRC_SECS:
		v.mag = c->ts / 1000000000ULL;
		break;
	case TF_SRC_USECS:
		v.mag = c->ts % 1000000000ULL / 1000;
		if (op->conv == TF_CONV_INT && op->letter == 'd' && op->width == 6 && op->prec < 0 &&
		    (op->flags & TF_F_SPEC) == TF_F_ZERO && !op->cast_size) {	// "%06d": the usual
			uint8_t *o = out->p + out->len;
			unsigned int u = (unsigned int)v.mag;

			memcpy(o, digit_pairs + 2 * (u / 10000), 2);
			memcpy(o + 2, digit_pairs + 2 * (u / 100 % 100), 2);
			memcpy(o + 4, digit_pairs + 2 * (u % 100), 2);
			out->len += 6;
			return 0;
		}
		break;
	case TF_SRC_NSECS:
		v.mag = c->ts % 1000000000ULL;
		break;
	}

	switch (op->conv) {
	case TF_CONV_INT:
		if (op->cast_size)
			v = cast(v, op->cast_size, op->cast_signed);
		out->len += put_int(out->p + out->len, v.neg, v.mag, op->letter, op->flags & TF_F_SPEC,
				    op->width, op->prec);
		return 0;
	case TF_CONV_CHAR: {
		uint8_t ch = (uint8_t)(bits_of(v) & 0xff), u[2];
		size_t from = out->len, n = 1;

		u[0] = ch;
		if (ch >= 0x80) {	// (the UTF-8 of U+0080..U+00FF)
			u[0] = (uint8_t)(0xc0 | (ch >> 6));
			u[1] = (uint8_t)(0x80 | (ch & 0x3f));
			n = 2;
		}
		ret = tf_buf_append(out, u, n);
		if (!ret)
			ret = pad_text(out, from, 1, op);
		break;
	}
	case TF_CONV_SYM: {
		const struct tf_symbol *sym;
		uint64_t addr = bits_of(v);

		if (!c->th && (ret = find_thread(c)))
			return ret;
		sym = symbol_find(c->f, c->th->tgid, addr, v.neg);
		if (!sym) {
			c->need->tgid = c->th->tgid;
			c->need->addr = addr;
			c->need->neg = v.neg;
			return TF_NEED_SYMBOL;
		}
		ret = put_named(out, c->f->pool.p + sym->name_off, sym->name_len, sym->name_ncp, op);
		break;
	}
	default:
		if (!fd)	// (tf_check_op lets only fields get here)
			return TF_ERR_PLAN;
		ret = put_span(out, op, fd, &sp, c->in->swap);
	}
texts:
	if (ret || reserve(out, c->plan->fixed))
		return TF_ERR_NOMEM;
	return 0;
}

static inline size_t head_slot(uint16_t id, int32_t tid, int32_t cpu)
{
	return hash64(((uint64_t)id << 48) ^ ((uint64_t)(uint32_t)cpu << 32) ^ (uint32_t)tid) &
	       (TF_HEAD_CACHE - 1);
}

// Format one event (c's header values, row or record set) by its plan, appending to f->out:
// 0, or a TF_NEED_* / TF_ERR_* status with the event's partial output left for the caller to
// remove.
static inline __attribute__((always_inline)) int format_event(struct event_ctx *c, uint16_t id)
{
	struct tf_formatter *f = c->f;
	struct tf_buf *out = &f->out;
	struct tf_plan *plan = f->plans[id];
	struct tf_head *head;
	uint32_t k = 0;
	int ret;

	c->line = c->cell = out->len;
	if (!plan) {
		c->need->id = id;
		return TF_NEED_PLAN;
	}
	if (plan->kind == TF_PLAN_SKIP)
		return 0;
	if (plan->kind == TF_PLAN_CALLER)
		return TF_NEED_CALLER;
	c->plan = plan;
	c->th = NULL;
	c->fi = c->in->schema->index[id];
	c->fmt = c->fi >= 0 && (c->rec || c->row != UINT32_MAX) ? &c->in->schema->formats[c->fi] : NULL;
	c->fits = c->fmt && plan_fits(plan, c);
	if (reserve(out, plan->fixed))
		return TF_ERR_NOMEM;
	if (plan->nhead) {	// the line start, by thread and CPU
		head = &f->heads[head_slot(id, c->pid, c->cpu)];
		if (head->len && head->id == id && head->tid == c->pid && head->cpu == c->cpu) {
			memcpy(out->p + out->len, head->text, TF_HEAD_MAX);
			out->len += head->len;
			k = plan->nhead;
		} else {
			for (; k < plan->nhead; k++) {
				ret = run_op(c, &plan->ops[k]);
				if (ret)
					return ret;
			}
			if (out->len - c->line <= TF_HEAD_MAX) {
				memcpy(head->text, out->p + c->line, out->len - c->line);
				head->len = (uint8_t)(out->len - c->line);
				head->id = id;
				head->tid = c->pid;
				head->cpu = c->cpu;
			}
		}
	}
	for (; k < plan->nops; k++) {
		const struct tf_op *op = &plan->ops[k];

		if (op->src == TF_SRC_LIT) {	// (the room has TF_LIT_SLACK bytes to spare)
			if (op->len <= TF_LIT_SLACK)
				memcpy(out->p + out->len, plan->lits + op->index, TF_LIT_SLACK);
			else
				memcpy(out->p + out->len, plan->lits + op->index, op->len);
			out->len += op->len;
			continue;
		}
		ret = run_op(c, op);
		if (ret == EMPTY_CELL) {	// (the cell's end, which quotes nothing, comes next)
			out->len = c->cell;
			while (k + 1 < plan->nops && plan->ops[k + 1].src != TF_SRC_CELL_END)
				k++;
			continue;
		}
		if (ret)
			return ret;
	}
	return 0;
}

int tf_format(struct tf_formatter *f, const struct tf_input *in, size_t *pos,
	      struct tf_need *need)
{
	const struct rb_batch *b = in->batch;
	struct event_ctx c = { .f = f, .in = in, .need = need };
	size_t i;
	int ret = 0;

	for (i = *pos; i < b->n; i++) {
		c.row = b->row[i];
		c.ts = b->ts[i];
		c.cpu = b->cpu[i];
		c.pid = b->pid[i];
		ret = format_event(&c, b->id[i]);
		if (ret)
			goto stop;
	}
	*pos = i;
	return TF_DONE;
stop:
	if (ret == TF_ERR_NOMEM)
		return ret;
	if (ret == TF_ERR_PLAN)
		need->id = b->id[i];
	// (the event's partial output goes: it is made again when the caller resumes)
	f->out.len = c.line;
	need->index = i;
	*pos = i;
	return ret;
}

int tf_format_records(struct tf_formatter *f, struct tf_records *r, size_t max_bytes,
		      struct tf_need *need)
{
	struct tf_input in = { .batch = NULL, .schema = r->schema, .serial = r->serial,
			       .swap = r->reader->swap };
	struct event_ctx c = { .f = f, .in = &in, .need = need };
	struct rb_record *rec = &r->rec;
	uint16_t id;
	int ret;

	while (f->out.len < max_bytes) {
		if (!r->pending) {
			ret = rb_reader_next(r->reader, rec);
			if (ret < 0) {
				r->decode_err = ret;
				return TF_ERR_DECODE;
			}
			if (!ret)
				return TF_DONE;
			r->pending = true;
			if (rec->len < 8)
				r->short_records++;
		}
		// the common header, as rb_batch_fill reads it
		id = rec->len >= 2 ? (uint16_t)rb_read_uint(rec->data, 2, in.swap) : 0;
		c.pid = rec->len >= 8 ? (int32_t)rb_read_int(rec->data + 4, 4, true, in.swap) : -1;
		c.ts = rec->ts;
		c.cpu = rec->cpu;
		c.rec = rec->data;
		c.rec_len = rec->len;
		c.row = 0;
		ret = format_event(&c, id);
		if (ret) {
			if (ret == TF_ERR_NOMEM)
				return ret;
			need->id = id;
			f->out.len = c.line;
			return ret;
		}
		r->pending = false;
		r->events++;
	}
	return TF_MORE;
}
