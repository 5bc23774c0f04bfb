// SPDX-License-Identifier: GPL-2.0-only
// pyfold.c - probectl._native.fold_stacks(): a recording's events counted by thread and stacks (fold.h).

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "fold.h"
#include "pyglue.h"

// A field spec or None into *@field (*@has: whether there is one); -1 with an exception.
static int optional_field(PyObject *o, struct rb_field *field, bool *has)
{
	*has = o != Py_None;
	return *has ? parse_field(o, field) : 0;
}

static int setup(struct fold *f, PyObject *selected_o, PyObject *stacks_o, PyObject *probes_o)
{
	PyObject *seq = PySequence_Fast(selected_o, "selected must be a sequence of event ids");
	int ret = -1;

	if (!seq)
		return -1;
	for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
		long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));

		if (id < 0 || id > 65535) {
			if (!PyErr_Occurred())
				PyErr_SetString(PyExc_ValueError, "an event id is 0..65535");
			goto out;
		}
		f->selected[id / 8] |= (uint8_t)(1 << (id % 8));
	}
	Py_DECREF(seq);
	seq = PySequence_Fast(stacks_o, "stacks must be a sequence of (id, kind, first, array)");
	if (!seq)
		return -1;
	f->nstacks = (size_t)PySequence_Fast_GET_SIZE(seq);
	f->stacks = PyMem_Calloc(f->nstacks ? f->nstacks : 1, sizeof(*f->stacks));
	if (!f->stacks) {
		PyErr_NoMemory();
		goto out;
	}
	for (size_t i = 0; i < f->nstacks; i++) {
		struct fold_stack_format *sf = &f->stacks[i];
		PyObject *first_o, *array_o;
		int id, kind;

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i), "iiOO", &id, &kind, &first_o, &array_o))
			goto out;
		if (id < 0 || id > 65535 || (kind != FOLD_KERNEL && kind != FOLD_USER)) {
			PyErr_SetString(PyExc_ValueError, "a stack format is (id 0..65535, kind 0 or 1, first, array)");
			goto out;
		}
		sf->kind = (uint8_t)kind;
		if (optional_field(first_o, &sf->first, &sf->has_first) ||
		    optional_field(array_o, &sf->array, &sf->has_array))
			goto out;
		f->stack_of[id] = (int32_t)i;
	}
	Py_DECREF(seq);
	seq = PySequence_Fast(probes_o, "probe_ips must be a sequence of (id, field)");
	if (!seq)
		return -1;
	f->nprobes = (size_t)PySequence_Fast_GET_SIZE(seq);
	f->probe_ips = PyMem_Calloc(f->nprobes ? f->nprobes : 1, sizeof(*f->probe_ips));
	if (!f->probe_ips) {
		PyErr_NoMemory();
		goto out;
	}
	for (size_t i = 0; i < f->nprobes; i++) {
		PyObject *field_o;
		int id;

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i), "iO", &id, &field_o))
			goto out;
		if (id < 0 || id > 65535) {
			PyErr_SetString(PyExc_ValueError, "an event id is 0..65535");
			goto out;
		}
		if (parse_field(field_o, &f->probe_ips[i]))
			goto out;
		f->probe_of[id] = (int32_t)i;
	}
	ret = 0;
out:
	Py_XDECREF(seq);
	return ret;
}

PyObject *fold_stacks(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "streams", "selected", "stacks", "probe_ips", "long_size", "big_endian", "page_size",
				  "strict", NULL };
	int long_size = 8, big_endian = 0, strict = 1;
	Py_ssize_t page_size = 4096;
	PyObject *streams, *selected_o, *stacks_o, *probes_o, *list = NULL, *result = NULL;
	struct rb_layout layout;
	struct rb_reader reader = { 0 };
	bool reader_ready = false;
	Py_buffer *views = NULL;
	size_t nviews = 0;
	struct fold *f;
	long got;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO|$ipnp", kwlist, &streams, &selected_o, &stacks_o, &probes_o,
					 &long_size, &big_endian, &page_size, &strict))
		return NULL;
	if (get_layout(&layout, long_size, big_endian, page_size))
		return NULL;
	f = PyMem_Malloc(sizeof(*f));
	if (!f || fold_init(f)) {
		PyMem_Free(f);
		return PyErr_NoMemory();
	}
	if (setup(f, selected_o, stacks_o, probes_o))
		goto out;
	if (streams_open(streams, &layout, strict, &reader, &views, &nviews))
		goto out;
	reader_ready = true;
	Py_BEGIN_ALLOW_THREADS
	got = fold_feed(f, &reader);
	if (got >= 0 && fold_finish(f))
		got = RB_ERR_NOMEM;
	Py_END_ALLOW_THREADS
	if (got == RB_ERR_NOMEM) {
		PyErr_NoMemory();
		goto out;
	} else if (got < 0) {
		raise_decode_error((int)got, reader.err_cpu, reader.err_offset, reader.err_pos);
		goto out;
	}
	list = PyList_New(0);
	for (size_t i = 0; list && i < f->cap; i++) {
		const struct fold_slot *s = &f->slots[i];

		if (!s->hash)
			continue;
		PyObject *t = Py_BuildValue("(y#K)", (const char *)f->keys + s->off, (Py_ssize_t)s->len,
					    (unsigned long long)s->count);

		if (!t || PyList_Append(list, t))
			Py_CLEAR(list);
		Py_XDECREF(t);
	}
	if (list)
		result = Py_BuildValue("(KKN)", (unsigned long long)f->records, (unsigned long long)f->events, list);
out:
	if (reader_ready)
		streams_release(&reader, views, nviews);
	PyMem_Free(f->stacks);
	PyMem_Free(f->probe_ips);
	fold_deinit(f);
	PyMem_Free(f);
	return result;
}
