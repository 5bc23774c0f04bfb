// SPDX-License-Identifier: GPL-2.0-only
// perfring.c - copying of perf event mmap rings to files (see perfring.h).

#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "chainmerge.h"
#include "perfring.h"
#include "ringbuf.h"

#define DEFAULT_POLL_MS	100

struct ring {
	int cpu;
	int fd;
	int out_fd;
	void *base;			// the mapping: metadata page, then the data
	size_t map_size;
	uint8_t *data;
	uint64_t size;			// data bytes, a power of two
	uint64_t bytes;
	uint64_t samples;
	uint64_t lost;
	uint64_t lost_records;
	int err;
	const char *err_op;
	struct cm_stream *stream;	// the pages written as the ring is read, or NULL: copied verbatim
	uint8_t *scratch;		// (stream) a record that wraps around the ring's end, made whole
};

struct perf_ring_copier {
	size_t ncpus;
	struct ring *rings;
	int stop_fd;
	int poll_ms;
	bool running;
	pthread_t thread;
};

static void add_stat(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static void fail(struct ring *r, const char *op, int err)
{
	if (!r->err) {
		r->err_op = op;
		__atomic_store_n(&r->err, err, __ATOMIC_RELEASE);
	}
}

static int write_all(struct ring *r, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = write(r->out_fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail(r, "write", errno);
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

// Count the records in [tail, head): headers are 8-byte aligned, so neither a header nor the
// u64 lost count of PERF_RECORD_LOST straddles the end of the ring.
static void count_records(struct ring *r, uint64_t tail, uint64_t head)
{
	uint64_t mask = r->size - 1;

	while (tail < head) {
		struct perf_event_header h;

		memcpy(&h, r->data + (tail & mask), sizeof(h));
		if (h.size < sizeof(h))
			break;	// a ring the kernel wrote is never like this; do not loop on it
		if (h.type == PERF_RECORD_SAMPLE) {
			add_stat(&r->samples, 1);
		} else if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
			uint64_t lost;

			memcpy(&lost, r->data + ((tail + sizeof(h) + 8) & mask), 8);
			add_stat(&r->lost, lost);
			add_stat(&r->lost_records, 1);
		}
		tail += h.size;
	}
}

// Each record in [tail, head) into the ring's stream, whole.
static int stream_records(struct ring *r, uint64_t tail, uint64_t head)
{
	uint64_t mask = r->size - 1;

	while (tail < head) {
		struct perf_event_header h;
		uint64_t start = tail & mask;
		const uint8_t *rec = r->data + start;
		int err;

		memcpy(&h, rec, sizeof(h));
		if (h.size < sizeof(h) || h.size > head - tail) {
			fail(r, "read", EIO);
			return -1;
		}
		if (start + h.size > r->size) {
			size_t part = (size_t)(r->size - start);

			memcpy(r->scratch, rec, part);
			memcpy(r->scratch + part, r->data, h.size - part);
			rec = r->scratch;
		}
		err = cm_stream_record(r->stream, rec, h.size);
		if (err) {
			fail(r, "write", err == RB_ERR_NOMEM ? ENOMEM : errno);
			return -1;
		}
		tail += h.size;
	}
	return 0;
}

// Move what the ring holds now to the output. Returns bytes moved, or -1.
static long long move_ring(struct ring *r)
{
	struct perf_event_mmap_page *meta = r->base;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	uint64_t mask = r->size - 1;
	uint64_t len = head - tail;

	if (!len || r->err)
		return 0;
	if (len > r->size) {
		fail(r, "read", EIO);
		return -1;
	}
	uint64_t start = tail & mask;
	uint64_t first = len < r->size - start ? len : r->size - start;

	if (r->stream ? stream_records(r, tail, head) :
	    write_all(r, r->data + start, first) || write_all(r, r->data, len - first))
		return -1;
	count_records(r, tail, head);
	add_stat(&r->bytes, len);
	__atomic_store_n(&meta->data_tail, head, __ATOMIC_RELEASE);
	return (long long)len;
}

static void *copier_main(void *arg)
{
	struct perf_ring_copier *pc = arg;
	struct pollfd *pfd = calloc(pc->ncpus + 1, sizeof(*pfd));

	if (!pfd) {
		fail(&pc->rings[0], "poll", ENOMEM);
		return NULL;
	}
	for (size_t i = 0; i < pc->ncpus; i++) {
		pfd[i].fd = pc->rings[i].fd;
		pfd[i].events = POLLIN;
	}
	pfd[pc->ncpus].fd = pc->stop_fd;
	pfd[pc->ncpus].events = POLLIN;
	for (;;) {
		int n = poll(pfd, pc->ncpus + 1, pc->poll_ms);

		if (n < 0 && errno != EINTR) {
			fail(&pc->rings[0], "poll", errno);
			break;
		}
		for (size_t i = 0; i < pc->ncpus; i++)
			move_ring(&pc->rings[i]);
		if (n > 0 && pfd[pc->ncpus].revents)
			break;
	}
	// The events are disabled before the stop request: this pass leaves the rings empty.
	for (size_t i = 0; i < pc->ncpus; i++)
		move_ring(&pc->rings[i]);
	free(pfd);
	return NULL;
}

int perf_ring_create(struct perf_ring_copier **ret, size_t ncpus, const int *cpus, const int *perf_fds,
		     const int *out_fds, struct cm_stream *const *streams, size_t data_pages, int poll_ms)
{
	long page = sysconf(_SC_PAGESIZE);
	struct perf_ring_copier *pc;

	*ret = NULL;
	if (!ncpus || !data_pages || (data_pages & (data_pages - 1)) || page <= 0)
		return RB_ERR_INVAL;
	pc = calloc(1, sizeof(*pc));
	if (!pc)
		return RB_ERR_NOMEM;
	pc->rings = calloc(ncpus, sizeof(*pc->rings));
	if (!pc->rings) {
		free(pc);
		return RB_ERR_NOMEM;
	}
	pc->ncpus = ncpus;
	pc->poll_ms = poll_ms > 0 ? poll_ms : DEFAULT_POLL_MS;
	pc->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (pc->stop_fd < 0)
		goto err_io;
	for (size_t i = 0; i < ncpus; i++) {
		struct ring *r = &pc->rings[i];

		r->cpu = cpus[i];
		r->fd = perf_fds[i];
		r->out_fd = out_fds[i];
		r->size = (uint64_t)data_pages * (uint64_t)page;
		r->map_size = (size_t)r->size + (size_t)page;
		r->base = mmap(NULL, r->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
		if (r->base == MAP_FAILED) {
			r->base = NULL;
			goto err_io;
		}
		r->data = (uint8_t *)r->base + page;
		if (streams && streams[i]) {
			r->stream = streams[i];
			r->scratch = malloc(1 << 16);
			if (!r->scratch) {
				perf_ring_destroy(pc);
				return RB_ERR_NOMEM;
			}
		}
	}
	*ret = pc;
	return RB_OK;

err_io:;
	int saved = errno;

	perf_ring_destroy(pc);
	errno = saved;
	return RB_ERR_IO;
}

int perf_ring_start(struct perf_ring_copier *pc)
{
	sigset_t all, old;
	int err;

	if (pc->running)
		return RB_ERR_INVAL;
	// The thread takes no signals: Ctrl-C and SIGTERM belong to the caller's main thread.
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&pc->thread, NULL, copier_main, pc);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		errno = err;
		return RB_ERR_IO;
	}
	pc->running = true;
	return RB_OK;
}

int perf_ring_stop(struct perf_ring_copier *pc)
{
	uint64_t one = 1;

	if (!pc->running)
		return RB_OK;
	while (write(pc->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	pthread_join(pc->thread, NULL);
	pc->running = false;
	for (size_t i = 0; i < pc->ncpus; i++) {
		struct ring *r = &pc->rings[i];

		if (r->stream && !r->err && cm_stream_finish(r->stream))
			fail(r, "write", errno);
		r->stream = NULL;	// (finished: a second stop writes nothing)
	}
	for (size_t i = 0; i < pc->ncpus; i++)
		if (pc->rings[i].err)
			return RB_ERR_IO;
	return RB_OK;
}

size_t perf_ring_ncpus(const struct perf_ring_copier *pc)
{
	return pc->ncpus;
}

bool perf_ring_running(const struct perf_ring_copier *pc)
{
	return pc->running;
}

void perf_ring_get_stats(const struct perf_ring_copier *pc, size_t i, struct perf_ring_stats *ret)
{
	struct ring *r = &pc->rings[i];

	ret->cpu = r->cpu;
	ret->bytes = __atomic_load_n(&r->bytes, __ATOMIC_RELAXED);
	ret->samples = __atomic_load_n(&r->samples, __ATOMIC_RELAXED);
	ret->lost = __atomic_load_n(&r->lost, __ATOMIC_RELAXED);
	ret->lost_records = __atomic_load_n(&r->lost_records, __ATOMIC_RELAXED);
	ret->err = __atomic_load_n(&r->err, __ATOMIC_ACQUIRE);
	ret->err_op = ret->err ? r->err_op : NULL;
}

void perf_ring_destroy(struct perf_ring_copier *pc)
{
	if (!pc)
		return;
	perf_ring_stop(pc);
	for (size_t i = 0; i < pc->ncpus; i++)
		if (pc->rings[i].base)
			munmap(pc->rings[i].base, pc->rings[i].map_size);
	for (size_t i = 0; i < pc->ncpus; i++)
		free(pc->rings[i].scratch);
	if (pc->stop_fd >= 0)
		close(pc->stop_fd);
	free(pc->rings);
	free(pc);
}
