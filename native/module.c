// SPDX-License-Identifier: GPL-2.0-only
// module.c - the CPython binding probectl._native (with textout.c; pyglue.h is what they share).
//
//   parse_page(data, long_size=8, big_endian=False) -> dict     one page, for tests and tools
//   event_ids(streams, ...) -> [id]                             ids of every record, undecoded
//   Reader(streams, formats, ...)                               merged, batched decoding
//   Recorder(cpus, in_fds, out_fds, subbuf_size, ...)           per-CPU trace_pipe_raw copying
//   TextFormatter(plan, thread, symbol, line)                   plans for Reader.format_text
//   DecodeError(ValueError)                                     a corrupt page
//
// native/textout.c holds event_ids() and Reader.format_text. Decoding runs without the GIL (it
// touches no Python object); Python objects are made per batch from the C columns.
// probectl/ringbuf.py is the documented interface on top of this.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "pyglue.h"
#include "recorder.h"

PyObject *DecodeError;

// ---- helpers ---------------------------------------------------------------------------------

int get_layout(struct rb_layout *layout, int long_size, int big_endian, Py_ssize_t page_size)
{
	if (page_size < 0)
		page_size = 0;
	layout->long_size = (unsigned int)long_size;
	layout->big_endian = big_endian != 0;
	layout->page_size = (size_t)page_size;
	if (rb_layout_check(layout)) {
		PyErr_Format(PyExc_ValueError,
			     "bad page layout: long size %d (want 4 or 8), page size %zd "
			     "(want %d..%u bytes)", long_size, page_size, 8 + long_size + 1,
			     RB_MAX_PAGE_SIZE);
		return -1;
	}
	return 0;
}

PyObject *raise_decode_error(int err, int cpu, size_t page_offset, size_t pos)
{
	PyObject *exc;

	if (err == RB_ERR_NOMEM)
		return PyErr_NoMemory();
	if (cpu >= 0)
		exc = PyObject_CallFunction(DecodeError, "siinn", rb_strerror(err), err, cpu,
					    (Py_ssize_t)page_offset, (Py_ssize_t)pos);
	else
		exc = PyObject_CallFunction(DecodeError, "siOnn", rb_strerror(err), err, Py_None,
					    (Py_ssize_t)page_offset, (Py_ssize_t)pos);
	if (exc) {
		PyErr_SetObject(DecodeError, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

static PyObject *parse_page(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "data", "long_size", "big_endian", "page_size", NULL };
	Py_buffer view;
	int long_size = 8, big_endian = 0;
	Py_ssize_t page_size = -1;
	struct rb_layout layout;
	struct rb_page page;
	struct rb_event ev;
	PyObject *events = NULL, *result = NULL;
	int ret;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|ipn", kwlist, &view, &long_size,
					 &big_endian, &page_size))
		return NULL;
	if (page_size < 0)
		page_size = view.len > 8 + long_size ? view.len : 8 + long_size + 1;
	if (get_layout(&layout, long_size, big_endian, page_size))
		goto out;
	ret = rb_page_load(&page, &layout, view.buf, (size_t)view.len);
	if (ret < 0) {
		raise_decode_error(ret, -1, 0, 0);
		goto out;
	}
	events = PyList_New(0);
	if (!events)
		goto out;
	while ((ret = rb_page_next(&page, &ev)) == 1) {
		PyObject *item = Py_BuildValue("Ky#", (unsigned long long)ev.ts, ev.data,
					       (Py_ssize_t)ev.len);

		if (!item || PyList_Append(events, item)) {
			Py_XDECREF(item);
			goto out;
		}
		Py_DECREF(item);
	}
	if (ret < 0) {
		raise_decode_error(ret, -1, 0, page.pos);
		goto out;
	}
	result = Py_BuildValue("{sKsnsIsLsnsO}", "timestamp", (unsigned long long)page.timestamp,
			       "size", (Py_ssize_t)page.size, "flags", page.flags,
			       "missed", (long long)page.missed, "data_offset",
			       (Py_ssize_t)page.data_off, "events", events);
out:
	Py_XDECREF(events);
	PyBuffer_Release(&view);
	return result;
}

// ---- Reader ----------------------------------------------------------------------------------

static void reader_release(ReaderObject *self)
{
	if (self->batch_ready)
		rb_batch_deinit(&self->batch);
	self->batch_ready = false;
	if (self->reader_ready)
		rb_reader_deinit(&self->reader);
	self->reader_ready = false;
	for (size_t i = 0; i < self->nviews; i++)
		PyBuffer_Release(&self->views[i]);
	PyMem_Free(self->views);
	self->views = NULL;
	self->nviews = 0;
	free(self->schema);
	self->schema = NULL;
	PyMem_Free(self->formats);
	self->formats = NULL;
	PyMem_Free(self->fields);
	self->fields = NULL;
	if (self->scache) {
		for (size_t i = 0; i < SCACHE_SIZE; i++) {
			free(self->scache[i].key);
			Py_XDECREF(self->scache[i].obj);
		}
		PyMem_Free(self->scache);
		self->scache = NULL;
	}
}

static void Reader_dealloc(ReaderObject *self)
{
	reader_release(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int parse_field(PyObject *item, struct rb_field *f)
{
	unsigned int offset, size;
	int loc, kind, elem_size, is_signed;

	if (!PyArg_ParseTuple(item, "IIiiip;a field is (offset, size, loc, kind, elem_size, signed)",
			      &offset, &size, &loc, &kind, &elem_size, &is_signed))
		return -1;
	if (loc < 0 || loc > RB_LOC_TAIL || kind < 0 || kind > RB_KIND_INT_ARRAY ||
	    elem_size < 0 || elem_size > 8) {
		PyErr_Format(PyExc_ValueError, "bad field (loc %d, kind %d, elem_size %d)", loc,
			     kind, elem_size);
		return -1;
	}
	f->offset = offset;
	f->size = size;
	f->loc = (uint8_t)loc;
	f->kind = (uint8_t)kind;
	f->elem_size = (uint8_t)elem_size;
	f->is_signed = (uint8_t)is_signed;
	return 0;
}

static int parse_formats(ReaderObject *self, PyObject *formats)
{
	PyObject *seq = PySequence_Fast(formats, "formats must be a sequence of (id, fields)");
	Py_ssize_t n, total = 0;
	int ret = -1;

	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	// First pass: count the fields.
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
		PyObject *fields;
		Py_ssize_t nf;

		if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2) {
			PyErr_SetString(PyExc_TypeError, "a format is a tuple (id, fields)");
			goto out;
		}
		fields = PyTuple_GET_ITEM(item, 1);
		nf = PySequence_Size(fields);
		if (nf < 0)
			goto out;
		total += nf;
	}
	self->formats = PyMem_Calloc(n ? (size_t)n : 1, sizeof(*self->formats));
	self->fields = PyMem_Calloc(total ? (size_t)total : 1, sizeof(*self->fields));
	self->schema = malloc(sizeof(*self->schema));
	if (!self->formats || !self->fields || !self->schema) {
		PyErr_NoMemory();
		goto out;
	}
	total = 0;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
		long id = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
		PyObject *fseq;

		if (id == -1 && PyErr_Occurred())
			goto out;
		if (id < 0 || id > 65535) {
			PyErr_Format(PyExc_ValueError, "event id %ld out of range", id);
			goto out;
		}
		fseq = PySequence_Fast(PyTuple_GET_ITEM(item, 1), "fields must be a sequence");
		if (!fseq)
			goto out;
		self->formats[i].id = (uint16_t)id;
		self->formats[i].fields = &self->fields[total];
		self->formats[i].nfields = (uint32_t)PySequence_Fast_GET_SIZE(fseq);
		for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(fseq); j++) {
			if (parse_field(PySequence_Fast_GET_ITEM(fseq, j), &self->fields[total++])) {
				Py_DECREF(fseq);
				goto out;
			}
		}
		Py_DECREF(fseq);
	}
	if (rb_schema_init(self->schema, self->formats, (uint32_t)n)) {
		PyErr_SetString(PyExc_ValueError,
				"bad event formats: duplicate id, or a field that cannot be decoded "
				"as given (integers are 1, 2, 4 or 8 bytes at a fixed offset)");
		goto out;
	}
	ret = 0;
out:
	Py_DECREF(seq);
	return ret;
}

static int parse_streams(ReaderObject *self, PyObject *streams, const struct rb_layout *layout,
			 bool strict)
{
	PyObject *seq = PySequence_Fast(streams, "streams must be a sequence of (cpu, buffer, offset, size)");
	Py_ssize_t n;
	int ret = -1;

	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	self->views = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
	if (!self->views) {
		PyErr_NoMemory();
		goto out;
	}
	if (rb_reader_init(&self->reader, layout, (size_t)n, strict)) {
		PyErr_NoMemory();
		goto out;
	}
	self->reader_ready = true;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
		PyObject *buf;
		int cpu;
		Py_ssize_t offset, size;

		if (!PyArg_ParseTuple(item, "iOnn;a stream is (cpu, buffer, offset, size)", &cpu,
				      &buf, &offset, &size))
			goto out;
		if (PyObject_GetBuffer(buf, &self->views[i], PyBUF_SIMPLE))
			goto out;
		self->nviews++;
		if (offset < 0 || size < 0 || offset > self->views[i].len ||
		    size > self->views[i].len - offset) {
			PyErr_Format(PyExc_ValueError,
				     "cpu %d: data at %zd+%zd is outside its buffer of %zd bytes", cpu,
				     offset, size, self->views[i].len);
			goto out;
		}
		rb_reader_set_stream(&self->reader, (size_t)i, cpu,
				     (const uint8_t *)self->views[i].buf + offset, (size_t)size);
	}
	ret = 0;
out:
	Py_DECREF(seq);
	return ret;
}

static int Reader_init(ReaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "streams", "formats", "long_size", "big_endian", "page_size",
				  "strict", "raw", NULL };
	PyObject *streams, *formats;
	int long_size = 8, big_endian = 0, strict = 1, raw = 0;
	Py_ssize_t page_size = 4096;
	struct rb_layout layout;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|$ipnpp", kwlist, &streams, &formats,
					 &long_size, &big_endian, &page_size, &strict, &raw))
		return -1;
	reader_release(self);
	self->finished = false;
	self->short_records = 0;
	if (get_layout(&layout, long_size, big_endian, page_size))
		return -1;
	self->scache = PyMem_Calloc(SCACHE_SIZE, sizeof(*self->scache));
	if (!self->scache) {
		PyErr_NoMemory();
		return -1;
	}
	if (parse_formats(self, formats) || parse_streams(self, streams, &layout, strict))
		return -1;
	static uint64_t schemas;
	self->serial = ++schemas;	// (under the GIL)
	if (rb_batch_init(&self->batch, self->schema, raw)) {
		PyErr_NoMemory();
		return -1;
	}
	self->batch_ready = true;
	return 0;
}

static uint64_t fnv1a(const uint8_t *p, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (uint32_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

// Field strings repeat (comm names, paths): decode each distinct one once.
static PyObject *str_from_span(ReaderObject *self, const uint8_t *p, uint32_t n)
{
	struct scache_entry *e;
	PyObject *obj;
	uint64_t h;

	if (n > SCACHE_MAX_LEN)
		return PyUnicode_DecodeUTF8((const char *)p, n, "backslashreplace");
	h = fnv1a(p, n);
	e = &self->scache[h & (SCACHE_SIZE - 1)];
	if (e->obj && e->hash == h && e->len == n && !memcmp(e->key, p, n)) {
		Py_INCREF(e->obj);
		return e->obj;
	}
	obj = PyUnicode_DecodeUTF8((const char *)p, n, "backslashreplace");
	if (!obj)
		return NULL;
	uint8_t *key = malloc(n ? n : 1);

	if (key) {
		memcpy(key, p, n);
		free(e->key);
		Py_XDECREF(e->obj);
		e->key = key;
		e->hash = h;
		e->len = n;
		Py_INCREF(obj);
		e->obj = obj;
	}
	return obj;
}

static PyObject *field_value(ReaderObject *self, const struct rb_field *f,
			     const struct rb_column *col, size_t row)
{
	const struct rb_span *sp;

	if (f->kind == RB_KIND_INT) {
		int64_t v = col->ints[row];

		return f->is_signed ? PyLong_FromLongLong(v) : PyLong_FromUnsignedLongLong((uint64_t)v);
	}
	sp = &col->spans[row];
	if (!sp->ptr)
		Py_RETURN_NONE;
	switch (f->kind) {
	case RB_KIND_STR:
		return str_from_span(self, sp->ptr, sp->len);
	case RB_KIND_INT_ARRAY: {
		size_t n = sp->len / f->elem_size;
		PyObject *t = PyTuple_New((Py_ssize_t)n);

		if (!t)
			return NULL;
		for (size_t i = 0; i < n; i++) {
			int64_t v = rb_read_int(sp->ptr + i * f->elem_size, f->elem_size,
						f->is_signed, self->reader.swap);
			PyObject *o = f->is_signed ? PyLong_FromLongLong(v)
						   : PyLong_FromUnsignedLongLong((uint64_t)v);

			if (!o) {
				Py_DECREF(t);
				return NULL;
			}
			PyTuple_SET_ITEM(t, (Py_ssize_t)i, o);
		}
		PyObject_GC_UnTrack(t);  // numbers only: no cycles
		return t;
	}
	default:
		return PyBytes_FromStringAndSize((const char *)sp->ptr, sp->len);
	}
}

// Decode the next batch into self->batch; returns events decoded, 0 at the end, -1 with an error.
Py_ssize_t reader_fill(ReaderObject *self, Py_ssize_t max)
{
	long n;

	if (!self->batch_ready) {
		PyErr_SetString(PyExc_ValueError, "the reader is closed");
		return -1;
	}
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "the reader is in use by another thread");
		return -1;
	}
	if (max <= 0) {
		PyErr_SetString(PyExc_ValueError, "max_events must be positive");
		return -1;
	}
	rb_batch_reset(&self->batch);
	if (self->finished)
		return 0;
	self->busy = true;
	Py_BEGIN_ALLOW_THREADS
	n = rb_batch_fill(&self->batch, &self->reader, (size_t)max);
	Py_END_ALLOW_THREADS
	self->busy = false;
	if (n < 0) {
		self->finished = true;
		raise_decode_error((int)n, self->reader.err_cpu, self->reader.err_offset,
				   self->reader.err_pos);
		return -1;
	}
	self->short_records += self->batch.short_records;
	if (n == 0)
		self->finished = true;
	return n;
}

static PyObject *lost_list(const struct rb_batch *b)
{
	PyObject *list = PyList_New((Py_ssize_t)b->nlost);

	if (!list)
		return NULL;
	for (size_t i = 0; i < b->nlost; i++) {
		PyObject *t = Py_BuildValue("niL", (Py_ssize_t)b->lost[i].index, b->lost[i].cpu,
					    (long long)b->lost[i].count);

		if (!t) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, t);
	}
	return list;
}

static PyObject *bytes_of(const void *p, size_t n)
{
	return PyBytes_FromStringAndSize(p ? (const char *)p : "", (Py_ssize_t)(p ? n : 0));
}

static PyObject *Reader_read_columns(ReaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "max_events", NULL };
	Py_ssize_t max = 1 << 20, n;
	struct rb_batch *b = &self->batch;
	PyObject *result = NULL, *formats = NULL, *raw = NULL, *lost = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n", kwlist, &max))
		return NULL;
	n = reader_fill(self, max);
	if (n < 0)
		return NULL;
	if (n == 0)
		Py_RETURN_NONE;

	formats = PyList_New(self->schema->nformats);
	if (!formats)
		goto out;
	for (uint32_t i = 0; i < self->schema->nformats; i++) {
		const struct rb_event_format *fmt = &self->schema->formats[i];
		const struct rb_format_rows *fr = &b->rows[i];
		PyObject *cols = PyList_New(fmt->nfields);

		if (!cols)
			goto out;
		PyList_SET_ITEM(formats, i, cols);
		for (uint32_t j = 0; j < fmt->nfields; j++) {
			const struct rb_field *f = &fmt->fields[j];
			PyObject *col;

			if (f->kind == RB_KIND_INT) {
				col = bytes_of(fr->cols[j].ints, fr->nrows * sizeof(int64_t));
			} else {
				col = PyList_New((Py_ssize_t)fr->nrows);
				for (size_t r = 0; col && r < fr->nrows; r++) {
					PyObject *v = field_value(self, f, &fr->cols[j], r);

					if (!v) {
						Py_CLEAR(col);
						break;
					}
					PyList_SET_ITEM(col, (Py_ssize_t)r, v);
				}
			}
			if (!col)
				goto out;
			PyList_SET_ITEM(cols, j, col);
		}
	}
	if (b->want_raw) {
		raw = PyList_New(n);
		if (!raw)
			goto out;
		for (Py_ssize_t i = 0; i < n; i++) {
			PyObject *v = bytes_of(b->raw[i].ptr, b->raw[i].len);

			if (!v)
				goto out;
			PyList_SET_ITEM(raw, i, v);
		}
	} else {
		raw = Py_None;
		Py_INCREF(raw);
	}
	lost = lost_list(b);
	if (!lost)
		goto out;
	result = Py_BuildValue("{snsNsNsNsNsNsNsNsOsOsO}",
			       "n", n,
			       "ts", bytes_of(b->ts, (size_t)n * sizeof(*b->ts)),
			       "cpu", bytes_of(b->cpu, (size_t)n * sizeof(*b->cpu)),
			       "id", bytes_of(b->id, (size_t)n * sizeof(*b->id)),
			       "pid", bytes_of(b->pid, (size_t)n * sizeof(*b->pid)),
			       "flags", bytes_of(b->flags, (size_t)n),
			       "preempt", bytes_of(b->preempt, (size_t)n),
			       "row", bytes_of(b->row, (size_t)n * sizeof(*b->row)),
			       "formats", formats, "raw", raw, "lost", lost);
out:
	Py_XDECREF(formats);
	Py_XDECREF(raw);
	Py_XDECREF(lost);
	return result;
}

static bool set_item(PyObject *tuple, Py_ssize_t i, PyObject *item)
{
	if (!item)
		return false;
	PyTuple_SET_ITEM(tuple, i, item);
	return true;
}

// The row tuple (ts, cpu, id, pid, flags, preempt, values[, raw]) of event @i of the batch.
PyObject *reader_row_tuple(ReaderObject *self, Py_ssize_t i)
{
	struct rb_batch *b = &self->batch;
	uint32_t row = b->row[i];
	int32_t fi = self->schema->index[b->id[i]];
	PyObject *values, *t;

	if (row == UINT32_MAX || fi < 0) {
		values = Py_None;
		Py_INCREF(values);
	} else {
		const struct rb_event_format *fmt = &self->schema->formats[fi];

		values = PyTuple_New(fmt->nfields);
		for (uint32_t j = 0; values && j < fmt->nfields; j++) {
			PyObject *v = field_value(self, &fmt->fields[j], &b->rows[fi].cols[j], row);

			if (!v) {
				Py_CLEAR(values);
				break;
			}
			PyTuple_SET_ITEM(values, j, v);
		}
	}
	if (!values)
		return NULL;
	t = PyTuple_New(b->want_raw ? 8 : 7);
	if (!t) {
		Py_DECREF(values);
		return NULL;
	}
	PyTuple_SET_ITEM(t, 6, values);
	if (!set_item(t, 0, PyLong_FromUnsignedLongLong(b->ts[i])) ||
	    !set_item(t, 1, PyLong_FromLong(b->cpu[i])) ||
	    !set_item(t, 2, PyLong_FromLong(b->id[i])) ||
	    !set_item(t, 3, PyLong_FromLong(b->pid[i])) ||
	    !set_item(t, 4, PyLong_FromLong(b->flags[i])) ||
	    !set_item(t, 5, PyLong_FromLong(b->preempt[i])) ||
	    (b->want_raw && !set_item(t, 7, bytes_of(b->raw[i].ptr, b->raw[i].len)))) {
		Py_DECREF(t);
		return NULL;
	}
	// Rows hold only numbers, strings and such tuples: they cannot be part of a cycle,
	// and keeping millions of them away from the cycle collector triples the speed.
	if (values != Py_None)
		PyObject_GC_UnTrack(values);
	PyObject_GC_UnTrack(t);
	return t;
}

// ---- TextFormatter ---------------------------------------------------------------------------

static int TextFormatter_traverse(TextFormatterObject *self, visitproc visit, void *arg)
{
	Py_VISIT(self->plan_fn);
	Py_VISIT(self->thread_fn);
	Py_VISIT(self->symbol_fn);
	Py_VISIT(self->line_fn);
	return 0;
}

static int TextFormatter_clear(TextFormatterObject *self)
{
	Py_CLEAR(self->plan_fn);
	Py_CLEAR(self->thread_fn);
	Py_CLEAR(self->symbol_fn);
	Py_CLEAR(self->line_fn);
	return 0;
}

static void TextFormatter_dealloc(TextFormatterObject *self)
{
	PyObject_GC_UnTrack(self);
	TextFormatter_clear(self);
	tf_formatter_free(self->f);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int TextFormatter_init(TextFormatterObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "plan", "thread", "symbol", "line", NULL };
	PyObject *plan, *thread, *symbol, *line;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO", kwlist, &plan, &thread, &symbol,
					 &line))
		return -1;
	if (self->f) {
		PyErr_SetString(PyExc_RuntimeError, "the formatter is already set up");
		return -1;
	}
	self->f = tf_formatter_new();
	if (!self->f) {
		PyErr_NoMemory();
		return -1;
	}
	Py_INCREF(plan);
	Py_INCREF(thread);
	Py_INCREF(symbol);
	Py_INCREF(line);
	self->plan_fn = plan;
	self->thread_fn = thread;
	self->symbol_fn = symbol;
	self->line_fn = line;
	return 0;
}

static int byte_arg(int v, const char *what, uint8_t *dst)
{
	if (v < 0 || v > 255) {
		PyErr_Format(PyExc_ValueError, "op %s %d out of range", what, v);
		return -1;
	}
	*dst = (uint8_t)v;
	return 0;
}

// Install the plan object @plan (see above) for event id @id.
static int install_plan(TextFormatterObject *self, unsigned int id, PyObject *plan)
{
	PyObject *seq;
	Py_ssize_t n, lits_len = 0;
	struct tf_op *ops = NULL;
	uint8_t *lits = NULL;
	int ret = -1, err;

	if (plan == Py_None || plan == Py_True) {
		err = tf_set_plan(self->f, (uint16_t)id, plan == Py_None ? TF_PLAN_SKIP : TF_PLAN_CALLER,
				  NULL, 0, NULL, 0);
		if (err)
			PyErr_NoMemory();
		return err ? -1 : 0;
	}
	seq = PySequence_Fast(plan, "a plan is None, True or a sequence of ops");
	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	for (Py_ssize_t k = 0; k < n; k++) {
		PyObject *item = PySequence_Fast_GET_ITEM(seq, k);

		if (PyBytes_Check(item))
			lits_len += PyBytes_GET_SIZE(item);
	}
	if (n > UINT32_MAX / 2 || lits_len > UINT32_MAX / 2) {
		PyErr_SetString(PyExc_ValueError, "plan too large");
		goto out;
	}
	ops = PyMem_Calloc(n ? (size_t)n : 1, sizeof(*ops));
	lits = PyMem_Malloc(lits_len ? (size_t)lits_len : 1);
	if (!ops || !lits) {
		PyErr_NoMemory();
		goto out;
	}
	lits_len = 0;
	for (Py_ssize_t k = 0; k < n; k++) {
		PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
		struct tf_op *op = &ops[k];
		int src, conv, flags, letter, cast_size, cast_signed, width, prec;
		unsigned int field, index;

		if (PyBytes_Check(item)) {
			op->src = TF_SRC_LIT;
			op->letter = 's';
			op->prec = -1;
			op->index = (uint32_t)lits_len;
			op->len = (uint32_t)PyBytes_GET_SIZE(item);
			memcpy(lits + lits_len, PyBytes_AS_STRING(item), op->len);
			lits_len += op->len;
			continue;
		}
		if (!PyTuple_Check(item) ||
		    !PyArg_ParseTuple(item, "iiiiiiiiII;an op is bytes or (src, conv, flags, letter, "
				      "cast_size, cast_signed, width, prec, field, index)", &src, &conv,
				      &flags, &letter, &cast_size, &cast_signed, &width, &prec, &field,
				      &index)) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "an op is bytes or a tuple");
			goto out;
		}
		uint8_t letter8;

		if (byte_arg(src, "source", &op->src) || byte_arg(conv, "conversion", &op->conv) ||
		    byte_arg(flags, "flags", &op->flags) || byte_arg(letter, "letter", &letter8) ||
		    byte_arg(cast_size, "cast size", &op->cast_size) ||
		    byte_arg(cast_signed, "cast signedness", &op->cast_signed))
			goto out;
		op->letter = (char)letter8;
		op->width = width;
		op->prec = prec;
		op->field = field;
		op->index = index;
		if (tf_check_op(op)) {
			PyErr_Format(PyExc_ValueError, "event id %u: op %zd is not valid", id, k);
			goto out;
		}
	}
	err = tf_set_plan(self->f, (uint16_t)id, TF_PLAN_OPS, ops, (uint32_t)n, lits, (size_t)lits_len);
	if (err == TF_ERR_NOMEM)
		PyErr_NoMemory();
	else if (err)
		PyErr_Format(PyExc_ValueError, "event id %u: the plan is not valid", id);
	else
		ret = 0;
out:
	PyMem_Free(ops);
	PyMem_Free(lits);
	Py_DECREF(seq);
	return ret;
}

static PyObject *TextFormatter_set_plan(TextFormatterObject *self, PyObject *args)
{
	unsigned int id;
	PyObject *plan;

	if (!PyArg_ParseTuple(args, "IO", &id, &plan))
		return NULL;
	if (id > 65535) {
		PyErr_Format(PyExc_ValueError, "event id %u out of range", id);
		return NULL;
	}
	if (!self->f || self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "the formatter is not set up or in use");
		return NULL;
	}
	if (install_plan(self, id, plan))
		return NULL;
	Py_RETURN_NONE;
}

static PyMethodDef TextFormatter_methods[] = {
	{ "set_plan", (PyCFunction)TextFormatter_set_plan, METH_VARARGS,
	  "set_plan(id, plan): set the plan of an event id ahead of time" },
	{ NULL, NULL, 0, NULL },
};

PyTypeObject TextFormatterType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "probectl._native.TextFormatter",
	.tp_basicsize = sizeof(TextFormatterObject),
	.tp_dealloc = (destructor)TextFormatter_dealloc,
	.tp_traverse = (traverseproc)TextFormatter_traverse,
	.tp_clear = (inquiry)TextFormatter_clear,
	.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
	.tp_doc = "TextFormatter(plan, thread, symbol, line)\n\nPlans and name tables for "
		  "Reader.format_text; the callables fill them when an event needs what is missing.",
	.tp_methods = TextFormatter_methods,
	.tp_init = (initproc)TextFormatter_init,
	.tp_new = PyType_GenericNew,
};

// Resolve what tf_format() stopped for by asking Python; 0, or -1 with an exception.
int formatter_resolve_need(TextFormatterObject *tf, ReaderObject *reader, int status,
			   const struct tf_need *need, size_t *pos)
{
	PyObject *got;
	int err = 0;

	switch (status) {
	case TF_NEED_PLAN:
		got = PyObject_CallFunction(tf->plan_fn, "I", (unsigned int)need->id);
		if (!got)
			return -1;
		err = install_plan(tf, need->id, got);
		Py_DECREF(got);
		return err;
	case TF_NEED_THREAD: {
		const char *comm;
		Py_ssize_t len;
		long long tgid;

		got = PyObject_CallFunction(tf->thread_fn, "i", (int)need->tid);
		if (!got)
			return -1;
		if (!PyTuple_Check(got) ||
		    !PyArg_ParseTuple(got, "y#L;thread() returns (comm bytes, tgid)", &comm, &len, &tgid)) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "thread() returns (comm bytes, tgid)");
			Py_DECREF(got);
			return -1;
		}
		err = tf_add_thread(tf->f, need->tid, (const uint8_t *)comm, (size_t)len, tgid);
		Py_DECREF(got);
		break;
	}
	case TF_NEED_SYMBOL: {
		PyObject *addr;
		char *name;
		Py_ssize_t len;

		if (need->neg)
			addr = PyLong_FromLongLong((long long)need->addr);
		else
			addr = PyLong_FromUnsignedLongLong(need->addr);
		if (!addr)
			return -1;
		got = PyObject_CallFunction(tf->symbol_fn, "LN", (long long)need->tgid, addr);
		if (!got)
			return -1;
		if (PyBytes_AsStringAndSize(got, &name, &len)) {
			Py_DECREF(got);
			return -1;
		}
		err = tf_add_symbol(tf->f, need->tgid, need->addr, need->neg, (const uint8_t *)name,
				    (size_t)len);
		Py_DECREF(got);
		break;
	}
	case TF_NEED_CALLER: {
		PyObject *row = reader_row_tuple(reader, (Py_ssize_t)need->index);

		if (!row)
			return -1;
		err = tf_append_line(tf, row);
		Py_DECREF(row);
		if (err)
			return -1;
		*pos = need->index + 1;
		break;
	}
	default:
		PyErr_Format(PyExc_SystemError, "unexpected formatter status %d", status);
		return -1;
	}
	if (err) {
		PyErr_NoMemory();
		return -1;
	}
	return 0;
}

static PyObject *Reader_scan_ids(ReaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "max_events", NULL };
	Py_ssize_t max = 1 << 20, n;
	uint8_t seen[65536 / 8];

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n", kwlist, &max))
		return NULL;
	n = reader_fill(self, max);
	if (n < 0)
		return NULL;
	if (n == 0)
		Py_RETURN_NONE;
	memset(seen, 0, sizeof(seen));
	for (Py_ssize_t i = 0; i < n; i++)
		seen[self->batch.id[i] >> 3] |= (uint8_t)(1u << (self->batch.id[i] & 7));
	return id_list(seen);
}

static PyObject *Reader_read_rows(ReaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "max_events", NULL };
	Py_ssize_t max = 1 << 16, n;
	struct rb_batch *b = &self->batch;
	PyObject *rows = NULL, *lost = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n", kwlist, &max))
		return NULL;
	n = reader_fill(self, max);
	if (n < 0)
		return NULL;
	if (n == 0)
		Py_RETURN_NONE;
	rows = PyList_New(n);
	if (!rows)
		return NULL;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *t = reader_row_tuple(self, i);

		if (!t)
			goto fail;
		PyList_SET_ITEM(rows, i, t);
	}
	lost = lost_list(b);
	if (!lost)
		goto fail;
	return Py_BuildValue("NN", rows, lost);
fail:
	Py_DECREF(rows);
	return NULL;
}

static PyObject *Reader_stats(ReaderObject *self, PyObject *unused)
{
	PyObject *list;

	(void)unused;
	if (!self->reader_ready)
		return PyList_New(0);
	list = PyList_New((Py_ssize_t)self->reader.nstreams);
	if (!list)
		return NULL;
	for (size_t i = 0; i < self->reader.nstreams; i++) {
		const struct rb_stream *s = &self->reader.streams[i];
		PyObject *d = Py_BuildValue("{sisKsKsKsKsK}", "cpu", s->cpu, "pages",
					    (unsigned long long)s->pages, "events",
					    (unsigned long long)s->events, "missed_events",
					    (unsigned long long)s->missed_events, "missed_unknown",
					    (unsigned long long)s->missed_unknown, "bad_pages",
					    (unsigned long long)s->bad_pages);

		if (!d) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, d);
	}
	return list;
}

static PyObject *Reader_close(ReaderObject *self, PyObject *unused)
{
	(void)unused;
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "the reader is in use by another thread");
		return NULL;
	}
	reader_release(self);
	self->finished = true;
	Py_RETURN_NONE;
}

static PyObject *Reader_get_short_records(ReaderObject *self, void *closure)
{
	(void)closure;
	return PyLong_FromUnsignedLongLong(self->short_records);
}

static PyMethodDef Reader_methods[] = {
	{ "read_columns", (PyCFunction)(void (*)(void))Reader_read_columns,
	  METH_VARARGS | METH_KEYWORDS,
	  "read_columns(max_events=1048576) -> dict, or None at the end" },
	{ "read_rows", (PyCFunction)(void (*)(void))Reader_read_rows, METH_VARARGS | METH_KEYWORDS,
	  "read_rows(max_events=65536) -> (rows, lost), or None at the end" },
	{ "format_text", (PyCFunction)(void (*)(void))Reader_format_text, METH_VARARGS | METH_KEYWORDS,
	  "format_text(formatter, max_events=262144, *, fd=-1) -> (events, bytes), or None at the "
	  "end; with an fd: every remaining event written to it, their count returned" },
	{ "scan_ids", (PyCFunction)(void (*)(void))Reader_scan_ids, METH_VARARGS | METH_KEYWORDS,
	  "scan_ids(max_events=1048576) -> sorted event ids of the next batch, or None at the end" },
	{ "stats", (PyCFunction)Reader_stats, METH_NOARGS, "per-stream page and event counts" },
	{ "close", (PyCFunction)Reader_close, METH_NOARGS, "release the buffers" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Reader_getset[] = {
	{ "short_records", (getter)Reader_get_short_records, NULL,
	  "records so far too short for one of their fields", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject ReaderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "probectl._native.Reader",
	.tp_basicsize = sizeof(ReaderObject),
	.tp_dealloc = (destructor)Reader_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Reader(streams, formats, *, long_size=8, big_endian=False, page_size=4096, "
		  "strict=True, raw=False)\n\nstreams: (cpu, buffer, offset, size) per CPU; "
		  "formats: (id, ((offset, size, loc, kind, elem_size, signed), ...)) per event.",
	.tp_methods = Reader_methods,
	.tp_getset = Reader_getset,
	.tp_init = (initproc)Reader_init,
	.tp_new = PyType_GenericNew,
};

// ---- Recorder --------------------------------------------------------------------------------

typedef struct {
	PyObject_HEAD
	struct rb_recorder *rec;
} RecorderObject;

static void Recorder_dealloc(RecorderObject *self)
{
	if (self->rec) {
		Py_BEGIN_ALLOW_THREADS
		rb_recorder_destroy(self->rec);
		Py_END_ALLOW_THREADS
	}
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int int_list(PyObject *obj, const char *what, Py_ssize_t *n, int **ret)
{
	PyObject *seq = PySequence_Fast(obj, what);

	if (!seq)
		return -1;
	*n = PySequence_Fast_GET_SIZE(seq);
	*ret = PyMem_Calloc(*n ? (size_t)*n : 1, sizeof(int));
	if (!*ret) {
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < *n; i++) {
		long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));

		if (v == -1 && PyErr_Occurred()) {
			Py_DECREF(seq);
			return -1;
		}
		(*ret)[i] = (int)v;
	}
	Py_DECREF(seq);
	return 0;
}

static int Recorder_init(RecorderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "cpus", "in_fds", "out_fds", "subbuf_size", "poll_ms", "idle_ms",
				  "pipe_size", "use_read", "flush_max_bytes", NULL };
	PyObject *cpus_o, *in_o, *out_o;
	struct rb_recorder_config cfg = { 0 };
	Py_ssize_t subbuf, pipe_size = 0, ncpu = 0, nin = 0, nout = 0;
	int poll_ms = 0, idle_ms = 0, use_read = 0;
	unsigned long long flush_max = 0;
	int *cpus = NULL, *ins = NULL, *outs = NULL;
	int ret = -1, err;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOn|$iinpK", kwlist, &cpus_o, &in_o, &out_o,
					 &subbuf, &poll_ms, &idle_ms, &pipe_size, &use_read,
					 &flush_max))
		return -1;
	if (self->rec) {
		PyErr_SetString(PyExc_RuntimeError, "the recorder is already set up");
		return -1;
	}
	if (int_list(cpus_o, "cpus must be a sequence", &ncpu, &cpus) ||
	    int_list(in_o, "in_fds must be a sequence", &nin, &ins) ||
	    int_list(out_o, "out_fds must be a sequence", &nout, &outs))
		goto out;
	if (ncpu == 0 || ncpu != nin || ncpu != nout) {
		PyErr_SetString(PyExc_ValueError, "cpus, in_fds and out_fds must have the same, non-zero length");
		goto out;
	}
	cfg.subbuf_size = subbuf > 0 ? (size_t)subbuf : 0;
	cfg.poll_ms = poll_ms;
	cfg.idle_ms = idle_ms;
	cfg.pipe_size = pipe_size > 0 ? (size_t)pipe_size : 0;
	cfg.use_read = use_read;
	cfg.flush_max_bytes = flush_max;
	err = rb_recorder_create(&self->rec, &cfg, (size_t)ncpu, cpus, ins, outs);
	if (err == RB_ERR_IO)
		PyErr_SetFromErrno(PyExc_OSError);
	else if (err == RB_ERR_NOMEM)
		PyErr_NoMemory();
	else if (err)
		PyErr_Format(PyExc_ValueError, "bad sub-buffer size %zd", subbuf);
	else
		ret = 0;
out:
	PyMem_Free(cpus);
	PyMem_Free(ins);
	PyMem_Free(outs);
	return ret;
}

static struct rb_recorder *get_rec(RecorderObject *self)
{
	if (!self->rec)
		PyErr_SetString(PyExc_ValueError, "the recorder is not set up");
	return self->rec;
}

static PyObject *Recorder_start(RecorderObject *self, PyObject *unused)
{
	struct rb_recorder *rec = get_rec(self);
	int err;

	(void)unused;
	if (!rec)
		return NULL;
	if (rb_recorder_running(rec)) {
		PyErr_SetString(PyExc_RuntimeError, "the recorder is already running");
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS
	err = rb_recorder_start(rec);
	Py_END_ALLOW_THREADS
	if (err)
		return PyErr_SetFromErrno(PyExc_OSError);
	Py_RETURN_NONE;
}

static PyObject *Recorder_stop(RecorderObject *self, PyObject *unused)
{
	struct rb_recorder *rec = get_rec(self);
	int err;

	(void)unused;
	if (!rec)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	err = rb_recorder_stop(rec);
	Py_END_ALLOW_THREADS
	return PyBool_FromLong(err == 0);
}

static PyObject *Recorder_stats(RecorderObject *self, PyObject *unused)
{
	struct rb_recorder *rec = get_rec(self);
	PyObject *list;

	(void)unused;
	if (!rec)
		return NULL;
	list = PyList_New((Py_ssize_t)rb_recorder_ncpus(rec));
	if (!list)
		return NULL;
	for (size_t i = 0; i < rb_recorder_ncpus(rec); i++) {
		struct rb_recorder_stats st;
		PyObject *d;

		rb_recorder_get_stats(rec, i, &st);
		d = Py_BuildValue("{sisKsKsKsKsKsiss}", "cpu", st.cpu, "bytes",
				  (unsigned long long)st.bytes, "splice_bytes",
				  (unsigned long long)st.splice_bytes, "read_bytes",
				  (unsigned long long)st.read_bytes, "pages",
				  (unsigned long long)st.pages, "wakeups",
				  (unsigned long long)st.wakeups, "errno", st.err, "error_op",
				  st.err_op);
		if (!d) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, d);
	}
	return list;
}

static PyObject *Recorder_get_running(RecorderObject *self, void *closure)
{
	(void)closure;
	return PyBool_FromLong(self->rec && rb_recorder_running(self->rec));
}

static PyMethodDef Recorder_methods[] = {
	{ "start", (PyCFunction)Recorder_start, METH_NOARGS, "start the per-CPU threads" },
	{ "stop", (PyCFunction)Recorder_stop, METH_NOARGS,
	  "drain, join the threads; True unless a CPU failed (see stats())" },
	{ "stats", (PyCFunction)Recorder_stats, METH_NOARGS, "per-CPU counters" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Recorder_getset[] = {
	{ "running", (getter)Recorder_get_running, NULL, "threads are running", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

static PyTypeObject RecorderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "probectl._native.Recorder",
	.tp_basicsize = sizeof(RecorderObject),
	.tp_dealloc = (destructor)Recorder_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Recorder(cpus, in_fds, out_fds, subbuf_size, *, poll_ms=250, idle_ms=1, "
		  "pipe_size=0, use_read=False, flush_max_bytes=0)",
	.tp_methods = Recorder_methods,
	.tp_getset = Recorder_getset,
	.tp_init = (initproc)Recorder_init,
	.tp_new = PyType_GenericNew,
};

// ---- module ----------------------------------------------------------------------------------

static PyMethodDef module_methods[] = {
	{ "parse_page", (PyCFunction)(void (*)(void))parse_page, METH_VARARGS | METH_KEYWORDS,
	  "parse_page(data, long_size=8, big_endian=False, page_size=len(data)) -> dict" },
	{ "event_ids", (PyCFunction)(void (*)(void))event_ids, METH_VARARGS | METH_KEYWORDS,
	  "event_ids(streams, *, long_size=8, big_endian=False, page_size=4096) -> sorted ids "
	  "of every record" },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef native_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "probectl._native",
	.m_doc = "Ring-buffer page decoding and per-CPU recording (C core of probectl).",
	.m_size = -1,
	.m_methods = module_methods,
};

static int add_textfmt_constants(PyObject *m)
{
	static const struct { const char *name; long value; } names[] = {
		{ "TF_SRC_LIT", TF_SRC_LIT }, { "TF_SRC_FIELD", TF_SRC_FIELD },
		{ "TF_SRC_COMM", TF_SRC_COMM }, { "TF_SRC_TGID", TF_SRC_TGID },
		{ "TF_SRC_TID", TF_SRC_TID }, { "TF_SRC_CPU", TF_SRC_CPU },
		{ "TF_SRC_SECS", TF_SRC_SECS }, { "TF_SRC_USECS", TF_SRC_USECS },
		{ "TF_SRC_NSECS", TF_SRC_NSECS }, { "TF_SRC_CELL_BEGIN", TF_SRC_CELL_BEGIN },
		{ "TF_SRC_CELL_END", TF_SRC_CELL_END }, { "TF_SRC_EMPTY_QUOTE", TF_SRC_EMPTY_QUOTE },
		{ "TF_SRC_ELEM", TF_SRC_ELEM }, { "TF_CONV_INT", TF_CONV_INT },
		{ "TF_CONV_CHAR", TF_CONV_CHAR }, { "TF_CONV_STR", TF_CONV_STR },
		{ "TF_CONV_RAW", TF_CONV_RAW }, { "TF_CONV_HEX_LIST", TF_CONV_HEX_LIST },
		{ "TF_CONV_DEC_LIST", TF_CONV_DEC_LIST }, { "TF_CONV_HEX_BYTES", TF_CONV_HEX_BYTES },
		{ "TF_CONV_SYM", TF_CONV_SYM }, { "TF_CONV_JSON_STR", TF_CONV_JSON_STR },
		{ "TF_CONV_JSON_LIST", TF_CONV_JSON_LIST }, { "TF_CONV_JSON_BYTES", TF_CONV_JSON_BYTES },
		{ "TF_F_LEFT", TF_F_LEFT }, { "TF_F_PLUS", TF_F_PLUS }, { "TF_F_SPACE", TF_F_SPACE },
		{ "TF_F_ALT", TF_F_ALT }, { "TF_F_ZERO", TF_F_ZERO },
		{ "TF_F_EMPTY_CELL", TF_F_EMPTY_CELL },
		{ "TF_MAX_WIDTH", TF_MAX_WIDTH },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (PyModule_AddIntConstant(m, names[i].name, names[i].value))
			return -1;
	return 0;
}

PyMODINIT_FUNC PyInit__native(void)
{
	PyObject *m;

	if (PyType_Ready(&ReaderType) < 0 || PyType_Ready(&RecorderType) < 0 ||
	    PyType_Ready(&TextFormatterType) < 0)
		return NULL;
	m = PyModule_Create(&native_module);
	if (!m)
		return NULL;
	DecodeError = PyErr_NewExceptionWithDoc(
		"probectl._native.DecodeError",
		"A corrupt ring-buffer page: args are (message, code, cpu, page_offset, position).",
		PyExc_ValueError, NULL);
	if (!DecodeError)
		goto fail;
	Py_INCREF(DecodeError);
	if (PyModule_AddObject(m, "DecodeError", DecodeError) < 0)
		goto fail;
	Py_INCREF(&ReaderType);
	if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0)
		goto fail;
	Py_INCREF(&RecorderType);
	if (PyModule_AddObject(m, "Recorder", (PyObject *)&RecorderType) < 0)
		goto fail;
	Py_INCREF(&TextFormatterType);
	if (PyModule_AddObject(m, "TextFormatter", (PyObject *)&TextFormatterType) < 0)
		goto fail;
	if (PyModule_AddIntConstant(m, "LOC_FIXED", RB_LOC_FIXED) ||
	    PyModule_AddIntConstant(m, "LOC_DATA", RB_LOC_DATA) ||
	    PyModule_AddIntConstant(m, "LOC_REL", RB_LOC_REL) ||
	    PyModule_AddIntConstant(m, "LOC_TAIL", RB_LOC_TAIL) ||
	    PyModule_AddIntConstant(m, "KIND_INT", RB_KIND_INT) ||
	    PyModule_AddIntConstant(m, "KIND_STR", RB_KIND_STR) ||
	    PyModule_AddIntConstant(m, "KIND_BYTES", RB_KIND_BYTES) ||
	    PyModule_AddIntConstant(m, "KIND_INT_ARRAY", RB_KIND_INT_ARRAY) ||
	    PyModule_AddIntConstant(m, "MISSED_EVENTS", (long)RB_MISSED_EVENTS) ||
	    PyModule_AddIntConstant(m, "MISSED_STORED", RB_MISSED_STORED))
		goto fail;
	if (add_textfmt_constants(m))
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
