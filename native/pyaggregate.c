// SPDX-License-Identifier: GPL-2.0-only
// pyaggregate.c - probectl._native.Aggregator: aggregate.h for Python. Plans come in as tuples,
// pages are fed as the Reader's streams are given, and the tables go out as bytes and tuples
// once, at the end: no Python object per event.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "pyglue.h"

typedef struct {
	PyObject_HEAD
	struct agg *agg;
	bool busy;
} AggregatorObject;

static void Aggregator_dealloc(AggregatorObject *self)
{
	if (self->agg) {
		agg_deinit(self->agg);
		free(self->agg);
	}
	Py_TYPE(self)->tp_free((PyObject *)self);
}

// A part: (src, a field as parse_field() reads it or None, bucket, step, width).
static int parse_part(PyObject *item, struct agg_part *p)
{
	PyObject *field;
	int src, bucket;
	unsigned long long step;
	unsigned int width;

	if (!PyArg_ParseTuple(item, "iOiKI;a part is (src, field, bucket, step, width)", &src, &field,
			      &bucket, &step, &width))
		return -1;
	memset(p, 0, sizeof(*p));
	if (field != Py_None && parse_field(field, &p->field))
		return -1;
	p->src = (uint8_t)src;
	p->bucket = (uint8_t)bucket;
	p->step = step;
	p->width = width;
	return 0;
}

// A plan: (id, role, [parts], value part or None).
static int parse_plan(PyObject *item, struct agg_plan *plan)
{
	PyObject *keys, *value, *seq;
	unsigned int id;
	int role;
	int ret = -1;

	if (!PyArg_ParseTuple(item, "IiOO;a plan is (id, role, keys, value)", &id, &role, &keys, &value))
		return -1;
	if (id > 65535 || role < 0 || role > AGG_ROLE_STACK) {
		PyErr_Format(PyExc_ValueError, "bad plan: id %u, role %d", id, role);
		return -1;
	}
	memset(plan, 0, sizeof(*plan));
	plan->id = (uint16_t)id;
	plan->role = (uint8_t)role;
	seq = PySequence_Fast(keys, "keys must be a sequence of parts");
	if (!seq)
		return -1;
	if (PySequence_Fast_GET_SIZE(seq) > AGG_MAX_KEYS) {
		PyErr_Format(PyExc_ValueError, "at most %d key parts", AGG_MAX_KEYS);
		goto out;
	}
	plan->nkeys = (uint32_t)PySequence_Fast_GET_SIZE(seq);
	for (uint32_t k = 0; k < plan->nkeys; k++) {
		if (parse_part(PySequence_Fast_GET_ITEM(seq, k), &plan->keys[k]))
			goto out;
	}
	if (value != Py_None && parse_part(value, &plan->value))
		goto out;
	ret = 0;
out:
	Py_DECREF(seq);
	return ret;
}

static int Aggregator_init(AggregatorObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "plans", "time_div", NULL };
	struct agg_plan *plans = NULL;	// (AGG_MAX_PLANS of them take some 40 KiB: not on the stack)
	unsigned long long time_div = 1;
	PyObject *list, *seq;
	Py_ssize_t n;
	int ret = -1;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$K", kwlist, &list, &time_div))
		return -1;
	seq = PySequence_Fast(list, "plans must be a sequence");
	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n < 1 || n > AGG_MAX_PLANS) {
		PyErr_Format(PyExc_ValueError, "1 to %d plans", AGG_MAX_PLANS);
		goto out;
	}
	plans = PyMem_Calloc((size_t)n, sizeof(*plans));
	if (!plans) {
		PyErr_NoMemory();
		goto out;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		if (parse_plan(PySequence_Fast_GET_ITEM(seq, i), &plans[i]))
			goto out;
	}
	if (self->agg) {
		agg_deinit(self->agg);
		free(self->agg);
	}
	self->agg = malloc(sizeof(*self->agg));
	if (!self->agg) {
		PyErr_NoMemory();
		goto out;
	}
	ret = agg_init(self->agg, plans, (uint32_t)n, time_div);
	if (ret) {
		free(self->agg);
		self->agg = NULL;
		if (ret == RB_ERR_NOMEM)
			PyErr_NoMemory();
		else
			PyErr_SetString(PyExc_ValueError,
					"bad aggregation plans: keys of different sizes, a text value, "
					"a bucket on text, a duplicate id or a field that is not a number or text");
		ret = -1;
	}
out:
	PyMem_Free(plans);
	Py_DECREF(seq);
	return ret;
}

static PyObject *Aggregator_feed(AggregatorObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "streams", "long_size", "big_endian", "page_size", "strict", NULL };
	int long_size = 8, big_endian = 0, strict = 1;
	Py_ssize_t page_size = 4096;
	struct rb_layout layout;
	struct rb_reader reader;
	PyObject *streams, *result = NULL;
	Py_buffer *views;
	size_t nviews;
	long got;

	if (!self->agg) {
		PyErr_SetString(PyExc_ValueError, "the aggregator is not initialized");
		return NULL;
	}
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$ipnp", kwlist, &streams, &long_size,
					 &big_endian, &page_size, &strict))
		return NULL;
	if (get_layout(&layout, long_size, big_endian, page_size))
		return NULL;
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "the aggregator is in use");
		return NULL;
	}
	if (streams_open(streams, &layout, strict, &reader, &views, &nviews))
		return NULL;
	self->busy = true;
	Py_BEGIN_ALLOW_THREADS
	got = agg_feed(self->agg, &reader);
	Py_END_ALLOW_THREADS
	self->busy = false;
	if (got == RB_ERR_NOMEM)
		PyErr_NoMemory();
	else if (got < 0)
		raise_decode_error((int)got, reader.err_cpu, reader.err_offset, reader.err_pos);
	else
		result = PyLong_FromLong(got);
	streams_release(&reader, views, nviews);
	return result;
}

// [(key bytes, count, sum, min, max)] of the answer table, in no particular order (events still
// waiting for their stack are counted first, with the stack they have).
static PyObject *Aggregator_entries(AggregatorObject *self, PyObject *Py_UNUSED(ignored))
{
	const struct agg_table *t;
	PyObject *list;

	if (!self->agg)
		return PyList_New(0);
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "the aggregator is in use");
		return NULL;
	}
	if (agg_flush(self->agg))
		return PyErr_NoMemory();
	t = &self->agg->table;
	list = PyList_New(0);
	if (!list)
		return NULL;
	for (size_t i = 0; i < t->cap; i++) {
		const struct agg_entry *e = agg_table_entry(t, i);
		PyObject *row;

		if (!e->hash)
			continue;
		row = Py_BuildValue("(y#KLLL)", (const char *)e->key, (Py_ssize_t)t->keylen,
				    (unsigned long long)e->count, (long long)e->sum, (long long)e->min,
				    (long long)e->max);
		if (!row || PyList_Append(list, row)) {
			Py_XDECREF(row);
			Py_DECREF(list);
			return NULL;
		}
		Py_DECREF(row);
	}
	return list;
}

// (completion times, latencies): two bytes objects of native u64, one item per pair.
static PyObject *Aggregator_pairs(AggregatorObject *self, PyObject *Py_UNUSED(ignored))
{
	size_t n = self->agg ? self->agg->npairs : 0;

	return Py_BuildValue("(y#y#)", n ? (const char *)self->agg->pair_end : "", (Py_ssize_t)(n * 8),
			     n ? (const char *)self->agg->pair_lat : "", (Py_ssize_t)(n * 8));
}

static PyObject *Aggregator_counters(AggregatorObject *self, PyObject *Py_UNUSED(ignored))
{
	const struct agg *a = self->agg;

	if (!a)
		return PyDict_New();
	return Py_BuildValue("{sKsKsKsKsn}", "events", (unsigned long long)a->events, "unmatched",
			     (unsigned long long)a->unmatched, "replaced", (unsigned long long)a->replaced, "short_records",
			     (unsigned long long)a->short_records, "pending", (Py_ssize_t)agg_pending(a));
}

static PyMethodDef Aggregator_methods[] = {
	{ "feed", (PyCFunction)(void (*)(void))Aggregator_feed, METH_VARARGS | METH_KEYWORDS, DOC_Aggregator_feed },
	{ "entries", (PyCFunction)Aggregator_entries, METH_NOARGS, DOC_Aggregator_entries },
	{ "pairs", (PyCFunction)Aggregator_pairs, METH_NOARGS, DOC_Aggregator_pairs },
	{ "counters", (PyCFunction)Aggregator_counters, METH_NOARGS, DOC_Aggregator_counters },
	{ NULL, NULL, 0, NULL },
};

PyTypeObject AggregatorType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "probectl._native.Aggregator",
	.tp_basicsize = sizeof(AggregatorObject),
	.tp_dealloc = (destructor)Aggregator_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = DOC_Aggregator,
	.tp_methods = Aggregator_methods,
	.tp_init = (initproc)Aggregator_init,
	.tp_new = PyType_GenericNew,
};
