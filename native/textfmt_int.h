/* SPDX-License-Identifier: GPL-2.0-only */
// textfmt_int.h - what textfmt.c and textfmt_run.c share: buffer room, the integer printer
// (inline: it runs for every number of every line) and a few helpers. Not a public interface.
#ifndef PROBECTL_TEXTFMT_INT_H
#define PROBECTL_TEXTFMT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "textfmt.h"

#define TF_LIT_SLACK	16	// literals are copied in blocks of this size
#define TF_F_PLAIN_CELL	0x40	// (set by tf_set_plan on a TF_SRC_CELL_END) the cell never needs quotes

int tf_buf_grow(struct tf_buf *b, size_t need);

// Make room for @n more bytes.
static inline int reserve(struct tf_buf *b, size_t n)
{
	if (b->cap - b->len >= n && b->p)
		return 0;
	return tf_buf_grow(b, n);
}

static inline size_t hash64(uint64_t v)
{
	v ^= v >> 33;
	v *= 0xff51afd7ed558ccdULL;
	v ^= v >> 33;
	return (size_t)v;
}

// Pad what was appended since @from (@ncp code points) to the op's width, cut to its precision.
int tf_pad_text(struct tf_buf *out, size_t from, size_t ncp, const struct tf_op *op);

// CSV: quote the cell appended since @from if it needs quotes.
int tf_csv_quote(struct tf_buf *out, size_t from);

struct tf_thread *tf_thread_find(const struct tf_formatter *f, int32_t tid);
struct tf_symbol *tf_symbol_find(const struct tf_formatter *f, int64_t tgid, uint64_t addr,
				  bool neg);

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

#endif // PROBECTL_TEXTFMT_INT_H
