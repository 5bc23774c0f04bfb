/* SPDX-License-Identifier: GPL-2.0-only */
// recorder.h - copy ring-buffer pages from per_cpu/cpuN/trace_pipe_raw to files, a thread per CPU.
//
// Each thread waits in poll() on its trace_pipe_raw (woken by the kernel at the instance's
// buffer_percent) and on a shared stop eventfd, moves whole pages with splice() through a pipe
// into its output file, and after the stop request drains what is left: splice for whole pages,
// then non-blocking read()s for the last partial page, which splice cannot move. Every page in
// the output is padded to the sub-buffer size, as trace.dat wants them.
//
// The caller opens the files (trace_pipe_raw with O_NONBLOCK) and owns the descriptors; the
// threads touch nothing but them, so they run without any interpreter lock.
#ifndef PROBECTL_RECORDER_H
#define PROBECTL_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rb_recorder;

struct rb_recorder_config {
	size_t subbuf_size;		// sub-buffer size: the unit of reads and of the output
	int poll_ms;			// longest sleep before trying to move data anyway (<= 0: 250)
	int idle_ms;			// sleep after a wake-up that found only a partial page (<= 0: 1)
	size_t pipe_size;		// splice pipe size to ask for (0: 1 MiB); the kernel may cap it
	bool use_read;			// read()/write() instead of splice (for comparison and fallback)
	uint64_t flush_max_bytes;	// cap of the final drain per CPU (0: until the buffer is empty)
};

struct rb_recorder_stats {
	int cpu;
	uint64_t bytes;			// written to the output, padding included
	uint64_t splice_bytes;		// moved by splice
	uint64_t read_bytes;		// moved by read (partial pages, or everything with use_read)
	uint64_t pages;			// pages written
	uint64_t wakeups;		// returns from poll()
	int err;			// errno of the failure that ended this CPU's copying, or 0
	const char *err_op;		// "poll", "splice", "read" or "write" when err is set
};

/**
 * rb_recorder_create - prepare a recorder for @ncpus CPUs
 * @cpus: CPU numbers (for the statistics)
 * @in_fds: per_cpu/cpuN/trace_pipe_raw, opened O_RDONLY | O_NONBLOCK
 * @out_fds: output files, written from their current position
 *
 * Returns 0 with *@ret set, or RB_ERR_INVAL / RB_ERR_NOMEM / RB_ERR_IO (errno set).
 */
int rb_recorder_create(struct rb_recorder **ret, const struct rb_recorder_config *config,
		       size_t ncpus, const int *cpus, const int *in_fds, const int *out_fds);

/**
 * rb_recorder_start - start the per-CPU threads
 *
 * Returns 0, or RB_ERR_IO with errno set if a thread could not be created (the others are stopped).
 */
int rb_recorder_start(struct rb_recorder *rec);

/**
 * rb_recorder_stop - ask the threads to drain and finish, and wait for them
 *
 * Turn tracing off first (tracing_on = 0) so that the drain has an end. Returns 0, or RB_ERR_IO
 * if any CPU failed (see rb_recorder_get_stats()). Calling it again does nothing.
 */
int rb_recorder_stop(struct rb_recorder *rec);

size_t rb_recorder_ncpus(const struct rb_recorder *rec);

bool rb_recorder_running(const struct rb_recorder *rec);

/**
 * rb_recorder_get_stats - the counters of the @i-th CPU; safe while the threads run
 */
void rb_recorder_get_stats(const struct rb_recorder *rec, size_t i, struct rb_recorder_stats *ret);

/**
 * rb_recorder_destroy - stop if running and free; does not close the caller's descriptors
 */
void rb_recorder_destroy(struct rb_recorder *rec);

#endif // PROBECTL_RECORDER_H
