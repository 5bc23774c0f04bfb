// SPDX-License-Identifier: GPL-2.0-only
// pyperfring.c - probectl._native.PerfRings: copying of perf event mmap rings to files
// (perfring.h), started and stopped from Python; write_callchains(): their samples written into a
// CPU's pages (chainmerge.h).

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "chainmerge.h"
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
	if (int_list(cpus_o, "cpus must be a sequence", &ncpu, &cpus) ||
	    int_list(perf_o, "perf_fds must be a sequence", &nperf, &perfs) ||
	    int_list(out_o, "out_fds must be a sequence", &nout, &outs))
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
	{ "start", (PyCFunction)PerfRings_start, METH_NOARGS, DOC_PerfRings_start },
	{ "stop", (PyCFunction)PerfRings_stop, METH_NOARGS, DOC_PerfRings_stop },
	{ "stats", (PyCFunction)PerfRings_stats, METH_NOARGS, DOC_PerfRings_stats },
	{ NULL, NULL, 0, NULL },
};

static PyGetSetDef PerfRings_getset[] = {
	{ "running", (getter)PerfRings_get_running, NULL, DOC_PerfRings_running, NULL },
	{ NULL, NULL, NULL, NULL, NULL },
};

PyTypeObject PerfRingsType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "probectl._native.PerfRings",
	.tp_basicsize = sizeof(PerfRingsObject),
	.tp_dealloc = (destructor)PerfRings_dealloc,
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = DOC_PerfRings,
	.tp_methods = PerfRings_methods,
	.tp_getset = PerfRings_getset,
	.tp_init = (initproc)PerfRings_init,
	.tp_new = PyType_GenericNew,
};

// ---- write_callchains ------------------------------------------------------------------------

static PyObject *comms_result(const struct cm_result *res)
{
	PyObject *comms = PyList_New((Py_ssize_t)res->ncomms);

	if (!comms)
		return NULL;
	for (size_t i = 0; i < res->ncomms; i++) {
		PyObject *t = Py_BuildValue("(IIy)", res->comms[i].pid, res->comms[i].tid, res->comms[i].name);

		if (!t) {
			Py_DECREF(comms);
			return NULL;
		}
		PyList_SET_ITEM(comms, (Py_ssize_t)i, t);
	}
	PyObject *mmaps = PyList_New((Py_ssize_t)res->nmmaps);

	if (!mmaps) {
		Py_DECREF(comms);
		return NULL;
	}
	for (size_t i = 0; i < res->nmmaps; i++) {
		const struct cm_mmap *m = &res->mmaps[i];
		PyObject *t = Py_BuildValue("(IKKKIIKIIy)", m->pid, (unsigned long long)m->addr,
					    (unsigned long long)m->len, (unsigned long long)m->pgoff, m->maj, m->min,
					    (unsigned long long)m->ino, m->prot, m->flags, m->path);

		if (!t) {
			Py_DECREF(comms);
			Py_DECREF(mmaps);
			return NULL;
		}
		PyList_SET_ITEM(mmaps, (Py_ssize_t)i, t);
	}
	return Py_BuildValue("(KKKNN)", (unsigned long long)res->written, (unsigned long long)res->left,
			     (unsigned long long)res->pages, comms, mmaps);
}

PyObject *write_callchains(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "src", "perf", "out_fd", "long_size", "big_endian", "page_size",
				  "callchain_id", "window_ns", "events", "pids", NULL };
	PyObject *src_o, *events_o, *pids_o;
	Py_buffer src = { 0 };
	Py_buffer records;
	int fd, long_size, big_endian, chain_id;
	Py_ssize_t page_size;
	unsigned long long window;
	struct cm_args a = { 0 };
	struct cm_result res = { 0 };
	struct cm_event_map *map = NULL;
	int32_t *pids = NULL;
	PyObject *seq = NULL, *ret = NULL;
	int err;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oy*iipniKOO", kwlist, &src_o, &records, &fd, &long_size,
					 &big_endian, &page_size, &chain_id, &window, &events_o, &pids_o))
		return NULL;
	if (src_o != Py_None && PyObject_GetBuffer(src_o, &src, PyBUF_SIMPLE))
		goto out;
	if (get_layout(&a.layout, long_size, big_endian, page_size))
		goto out;
	seq = PySequence_Fast(events_o, "events must be a sequence of (perf id, event id, flags)");
	if (!seq)
		goto out;
	a.nmap = (size_t)PySequence_Fast_GET_SIZE(seq);
	map = PyMem_Calloc(a.nmap ? a.nmap : 1, sizeof(*map));
	if (!map) {
		PyErr_NoMemory();
		goto out;
	}
	for (size_t i = 0; i < a.nmap; i++) {
		unsigned long long id;
		int event, flags;

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i), "Kii", &id, &event, &flags))
			goto out;
		map[i].perf_id = id;
		map[i].event = (uint16_t)event;
		map[i].flags = (uint8_t)flags;
	}
	Py_CLEAR(seq);
	if (pids_o != Py_None) {
		seq = PySequence_Fast(pids_o, "pids must be a sorted sequence of ints");
		if (!seq)
			goto out;
		a.npids = (size_t)PySequence_Fast_GET_SIZE(seq);
		pids = PyMem_Calloc(a.npids ? a.npids : 1, sizeof(*pids));
		if (!pids) {
			PyErr_NoMemory();
			goto out;
		}
		for (size_t i = 0; i < a.npids; i++) {
			long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i));

			if (v == -1 && PyErr_Occurred())
				goto out;
			pids[i] = (int32_t)v;
		}
		a.pids = pids;
	}
	a.src = src.buf;
	a.src_len = src.buf ? (size_t)src.len : 0;
	a.perf = records.buf;
	a.perf_len = (size_t)records.len;
	a.map = map;
	a.callchain_id = (uint16_t)chain_id;
	a.window_ns = window;
	a.out_fd = fd;
	Py_BEGIN_ALLOW_THREADS
	err = cm_write(&a, &res);
	Py_END_ALLOW_THREADS
	if (err == RB_ERR_IO)
		PyErr_SetFromErrno(PyExc_OSError);
	else if (err == RB_ERR_NOMEM)
		PyErr_NoMemory();
	else if (err)
		PyErr_SetString(PyExc_ValueError, "pages of another byte order than this machine's, or a bad layout");
	else
		ret = comms_result(&res);
	free(res.comms);
	free(res.mmaps);
out:
	Py_XDECREF(seq);
	PyMem_Free(map);
	PyMem_Free(pids);
	if (src.buf)
		PyBuffer_Release(&src);
	PyBuffer_Release(&records);
	return ret;
}
