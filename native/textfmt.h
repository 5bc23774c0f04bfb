/* SPDX-License-Identifier: GPL-2.0-only */
// textfmt.h - text output of decoded events: perf-script-like lines, JSON lines, CSV rows
// (textfmt.c: buffers, numbers, text, tables, plans; textfmt_run.c: the formatting loops).
//
// probectl/script/nativeplan.py compiles each event format's plan (probectl/script/plan.py) once
// into the plan of this file: a list of operations, each a literal or a value slot (a field of
// the event, or a header value: comm, thread group id, tid, cpu, time) with a conversion and a
// printf-like spec. tf_format() runs the plans over a decoded rb_batch, tf_format_records() over
// a reader's records as they are merged (no columns), and both append the output of every event,
// in time order, to one buffer. The output equals what Python's ``template % values`` of the
// same plan gives, byte for byte: integers as Python's % prints them (flags "-+ #0", width,
// precision, d o x X), strings decoded as UTF-8 with invalid bytes as \xNN (Python's
// "backslashreplace") and escaped for a quoted text value, JSON or CSV, widths counted in code
// points.
//
// What the plans need from elsewhere (a plan for an event id, the name and thread group of a
// thread, the name of a symbol) is looked up in tables the caller fills; when a key is missing,
// tf_format() stops before the event that needs it and says what is missing, the caller adds it
// and calls again (the CPython glue asks Python). No Python here, no allocation per event beyond
// the output buffer and the tables.
#ifndef PROBECTL_TEXTFMT_H
#define PROBECTL_TEXTFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringbuf.h"

// Where a slot's value comes from.
enum tf_src {
	TF_SRC_LIT = 0,		// literal bytes (no value)
	TF_SRC_FIELD,		// field `field` of the event's format
	TF_SRC_COMM,		// the thread's command name (thread table)
	TF_SRC_TGID,		// the thread's thread group id (thread table)
	TF_SRC_TID,		// common_pid
	TF_SRC_CPU,
	TF_SRC_SECS,		// time stamp / 1e9
	TF_SRC_USECS,		// (time stamp % 1e9) / 1000
	TF_SRC_NSECS,		// time stamp % 1e9
	TF_SRC_CELL_BEGIN,	// CSV: a cell starts here
	TF_SRC_CELL_END,	// CSV: quote the cell since its start if it needs quotes
	TF_SRC_EMPTY_QUOTE,	// CSV: "" when the line is still empty (a row of one empty cell)
	TF_SRC_ELEM,		// element `index` of integer array field `field` (0 when missing)
	TF_SRC_NSPID,		// the thread's pid in its own PID namespace (thread table)
	TF_SRC_MAX = TF_SRC_NSPID,
};

// How a value becomes text.
enum tf_conv {
	TF_CONV_INT = 0,	// an integer (after the optional cast), printed by the spec's letter
	TF_CONV_CHAR,		// chr(value & 0xff) as a string
	TF_CONV_STR,		// text escaped for a quoted text value ("" when missing)
	TF_CONV_RAW,		// text as it is ("" when missing)
	TF_CONV_HEX_LIST,	// integer array: 0x1,-0x2 (Python's hex() of each)
	TF_CONV_DEC_LIST,	// integer array: 1,-2
	TF_CONV_HEX_BYTES,	// bytes as lower-case hex
	TF_CONV_SYM,		// the symbol of (thread group, value) from the symbol table
	TF_CONV_JSON_STR,	// a JSON string, null when missing
	TF_CONV_JSON_LIST,	// integer array as a JSON list "[1, 2]", null when missing
	TF_CONV_JSON_BYTES,	// bytes as a JSON string of hex, null when missing
	TF_CONV_MAX = TF_CONV_JSON_BYTES,
};

// Spec flags, as in "%-+ #0".
#define TF_F_LEFT	0x01
#define TF_F_PLUS	0x02
#define TF_F_SPACE	0x04
#define TF_F_ALT	0x08
#define TF_F_ZERO	0x10
#define TF_F_EMPTY_CELL	0x20	// CSV: a missing string or array (field, element) empties the cell
#define TF_F_SPEC	0x1f	// the flags of the % spec

#define TF_MAX_WIDTH	(1 << 20)	// widths and precisions above this are refused
#define TF_HEAD_MAX	128		// thread parts up to this long are cached
#define TF_HEAD_CACHE	4096		// entries of the thread part cache (a power of two)

struct tf_op {
	uint8_t src;		// enum tf_src
	uint8_t conv;		// enum tf_conv
	uint8_t flags;		// TF_F_*
	char letter;		// 'd', 'o', 'x', 'X' or 's'
	uint8_t cast_size;	// 0: no cast; 1, 2, 4, 8: the value as a C integer of that size
	uint8_t cast_signed;
	int32_t width;		// 0: none
	int32_t prec;		// -1: none
	uint32_t field;		// TF_SRC_FIELD, TF_SRC_ELEM: index into the format's fields
	uint32_t index;		// TF_SRC_ELEM: element; TF_SRC_LIT: offset into the plan's literals
	uint32_t len;		// TF_SRC_LIT: length
};

enum tf_plan_kind {
	TF_PLAN_UNSET = 0,	// not known yet: tf_format() asks for it
	TF_PLAN_SKIP,		// the events are not printed
	TF_PLAN_OPS,		// formatted by the ops
	TF_PLAN_CALLER,		// formatted by the caller, one event at a time
};

struct tf_plan {
	uint8_t kind;		// enum tf_plan_kind
	size_t fixed;		// bytes enough for every op but the texts (reserved once per event)
	// the thread part: ops [head_begin, head_end) depend only on the thread and the CPU, and
	// their output is cached (head_end 0: none). Text has it at the line start; JSON and CSV
	// print the time first, so it is found wherever it is.
	uint32_t head_begin, head_end;
	uint32_t nops;
	struct tf_op *ops;
	uint8_t *lits;
	// the format its field ops were last found to fit (they are not checked per event then):
	// tf_input.serial and the format's index in that schema; serial 0: none
	uint64_t fits_serial;
	int32_t fits_index;
};

// thread id -> command name (UTF-8), thread group id and pid in its PID namespace
struct tf_thread {
	int32_t tid;
	bool used;
	int64_t tgid;
	int64_t nspid;
	uint32_t comm_off;	// into the thread table's byte pool
	uint32_t comm_len;
	uint32_t comm_ncp;	// code points
};

// (thread group, address) -> symbol name (UTF-8)
struct tf_symbol {
	int64_t tgid;
	uint64_t addr;
	bool neg;		// the address value was negative (a signed field)
	bool used;
	uint32_t name_off;
	uint32_t name_len;
	uint32_t name_ncp;
};

// The output of a plan's thread part for one event id, thread and CPU (len 0: empty entry).
struct tf_head {
	uint16_t id;
	uint8_t len;
	uint8_t cell;		// where its last CSV cell starts (0xff: it starts none)
	int32_t tid;
	int32_t cpu;
	uint8_t text[TF_HEAD_MAX];
};

struct tf_pool {
	uint8_t *p;
	size_t len, cap;
};

struct tf_buf {
	uint8_t *p;
	size_t len, cap;
};

struct tf_formatter {
	struct tf_plan *plans[65536];	// by event id (NULL: unset)
	struct tf_thread *threads;
	size_t nthreads, threads_cap;	// cap: a power of two
	struct tf_symbol *symbols;
	size_t nsymbols, symbols_cap;
	struct tf_pool pool;		// comm and symbol bytes
	struct tf_head heads[TF_HEAD_CACHE];	// thread parts by (event id, thread, CPU)
	struct tf_buf out;		// the output of the last tf_format() calls
};

// What tf_format() stopped for.
enum tf_status {
	TF_DONE = 0,
	TF_NEED_PLAN = 1,	// need.id has no plan: tf_set_plan()
	TF_NEED_THREAD = 2,	// need.tid is not in the thread table: tf_add_thread()
	TF_NEED_SYMBOL = 3,	// need.tgid/addr/neg is not in the symbol table: tf_add_symbol()
	TF_NEED_CALLER = 4,	// the event at need.index has a TF_PLAN_CALLER plan: append its
				// text to out and resume at need.index + 1
	TF_MORE = 5,		// tf_format_records: the output reached its size: write it out
	TF_ERR_NOMEM = -1,
	TF_ERR_PLAN = -2,	// a plan names a field its event does not have, or of another kind
	TF_ERR_DECODE = -3,	// tf_format_records: the reader failed (tf_records.decode_err)
};

struct tf_need {
	size_t index;		// the event's position in the batch
	uint16_t id;
	int32_t tid;
	int64_t tgid;
	uint64_t addr;
	bool neg;
	uint32_t field;		// TF_ERR_PLAN: the op's field
};

// The batch and how to read it.
struct tf_input {
	const struct rb_batch *batch;
	const struct rb_schema *schema;
	uint64_t serial;	// names the schema: a number no other schema has had (not 0)
	bool swap;		// byte order of array elements differs from the host's
};

// The records of a reader, formatted one at a time as they are merged (no columns).
struct tf_records {
	struct rb_reader *reader;
	const struct rb_schema *schema;
	uint64_t serial;	// names the schema (as tf_input.serial)
	struct rb_record rec;	// the record being formatted, held over a TF_NEED_*
	bool pending;		// rec is taken from the reader and not formatted yet
	int decode_err;		// TF_ERR_DECODE: the rb_error (the position is in the reader)
	uint64_t events;	// records formatted (or skipped by their plan)
	uint64_t short_records;	// records too short for their common header
};

struct tf_formatter *tf_formatter_new(void);
void tf_formatter_free(struct tf_formatter *f);

/**
 * tf_check_op - validate one op: known source and conversion, letter, widths within limits
 *
 * Returns 0 or TF_ERR_PLAN.
 */
int tf_check_op(const struct tf_op *op);

/**
 * tf_set_plan - set the plan of event id @id (replacing any)
 * @kind: TF_PLAN_SKIP, TF_PLAN_CALLER or TF_PLAN_OPS (with @ops, whose literals index @lits)
 *
 * The ops and literals are copied. Returns 0, TF_ERR_NOMEM, or TF_ERR_PLAN for a bad op.
 */
int tf_set_plan(struct tf_formatter *f, uint16_t id, int kind, const struct tf_op *ops,
		uint32_t nops, const uint8_t *lits, size_t lits_len);

int tf_add_thread(struct tf_formatter *f, int32_t tid, const uint8_t *comm, size_t len,
		  int64_t tgid, int64_t nspid);

int tf_add_symbol(struct tf_formatter *f, int64_t tgid, uint64_t addr, bool neg,
		  const uint8_t *name, size_t len);

/**
 * tf_buf_append - append bytes to a buffer (the caller's text for TF_NEED_CALLER)
 */
int tf_buf_append(struct tf_buf *buf, const void *p, size_t n);

/**
 * tf_format - format the events of a batch from *@pos on, appending to f->out
 *
 * Returns TF_DONE with *@pos at the end, a TF_NEED_* status with *@pos at the event that
 * needs it (its partial output removed) and @need filled, or a TF_ERR_* (TF_ERR_PLAN with
 * need->id and need->field).
 */
int tf_format(struct tf_formatter *f, const struct tf_input *in, size_t *pos,
	      struct tf_need *need);

/**
 * tf_format_records - format the reader's records in time order, appending to f->out, until
 * the output holds @max_bytes or more (TF_MORE), the records end (TF_DONE), or a record needs
 * something: a TF_NEED_* status with the record held in r->rec (r->pending; its partial output
 * removed) and @need filled. TF_NEED_CALLER: append the record's text to f->out, clear
 * r->pending and count it in r->events, then call again. The output equals tf_format()'s over
 * the same records decoded into batches.
 */
int tf_format_records(struct tf_formatter *f, struct tf_records *r, size_t max_bytes,
		      struct tf_need *need);

/**
 * tf_put_int - append an integer as Python's "%<flags><width>.<prec><letter>" % value prints it
 * @neg, @mag: the value is -mag when neg, else mag
 *
 * Letter 's' prints the decimal, like str(value). Returns 0 or TF_ERR_NOMEM.
 */
int tf_put_int(struct tf_buf *out, bool neg, uint64_t mag, char letter, unsigned int flags,
	       int32_t width, int32_t prec);

enum tf_text_mode {
	TF_TEXT_RAW = 0,	// as decoded
	TF_TEXT_ESC,		// escaped for a quoted text value
	TF_TEXT_JSON,		// escaped for the inside of a JSON string
};

/**
 * tf_put_text - append bytes decoded as UTF-8 (invalid bytes as \xNN) in a text mode
 *
 * Returns the number of code points appended, or TF_ERR_NOMEM.
 */
long tf_put_text(struct tf_buf *out, const uint8_t *s, size_t n, int mode);

#endif // PROBECTL_TEXTFMT_H
