// SPDX-License-Identifier: GPL-2.0-only
// pyrecorder.c - probectl._native.Recorder: per-CPU copying of trace_pipe_raw to files
// (recorder.h), started and stopped from Python.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "pyglue.h"
#include "recorder.h"

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

int int_list(PyObject *obj, const char *what, Py_ssize_t *n, int **ret)
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
	{ "start", (PyCFunction)Recorder_start, METH_NOARGS, DOC_Recorder_start },
	{ "stop", (PyCFunction)Recorder_stop, METH_NOARGS, DOC_Recorder_stop },
	{ "stats", (PyCFunction)Recorder_stats, METH_NOARGS, DOC_Recorder_stats },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef Recorder_getset[] = {
	{ "running", (getter)Recorder_get_running, NULL, DOC_Recorder_running, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject RecorderType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "probectl._native.Recorder",
	.tp_basicsize = sizeof(RecorderObject),
	.tp_dealloc = (destructor)Recorder_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = DOC_Recorder,
	.tp_methods = Recorder_methods,
	.tp_getset = Recorder_getset,
	.tp_init = (initproc)Recorder_init,
	.tp_new = PyType_GenericNew,
};
