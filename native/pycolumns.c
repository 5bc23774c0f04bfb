// SPDX-License-Identifier: GPL-2.0-only
// pycolumns.c - Reader.read_tables: the next batch as one table of columns per event format
// (columns.h), every column a bytes object in Arrow's layout, made without a Python object per
// event; with the file's threads, each row's thread index (for the command name) and thread group.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>
#include <stdlib.h>

#include "columns.h"
#include "pyglue.h"

static PyObject *new_bytes(size_t size, void **data)
{
	PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);

	if (b)
		*data = PyBytes_AS_STRING(b);
	return b;
}

// (offsets, data, validity or None, null count) of a variable-size column.
static PyObject *varlen_column(ReaderObject *self, const struct rb_field *f,
			       const struct rb_span *spans, size_t n)
{
	struct col_size size = col_varlen_size(f, spans, n);
	PyObject *offsets, *data, *validity;
	void *po = NULL, *pd = NULL, *pv = NULL;

	offsets = new_bytes((n + 1) * sizeof(int64_t), &po);
	data = new_bytes(size.data, &pd);
	validity = size.nulls ? new_bytes((n + 7) / 8, &pv) : (Py_INCREF(Py_None), Py_None);
	if (!offsets || !data || !validity) {
		Py_XDECREF(offsets);
		Py_XDECREF(data);
		Py_XDECREF(validity);
		return NULL;
	}
	col_varlen_fill(f, spans, n, self->reader.swap, po, pd, pv);
	return Py_BuildValue("NNNn", offsets, data, validity, (Py_ssize_t)size.nulls);
}

static PyObject *format_fields(ReaderObject *self, uint32_t fi)
{
	const struct rb_event_format *fmt = &self->schema->formats[fi];
	const struct rb_format_rows *fr = &self->batch.rows[fi];
	PyObject *cols = PyList_New(fmt->nfields);

	for (uint32_t j = 0; cols && j < fmt->nfields; j++) {
		const struct rb_field *f = &fmt->fields[j];
		PyObject *col;

		if (f->kind == RB_KIND_INT)
			col = PyBytes_FromStringAndSize((const char *)fr->cols[j].ints,
							(Py_ssize_t)(fr->nrows * sizeof(int64_t)));
		else
			col = varlen_column(self, f, fr->cols[j].spans, fr->nrows);
		if (!col) {
			Py_CLEAR(cols);
			break;
		}
		PyList_SET_ITEM(cols, j, col);
	}
	return cols;
}

// The threads argument: (tids, tgids) as int32 buffers, tids ascending; 0, or -1 with an error.
static int parse_threads(PyObject *arg, Py_buffer *tids, Py_buffer *tgids, struct col_threads *out)
{
	if (!PyArg_ParseTuple(arg, "y*y*;threads is (tids, tgids), int32 buffers", tids, tgids))
		return -1;
	if (tids->len != tgids->len || tids->len % (Py_ssize_t)sizeof(int32_t)) {
		PyErr_SetString(PyExc_ValueError, "threads: tids and tgids must be int32 buffers of one length");
		goto fail;
	}
	out->n = (size_t)tids->len / sizeof(int32_t);
	out->tids = tids->buf;
	out->tgids = tgids->buf;
	for (size_t i = 1; i < out->n; i++) {
		if (out->tids[i - 1] >= out->tids[i]) {
			PyErr_SetString(PyExc_ValueError, "threads: tids must be ascending");
			goto fail;
		}
	}
	return 0;
fail:
	PyBuffer_Release(tids);
	PyBuffer_Release(tgids);
	return -1;
}

static PyObject *int32_column(size_t rows, int32_t **data)
{
	return new_bytes(rows * sizeof(int32_t), (void **)data);
}

PyObject *Reader_read_tables(ReaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "max_events", "threads", NULL };
	Py_ssize_t max = 1 << 20, n;
	PyObject *threads_arg = Py_None;
	Py_buffer tids_view, tgids_view;
	struct col_threads threads;
	bool with_threads = false;
	uint32_t nformats;
	struct col_common_out out = { NULL, NULL, NULL, NULL, NULL };
	PyObject *tables = NULL, *result = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|nO", kwlist, &max, &threads_arg))
		return NULL;
	if (threads_arg != Py_None) {
		if (parse_threads(threads_arg, &tids_view, &tgids_view, &threads))
			return NULL;
		with_threads = true;
	}
	n = reader_fill(self, max);
	if (n <= 0) {
		if (n == 0)
			result = Py_None, Py_INCREF(Py_None);
		goto out;
	}
	nformats = self->schema->nformats ? self->schema->nformats : 1;
	out.ts = PyMem_Calloc(nformats, sizeof(*out.ts));
	out.cpu = PyMem_Calloc(nformats, sizeof(*out.cpu));
	out.pid = PyMem_Calloc(nformats, sizeof(*out.pid));
	out.thread = PyMem_Calloc(nformats, sizeof(*out.thread));
	out.tgid = PyMem_Calloc(nformats, sizeof(*out.tgid));
	tables = PyList_New(self->schema->nformats);
	if (!out.ts || !out.cpu || !out.pid || !out.thread || !out.tgid || !tables) {
		PyErr_NoMemory();
		goto out;
	}
	for (uint32_t i = 0; i < self->schema->nformats; i++) {
		size_t rows = self->batch.rows[i].nrows;
		PyObject *t;

		if (!rows) {
			Py_INCREF(Py_None);
			PyList_SET_ITEM(tables, i, Py_None);
			continue;
		}
		if (with_threads)
			t = Py_BuildValue("(nNNNONN)", (Py_ssize_t)rows,
					  new_bytes(rows * sizeof(uint64_t), (void **)&out.ts[i]),
					  int32_column(rows, &out.cpu[i]), int32_column(rows, &out.pid[i]),
					  Py_None, int32_column(rows, &out.thread[i]),
					  int32_column(rows, &out.tgid[i]));
		else
			t = Py_BuildValue("(nNNNOOO)", (Py_ssize_t)rows,
					  new_bytes(rows * sizeof(uint64_t), (void **)&out.ts[i]),
					  int32_column(rows, &out.cpu[i]), int32_column(rows, &out.pid[i]),
					  Py_None, Py_None, Py_None);
		if (!t)
			goto out;
		PyList_SET_ITEM(tables, i, t);
	}
	col_common(&self->batch, with_threads ? &threads : NULL, &out);
	for (uint32_t i = 0; i < self->schema->nformats; i++) {
		PyObject *t = PyList_GET_ITEM(tables, i), *fields;

		if (t == Py_None)
			continue;
		fields = format_fields(self, i);
		if (!fields)
			goto out;
		Py_DECREF(PyTuple_GET_ITEM(t, 4));
		PyTuple_SET_ITEM(t, 4, fields);
	}
	result = Py_BuildValue("(nO)", n, tables);
out:
	Py_XDECREF(tables);
	PyMem_Free(out.ts);
	PyMem_Free(out.cpu);
	PyMem_Free(out.pid);
	PyMem_Free(out.thread);
	PyMem_Free(out.tgid);
	if (with_threads) {
		PyBuffer_Release(&tids_view);
		PyBuffer_Release(&tgids_view);
	}
	return result;
}

// ---- time slices decoded on several threads (tables.h) -----------------------------------------

// Memory of the C core handed to Python as it is: a read-only buffer that frees it when the last
// reference (a pyarrow buffer, a memoryview) goes.
typedef struct {
	PyObject_HEAD
	void *data;
	Py_ssize_t size;
} ColumnBufferObject;

static void ColumnBuffer_dealloc(ColumnBufferObject *self)
{
	free(self->data);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ColumnBuffer_getbuffer(ColumnBufferObject *self, Py_buffer *view, int flags)
{
	return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 1, flags);
}

static Py_ssize_t ColumnBuffer_len(ColumnBufferObject *self)
{
	return self->size;
}

static PyBufferProcs ColumnBuffer_as_buffer = {
	.bf_getbuffer = (getbufferproc)ColumnBuffer_getbuffer,
};

static PySequenceMethods ColumnBuffer_as_sequence = {
	.sq_length = (lenfunc)ColumnBuffer_len,
};

PyTypeObject ColumnBufferType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "probectl._native.ColumnBuffer",
	.tp_basicsize = sizeof(ColumnBufferObject),
	.tp_dealloc = (destructor)ColumnBuffer_dealloc,
	.tp_as_buffer = &ColumnBuffer_as_buffer,
	.tp_as_sequence = &ColumnBuffer_as_sequence,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = DOC_ColumnBuffer,
};

// A ColumnBuffer owning *@data (set to NULL: taken, whatever happens).
static PyObject *take_buffer(void **data, size_t size)
{
	ColumnBufferObject *b = PyObject_New(ColumnBufferObject, &ColumnBufferType);

	if (!b) {
		free(*data);
		*data = NULL;
		return NULL;
	}
	b->data = *data;
	b->size = (Py_ssize_t)size;
	*data = NULL;
	return (PyObject *)b;
}

// take_buffer(), or None when there is no column (a header column the slices skipped).
static PyObject *take_column(void **data, size_t size)
{
	if (!*data)
		Py_RETURN_NONE;
	return take_buffer(data, size);
}

void reader_free_plan(ReaderObject *self)
{
	if (self->plan) {
		tab_plan_free(self->plan);
		free(self->plan);
		self->plan = NULL;
	}
}

// The streams of the reader as the slices read them.
static struct tab_stream *reader_streams(ReaderObject *self)
{
	struct tab_stream *streams = PyMem_Calloc(self->reader.nstreams ? self->reader.nstreams : 1,
						  sizeof(*streams));

	if (!streams) {
		PyErr_NoMemory();
		return NULL;
	}
	for (size_t i = 0; i < self->reader.nstreams; i++) {
		streams[i].cpu = self->reader.streams[i].cpu;
		streams[i].data = self->reader.streams[i].data;
		streams[i].size = self->reader.streams[i].size;
	}
	return streams;
}

static int check_idle(ReaderObject *self)
{
	if (!self->reader_ready || !self->batch_ready) {
		PyErr_SetString(PyExc_ValueError, "the reader is closed");
		return -1;
	}
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "the reader is in use by another thread");
		return -1;
	}
	return 0;
}

PyObject *Reader_plan_slices(ReaderObject *self, PyObject *args)
{
	Py_ssize_t n;
	struct tab_stream *streams;
	int ret;

	if (!PyArg_ParseTuple(args, "n", &n) || check_idle(self))
		return NULL;
	if (n < 1) {
		PyErr_SetString(PyExc_ValueError, "plan_slices: n must be positive");
		return NULL;
	}
	reader_free_plan(self);
	streams = reader_streams(self);
	self->plan = malloc(sizeof(*self->plan));
	if (!streams || !self->plan) {
		PyMem_Free(streams);
		free(self->plan);
		self->plan = NULL;
		return PyErr_NoMemory();
	}
	self->busy = true;
	Py_BEGIN_ALLOW_THREADS
	ret = tab_plan_make(self->plan, &self->reader.layout, streams, self->reader.nstreams, (size_t)n);
	Py_END_ALLOW_THREADS
	self->busy = false;
	PyMem_Free(streams);
	if (ret < 0) {
		free(self->plan);
		self->plan = NULL;
		return PyLong_FromLong(0);
	}
	return PyLong_FromSize_t(self->plan->nslices);
}

// (rows, ts, cpu, pid, fields, thread, tgid) of format @fi of @slice, as read_tables gives it.
static PyObject *slice_table(struct tab_slice *slice, uint32_t fi)
{
	const struct rb_event_format *fmt = &slice->schema->formats[fi];
	struct tab_rows *r = &slice->rows[fi];
	size_t n = r->n;
	PyObject *fields = PyList_New(fmt->nfields), *t;

	for (uint32_t j = 0; fields && j < fmt->nfields; j++) {
		PyObject *col;

		if (fmt->fields[j].kind == RB_KIND_INT) {
			col = take_buffer((void **)&r->ints[j], n * sizeof(int64_t));
		} else {
			struct tab_varlen *v = &r->var[j];
			size_t data = (size_t)v->offsets[n];

			// (offsets of an integer array count int64 elements)
			if (fmt->fields[j].kind == RB_KIND_INT_ARRAY)
				data *= sizeof(int64_t);
			col = Py_BuildValue("(NNNn)", take_buffer((void **)&v->offsets, (n + 1) * sizeof(int64_t)),
					    take_buffer((void **)&v->data, data),
					    v->validity ? take_buffer((void **)&v->validity, (n + 7) / 8)
							: (Py_INCREF(Py_None), Py_None),
					    (Py_ssize_t)v->nulls);
		}
		if (!col) {
			Py_CLEAR(fields);
			break;
		}
		PyList_SET_ITEM(fields, j, col);
	}
	if (!fields)
		return NULL;
	t = Py_BuildValue("(nNNNNNN)", (Py_ssize_t)n, take_column((void **)&r->ts, n * sizeof(uint64_t)),
			  take_column((void **)&r->cpu, n * sizeof(int32_t)),
			  take_column((void **)&r->tid, n * sizeof(int32_t)), fields,
			  take_column((void **)&r->thread, n * sizeof(int32_t)),
			  take_column((void **)&r->tgid, n * sizeof(int32_t)));
	return t;
}

static PyObject *slice_result(struct tab_slice *slice)
{
	uint32_t nformats = slice->schema->nformats;
	PyObject *tables = PyList_New(nformats);

	for (uint32_t fi = 0; tables && fi < nformats; fi++) {
		PyObject *t;

		if (slice->rows[fi].n) {
			t = slice_table(slice, fi);
			if (!t) {
				Py_CLEAR(tables);
				break;
			}
		} else {
			t = Py_None;
			Py_INCREF(t);
		}
		PyList_SET_ITEM(tables, fi, t);
	}
	return tables ? Py_BuildValue("(KN)", (unsigned long long)slice->events, tables) : NULL;
}

PyObject *Reader_read_slices(ReaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "first", "count", "threads", "skip", NULL };
	Py_ssize_t first, count;
	unsigned int skip = 0;
	PyObject *threads_arg = Py_None, *result = NULL;
	Py_buffer tids_view, tgids_view;
	struct col_threads threads;
	bool with_threads = false, ordered = true;
	struct tab_stream *streams = NULL;
	struct tab_slice *slices = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nn|O$I", kwlist, &first, &count, &threads_arg, &skip) ||
	    check_idle(self))
		return NULL;
	if (!self->plan) {
		PyErr_SetString(PyExc_ValueError, "read_slices: no plan (call plan_slices first)");
		return NULL;
	}
	if (first < 0 || count < 1 || (size_t)first + (size_t)count > self->plan->nslices) {
		PyErr_Format(PyExc_ValueError, "read_slices: slices %zd..%zd of %zu", first,
			     first + count - 1, self->plan->nslices);
		return NULL;
	}
	if (threads_arg != Py_None) {
		if (parse_threads(threads_arg, &tids_view, &tgids_view, &threads))
			return NULL;
		with_threads = true;
	}
	streams = reader_streams(self);
	slices = PyMem_Calloc((size_t)count, sizeof(*slices));
	if (!streams || !slices) {
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0; i < count; i++) {
		slices[i].schema = self->schema;
		slices[i].threads = with_threads ? &threads : NULL;
		slices[i].skip = skip;
	}
	self->busy = true;
	Py_BEGIN_ALLOW_THREADS
	tab_decode_all(slices, self->plan, streams, &self->reader.layout, (size_t)first, (size_t)count);
	Py_END_ALLOW_THREADS
	self->busy = false;
	for (Py_ssize_t i = 0; i < count; i++) {
		if (slices[i].err == RB_ERR_NOMEM) {
			PyErr_NoMemory();
			goto out;
		}
		ordered &= !slices[i].err;
	}
	if (!ordered) {
		result = Py_None;
		Py_INCREF(result);
		goto out;
	}
	result = PyList_New(count);
	for (Py_ssize_t i = 0; result && i < count; i++) {
		PyObject *item = slice_result(&slices[i]);

		if (!item) {
			Py_CLEAR(result);
			break;
		}
		self->short_records += slices[i].short_records;
		PyList_SET_ITEM(result, i, item);
	}
out:
	for (Py_ssize_t i = 0; slices && i < count; i++)
		tab_slice_free(&slices[i]);
	PyMem_Free(slices);
	PyMem_Free(streams);
	if (with_threads) {
		PyBuffer_Release(&tids_view);
		PyBuffer_Release(&tgids_view);
	}
	return result;
}
