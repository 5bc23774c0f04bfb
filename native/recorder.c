// SPDX-License-Identifier: GPL-2.0-only
// recorder.c - per-CPU copying of trace_pipe_raw pages to files (see recorder.h).

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "recorder.h"
#include "ringbuf.h"

#define DEFAULT_POLL_MS		250
#define DEFAULT_IDLE_MS		1
#define DEFAULT_PIPE_SIZE	(1U << 20)

struct rec_cpu {
	struct rb_recorder *rec;
	int cpu;
	int in_fd;
	int out_fd;
	int pipe_fds[2];
	size_t pipe_size;
	bool use_read;
	uint8_t *page;			// one sub-buffer for read()
	pthread_t thread;
	bool started;
	// counters, written by the thread, read with atomics from outside
	uint64_t bytes;
	uint64_t splice_bytes;
	uint64_t read_bytes;
	uint64_t pages;
	uint64_t wakeups;
	int err;
	const char *err_op;
};

struct rb_recorder {
	struct rb_recorder_config config;
	int stop_fd;
	bool running;
	size_t ncpus;
	struct rec_cpu *cpus;
};

static void add_stat(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static int fail(struct rec_cpu *c, const char *op, int err)
{
	if (!c->err) {
		c->err_op = op;
		__atomic_store_n(&c->err, err, __ATOMIC_RELEASE);
	}
	return -1;
}

static int write_all(struct rec_cpu *c, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = write(c->out_fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(c, "write", errno);
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

// Write one page read with read(): the kernel may return less than a sub-buffer for the
// page the writer is still on, so pad it with zeros.
static int write_page(struct rec_cpu *c, size_t len)
{
	size_t size = c->rec->config.subbuf_size;

	if (len < size)
		memset(c->page + len, 0, size - len);
	if (write_all(c, c->page, size))
		return -1;
	add_stat(&c->bytes, size);
	add_stat(&c->read_bytes, len);
	add_stat(&c->pages, 1);
	return 0;
}

// The committed size of a page just read (host order: the recorder runs on the traced kernel).
static size_t page_commit(const struct rec_cpu *c)
{
	uint32_t commit;

	memcpy(&commit, c->page + 8 + (HOST_BIG_ENDIAN && sizeof(long) == 8 ? 4 : 0), 4);
	return commit & RB_COMMIT_MASK;
}

// Move the pages available now with read(). Returns bytes read, or -1. Unless draining, stop
// after a page with room left: it was the page the kernel is writing, and reading again at once
// would only cut it into many small pages.
static long long move_read(struct rec_cpu *c, uint64_t limit, bool drain)
{
	size_t size = c->rec->config.subbuf_size;
	size_t partial = size - 8 - sizeof(long) - 256;
	long long total = 0;

	while (!limit || (uint64_t)total < limit) {
		ssize_t n = read(c->in_fd, c->page, size);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			return fail(c, "read", errno);
		}
		if (n == 0)
			break;
		if (write_page(c, (size_t)n))
			return -1;
		total += n;
		if (!drain && page_commit(c) < partial)
			break;
	}
	return total;
}

static int drain_pipe(struct rec_cpu *c, size_t len)
{
	while (len) {
		ssize_t n = splice(c->pipe_fds[0], NULL, c->out_fd, NULL, len, SPLICE_F_MOVE);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail(c, "write", errno);
		}
		if (n == 0)
			return fail(c, "write", EIO);
		len -= (size_t)n;
		add_stat(&c->bytes, (uint64_t)n);
	}
	return 0;
}

// Move every whole page that is available now with splice. Returns bytes moved, or -1.
static long long move_splice(struct rec_cpu *c, uint64_t limit, bool drain)
{
	long long total = 0;

	while (!limit || (uint64_t)total < limit) {
		ssize_t n = splice(c->in_fd, NULL, c->pipe_fds[1], NULL, c->pipe_size,
				   SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			if ((errno == EINVAL || errno == ENOSYS) && !total && !c->splice_bytes) {
				// No splice for this file or kernel: read() from now on.
				c->use_read = true;
				return move_read(c, limit, drain);
			}
			return fail(c, "splice", errno);
		}
		if (n == 0)
			break;
		if (drain_pipe(c, (size_t)n))
			return -1;
		add_stat(&c->splice_bytes, (uint64_t)n);
		add_stat(&c->pages, (uint64_t)n / c->rec->config.subbuf_size);
		total += n;
	}
	return total;
}

static long long move_data(struct rec_cpu *c, uint64_t limit, bool drain)
{
	return c->use_read ? move_read(c, limit, drain) : move_splice(c, limit, drain);
}

static void *cpu_main(void *arg)
{
	struct rec_cpu *c = arg;
	const struct rb_recorder_config *cfg = &c->rec->config;
	struct pollfd pfd[2] = {
		{ .fd = c->in_fd, .events = POLLIN },
		{ .fd = c->rec->stop_fd, .events = POLLIN },
	};

	for (;;) {
		int n = poll(pfd, 2, cfg->poll_ms);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			fail(c, "poll", errno);
			break;
		}
		add_stat(&c->wakeups, 1);
		if (pfd[1].revents)
			break;
		if (pfd[0].revents & (POLLERR | POLLNVAL)) {
			fail(c, "poll", EIO);
			break;
		}
		long long moved = move_data(c, 0, false);

		if (moved < 0)
			break;
		// Readable but not a whole page yet (buffer_percent 0): do not spin on it.
		if (!moved && (pfd[0].revents & POLLIN)) {
			n = poll(&pfd[1], 1, cfg->idle_ms);
			if (n > 0)
				break;
		}
	}

	// Drain: whole pages by the usual path, then the partial page that only read() returns.
	if (!c->err) {
		long long moved = move_data(c, cfg->flush_max_bytes, true);

		uint64_t limit = cfg->flush_max_bytes;

		if (moved >= 0 && !c->use_read && (!limit || (uint64_t)moved < limit))
			move_read(c, limit ? limit - (uint64_t)moved : 0, true);
	}
	return NULL;
}

int rb_recorder_create(struct rb_recorder **ret, const struct rb_recorder_config *config,
		       size_t ncpus, const int *cpus, const int *in_fds, const int *out_fds)
{
	struct rb_recorder *rec;

	*ret = NULL;
	if (!ncpus || config->subbuf_size < 16 || config->subbuf_size > RB_MAX_PAGE_SIZE)
		return RB_ERR_INVAL;
	rec = calloc(1, sizeof(*rec));
	if (!rec)
		return RB_ERR_NOMEM;
	rec->config = *config;
	if (rec->config.poll_ms <= 0)
		rec->config.poll_ms = DEFAULT_POLL_MS;
	if (rec->config.idle_ms <= 0)
		rec->config.idle_ms = DEFAULT_IDLE_MS;
	if (!rec->config.pipe_size)
		rec->config.pipe_size = DEFAULT_PIPE_SIZE;
	rec->stop_fd = -1;
	rec->cpus = calloc(ncpus, sizeof(*rec->cpus));
	if (!rec->cpus) {
		free(rec);
		return RB_ERR_NOMEM;
	}
	rec->ncpus = ncpus;
	for (size_t i = 0; i < ncpus; i++) {
		rec->cpus[i].pipe_fds[0] = -1;
		rec->cpus[i].pipe_fds[1] = -1;
	}

	rec->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rec->stop_fd < 0)
		goto err_io;
	for (size_t i = 0; i < ncpus; i++) {
		struct rec_cpu *c = &rec->cpus[i];

		c->rec = rec;
		c->cpu = cpus[i];
		c->in_fd = in_fds[i];
		c->out_fd = out_fds[i];
		c->use_read = config->use_read;
		c->page = malloc(config->subbuf_size);
		if (!c->page) {
			rb_recorder_destroy(rec);
			return RB_ERR_NOMEM;
		}
		if (c->use_read)
			continue;
		if (pipe2(c->pipe_fds, O_CLOEXEC))
			goto err_io;
		// A bigger pipe moves more pages per splice; the kernel caps it at pipe-max-size.
		int got = fcntl(c->pipe_fds[1], F_SETPIPE_SZ, (int)rec->config.pipe_size);

		if (got < 0)
			got = fcntl(c->pipe_fds[1], F_GETPIPE_SZ);
		if (got < 0)
			goto err_io;
		c->pipe_size = (size_t)got;
		if (c->pipe_size < config->subbuf_size) {
			errno = EINVAL;
			goto err_io;
		}
	}
	*ret = rec;
	return RB_OK;

err_io:;
	int saved = errno;

	rb_recorder_destroy(rec);
	errno = saved;
	return RB_ERR_IO;
}

int rb_recorder_start(struct rb_recorder *rec)
{
	sigset_t all, old;
	int err = 0;

	if (rec->running)
		return RB_ERR_INVAL;
	// The threads take no signals: Ctrl-C and SIGTERM belong to the caller's main thread.
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rec->running = true;
	for (size_t i = 0; i < rec->ncpus; i++) {
		struct rec_cpu *c = &rec->cpus[i];

		err = pthread_create(&c->thread, NULL, cpu_main, c);
		if (err)
			break;
		c->started = true;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		rb_recorder_stop(rec);
		errno = err;
		return RB_ERR_IO;
	}
	return RB_OK;
}

int rb_recorder_stop(struct rb_recorder *rec)
{
	uint64_t one = 1;
	int ret = RB_OK;

	if (!rec->running)
		return RB_OK;
	while (write(rec->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
	for (size_t i = 0; i < rec->ncpus; i++) {
		struct rec_cpu *c = &rec->cpus[i];

		if (c->started) {
			pthread_join(c->thread, NULL);
			c->started = false;
		}
		if (c->err)
			ret = RB_ERR_IO;
	}
	rec->running = false;
	return ret;
}

size_t rb_recorder_ncpus(const struct rb_recorder *rec)
{
	return rec->ncpus;
}

bool rb_recorder_running(const struct rb_recorder *rec)
{
	return rec->running;
}

void rb_recorder_get_stats(const struct rb_recorder *rec, size_t i, struct rb_recorder_stats *ret)
{
	struct rec_cpu *c = &rec->cpus[i];

	ret->cpu = c->cpu;
	ret->bytes = __atomic_load_n(&c->bytes, __ATOMIC_RELAXED);
	ret->splice_bytes = __atomic_load_n(&c->splice_bytes, __ATOMIC_RELAXED);
	ret->read_bytes = __atomic_load_n(&c->read_bytes, __ATOMIC_RELAXED);
	ret->pages = __atomic_load_n(&c->pages, __ATOMIC_RELAXED);
	ret->wakeups = __atomic_load_n(&c->wakeups, __ATOMIC_RELAXED);
	ret->err = __atomic_load_n(&c->err, __ATOMIC_ACQUIRE);
	ret->err_op = ret->err ? c->err_op : NULL;
}

void rb_recorder_destroy(struct rb_recorder *rec)
{
	if (!rec)
		return;
	rb_recorder_stop(rec);
	for (size_t i = 0; i < rec->ncpus; i++) {
		struct rec_cpu *c = &rec->cpus[i];

		free(c->page);
		if (c->pipe_fds[0] >= 0)
			close(c->pipe_fds[0]);
		if (c->pipe_fds[1] >= 0)
			close(c->pipe_fds[1]);
	}
	if (rec->stop_fd >= 0)
		close(rec->stop_fd);
	free(rec->cpus);
	free(rec);
}
