/* SPDX-License-Identifier: GPL-2.0-only */
// chainmerge.h - one CPU's ring-buffer pages written anew with the perf samples of a recording in
// them: each sample's user callchain as a probectl:user_callchain record after its event (the
// Python side, probectl/tracedat/callchain.py, documents the record and why it goes there).
//
// A sample whose perf event carries the event's record (PERF_SAMPLE_RAW: a uprobe, taken from perf
// alone) puts that record into the pages by time, then its callchain. Any other sample joins the
// ftrace event of its thread and type nearest in time within a window, and its callchain follows
// that event with the event's time stamp. The kernel's records are copied verbatim, their time
// deltas recomputed, a page's lost-event count kept on the first page written after the loss.
#ifndef PROBECTL_CHAINMERGE_H
#define PROBECTL_CHAINMERGE_H

#include <stddef.h>
#include <stdint.h>

#include "ringbuf.h"
#include "unwind.h"

#define CM_RAW		1U	// the samples of this perf event carry the event's record
#define CM_ENTRY	2U	// ... and the user SP and the word there (an entry uprobe)
#define CM_STACK	4U	// ... and the user registers and a copy of the user stack (--call-graph
				// dwarf): the callchain is the one @args->chains has for the sample, if any
#define CM_BARE		8U	// a raw event's record alone, without a callchain record (--cgroup without -g)

struct cm_event_map {
	uint64_t perf_id;		// the perf event's id (PERF_EVENT_IOC_ID; SAMPLE_IDENTIFIER)
	uint16_t event;			// the ftrace event id it samples
	uint8_t flags;			// CM_RAW | CM_ENTRY | CM_STACK | CM_BARE
};

// The callchain, unwound from its registers and stack copy, of the sample at @offset of the perf
// records: @count addresses of the pool from @start, innermost first.
struct cm_chain {
	uint64_t offset;
	uint64_t start;
	uint64_t count;
};

struct cm_args {
	struct rb_layout layout;	// of the pages, in host byte order
	const uint8_t *src;		// the CPU's ftrace pages (whole pages), or NULL
	size_t src_len;
	const uint8_t *perf;		// the records copied from the CPU's perf ring
	size_t perf_len;
	const struct cm_event_map *map;
	size_t nmap;
	const int32_t *pids;		// keep only samples of these threads or processes, sorted; NULL: all
	size_t npids;
	uint16_t callchain_id;		// probectl:user_callchain's id
	uint32_t stack_nregs;		// registers in the samples of CM_STACK events
	const struct cm_chain *chains;	// callchains of CM_STACK samples, by offset; NULL: none
	size_t nchains;
	const uint64_t *chain_pool;	// their addresses
	size_t chain_pool_len;
	uint64_t window_ns;		// how far a sample may be from the event it joins
	int out_fd;
};

// The command name a task took at an exec (PERF_RECORD_COMM).
struct cm_comm {
	uint32_t pid, tid;
	char name[16];			// NUL-terminated
};

// An executable mapping a task made (PERF_RECORD_MMAP2).
struct cm_mmap {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t maj, min;
	uint64_t ino;
	uint32_t prot, flags;
	char path[256];			// NUL-terminated (cut at 255 bytes)
};

struct cm_result {
	uint64_t written;		// callchain records written
	uint64_t left;			// samples that joined no event
	uint64_t pages;			// pages written
	struct cm_comm *comms;		// the PERF_RECORD_COMM records, in order; free() them
	size_t ncomms;
	struct cm_mmap *mmaps;		// the PERF_RECORD_MMAP2 records, in order; free() them
	size_t nmmaps;
};

// A sample of a CM_STACK event: its user registers (as perf orders them) and stack copy, in @args->perf.
struct cm_stack {
	uint64_t offset;		// of the record in the perf records
	uint32_t pid, tid;
	uint64_t ts;
	const uint8_t *regs;		// @args->stack_nregs words
	const uint8_t *stack;		// the copy, from the stack pointer up
	uint64_t stack_len;		// the bytes of it the kernel filled (dyn_size)
};

/**
 * cm_stacks - the samples of CM_STACK events in @args->perf, and the records of @res
 *
 * Returns 0 or RB_ERR_NOMEM; @ret (free() it) points into @args->perf. Samples without registers
 * (taken in kernel threads) or cut short are left out.
 */
int cm_stacks(const struct cm_args *args, struct cm_stack **ret, size_t *count, struct cm_result *res);

/**
 * cm_write - write the pages (see above) to @args->out_fd
 *
 * Returns 0, or RB_ERR_INVAL (a layout of the other byte order), RB_ERR_NOMEM, RB_ERR_IO (errno
 * set). A source page that cannot be decoded ends the copy of the source there; a perf record cut
 * short ends the reading of the samples. On success @res->comms holds the names taken at exec, @res->mmaps the
 * executable mappings made.
 */
int cm_write(const struct cm_args *args, struct cm_result *res);

/**
 * cm_names - the PERF_RECORD_COMM and PERF_RECORD_MMAP2 records of @args->perf into @res
 *
 * Returns 0 or RB_ERR_NOMEM; @res->comms and @res->mmaps as cm_write() leaves them.
 */
int cm_names(const struct cm_args *args, struct cm_result *res);

// A CPU's pages written while its perf ring is read, when every event's samples carry their record
// (CM_RAW) and none a stack copy (CM_STACK: unwound once the recording ends): a ring's records are
// in time order, so each sample goes into the pages as it comes, its callchain after it, and the
// records are not copied and read again. The other records (PERF_RECORD_COMM, _MMAP2, _LOST) go
// verbatim to another file, read by cm_names() at the end.
struct cm_stream;

// The rules stacks are walked by while the rings are read (unwind.h), shared by the streams of all
// CPUs and the caller, who finds the rules that were wanted (cm_rules_wanted) and gives them
// (cm_rules_put) from another thread. A stack copy whose walk needs a rule not known yet goes whole
// to the stream's other records, to be unwound when the recording ends.
struct cm_rules;

// The user registers of the samples (@nregs words; @ip, @sp, @bp their indices, @bp -1: none) and
// the longest walk; NULL when out of memory.
struct cm_rules *cm_rules_new(uint32_t nregs, int ip, int sp, int bp, uint32_t max_frames);
void cm_rules_free(struct cm_rules *r);

// Up to @max (pid, address) pairs whose rules were wanted and are not known, into @pids/@addresses
// (the pairs are given once); the count.
size_t cm_rules_wanted(struct cm_rules *r, uint32_t *pids, uint64_t *addresses, size_t max);

// The rule of @address of @pid (unwind.h); 0 or -1 (no memory).
int cm_rules_put(struct cm_rules *r, uint32_t pid, uint64_t address, const struct uw_rule *rule);

/**
 * cm_stream_create - a stream writing pages to @pages_fd and other records to @rest_fd
 * @map: the perf events (copied): CM_RAW each, with CM_ENTRY, CM_BARE or (with @rules) CM_STACK
 * @rules: how CM_STACK samples' copies are walked (the caller's, shared), or NULL
 *
 * Returns 0 with *@ret set, or RB_ERR_INVAL (a layout of the other byte order, an event that is not
 * CM_RAW, or CM_STACK without @rules) / RB_ERR_NOMEM.
 */
int cm_stream_create(struct cm_stream **ret, const struct rb_layout *layout, const struct cm_event_map *map,
		     size_t nmap, uint16_t callchain_id, int pages_fd, int rest_fd, struct cm_rules *rules);

/**
 * cm_stream_record - one whole record of the ring (@size bytes, from its header)
 *
 * Returns 0, RB_ERR_NOMEM or RB_ERR_IO (errno set). A sample of no event of the map, or cut short,
 * is left out.
 */
int cm_stream_record(struct cm_stream *s, const uint8_t *record, size_t size);

// cm_stream_finish - write the last page; 0 or RB_ERR_IO (errno set). Once, after the last record.
int cm_stream_finish(struct cm_stream *s);

struct cm_stream_stats {
	uint64_t written;		// samples written (each an event, and its callchain record)
	uint64_t walked;		// CM_STACK samples whose stacks were walked (and written)
	uint64_t whole;			// CM_STACK samples left whole to the other records
	uint64_t pages;			// pages written
	const uint32_t *tids;		// the threads of the samples (in no order), valid until destroyed
	size_t ntids;
};

void cm_stream_get_stats(struct cm_stream *s, struct cm_stream_stats *ret);

void cm_stream_destroy(struct cm_stream *s);

#endif // PROBECTL_CHAINMERGE_H
