// SPDX-License-Identifier: GPL-2.0-only
// textfmt_run.c - the formatting loops of textfmt.h: the ops of a plan run over a decoded batch
// (tf_format) or over a reader's records as they are merged (tf_format_records).

#include <stdlib.h>
#include <string.h>

#include "textfmt.h"
#include "textfmt_int.h"

static const char hex_lower[] = "0123456789abcdef";

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
	return tf_pad_text(out, from, (size_t)ncp, op);
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
	c->th = tf_thread_find(c->f, tid);
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

		if (c->rec)
			rb_field_int(*fd, c->rec, c->rec_len, c->in->swap, &x);
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
		return ret ? ret : tf_pad_text(out, from, out->len - from, op);
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
		return tf_pad_text(out, from, (size_t)ncp, op);
	case TF_CONV_HEX_BYTES:
	case TF_CONV_JSON_BYTES:
		ret = op->conv == TF_CONV_JSON_BYTES ? tf_buf_append(out, "\"", 1) : 0;
		if (!ret)
			ret = put_hex_bytes(out, sp->ptr, sp->len);
		if (!ret && op->conv == TF_CONV_JSON_BYTES)
			ret = tf_buf_append(out, "\"", 1);
		return ret ? ret : tf_pad_text(out, from, out->len - from, op);
	default:	// the lists
		ret = put_list(out, fd, sp, swap, op->conv);
		return ret ? ret : tf_pad_text(out, from, out->len - from, op);
	}
}

// One op of an event other than a literal (run_ops copies those): 0, a TF_NEED_* status or a
// TF_ERR_*. Numbers write into the room reserved for the plan (plan->fixed); everything else
// reserves its own, then the plan's room again.
static inline __attribute__((always_inline)) int run_op(struct event_ctx *c, const struct tf_op *op)
{
	struct tf_buf *out = &c->f->out;
	const struct rb_field *fd = NULL;
	struct rb_span sp = { NULL, 0 };
	struct pyint v = { false, 0 };
	int ret = 0;

	switch (op->src) {
	case TF_SRC_CELL_BEGIN:
		c->cell = out->len;
		return 0;
	case TF_SRC_CELL_END:
		if (op->flags & TF_F_PLAIN_CELL)
			return 0;
		ret = tf_csv_quote(out, c->cell);
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
	case TF_SRC_NSPID:
		if (!c->th && (ret = find_thread(c)))
			return ret;
		if (op->src == TF_SRC_COMM) {
			ret = put_named(out, c->f->pool.p + c->th->comm_off, c->th->comm_len,
					c->th->comm_ncp, op);
			goto texts;
		}
		v = pyint_of(op->src == TF_SRC_TGID ? c->th->tgid : c->th->nspid, true);
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
		if (op->conv == TF_CONV_INT && op->letter == 'd' && op->width == 9 && op->prec < 0 &&
		    (op->flags & TF_F_SPEC) == TF_F_ZERO && !op->cast_size) {	// "%09d": the usual
			uint8_t *o = out->p + out->len;
			unsigned int u = (unsigned int)v.mag, hi = u / 10000, lo = u % 10000;

			o[0] = (uint8_t)('0' + hi / 10000);
			memcpy(o + 1, digit_pairs + 2 * (hi / 100 % 100), 2);
			memcpy(o + 3, digit_pairs + 2 * (hi % 100), 2);
			memcpy(o + 5, digit_pairs + 2 * (lo / 100), 2);
			memcpy(o + 7, digit_pairs + 2 * (lo % 100), 2);
			out->len += 9;
			return 0;
		}
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
			ret = tf_pad_text(out, from, 1, op);
		break;
	}
	case TF_CONV_SYM: {
		const struct tf_symbol *sym;
		uint64_t addr = bits_of(v);

		if (!c->th && (ret = find_thread(c)))
			return ret;
		sym = tf_symbol_find(c->f, c->th->tgid, addr, v.neg);
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

// Ops [from, to) of the event's plan: 0, or a TF_NEED_* / TF_ERR_* status.
static inline __attribute__((always_inline)) int run_ops(struct event_ctx *c, uint32_t from,
							 uint32_t to)
{
	const struct tf_plan *plan = c->plan;
	struct tf_buf *out = &c->f->out;
	int ret;

	for (uint32_t k = from; k < to; k++) {
		const struct tf_op *op = &plan->ops[k];

		if (op->src == TF_SRC_LIT) {	// (the room and the literals have a block to spare)
			uint8_t *o = out->p + out->len;
			const uint8_t *l = plan->lits + op->index;

			memcpy(o, l, TF_LIT_SLACK);
			for (uint32_t i = TF_LIT_SLACK; i < op->len; i += TF_LIT_SLACK)
				memcpy(o + i, l + i, TF_LIT_SLACK);
			out->len += op->len;
			continue;
		}
		ret = run_op(c, op);
		if (ret == EMPTY_CELL) {	// (the cell's end, which quotes nothing, comes next)
			out->len = c->cell;
			while (k + 1 < to && plan->ops[k + 1].src != TF_SRC_CELL_END)
				k++;
			continue;
		}
		if (ret)
			return ret;
	}
	return 0;
}

// The plan's thread part, from the cache or made (and cached): 0 or a status as run_ops.
static inline __attribute__((always_inline)) int put_head(struct event_ctx *c, uint16_t id)
{
	const struct tf_plan *plan = c->plan;
	struct tf_buf *out = &c->f->out;
	struct tf_head *head = &c->f->heads[head_slot(id, c->pid, c->cpu)];
	size_t start = out->len, cell = c->cell;
	int ret;

	if (head->len && head->id == id && head->tid == c->pid && head->cpu == c->cpu) {
		memcpy(out->p + start, head->text, TF_HEAD_MAX);
		out->len += head->len;
		if (head->cell != 0xff)
			c->cell = start + head->cell;
		return 0;
	}
	c->cell = SIZE_MAX;	// (plan_head: no cell end in the part quotes from before it)
	ret = run_ops(c, plan->head_begin, plan->head_end);
	if (ret)
		return ret;
	if (out->len - start <= TF_HEAD_MAX) {
		memcpy(head->text, out->p + start, out->len - start);
		head->len = (uint8_t)(out->len - start);
		head->cell = c->cell == SIZE_MAX ? 0xff : (uint8_t)(c->cell - start);
		head->id = id;
		head->tid = c->pid;
		head->cpu = c->cpu;
	}
	if (c->cell == SIZE_MAX)
		c->cell = cell;
	return 0;
}

// Format one event (c's header values, row or record set) by its plan, appending to f->out:
// 0, or a TF_NEED_* / TF_ERR_* status with the event's partial output left for the caller to
// remove.
static inline __attribute__((always_inline)) int format_event(struct event_ctx *c, uint16_t id)
{
	struct tf_formatter *f = c->f;
	struct tf_buf *out = &f->out;
	struct tf_plan *plan = f->plans[id];
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
	if (!plan->head_end)
		return run_ops(c, 0, plan->nops);
	ret = run_ops(c, 0, plan->head_begin);
	if (!ret)
		ret = put_head(c, id);
	if (!ret)
		ret = run_ops(c, plan->head_end, plan->nops);
	return ret;
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
