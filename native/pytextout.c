// SPDX-License-Identifier: GPL-2.0-only
// pytextout.c - the CPython glue of text output: event_ids() (which formats a file needs) and
// Reader.format_text (the native formatter over a reader's batches, or over its records straight
// to a file descriptor). See pymodule.c for the rest of probectl._native.

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pyglue.h"

// Map in the pages of a buffer at once (a file mapping is otherwise faulted in a few pages at a
// time as the walk reaches them, a visible part of reading a large file: bench_script.py). Best effort.
static void prefault(const void *p, size_t size)
{
#ifdef MADV_POPULATE_READ
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start, end;

	if (page <= 0 || !size)
		return;
	start = (uintptr_t)p & ~((uintptr_t)page - 1);
	end = (uintptr_t)p + size;
	madvise((void *)start, end - start, MADV_POPULATE_READ);
#else
	(void)p;
	(void)size;
#endif
}

// The ids set in a 65536-bit map, ascending, as a list of ints (NULL with the Python error set).
PyObject *id_list(const uint8_t *seen)
{
	PyObject *list = PyList_New(0);

	for (unsigned int id = 0; list && id < 65536; id++) {
		if (seen[id >> 3] & (1U << (id & 7))) {
			PyObject *v = PyLong_FromLong((long)id);

			if (!v || PyList_Append(list, v))
				Py_CLEAR(list);
			Py_XDECREF(v);
		}
	}
	return list;
}

// event_ids(streams, long_size=8, big_endian=False, page_size=4096) -> sorted list of the ids
// of every record of the streams ((cpu, buffer, offset, size) as Reader takes them), found by
// walking the pages without decoding: which formats a reader will need.
PyObject *event_ids(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "streams", "long_size", "big_endian", "page_size", NULL };
	PyObject *streams, *seq, *list = NULL;
	int long_size = 8, big_endian = 0;
	Py_ssize_t page_size = 4096;
	struct rb_layout layout;
	uint8_t *seen;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$ipn", kwlist, &streams, &long_size,
					 &big_endian, &page_size))
		return NULL;
	if (get_layout(&layout, long_size, big_endian, page_size))
		return NULL;
	seq = PySequence_Fast(streams, "streams must be a sequence of (cpu, buffer, offset, size)");
	if (!seq)
		return NULL;
	seen = PyMem_Calloc(65536 / 8, 1);
	if (!seen) {
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
		Py_buffer view;
		const uint8_t *data;
		size_t size;
		int cpu;

		if (stream_item(PySequence_Fast_GET_ITEM(seq, i), &cpu, &view, &data, &size))
			goto out;
		Py_BEGIN_ALLOW_THREADS
		prefault(data, size);
		rb_stream_ids(&layout, data, size, seen);
		Py_END_ALLOW_THREADS
		PyBuffer_Release(&view);
	}
	list = id_list(seen);
out:
	PyMem_Free(seen);
	Py_DECREF(seq);
	return list;
}

// ---- format_text -------------------------------------------------------------------------------

// Format the n events of the reader's batch into tf->f->out (appended), asking Python for
// what is missing. 0, or -1 with an exception.
static int format_batch(ReaderObject *self, TextFormatterObject *tf)
{
	struct tf_input in;
	struct tf_need need;
	size_t pos = 0;
	int status;

	in.batch = &self->batch;
	in.schema = self->schema;
	in.serial = self->serial;
	in.swap = self->reader.swap;
	for (;;) {
		memset(&need, 0, sizeof(need));
		Py_BEGIN_ALLOW_THREADS
		status = tf_format(tf->f, &in, &pos, &need);
		Py_END_ALLOW_THREADS
		if (status == TF_DONE)
			return 0;
		if (status == TF_ERR_NOMEM) {
			PyErr_NoMemory();
			return -1;
		}
		if (status == TF_ERR_PLAN) {
			PyErr_Format(PyExc_ValueError, "the plan of event id %u does not fit its "
				     "format (field %u)", (unsigned int)need.id, need.field);
			return -1;
		}
		if (formatter_resolve_need(tf, self, status, &need, &pos))
			return -1;
	}
}

#define FORMAT_FLUSH	(1 << 20)	// output written to the fd in chunks of about this size

// Write all of @n bytes to @fd; 0 or an errno value. (EINTR: retried; the caller checks for
// signals between chunks.)
static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int flush_to(int fd, struct tf_buf *out)
{
	int err;

	Py_BEGIN_ALLOW_THREADS
	err = write_all(fd, out->p, out->len);
	Py_END_ALLOW_THREADS
	out->len = 0;
	if (err) {
		errno = err;
		PyErr_SetFromErrno(PyExc_OSError);
		return -1;
	}
	return 0;
}

// line(row) of the formatter's Python side, appended to its output as UTF-8; 0, or -1 with
// the Python error set. (For the events the native plans leave to Python: TF_NEED_CALLER.)
int tf_append_line(TextFormatterObject *tf, PyObject *row)
{
	PyObject *got, *text;
	char *p;
	Py_ssize_t len;
	int err;

	got = PyObject_CallFunctionObjArgs(tf->line_fn, row, NULL);
	if (!got)
		return -1;
	if (PyUnicode_Check(got)) {
		text = PyUnicode_AsUTF8String(got);
		Py_DECREF(got);
		if (!text)
			return -1;
		got = text;
	}
	if (PyBytes_AsStringAndSize(got, &p, &len)) {
		Py_DECREF(got);
		return -1;
	}
	err = tf_buf_append(&tf->f->out, p, (size_t)len);
	Py_DECREF(got);
	if (err) {
		PyErr_NoMemory();
		return -1;
	}
	return 0;
}

// TF_NEED_CALLER in record mode: the held record's text from Python's line(row), appended.
static int caller_line(ReaderObject *self, TextFormatterObject *tf, struct tf_records *r)
{
	PyObject *row;
	int err;

	rb_batch_reset(&self->batch);
	err = rb_batch_add(&self->batch, &r->rec, self->reader.swap);
	if (err) {
		PyErr_NoMemory();
		return -1;
	}
	row = reader_row_tuple(self, 0);
	if (!row)
		return -1;
	err = tf_append_line(tf, row);
	Py_DECREF(row);
	if (err)
		return -1;
	r->pending = false;
	r->events++;
	return 0;
}

// Every remaining record formatted as it is merged (tf_format_records, no columns) and written
// to @fd in chunks; the count, or NULL with an exception (what came before a corrupt page is
// written first).
static PyObject *format_records_to(ReaderObject *self, TextFormatterObject *tf, int fd)
{
	struct tf_records r;
	struct tf_need need;
	PyObject *result = NULL;
	int status;

	if (!self->batch_ready) {
		PyErr_SetString(PyExc_ValueError, "the reader is closed");
		return NULL;
	}
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "the reader is in use by another thread");
		return NULL;
	}
	if (self->finished)
		return PyLong_FromLong(0);
	memset(&r, 0, sizeof(r));
	r.reader = &self->reader;
	r.schema = self->schema;
	r.serial = self->serial;
	self->busy = true;	// (the callbacks must not use the reader)
	for (;;) {
		memset(&need, 0, sizeof(need));
		Py_BEGIN_ALLOW_THREADS
		status = tf_format_records(tf->f, &r, FORMAT_FLUSH, &need);
		Py_END_ALLOW_THREADS
		if (status == TF_DONE) {
			if (!flush_to(fd, &tf->f->out))
				result = PyLong_FromUnsignedLongLong(r.events);
			self->finished = true;
			break;
		}
		if (status == TF_MORE) {
			if (flush_to(fd, &tf->f->out) || PyErr_CheckSignals())
				break;
			continue;
		}
		if (status == TF_ERR_DECODE) {
			self->finished = true;
			if (!flush_to(fd, &tf->f->out))
				raise_decode_error(r.decode_err, self->reader.err_cpu,
						   self->reader.err_offset, self->reader.err_pos);
			break;
		}
		if (status == TF_ERR_NOMEM) {
			PyErr_NoMemory();
			break;
		}
		if (status == TF_ERR_PLAN) {
			PyErr_Format(PyExc_ValueError, "the plan of event id %u does not fit its "
				     "format (field %u)", (unsigned int)need.id, need.field);
			break;
		}
		if (status == TF_NEED_CALLER ? caller_line(self, tf, &r) :
		    formatter_resolve_need(tf, self, status, &need, NULL))
			break;
	}
	self->short_records += r.short_records + self->batch.short_records;
	rb_batch_reset(&self->batch);
	self->busy = false;
	return result;
}

// format_text(formatter, max_events=262144, fd=-1): with no fd, the next batch of up to
// max_events events as (count, text bytes), or None at the end; with an fd, every remaining
// event formatted as it is merged, the text written to the fd in large chunks, and the count
// returned.
PyObject *Reader_format_text(ReaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "formatter", "max_events", "fd", NULL };
	TextFormatterObject *tf;
	Py_ssize_t max = 1 << 18, n;
	int fd = -1;
	PyObject *result = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!|n$i", kwlist, &TextFormatterType, &tf,
					 &max, &fd))
		return NULL;
	if (!tf->f || tf->busy) {
		PyErr_SetString(PyExc_RuntimeError, "the formatter is not set up or in use");
		return NULL;
	}
	if (max <= 0) {
		PyErr_SetString(PyExc_ValueError, "max_events must be positive");
		return NULL;
	}
	Py_INCREF(tf);
	tf->busy = true;
	tf->f->out.len = 0;
	if (fd >= 0) {
		result = format_records_to(self, tf, fd);
		goto out;
	}
	n = reader_fill(self, max);
	if (n < 0)
		goto out;
	if (n == 0) {
		result = Py_NewRef(Py_None);
		goto out;
	}
	self->busy = true;	// (the callbacks must not refill the batch)
	if (!format_batch(self, tf))
		result = Py_BuildValue("ny#", n, (const char *)tf->f->out.p,
				       (Py_ssize_t)tf->f->out.len);
	self->busy = false;
out:
	tf->busy = false;
	Py_DECREF(tf);
	return result;
}
