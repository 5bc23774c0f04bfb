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
	struct cm_stream **streams;	// per CPU, or NULL (the records copied verbatim)
	size_t nstreams;
	struct cm_rules *rules;		// the streams' walks of stack copies, or NULL
} PerfRingsObject;

static void free_streams(PerfRingsObject *self)
{
	for (size_t i = 0; i < self->nstreams; i++)
		cm_stream_destroy(self->streams[i]);
	PyMem_Free(self->streams);
	self->streams = NULL;
	self->nstreams = 0;
	cm_rules_free(self->rules);
	self->rules = NULL;
}

static void PerfRings_dealloc(PerfRingsObject *self)
{
	if (self->pc) {
		Py_BEGIN_ALLOW_THREADS
		perf_ring_destroy(self->pc);
		Py_END_ALLOW_THREADS
	}
	free_streams(self);
	Py_TYPE(self)->tp_free((PyObject *)self);
}


// The streams of @stream_o, (pages_fds, events, long_size, big_endian, page_size, callchain_id), one
// per CPU into @self->streams, their other records to @outs. -1 on error.
static int make_streams(PerfRingsObject *self, PyObject *stream_o, Py_ssize_t ncpu, const int *outs)
{
	PyObject *pages_o, *events_o, *stack_o = Py_None;
	int long_size, big_endian, chain_id, *pages = NULL, ret = -1;
	Py_ssize_t page_size, npages = 0;
	struct rb_layout layout;
	struct cm_event_map *map = NULL;
	size_t nmap = 0;

	if (!PyArg_ParseTuple(stream_o, "OOipni|O", &pages_o, &events_o, &long_size, &big_endian, &page_size, &chain_id,
			      &stack_o))
		return -1;
	if (stack_o != Py_None) {
		unsigned int nregs, max_frames;
		int ip, sp, bp;

		if (!PyArg_ParseTuple(stack_o, "IiiiI;stack is (nregs, ip, sp, bp, max_frames)", &nregs, &ip, &sp, &bp,
				      &max_frames))
			return -1;
		self->rules = cm_rules_new(nregs, ip, sp, bp, max_frames);
		if (!self->rules) {
			PyErr_SetString(PyExc_ValueError, "stack: register indices below nregs, max_frames > 0 (or no memory)");
			return -1;
		}
	}
	if (int_list(pages_o, "the pages' descriptors must be a sequence", &npages, &pages))
		return -1;
	if (npages != ncpu) {
		PyErr_SetString(PyExc_ValueError, "one pages descriptor per CPU");
		goto out;
	}
	if (get_layout(&layout, long_size, big_endian, page_size))
		goto out;
	map = event_map(events_o, &nmap);
	if (!map)
		goto out;
	self->streams = PyMem_Calloc((size_t)ncpu, sizeof(*self->streams));
	if (!self->streams) {
		PyErr_NoMemory();
		goto out;
	}
	self->nstreams = (size_t)ncpu;
	for (Py_ssize_t i = 0; i < ncpu; i++) {
		int err = cm_stream_create(&self->streams[i], &layout, map, nmap, (uint16_t)chain_id, pages[i],
					   outs[i], self->rules);

		if (err == RB_ERR_NOMEM) {
			PyErr_NoMemory();
			goto out;
		} else if (err) {
			PyErr_SetString(PyExc_ValueError, "a stream needs pages of this machine's byte order and events "
					"whose samples carry their record (and a stack copy only with stack)");
			goto out;
		}
	}
	ret = 0;
out:
	if (ret)
		free_streams(self);
	PyMem_Free(map);
	PyMem_Free(pages);
	return ret;
}

static int PerfRings_init(PerfRingsObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "cpus", "perf_fds", "out_fds", "data_pages", "poll_ms", "stream", NULL };
	PyObject *cpus_o, *perf_o, *out_o, *stream_o = Py_None;
	Py_ssize_t pages, ncpu = 0, nperf = 0, nout = 0;
	int poll_ms = 0, ret = -1, err;
	int *cpus = NULL, *perfs = NULL, *outs = NULL;

	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOn|$iO", kwlist, &cpus_o, &perf_o, &out_o, &pages,
					 &poll_ms, &stream_o))
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
	if (stream_o != Py_None) {
		if (make_streams(self, stream_o, ncpu, outs))
			goto out;
	}
	err = perf_ring_create(&self->pc, (size_t)ncpu, cpus, perfs, outs, self->streams,
			       pages > 0 ? (size_t)pages : 0, poll_ms);
	if (err == RB_ERR_IO)
		PyErr_SetFromErrno(PyExc_OSError);
	else if (err == RB_ERR_NOMEM)
		PyErr_NoMemory();
	else if (err)
		PyErr_Format(PyExc_ValueError, "data_pages must be a power of two, not %zd", pages);
	else
		ret = 0;
out:
	if (ret)
		free_streams(self);
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

static PyObject *PerfRings_streamed(PerfRingsObject *self, PyObject *unused)
{
	PyObject *list;

	(void)unused;
	if (!get_pc(self))
		return NULL;
	if (perf_ring_running(self->pc)) {
		PyErr_SetString(PyExc_RuntimeError, "the copier is still running");
		return NULL;
	}
	list = PyList_New((Py_ssize_t)self->nstreams);
	for (size_t i = 0; list && i < self->nstreams; i++) {
		struct cm_stream_stats st;
		PyObject *tids, *t;

		cm_stream_get_stats(self->streams[i], &st);
		tids = PyList_New((Py_ssize_t)st.ntids);
		for (size_t j = 0; tids && j < st.ntids; j++) {
			PyObject *v = PyLong_FromUnsignedLong(st.tids[j]);

			if (!v) {
				Py_CLEAR(tids);
				break;
			}
			PyList_SET_ITEM(tids, (Py_ssize_t)j, v);
		}
		t = tids ? Py_BuildValue("(KKNKK)", (unsigned long long)st.written, (unsigned long long)st.pages, tids,
					 (unsigned long long)st.walked, (unsigned long long)st.whole) : NULL;
		if (!t) {
			Py_CLEAR(list);
			break;
		}
		PyList_SET_ITEM(list, (Py_ssize_t)i, t);
	}
	return list;
}

static PyObject *PerfRings_wanted(PerfRingsObject *self, PyObject *unused)
{
	uint32_t pids[1024];
	uint64_t addresses[1024];
	PyObject *list = PyList_New(0);

	(void)unused;
	if (!list || !self->rules)
		return list;
	for (;;) {
		size_t n = cm_rules_wanted(self->rules, pids, addresses, 1024);

		for (size_t i = 0; i < n; i++) {
			PyObject *t = Py_BuildValue("(IK)", pids[i], (unsigned long long)addresses[i]);

			if (!t || PyList_Append(list, t)) {
				Py_XDECREF(t);
				Py_DECREF(list);
				return NULL;
			}
			Py_DECREF(t);
		}
		if (n < 1024)
			return list;
	}
}

static PyObject *PerfRings_put_rules(PerfRingsObject *self, PyObject *args)
{
	PyObject *rules_o, *seq;

	if (!PyArg_ParseTuple(args, "O", &rules_o))
		return NULL;
	if (!self->rules) {
		PyErr_SetString(PyExc_ValueError, "the rings walk no stacks");
		return NULL;
	}
	seq = PySequence_Fast(rules_o, "rules must be a sequence of (pid, address, rule)");
	if (!seq)
		return NULL;
	for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
		unsigned int pid;
		unsigned long long address;
		PyObject *rule_o;
		struct uw_rule rule;

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "IKO", &pid, &address, &rule_o) ||
		    parse_rule(rule_o, &rule)) {
			Py_DECREF(seq);
			return NULL;
		}
		if (cm_rules_put(self->rules, pid, address, &rule)) {
			Py_DECREF(seq);
			return PyErr_NoMemory();
		}
	}
	Py_DECREF(seq);
	Py_RETURN_NONE;
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
	{ "streamed", (PyCFunction)PerfRings_streamed, METH_NOARGS, DOC_PerfRings_streamed },
	{ "wanted", (PyCFunction)PerfRings_wanted, METH_NOARGS, DOC_PerfRings_wanted },
	{ "put_rules", (PyCFunction)PerfRings_put_rules, METH_VARARGS, DOC_PerfRings_put_rules },
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

// The callchains that replace the kernel's of CM_STACK samples: @chains_o is None or (index, pool),
// buffers of (offset, start, count) u64 triples sorted by offset and of u64 addresses. -1 on error.
static int stack_chains(struct cm_args *a, PyObject *chains_o, Py_buffer *index, Py_buffer *pool)
{
	if (chains_o == Py_None)
		return 0;
	if (!PyArg_ParseTuple(chains_o, "y*y*", index, pool))
		return -1;
	if (index->len % (Py_ssize_t)sizeof(struct cm_chain) || pool->len % 8) {
		PyErr_SetString(PyExc_ValueError, "chains must be (u64 triples, u64 addresses)");
		return -1;
	}
	a->chains = index->buf;
	a->nchains = (size_t)index->len / sizeof(struct cm_chain);
	a->chain_pool = pool->buf;
	a->chain_pool_len = (size_t)pool->len / 8;
	for (size_t i = 1; i < a->nchains; i++) {
		if (a->chains[i - 1].offset >= a->chains[i].offset) {
			PyErr_SetString(PyExc_ValueError, "chains must be sorted by offset");
			return -1;
		}
	}
	return 0;
}

struct cm_event_map *event_map(PyObject *events_o, size_t *count)
{
	PyObject *seq = PySequence_Fast(events_o, "events must be a sequence of (perf id, event id, flags)");
	struct cm_event_map *map;

	if (!seq)
		return NULL;
	*count = (size_t)PySequence_Fast_GET_SIZE(seq);
	map = PyMem_Calloc(*count ? *count : 1, sizeof(*map));
	if (!map) {
		PyErr_NoMemory();
		goto out;
	}
	for (size_t i = 0; i < *count; i++) {
		unsigned long long id;
		int event, flags;

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i), "Kii", &id, &event, &flags)) {
			PyMem_Free(map);
			map = NULL;
			goto out;
		}
		map[i].perf_id = id;
		map[i].event = (uint16_t)event;
		map[i].flags = (uint8_t)flags;
	}
out:
	Py_DECREF(seq);
	return map;
}

PyObject *write_callchains(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "src", "perf", "out_fd", "long_size", "big_endian", "page_size",
				  "callchain_id", "window_ns", "events", "pids", "chains", NULL };
	PyObject *src_o, *events_o, *pids_o, *chains_o = Py_None;
	Py_buffer src = { 0 }, index = { 0 }, pool_buf = { 0 };
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
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oy*iipniKOO|O", kwlist, &src_o, &records, &fd,
					 &long_size, &big_endian, &page_size, &chain_id, &window, &events_o, &pids_o,
					 &chains_o))
		return NULL;
	if (src_o != Py_None && PyObject_GetBuffer(src_o, &src, PyBUF_SIMPLE))
		goto out;
	if (get_layout(&a.layout, long_size, big_endian, page_size))
		goto out;
	map = event_map(events_o, &a.nmap);
	if (!map)
		goto out;
	if (stack_chains(&a, chains_o, &index, &pool_buf))
		goto out;
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
	if (index.buf)
		PyBuffer_Release(&index);
	if (pool_buf.buf)
		PyBuffer_Release(&pool_buf);
	PyBuffer_Release(&records);
	return ret;
}

// ---- perf_names ------------------------------------------------------------------------------

PyObject *perf_names(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "perf", NULL };
	Py_buffer records;
	struct cm_args a = { 0 };
	struct cm_result res = { 0 };
	PyObject *all, *ret = NULL;
	int err;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*", kwlist, &records))
		return NULL;
	a.perf = records.buf;
	a.perf_len = (size_t)records.len;
	Py_BEGIN_ALLOW_THREADS
	err = cm_names(&a, &res);
	Py_END_ALLOW_THREADS
	if (err) {
		PyErr_NoMemory();
	} else {
		all = comms_result(&res);	// (written, left, pages, comms, mmaps)
		if (all)
			ret = Py_BuildValue("(OO)", PyTuple_GET_ITEM(all, 3), PyTuple_GET_ITEM(all, 4));
		Py_XDECREF(all);
	}
	free(res.comms);
	free(res.mmaps);
	PyBuffer_Release(&records);
	return ret;
}
