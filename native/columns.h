/* SPDX-License-Identifier: GPL-2.0-only */
// columns.h - a decoded rb_batch laid out as Apache Arrow columns, one table per event format.
//
// rb_batch keeps the header values (time, cpu, pid) per event in time order and the field values
// per format; SQL wants one table per format with its own header columns. col_common() scatters
// the header values of a batch into per-format arrays (the decoder numbers the rows of a format in
// event order, so a format's rows stay in time order), with each row's index in the file's table
// of threads (an Arrow dictionary index for the command name) and its thread group. Variable-size fields become Arrow's
// "large" layouts (int64 offsets): text as UTF-8 with invalid bytes replaced by U+FFFD (Arrow
// strings must be valid UTF-8), bytes as they are, integer arrays as a list of int64 values.
// Missing values (a field past the end of a short record) are nulls in a validity bitmap.
//
// Each variable-size column takes two passes: col_*_size() says how many bytes the caller must
// give, col_*_fill() writes them; the caller owns every buffer (the glue hands Python bytes
// objects, so the columns reach Arrow without another copy). No Python here.
#ifndef PROBECTL_COLUMNS_H
#define PROBECTL_COLUMNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringbuf.h"

// The threads a file names (its saved cmdlines and thread groups), for per-row lookups.
struct col_threads {
	size_t n;
	const int32_t *tids;		// ascending
	const int32_t *tgids;		// the thread group of each
};

/**
 * col_thread_index - the index of @tid in @threads, threads->n when it is not there
 */
size_t col_thread_index(const struct col_threads *threads, int32_t tid);

// Per format index of the schema, the arrays of that format's nrows (NULL: skip the format);
// thread and tgid may be NULL when there are no threads to look up.
struct col_common_out {
	uint64_t **ts;
	int32_t **cpu;
	int32_t **pid;			// common_pid: the thread id
	int32_t **thread;		// index of the thread in col_threads, n when it is not there
	int32_t **tgid;			// its thread group, the thread id itself when it is not there
};

/**
 * col_common - the time, cpu and pid (common_pid) of each format's rows of @batch and, with
 * @threads, each row's thread index and thread group
 */
void col_common(const struct rb_batch *batch, const struct col_threads *threads,
		const struct col_common_out *out);

// What the variable-size column of a field needs.
struct col_size {
	size_t data;			// bytes of values (text/bytes) or of int64 elements (arrays)
	size_t nulls;			// missing values
};

/**
 * col_varlen_size - the data size and null count of the non-integer field @f over @spans
 */
struct col_size col_varlen_size(const struct rb_field *f, const struct rb_span *spans, size_t n);

/**
 * col_varlen_fill - write the column: @offsets (n + 1 int64), @data (col_varlen_size().data
 * bytes), @validity (ceil(n / 8) bytes, or NULL when there are no nulls)
 * @swap: the byte order of the pages differs from the host's (for integer arrays)
 */
void col_varlen_fill(const struct rb_field *f, const struct rb_span *spans, size_t n, bool swap,
		     int64_t *offsets, uint8_t *data, uint8_t *validity);

#endif // PROBECTL_COLUMNS_H
