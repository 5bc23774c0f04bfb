/* SPDX-License-Identifier: GPL-2.0-only */
// ringbuf.h - decoding of ftrace ring-buffer sub-buffers ("pages") and their event records.
//
// The kernel writes events into per-CPU sub-buffers; trace_pipe_raw hands them out whole and
// trace.dat files store them verbatim. A sub-buffer is:
//
//   u64  time_stamp                  base time of the page
//   long commit                      bytes of event data + RB_MISSED_* flags (kernel long: 4 or 8)
//   u8   data[commit & RB_COMMIT_MASK]
//   long lost count at data[size]    only when RB_MISSED_STORED is set
//
// and each record starts with a u32 header, type_len:5 time_delta:27 (bit order follows the
// kernel's endianness). See kernel/trace/ring_buffer.c.
//
// Layers, bottom up, none of which allocates per event or includes Python.h:
//   rb_page_*    walk the records of one page (bounds-checked; errors, never crashes)
//   rb_reader_*  merge the pages of several CPUs into one stream ordered by time
//   rb_batch_*   decode records into columns with precompiled per-event field tables
#ifndef PROBECTL_RINGBUF_H
#define PROBECTL_RINGBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

// Whether this machine stores integers most significant byte first (pages are read in their own order).
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define HOST_BIG_ENDIAN true
#else
#define HOST_BIG_ENDIAN false
#endif

#define RB_MISSED_EVENTS	(1U << 31)	// events were lost before this page
#define RB_MISSED_STORED	(1U << 30)	// the lost count is stored after the data
#define RB_COMMIT_MASK		((1U << 27) - 1)

#define RB_TYPE_DATA_MAX	28	// type_len 1..28: payload of 4 * type_len bytes
#define RB_TYPE_PADDING		29
#define RB_TYPE_TIME_EXTEND	30
#define RB_TYPE_TIME_STAMP	31
#define RB_TS_SHIFT		27
#define RB_TS_MSB		(0xf8ULL << 56)	// absolute stamps carry 59 bits

#define RB_MAX_PAGE_SIZE	(1U << 27)	// commit sizes have 27 bits

// Error codes: every function that can fail returns 0 (or a count) or one of these.
enum rb_error {
	RB_OK = 0,
	RB_ERR_INVAL = -1,		// bad argument (layout, table)
	RB_ERR_NOMEM = -2,
	RB_ERR_SHORT_PAGE = -3,		// the page is shorter than its header or its commit size
	RB_ERR_COMMIT = -4,		// commit size larger than the page can hold
	RB_ERR_RECORD = -5,		// a record runs past the committed data
	RB_ERR_LENGTH = -6,		// a record with an impossible length
	RB_ERR_IO = -7,			// recorder: read/splice/write failed (see errno value)
};

/**
 * rb_strerror - a short lower-case description of an rb_error code
 */
const char *rb_strerror(int err);

// How the pages of one kernel (or one trace file) are laid out.
struct rb_layout {
	unsigned int long_size;		// kernel long: 8 (64-bit) or 4; size of commit and lost count
	bool big_endian;		// byte order of the kernel that wrote the pages
	size_t page_size;		// sub-buffer size, e.g. 4096 (buffer_subbuf_size_kb * 1024)
};

/**
 * rb_layout_check - validate a layout: long size 4 or 8, page size above the header, <= 128 MiB
 */
int rb_layout_check(const struct rb_layout *layout);

// One page being walked. Fill with rb_page_load(), then call rb_page_next() until it returns 0.
struct rb_page {
	const uint8_t *buf;		// start of the page
	size_t len;			// bytes readable at buf (page_size, or less if truncated)
	bool swap;			// page byte order differs from the host's
	bool big_endian;
	uint64_t timestamp;		// page base time
	uint32_t flags;			// RB_MISSED_EVENTS | RB_MISSED_STORED as found
	size_t data_off;		// 16 with an 8-byte long, 12 with a 4-byte one
	size_t size;			// committed data bytes
	int64_t missed;			// 0 none, > 0 events lost before the page, -1 lost, count unknown
	size_t pos;			// next record header, from buf
	uint64_t ts;			// running time stamp
};

// One data record of a page.
struct rb_event {
	uint64_t ts;
	const uint8_t *data;		// payload: common_type, common_flags, ... (inside the page)
	uint32_t len;			// payload length (the kernel pads to 4 bytes)
};

/**
 * rb_page_load - read a page header and prepare to walk its records
 * @page: filled in
 * @layout: long size, byte order and page size
 * @buf: the page; @len bytes are readable (may be less than the page size for a truncated file)
 *
 * Returns 0, or RB_ERR_SHORT_PAGE / RB_ERR_COMMIT for a page that cannot be valid.
 */
int rb_page_load(struct rb_page *page, const struct rb_layout *layout, const void *buf, size_t len);

/**
 * rb_page_next - the next data record of a page
 *
 * Time extends and absolute time stamps update the running time; padding is skipped; a null
 * padding record ends the page. Returns 1 with @ev filled, 0 at the end of the page, or
 * RB_ERR_RECORD / RB_ERR_LENGTH for a corrupt record (the page cannot be walked further).
 */
static inline int rb_page_next(struct rb_page *page, struct rb_event *ev);

// ---- field tables ---------------------------------------------------------------------------

// Where a field's bytes are.
enum rb_loc {
	RB_LOC_FIXED = 0,		// at offset, size bytes
	RB_LOC_DATA = 1,		// __data_loc: u32 at offset, len << 16 | offset from the payload start
	RB_LOC_REL = 2,			// __rel_loc: same, offset counted from the end of the u32
	RB_LOC_TAIL = 3,		// from offset to the end of the record (kernel_stack's caller[])
};

// What the bytes mean.
enum rb_kind {
	RB_KIND_INT = 0,		// one integer of 1, 2, 4 or 8 bytes (RB_LOC_FIXED only)
	RB_KIND_STR = 1,		// text up to the first NUL
	RB_KIND_BYTES = 2,		// raw bytes
	RB_KIND_INT_ARRAY = 3,		// integers of elem_size bytes
	RB_KIND_STR_ARRAY = 4,		// size / 4 data_loc (RB_LOC_DATA) or rel_loc (RB_LOC_REL) words
					// at offset, each locating one string: a probe's :string[N]
};

struct rb_field {
	uint32_t offset;
	uint32_t size;
	uint8_t loc;			// enum rb_loc
	uint8_t kind;			// enum rb_kind
	uint8_t elem_size;		// RB_KIND_INT_ARRAY: 1, 2, 4 or 8
	uint8_t is_signed;
	// RB_KIND_STR of a counted string (a Go or Rust string, a std::string, whose bytes need not
	// have a NUL after them): its length is the unsigned integer of bound_size bytes (1, 2, 4 or
	// 8) at bound_offset of the record, and the text ends there; bound_size 0: no such length.
	// RB_KIND_INT_ARRAY of a slice: the same length, in elements, ends the array; of a C++
	// vector (head_size 4 or 8 too): the bound is its end pointer and the integer of head_size
	// bytes at head_offset its begin pointer, and the array ends at (end - begin) / elem_size
	// elements (the kernel cannot subtract; a vector whose end is before its start, none).
	// RB_KIND_INT with a bound: the field is a C++ vector's begin pointer, the bound its end
	// pointer, head_size (not 0) its element's size, and the value its length in elements.
	// Where the text read to a NUL is shorter than the length (the kernel found no NUL within its
	// limit, or one inside the string), its first head_size bytes at head_offset (0: none) are it.
	uint8_t bound_size;
	uint32_t bound_offset;
	uint32_t head_offset;
	uint32_t head_size;
};

// The fields of one event id, in the order the caller wants them.
struct rb_event_format {
	uint16_t id;
	uint32_t nfields;
	const struct rb_field *fields;
};

// The event ids a reader knows, with an id -> format index map.
struct rb_schema {
	uint32_t nformats;
	const struct rb_event_format *formats;
	int32_t index[65536];		// event id -> index into formats, -1 unknown
};

/**
 * rb_schema_init - check the formats and build the id index
 *
 * Returns RB_ERR_INVAL for a bad field (an RB_KIND_INT that is not fixed or not 1/2/4/8 bytes,
 * an unknown loc/kind, an array element size that is not 1/2/4/8, a length bound on a field
 * that is not RB_KIND_STR or of a size that is not 1/2/4/8) or a duplicate id.
 */
int rb_schema_init(struct rb_schema *schema, const struct rb_event_format *formats, uint32_t nformats);

// A decoded variable-size value: bytes inside the page. ptr == NULL: not present in the record.
struct rb_span {
	const uint8_t *ptr;
	uint32_t len;
};

/**
 * rb_field_int - read a fixed integer field; returns false if the record is too short
 */
static inline bool rb_field_int(const struct rb_field *field, const uint8_t *rec, uint32_t len,
				bool swap, int64_t *ret);

/**
 * rb_field_span - find the bytes of a non-integer field; returns false if out of the record
 *
 * RB_KIND_STR spans stop before the first NUL. An RB_KIND_STR_ARRAY span is the whole record
 * (its words locate strings anywhere in it; rb_str_array_item reads them).
 */
bool rb_field_span(const struct rb_field *field, const uint8_t *rec, uint32_t len, bool swap,
		   struct rb_span *ret);

/**
 * rb_str_array_item - the string of element @i of an RB_KIND_STR_ARRAY field
 *
 * @rec/@len is the field's span (the record). Returns false when the element's word or its string
 * lies outside the record; a word of length 0 is the kernel's "(fault)" (ret->ptr NULL, true).
 */
bool rb_str_array_item(const struct rb_field *field, const uint8_t *rec, uint32_t len, bool swap,
		       uint32_t i, struct rb_span *ret);

static inline uint64_t rb_read_uint(const uint8_t *p, unsigned int size, bool swap)
{
	uint8_t b1;
	uint16_t b2;
	uint32_t b4;
	uint64_t b8;

	switch (size) {
	case 1:
		b1 = *p;
		return b1;
	case 2:
		__builtin_memcpy(&b2, p, 2);
		return swap ? __builtin_bswap16(b2) : b2;
	case 4:
		__builtin_memcpy(&b4, p, 4);
		return swap ? __builtin_bswap32(b4) : b4;
	case 8:
		__builtin_memcpy(&b8, p, 8);
		return swap ? __builtin_bswap64(b8) : b8;
	}
	return 0;
}

static inline int64_t rb_read_int(const uint8_t *p, unsigned int size, bool is_signed, bool swap)
{
	uint64_t v = rb_read_uint(p, size, swap);

	if (is_signed && size < 8) {
		unsigned int shift = 64 - 8 * size;

		return (int64_t)(v << shift) >> shift;
	}
	return (int64_t)v;
}

// rb_page_next() and rb_field_int() run once per record or field of every file read: here, so
// that the readers inline them.
static inline __attribute__((always_inline)) int rb_page_next(struct rb_page *page, struct rb_event *ev)
{
	size_t end = page->data_off + page->size;

	while (page->pos < end) {
		const uint8_t *p = page->buf + page->pos;
		size_t room = end - page->pos;
		uint32_t hdr, type_len, delta, array0;

		if (room < 4)
			return RB_ERR_RECORD;
		hdr = (uint32_t)rb_read_uint(p, 4, page->swap);
		if (page->big_endian) {
			type_len = hdr >> 27;
			delta = hdr & ((1U << 27) - 1);
		} else {
			type_len = hdr & 0x1f;
			delta = hdr >> 5;
		}

		if (type_len >= 1 && type_len <= RB_TYPE_DATA_MAX) {
			size_t rlen = 4 + 4 * (size_t)type_len;

			if (rlen > room)
				return RB_ERR_RECORD;
			page->ts += delta;
			page->pos += rlen;
			ev->ts = page->ts;
			ev->data = p + 4;
			ev->len = 4 * type_len;
			return 1;
		}

		if (type_len == RB_TYPE_PADDING && delta == 0) {
			// A null event: the rest of the page is unused.
			page->pos = end;
			return 0;
		}

		if (room < 8)
			return RB_ERR_RECORD;
		array0 = (uint32_t)rb_read_uint(p + 4, 4, page->swap);

		switch (type_len) {
		case 0:
			// array[0] counts itself and the payload; the payload starts after it.
			if (array0 < 4)
				return RB_ERR_LENGTH;
			if (array0 > room - 4)
				return RB_ERR_RECORD;
			page->ts += delta;
			page->pos += 4 + (size_t)array0;
			ev->ts = page->ts;
			ev->data = p + 8;
			ev->len = array0 - 4;
			return 1;
		case RB_TYPE_PADDING:
			// A discarded record or the end-of-page filler: skip 4 + array[0] bytes.
			// A discarded record keeps its delta and later deltas count from it, so it
			// moves the clock (libtraceevent's kbuffer does the same).
			if (array0 > room - 4)
				return RB_ERR_RECORD;
			page->ts += delta;
			page->pos += 4 + (size_t)array0;
			break;
		case RB_TYPE_TIME_EXTEND:
			page->ts += ((uint64_t)array0 << RB_TS_SHIFT) + delta;
			page->pos += 8;
			break;
		case RB_TYPE_TIME_STAMP:
			page->ts = (((uint64_t)array0 << RB_TS_SHIFT) | delta) | (page->ts & RB_TS_MSB);
			page->pos += 8;
			break;
		}
	}
	return 0;
}

// A C++ vector's length from its begin pointer *@ret and the end pointer its bound locates (ringbuf.c).
bool rb_vector_length(const struct rb_field *field, const uint8_t *rec, uint32_t len, bool swap,
		      int64_t *ret);

static inline bool rb_field_int(const struct rb_field *field, const uint8_t *rec, uint32_t len,
				bool swap, int64_t *ret)
{
	if (field->offset > len || field->size > len - field->offset) {
		*ret = 0;
		return false;
	}
	*ret = rb_read_int(rec + field->offset, field->size, field->is_signed, swap);
	if (__builtin_expect(field->bound_size != 0, 0))
		return rb_vector_length(field, rec, len, swap, ret);
	return true;
}

/**
 * rb_grow - resize the array *@p to @cap elements of @elem bytes; false (*@p kept) when out of memory
 */
static inline bool rb_grow(void **p, size_t elem, size_t cap)
{
	void *q = realloc(*p, elem * cap);

	if (!q)
		return false;
	*p = q;
	return true;
}

// ---- merged reader over several CPUs ------------------------------------------------------

// The pages of one CPU: a run of page_size pages (the last one may be cut short).
struct rb_stream {
	int cpu;
	const uint8_t *data;
	size_t size;
	size_t next_page;		// offset of the next page to load
	size_t page_off;		// offset of the loaded page
	bool page_loaded;
	struct rb_page page;
	struct rb_event ev;		// look-ahead record
	bool live;			// ev is valid
	bool done;
	int64_t pending_missed;		// lost before ev: 0 none, -1 unknown count
	// a range of the stream (rb_reader_set_range): records of the first page to pass over,
	// and the page and record where the range ends (stop_page SIZE_MAX: at the stream's end)
	size_t skip;
	size_t stop_page;
	size_t stop_record;
	size_t page_records;		// records of the loaded page walked so far
	uint64_t last_ts;
	bool disordered;		// a record's time stamp was before the one before it
	// statistics
	uint64_t pages;
	uint64_t events;
	uint64_t missed_events;		// sum of the stored counts
	uint64_t missed_unknown;	// pages flagged with lost events but no count
	uint64_t bad_pages;		// pages skipped in lenient mode
};

// A record from rb_reader_next(); data points into the caller's buffers.
struct rb_record {
	uint64_t ts;
	int cpu;
	const uint8_t *data;
	uint32_t len;
	int64_t missed;			// events lost on this CPU just before: 0, > 0, or -1 unknown
};

struct rb_reader {
	struct rb_layout layout;
	bool swap;
	bool strict;			// corrupt page -> error; otherwise skip the rest of the page
	size_t nstreams;
	struct rb_stream *streams;
	size_t nheap;
	uint32_t *heap;			// indexes of live streams, min-heap on (ts, cpu)
	bool started;
	int pending_err;		// an error to report on the next call
	// the last error
	int err_cpu;
	size_t err_offset;		// offset of the bad page in its stream
	size_t err_pos;			// offset of the bad header or record inside the page
};

/**
 * rb_reader_init - prepare to read @nstreams CPU streams; set each with rb_reader_set_stream()
 * @strict: report a corrupt page as an error (otherwise it is counted in bad_pages and skipped)
 */
int rb_reader_init(struct rb_reader *reader, const struct rb_layout *layout, size_t nstreams,
		   bool strict);

void rb_reader_set_stream(struct rb_reader *reader, size_t i, int cpu, const void *data,
			  size_t size);

/**
 * rb_reader_set_range - like rb_reader_set_stream, but only the records from record @skip of the
 * page at offset @start_page up to (not including) record @stop_record of the page at @stop_page
 * (@stop_page SIZE_MAX: to the end): one time slice of a CPU's pages (tables.h)
 */
void rb_reader_set_range(struct rb_reader *reader, size_t i, int cpu, const void *data,
			 size_t size, size_t start_page, size_t skip, size_t stop_page,
			 size_t stop_record);

/**
 * rb_reader_next - the next record of all streams, by time stamp (ties: stream order)
 *
 * Returns 1 with @rec filled, 0 when every stream is exhausted, or an rb_error with the position
 * in err_cpu / err_offset / err_pos.
 */
int rb_reader_next(struct rb_reader *reader, struct rb_record *rec);

void rb_reader_deinit(struct rb_reader *reader);

/**
 * rb_stream_ids - mark the event id of every data record of a run of pages in a bitmap
 * @layout: long size, byte order and page size
 * @data: @size bytes of whole pages (the last one may be cut short)
 * @seen: 65536 bits, bit (id & 7) of byte id >> 3; set, never cleared
 *
 * The pages are walked one by one, without merging or decoding fields: what a reader needs to
 * know which formats a file uses. A corrupt page is skipped from where it goes wrong (the
 * reader that decodes the stream reports it). Returns the number of records seen.
 */
uint64_t rb_stream_ids(const struct rb_layout *layout, const void *data, size_t size,
		       uint8_t *seen);

// ---- columnar batches --------------------------------------------------------------------

// One column: integers for RB_KIND_INT, spans otherwise.
struct rb_column {
	int64_t *ints;
	struct rb_span *spans;
};

struct rb_format_rows {
	size_t nrows;
	size_t cap;
	struct rb_column *cols;		// one per field of the format
};

// Events lost on a CPU before the event at @index of the batch.
struct rb_lost {
	size_t index;
	int cpu;
	int64_t count;			// -1: unknown
};

// Decoded events, in time order. Per event: ts, cpu, id, pid, flags, preempt and the row of its
// format's columns (UINT32_MAX for an id without a format).
struct rb_batch {
	size_t n;
	size_t cap;
	uint64_t *ts;
	int32_t *cpu;
	uint16_t *id;
	int32_t *pid;
	uint8_t *flags;
	uint8_t *preempt;
	uint32_t *row;
	struct rb_span *raw;		// payloads, when asked for
	bool want_raw;
	const struct rb_schema *schema;
	struct rb_format_rows *rows;	// one per format of the schema
	struct rb_lost *lost;
	size_t nlost;
	size_t lost_cap;
	uint64_t short_records;		// records too short for a field (the value reads as 0/missing)
};

int rb_batch_init(struct rb_batch *batch, const struct rb_schema *schema, bool want_raw);

/**
 * rb_batch_reset - empty the batch, keeping its memory
 */
void rb_batch_reset(struct rb_batch *batch);

/**
 * rb_batch_fill - decode up to @max more records from @reader into @batch
 *
 * Returns the number of records added (0 at the end) or an rb_error from the reader.
 */
long rb_batch_fill(struct rb_batch *batch, struct rb_reader *reader, size_t max);

/**
 * rb_batch_add - decode one record from rb_reader_next() into @batch (0 or RB_ERR_NOMEM)
 */
int rb_batch_add(struct rb_batch *batch, const struct rb_record *rec, bool swap);

void rb_batch_deinit(struct rb_batch *batch);

#endif // PROBECTL_RINGBUF_H
