/* SPDX-License-Identifier: GPL-2.0-only */
// tables.h - a whole trace file decoded into per-format Arrow columns by several threads at once.
//
// The merged reader (ringbuf.h) hands out the records of all CPUs one by one in time order, and
// rb_batch keeps per-event arrays that columns.h then scatters per format. For a file read whole
// (report, query, Parquet) that is two passes over memory and one core. Here the file is cut into
// time slices instead: slice k holds, on every CPU, the records with time stamps in
// [bound[k], bound[k + 1]) (bounds at quantiles of the pages' base times, so the slices hold
// about as many pages). Each slice is merged and decoded on its own thread straight into its
// format's columns (time, cpu, tid, thread index and thread group, the fields); the slices
// concatenated are the rows of each format in the order the merged reader gives them.
//
// That holds when each CPU's time stamps never go back, which is what the kernel writes. A slice
// that sees a time stamp outside its bounds or going back, or a page that does not load, reports
// TAB_ERR_ORDER or the reader's error: the caller then reads the file with the merged reader
// (which orders such files its own way, and reports errors where they are). No Python here.
#ifndef PROBECTL_TABLES_H
#define PROBECTL_TABLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "columns.h"
#include "ringbuf.h"

#define TAB_ERR_ORDER	(-100)	// time stamps out of the slice or going back: read it merged

// Header columns a slice does not fill (struct tab_slice.skip): a query that names none of them
// spares their memory (written once, and faulted in page by page, it is most of what columns cost).
#define TAB_SKIP_TS	(1u << 0)
#define TAB_SKIP_CPU	(1u << 1)
#define TAB_SKIP_TID	(1u << 2)
#define TAB_SKIP_THREAD	(1u << 3)	// (with threads)
#define TAB_SKIP_TGID	(1u << 4)	// (with threads)

// The pages of one CPU.
struct tab_stream {
	int cpu;
	const uint8_t *data;
	size_t size;
};

// Where a slice starts in one CPU's pages: record @record of the page at offset @page
// (@page == the stream's size: past its end).
struct tab_cut {
	size_t page;
	size_t record;
};

// The cuts of a file into time slices.
struct tab_plan {
	size_t nstreams;
	size_t nslices;
	uint64_t *bounds;		// nslices + 1: bounds[0] 0, bounds[nslices] UINT64_MAX
	struct tab_cut *cuts;		// (nslices + 1) * nstreams: cuts[k * nstreams + i]
};

/**
 * tab_plan_make - cut @streams into at most @nslices time slices (fewer when the pages' times do
 * not spread so far; one when @nslices is 1); returns 0 or an rb_error (a page that does not load)
 */
int tab_plan_make(struct tab_plan *plan, const struct rb_layout *layout,
		  const struct tab_stream *streams, size_t nstreams, size_t nslices);

void tab_plan_free(struct tab_plan *plan);

// A variable-size column in Arrow's layout (columns.h), owned: free() each pointer.
struct tab_varlen {
	int64_t *offsets;
	uint8_t *data;
	uint8_t *validity;		// NULL: no nulls
	size_t nulls;
};

// The rows of one format in one slice; the arrays are malloc'd, and whoever takes one sets it to
// NULL (tab_slice_free frees the rest).
struct tab_rows {
	size_t n;
	size_t cap;
	uint64_t *ts;			// (each header column NULL when skipped)
	int32_t *cpu;
	int32_t *tid;			// common_pid
	int32_t *thread;		// index in the col_threads, n when it is not there
	int32_t *tgid;			// its thread group, the thread id when it is not there
	int64_t **ints;			// per field: the values of an integer field, else NULL
	struct rb_span **spans;		// per field, while decoding: the bytes of the others
	struct tab_varlen *var;		// per field, once decoded: the other fields' columns
};

// One slice being decoded, and what came of it.
struct tab_slice {
	const struct rb_schema *schema;
	const struct col_threads *threads;	// NULL: no thread columns
	unsigned int skip;		// TAB_SKIP_*: header columns not filled (0: all)
	struct tab_rows *rows;		// per format of the schema
	uint64_t events;		// records decoded, formats or not
	uint64_t short_records;		// records too short for a field
	int err;			// 0, TAB_ERR_ORDER, or an rb_error
};

/**
 * tab_decode - decode slice @k of @plan into @slice (zeroed, with its schema and threads set)
 * @streams: the plan's streams; @swap: the pages' byte order differs from the host's
 *
 * Safe to run for several slices at once on separate threads. Sets slice->err.
 */
void tab_decode(struct tab_slice *slice, const struct tab_plan *plan,
		const struct tab_stream *streams, const struct rb_layout *layout, size_t k);

/**
 * tab_decode_all - tab_decode() slices @first .. @first + @count - 1 into @slices[0 .. count - 1],
 * on @count threads (the caller's and @count - 1 more; a slice whose thread cannot start is
 * decoded on the caller's)
 */
void tab_decode_all(struct tab_slice *slices, const struct tab_plan *plan,
		   const struct tab_stream *streams, const struct rb_layout *layout,
		   size_t first, size_t count);

void tab_slice_free(struct tab_slice *slice);

#endif // PROBECTL_TABLES_H
