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
