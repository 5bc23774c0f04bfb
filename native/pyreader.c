// SPDX-License-Identifier: GPL-2.0-only
// pyreader.c - probectl._native.Reader: the streams of a trace merged by time and decoded in
// batches (ringbuf.h), handed to Python as columns (read_columns), row tuples (read_rows) or event
// ids (scan_ids); Reader.format_text is in pytextout.c, Reader.read_tables in pycolumns.c.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "pyglue.h"

// ---- Reader ----------------------------------------------------------------------------------

static void reader_release(ReaderObject *self)
{
	reader_free_plan(self);
	if (self->batch_ready)
		rb_batch_deinit(&self->batch);
	self->batch_ready = false;
	if (self->reader_ready)
		streams_release(&self->reader, self->views, self->nviews);
	self->reader_ready = false;
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

int parse_field(PyObject *item, struct rb_field *f)
{
	unsigned int offset, size, bound_offset = 0, head_size = 0, head_offset = 0;
	int loc, kind, elem_size, is_signed, bound_size = 0;

	if (!PyArg_ParseTuple(item, "IIiiip|iIII;a field is (offset, size, loc, kind, elem_size, signed[, "
			      "bound_size, bound_offset, head_size, head_offset])", &offset, &size, &loc,
			      &kind, &elem_size, &is_signed, &bound_size, &bound_offset, &head_size,
			      &head_offset))
		return -1;
	if (loc < 0 || loc > RB_LOC_TAIL || kind < 0 || kind > RB_KIND_STR_ARRAY ||
	    elem_size < 0 || elem_size > 8 || bound_size < 0 || bound_size > 8) {
		PyErr_Format(PyExc_ValueError, "bad field (loc %d, kind %d, elem_size %d, bound_size %d)",
			     loc, kind, elem_size, bound_size);
		return -1;
	}
	memset(f, 0, sizeof(*f));
	f->offset = offset;
	f->size = size;
	f->loc = (uint8_t)loc;
	f->kind = (uint8_t)kind;
	f->elem_size = (uint8_t)elem_size;
	f->is_signed = (uint8_t)is_signed;
	f->bound_size = (uint8_t)bound_size;
	f->bound_offset = bound_offset;
	f->head_size = head_size;
	f->head_offset = head_offset;
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
	if (streams_open(streams, layout, strict, &self->reader, &self->views, &self->nviews))
		return -1;
	self->reader_ready = true;
	return 0;
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

// An RB_KIND_STR_ARRAY value: a tuple of its strings, None for one the kernel could not read
// ("(fault)") or that lies outside the record.
static PyObject *str_array(ReaderObject *self, const struct rb_field *f, const struct rb_span *sp)
{
	uint32_t n = f->size / 4;
	PyObject *t = PyTuple_New((Py_ssize_t)n);

	if (!t)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		struct rb_span item;
		PyObject *o;

		if (rb_str_array_item(f, sp->ptr, sp->len, self->reader.swap, i, &item) && item.ptr) {
			o = str_from_span(self, item.ptr, item.len);
		} else {
			o = Py_None;
			Py_INCREF(o);
		}
		if (!o) {
			Py_DECREF(t);
			return NULL;
		}
		PyTuple_SET_ITEM(t, (Py_ssize_t)i, o);
	}
	return t;
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
	case RB_KIND_STR_ARRAY:
		return str_array(self, f, sp);
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
	  METH_VARARGS | METH_KEYWORDS, DOC_Reader_read_columns },
	{ "read_tables", (PyCFunction)(void (*)(void))Reader_read_tables,
	  METH_VARARGS | METH_KEYWORDS, DOC_Reader_read_tables },
	{ "plan_slices", (PyCFunction)Reader_plan_slices, METH_VARARGS, DOC_Reader_plan_slices },
	{ "read_slices", (PyCFunction)(void (*)(void))Reader_read_slices, METH_VARARGS | METH_KEYWORDS,
	  DOC_Reader_read_slices },
	{ "read_rows", (PyCFunction)(void (*)(void))Reader_read_rows, METH_VARARGS | METH_KEYWORDS,
	  DOC_Reader_read_rows },
	{ "format_text", (PyCFunction)(void (*)(void))Reader_format_text, METH_VARARGS | METH_KEYWORDS,
	  DOC_Reader_format_text },
	{ "scan_ids", (PyCFunction)(void (*)(void))Reader_scan_ids, METH_VARARGS | METH_KEYWORDS,
	  DOC_Reader_scan_ids },
	{ "stats", (PyCFunction)Reader_stats, METH_NOARGS, DOC_Reader_stats },
	{ "close", (PyCFunction)Reader_close, METH_NOARGS, DOC_Reader_close },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Reader_getset[] = {
	{ "short_records", (getter)Reader_get_short_records, NULL, DOC_Reader_short_records, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject ReaderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "probectl._native.Reader",
	.tp_basicsize = sizeof(ReaderObject),
	.tp_dealloc = (destructor)Reader_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = DOC_Reader,
	.tp_methods = Reader_methods,
	.tp_getset = Reader_getset,
	.tp_init = (initproc)Reader_init,
	.tp_new = PyType_GenericNew,
};
