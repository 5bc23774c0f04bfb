// SPDX-License-Identifier: GPL-2.0-only
// pyperfring.c - probectl._native.PerfRings: copying of perf event mmap rings to files
// (perfring.h), started and stopped from Python.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "perfring.h"
#include "pyglue.h"
#include "ringbuf.h"

typedef struct {
	PyObject_HEAD
	struct perf_ring_copier *pc;
} PerfRingsObject;

static void PerfRings_dealloc(PerfRingsObject *self)
{
	if (self->pc) {
		Py_BEGIN_ALLOW_THREADS
		perf_ring_destroy(self->pc);
		Py_END_ALLOW_THREADS
	}
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static int fd_list(PyObject *obj, const char *what, Py_ssize_t *n, int **ret)
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

static int PerfRings_init(PerfRingsObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "cpus", "perf_fds", "out_fds", "data_pages", "poll_ms", NULL };
	PyObject *cpus_o, *perf_o, *out_o;
	Py_ssize_t pages, ncpu = 0, nperf = 0, nout = 0;
	int poll_ms = 0, ret = -1, err;
	int *cpus = NULL, *perfs = NULL, *outs = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOn|$i", kwlist, &cpus_o, &perf_o, &out_o, &pages,
					 &poll_ms))
		return -1;
	if (self->pc) {
		PyErr_SetString(PyExc_RuntimeError, "the rings are already set up");
		return -1;
	}
	if (fd_list(cpus_o, "cpus must be a sequence", &ncpu, &cpus) ||
	    fd_list(perf_o, "perf_fds must be a sequence", &nperf, &perfs) ||
	    fd_list(out_o, "out_fds must be a sequence", &nout, &outs))
		goto out;
	if (ncpu == 0 || ncpu != nperf || ncpu != nout) {
		PyErr_SetString(PyExc_ValueError, "cpus, perf_fds and out_fds must have the same, non-zero length");
		goto out;
	}
	err = perf_ring_create(&self->pc, (size_t)ncpu, cpus, perfs, outs, pages > 0 ? (size_t)pages : 0,
			       poll_ms);
	if (err == RB_ERR_IO)
		PyErr_SetFromErrno(PyExc_OSError);
	else if (err == RB_ERR_NOMEM)
		PyErr_NoMemory();
	else if (err)
		PyErr_Format(PyExc_ValueError, "data_pages must be a power of two, not %zd", pages);
	else
		ret = 0;
out:
	PyMem_Free(cpus);
	PyMem_Free(perfs);
	PyMem_Free(outs);
	return ret;
}

static struct perf_ring_copier *get_pc(PerfRingsObject *self)
{
	if (!self->pc)
		PyErr_SetString(PyExc_ValueError, "the rings are not set up");
	return self->pc;
}

static PyObject *PerfRings_start(PerfRingsObject *self, PyObject *unused)
{
	struct perf_ring_copier *pc = get_pc(self);
	int err;

	(void)unused;
	if (!pc)
		return NULL;
	if (perf_ring_running(pc)) {
		PyErr_SetString(PyExc_RuntimeError, "the copier is already running");
		return NULL;
	}
	err = perf_ring_start(pc);
	if (err)
		return PyErr_SetFromErrno(PyExc_OSError);
	Py_RETURN_NONE;
}

static PyObject *PerfRings_stop(PerfRingsObject *self, PyObject *unused)
{
	struct perf_ring_copier *pc = get_pc(self);
	int err;

	(void)unused;
	if (!pc)
		return NULL;
	Py_BEGIN_ALLOW_THREADS
	err = perf_ring_stop(pc);
	Py_END_ALLOW_THREADS
	return PyBool_FromLong(err == 0);
}

static PyObject *PerfRings_stats(PerfRingsObject *self, PyObject *unused)
{
	struct perf_ring_copier *pc = get_pc(self);
	PyObject *list;

	(void)unused;
	if (!pc)
		return NULL;
	list = PyList_New((Py_ssize_t)perf_ring_ncpus(pc));
	if (!list)
		return NULL;
	for (size_t i = 0; i < perf_ring_ncpus(pc); i++) {
		struct perf_ring_stats st;
		PyObject *d;

		perf_ring_get_stats(pc, i, &st);
		d = Py_BuildValue("{sisKsKsKsKsiss}", "cpu", st.cpu, "bytes", (unsigned long long)st.bytes,
				  "samples", (unsigned long long)st.samples, "lost", (unsigned long long)st.lost,
				  "lost_records", (unsigned long long)st.lost_records, "errno", st.err,
				  "error_op", st.err_op);
		if (!d) {
			Py_DECREF(list);
			return NULL;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, d);
	}
	return list;
}

static PyObject *PerfRings_get_running(PerfRingsObject *self, void *closure)
{
	(void)closure;
	return PyBool_FromLong(self->pc && perf_ring_running(self->pc));
}

static PyMethodDef PerfRings_methods[] = {
	{ "start", (PyCFunction)PerfRings_start, METH_NOARGS, "start the copying thread" },
	{ "stop", (PyCFunction)PerfRings_stop, METH_NOARGS,
	  "drain every ring, join the thread; True unless a CPU failed (see stats())" },
	{ "stats", (PyCFunction)PerfRings_stats, METH_NOARGS, "per-CPU counters" },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef PerfRings_getset[] = {
	{ "running", (getter)PerfRings_get_running, NULL, "the thread is running", NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject PerfRingsType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "probectl._native.PerfRings",
	.tp_basicsize = sizeof(PerfRingsObject),
	.tp_dealloc = (destructor)PerfRings_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "PerfRings(cpus, perf_fds, out_fds, data_pages, *, poll_ms=100)",
	.tp_methods = PerfRings_methods,
	.tp_getset = PerfRings_getset,
	.tp_init = (initproc)PerfRings_init,
	.tp_new = PyType_GenericNew,
};
