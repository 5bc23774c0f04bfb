/* SPDX-License-Identifier: GPL-2.0-only */
// perfring.h - copy the records of perf event mmap rings to files, one thread for all CPUs.
//
// A perf event opened with perf_event_open() and mapped (one metadata page, then 2^n data pages)
// is a ring the kernel writes PERF_RECORD_* records into (struct perf_event_header, then the
// record) and the reader frees by advancing data_tail. The copier waits in poll() on every ring
// and on a stop eventfd, moves what lies between data_tail and data_head to the CPU's output
// file verbatim, and counts the records on the way: samples, and the events the kernel lost
// (PERF_RECORD_LOST's count). After the stop request it drains every ring once more.
//
// The caller opens and maps nothing: it gives the event descriptors (one per CPU; the other
// events of a CPU redirected into it with PERF_EVENT_IOC_SET_OUTPUT), and owns them and the output
// descriptors. The copier maps the rings and unmaps them in perf_ring_destroy().
#ifndef PROBECTL_PERFRING_H
#define PROBECTL_PERFRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct perf_ring_copier;
struct cm_stream;

struct perf_ring_stats {
	int cpu;
	uint64_t bytes;			// records copied to the output
	uint64_t samples;		// PERF_RECORD_SAMPLE records
	uint64_t lost;			// events the kernel counted as lost (PERF_RECORD_LOST)
	uint64_t lost_records;		// PERF_RECORD_LOST records
	int err;			// errno of the failure that ended this CPU's copying, or 0
	const char *err_op;		// "mmap", "poll" or "write" when err is set
};

/**
 * perf_ring_create - map the rings of @ncpus perf events
 * @streams: NULL, or per CPU a stream (chainmerge.h) each record goes to instead of @out_fds (the
 *	caller owns them; perf_ring_stop() finishes them)
 * @data_pages: data pages of each ring, a power of two (the mapping is one page more)
 *
 * Returns 0 with *@ret set, or RB_ERR_INVAL / RB_ERR_NOMEM / RB_ERR_IO (errno set).
 */
int perf_ring_create(struct perf_ring_copier **ret, size_t ncpus, const int *cpus, const int *perf_fds,
		     const int *out_fds, struct cm_stream *const *streams, size_t data_pages, int poll_ms);

int perf_ring_start(struct perf_ring_copier *pc);

/**
 * perf_ring_stop - drain every ring and join the thread; disable the events first
 *
 * Returns 0, or RB_ERR_IO if a CPU failed (see perf_ring_get_stats()). Calling it again does nothing.
 */
int perf_ring_stop(struct perf_ring_copier *pc);

size_t perf_ring_ncpus(const struct perf_ring_copier *pc);

bool perf_ring_running(const struct perf_ring_copier *pc);

void perf_ring_get_stats(const struct perf_ring_copier *pc, size_t i, struct perf_ring_stats *ret);

void perf_ring_destroy(struct perf_ring_copier *pc);

#endif // PROBECTL_PERFRING_H
