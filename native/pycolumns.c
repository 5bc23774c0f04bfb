// SPDX-License-Identifier: GPL-2.0-only
// pycolumns.c - Reader.read_tables: the next batch as one table of columns per event format
// (columns.h), every column a bytes object in Arrow's layout, made without a Python object per
// event.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
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

PyObject *Reader_read_tables(ReaderObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "max_events", NULL };
	Py_ssize_t max = 1 << 20, n;
	uint32_t nformats;
	uint64_t **ts = NULL;
	int32_t **cpu = NULL, **pid = NULL;
	PyObject *tables = NULL, *result = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n", kwlist, &max))
		return NULL;
	n = reader_fill(self, max);
	if (n < 0)
		return NULL;
	if (n == 0)
		Py_RETURN_NONE;
	nformats = self->schema->nformats;
	ts = PyMem_Calloc(nformats ? nformats : 1, sizeof(*ts));
	cpu = PyMem_Calloc(nformats ? nformats : 1, sizeof(*cpu));
	pid = PyMem_Calloc(nformats ? nformats : 1, sizeof(*pid));
	tables = PyList_New(nformats);
	if (!ts || !cpu || !pid || !tables) {
		PyErr_NoMemory();
		goto out;
	}
	for (uint32_t i = 0; i < nformats; i++) {
		size_t rows = self->batch.rows[i].nrows;
		PyObject *t;

		if (!rows) {
			Py_INCREF(Py_None);
			PyList_SET_ITEM(tables, i, Py_None);
			continue;
		}
		t = Py_BuildValue("(nNNNO)", (Py_ssize_t)rows,
				  new_bytes(rows * sizeof(uint64_t), (void **)&ts[i]),
				  new_bytes(rows * sizeof(int32_t), (void **)&cpu[i]),
				  new_bytes(rows * sizeof(int32_t), (void **)&pid[i]), Py_None);
		if (!t)
			goto out;
		PyList_SET_ITEM(tables, i, t);
	}
	col_common(&self->batch, ts, cpu, pid);
	for (uint32_t i = 0; i < nformats; i++) {
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
	PyMem_Free(ts);
	PyMem_Free(cpu);
	PyMem_Free(pid);
	return result;
}
