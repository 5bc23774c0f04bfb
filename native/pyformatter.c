// SPDX-License-Identifier: GPL-2.0-only
// pyformatter.c - probectl._native.TextFormatter: the plans and name tables of textfmt.h, filled
// from Python callables when Reader.format_text meets an event, thread or symbol it lacks.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "pyglue.h"

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
	{ "set_plan", (PyCFunction)TextFormatter_set_plan, METH_VARARGS, DOC_TextFormatter_set_plan },
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
	.tp_doc = DOC_TextFormatter,
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
		long long tgid, nspid;

		got = PyObject_CallFunction(tf->thread_fn, "i", (int)need->tid);
		if (!got)
			return -1;
		if (!PyTuple_Check(got) ||
		    !PyArg_ParseTuple(got, "y#LL;thread() returns (comm bytes, tgid, nspid)", &comm, &len, &tgid,
				      &nspid)) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_TypeError, "thread() returns (comm bytes, tgid, nspid)");
			Py_DECREF(got);
			return -1;
		}
		err = tf_add_thread(tf->f, need->tid, (const uint8_t *)comm, (size_t)len, tgid, nspid);
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
