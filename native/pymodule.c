// SPDX-License-Identifier: GPL-2.0-only
// pymodule.c - the CPython binding probectl._native (pyglue.h is what its files share).
//
//   parse_page(data, long_size=8, big_endian=False) -> dict     one page, for tests and tools
//   event_ids(streams, ...) -> [id]                             ids of every record, undecoded
//   Reader(streams, formats, ...)                               merged, batched decoding
//   Recorder(cpus, in_fds, out_fds, subbuf_size, ...)           per-CPU trace_pipe_raw copying
//   PerfRings(cpus, perf_fds, out_fds, data_pages)              perf event mmap ring copying
//   write_callchains(src, perf, out_fd, ...)                    perf samples into a CPU's pages
//   perf_names(perf)                                            the execs and mappings perf reported
//   unwind_copies(perf, events, ...)                            their stack copies unwound by simple rules
//   fold_stacks(streams, selected, stacks, probe_ips)           events counted by thread and stacks
//   dwarf_definitions(info, ..., unit, strings)                 a DWARF unit's definitions, by name
//   dwarf_instances(info, info_base, abbrev, unit, unit_base)    its inline instances, by origin
//   cxa_demangle(names)                                         C++ names through __cxa_demangle
//   demangled_signatures(texts)                                 their functions as probe points write them
//   elf_symbols(raw, strtab, ...)                               the named symbols of an ELF symbol table
//   TextFormatter(plan, thread, symbol, line)                   plans for Reader.format_text
//   Aggregator(plans, time_div=1)                               keyed counts and latency pairs
//   DecodeError(ValueError)                                     a corrupt page
//
// The types are in pyreader.c (with pycolumns.c: Reader.read_tables, plan_slices and read_slices),
// pyformatter.c, pyrecorder.c, pyperfring.c and pyaggregate.c; pytextout.c holds event_ids() and
// Reader.format_text; this file the module, parse_page and the helpers they share. Decoding runs
// without the GIL (it touches no Python object); Python objects are made per batch from the C
// columns.
// probectl/ringbuf.py is the documented interface on top of this.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "pyglue.h"

PyObject *DecodeError;

// ---- helpers ---------------------------------------------------------------------------------

int get_layout(struct rb_layout *layout, int long_size, int big_endian, Py_ssize_t page_size)
{
	if (page_size < 0)
		page_size = 0;
	layout->long_size = (unsigned int)long_size;
	layout->big_endian = big_endian != 0;
	layout->page_size = (size_t)page_size;
	if (rb_layout_check(layout)) {
		PyErr_Format(PyExc_ValueError,
			     "bad page layout: long size %d (want 4 or 8), page size %zd "
			     "(want %d..%u bytes)", long_size, page_size, 8 + long_size + 1,
			     RB_MAX_PAGE_SIZE);
		return -1;
	}
	return 0;
}

PyObject *raise_decode_error(int err, int cpu, size_t page_offset, size_t pos)
{
	PyObject *exc;

	if (err == RB_ERR_NOMEM)
		return PyErr_NoMemory();
	if (cpu >= 0)
		exc = PyObject_CallFunction(DecodeError, "siinn", rb_strerror(err), err, cpu,
					    (Py_ssize_t)page_offset, (Py_ssize_t)pos);
	else
		exc = PyObject_CallFunction(DecodeError, "siOnn", rb_strerror(err), err, Py_None,
					    (Py_ssize_t)page_offset, (Py_ssize_t)pos);
	if (exc) {
		PyErr_SetObject(DecodeError, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

int stream_item(PyObject *item, int *cpu, Py_buffer *view, const uint8_t **data, size_t *size)
{
	PyObject *buf;
	Py_ssize_t offset, len;

	if (!PyArg_ParseTuple(item, "iOnn;a stream is (cpu, buffer, offset, size)", cpu, &buf, &offset,
			      &len))
		return -1;
	if (PyObject_GetBuffer(buf, view, PyBUF_SIMPLE))
		return -1;
	if (offset < 0 || len < 0 || offset > view->len || len > view->len - offset) {
		PyErr_Format(PyExc_ValueError, "cpu %d: data at %zd+%zd is outside its buffer of %zd bytes",
			     *cpu, offset, len, view->len);
		PyBuffer_Release(view);
		return -1;
	}
	*data = (const uint8_t *)view->buf + offset;
	*size = (size_t)len;
	return 0;
}

int streams_open(PyObject *streams, const struct rb_layout *layout, bool strict,
		 struct rb_reader *reader, Py_buffer **views, size_t *nviews)
{
	PyObject *seq = PySequence_Fast(streams, "streams must be a sequence of (cpu, buffer, offset, size)");
	Py_ssize_t n;

	*views = NULL;
	*nviews = 0;
	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	*views = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Py_buffer));
	if (!*views || rb_reader_init(reader, layout, (size_t)n, strict)) {
		PyMem_Free(*views);
		*views = NULL;
		Py_DECREF(seq);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++) {
		const uint8_t *data;
		size_t size;
		int cpu;

		if (stream_item(PySequence_Fast_GET_ITEM(seq, i), &cpu, &(*views)[i], &data, &size)) {
			streams_release(reader, *views, *nviews);
			*views = NULL;
			*nviews = 0;
			Py_DECREF(seq);
			return -1;
		}
		(*nviews)++;
		rb_reader_set_stream(reader, (size_t)i, cpu, data, size);
	}
	Py_DECREF(seq);
	return 0;
}

void streams_release(struct rb_reader *reader, Py_buffer *views, size_t nviews)
{
	rb_reader_deinit(reader);
	for (size_t i = 0; i < nviews; i++)
		PyBuffer_Release(&views[i]);
	PyMem_Free(views);
}

static PyObject *parse_page(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "data", "long_size", "big_endian", "page_size", NULL };
	Py_buffer view;
	int long_size = 8, big_endian = 0;
	Py_ssize_t page_size = -1;
	struct rb_layout layout;
	struct rb_page page;
	struct rb_event ev;
	PyObject *events = NULL, *result = NULL;
	int ret;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|ipn", kwlist, &view, &long_size,
					 &big_endian, &page_size))
		return NULL;
	if (page_size < 0)
		page_size = view.len > 8 + long_size ? view.len : 8 + long_size + 1;
	if (get_layout(&layout, long_size, big_endian, page_size))
		goto out;
	ret = rb_page_load(&page, &layout, view.buf, (size_t)view.len);
	if (ret < 0) {
		raise_decode_error(ret, -1, 0, 0);
		goto out;
	}
	events = PyList_New(0);
	if (!events)
		goto out;
	while ((ret = rb_page_next(&page, &ev)) == 1) {
		PyObject *item = Py_BuildValue("Ky#", (unsigned long long)ev.ts, ev.data,
					       (Py_ssize_t)ev.len);

		if (!item || PyList_Append(events, item)) {
			Py_XDECREF(item);
			goto out;
		}
		Py_DECREF(item);
	}
	if (ret < 0) {
		raise_decode_error(ret, -1, 0, page.pos);
		goto out;
	}
	result = Py_BuildValue("{sKsnsIsLsnsO}", "timestamp", (unsigned long long)page.timestamp,
			       "size", (Py_ssize_t)page.size, "flags", page.flags,
			       "missed", (long long)page.missed, "data_offset",
			       (Py_ssize_t)page.data_off, "events", events);
out:
	Py_XDECREF(events);
	PyBuffer_Release(&view);
	return result;
}

// ---- module ----------------------------------------------------------------------------------

static PyMethodDef module_methods[] = {
	{ "parse_page", (PyCFunction)(void (*)(void))parse_page, METH_VARARGS | METH_KEYWORDS,
	  DOC_parse_page },
	{ "event_ids", (PyCFunction)(void (*)(void))event_ids, METH_VARARGS | METH_KEYWORDS,
	  DOC_event_ids },
	{ "write_callchains", (PyCFunction)(void (*)(void))write_callchains, METH_VARARGS | METH_KEYWORDS,
	  DOC_write_callchains },
	{ "perf_names", (PyCFunction)(void (*)(void))perf_names, METH_VARARGS | METH_KEYWORDS,
	  DOC_perf_names },
	{ "unwind_copies", (PyCFunction)(void (*)(void))unwind_copies, METH_VARARGS | METH_KEYWORDS,
	  DOC_unwind_copies },
	{ "fold_stacks", (PyCFunction)(void (*)(void))fold_stacks, METH_VARARGS | METH_KEYWORDS,
	  DOC_fold_stacks },
	{ "dwarf_definitions", (PyCFunction)dwarf_definitions, METH_VARARGS, DOC_dwarf_definitions },
	{ "dwarf_instances", (PyCFunction)dwarf_instances, METH_VARARGS, DOC_dwarf_instances },
	{ "cxa_demangle", (PyCFunction)cxa_demangle, METH_VARARGS, DOC_cxa_demangle },
	{ "demangled_signatures", (PyCFunction)demangled_signatures, METH_VARARGS, DOC_demangled_signatures },
	{ "elf_symbols", (PyCFunction)elf_symbols, METH_VARARGS, DOC_elf_symbols },
	{ NULL, NULL, 0, NULL },
};

static struct PyModuleDef native_module = {
	PyModuleDef_HEAD_INIT,
	.m_name = "probectl._native",
	.m_doc = DOC_MODULE,
	.m_size = -1,
	.m_methods = module_methods,
};

static int add_textfmt_constants(PyObject *m)
{
	static const struct { const char *name; long value; } names[] = {
		{ "TF_SRC_LIT", TF_SRC_LIT }, { "TF_SRC_FIELD", TF_SRC_FIELD },
		{ "TF_SRC_COMM", TF_SRC_COMM }, { "TF_SRC_TGID", TF_SRC_TGID },
		{ "TF_SRC_TID", TF_SRC_TID }, { "TF_SRC_CPU", TF_SRC_CPU },
		{ "TF_SRC_SECS", TF_SRC_SECS }, { "TF_SRC_USECS", TF_SRC_USECS },
		{ "TF_SRC_NSECS", TF_SRC_NSECS }, { "TF_SRC_CELL_BEGIN", TF_SRC_CELL_BEGIN },
		{ "TF_SRC_CELL_END", TF_SRC_CELL_END }, { "TF_SRC_EMPTY_QUOTE", TF_SRC_EMPTY_QUOTE },
		{ "TF_SRC_ELEM", TF_SRC_ELEM }, { "TF_SRC_NSPID", TF_SRC_NSPID }, { "TF_CONV_INT", TF_CONV_INT },
		{ "TF_CONV_CHAR", TF_CONV_CHAR }, { "TF_CONV_STR", TF_CONV_STR },
		{ "TF_CONV_RAW", TF_CONV_RAW }, { "TF_CONV_HEX_LIST", TF_CONV_HEX_LIST },
		{ "TF_CONV_DEC_LIST", TF_CONV_DEC_LIST }, { "TF_CONV_HEX_BYTES", TF_CONV_HEX_BYTES },
		{ "TF_CONV_SYM", TF_CONV_SYM }, { "TF_CONV_JSON_STR", TF_CONV_JSON_STR },
		{ "TF_CONV_JSON_LIST", TF_CONV_JSON_LIST }, { "TF_CONV_JSON_BYTES", TF_CONV_JSON_BYTES },
		{ "TF_F_LEFT", TF_F_LEFT }, { "TF_F_PLUS", TF_F_PLUS }, { "TF_F_SPACE", TF_F_SPACE },
		{ "TF_F_ALT", TF_F_ALT }, { "TF_F_ZERO", TF_F_ZERO },
		{ "TF_F_EMPTY_CELL", TF_F_EMPTY_CELL },
		{ "TF_MAX_WIDTH", TF_MAX_WIDTH },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (PyModule_AddIntConstant(m, names[i].name, names[i].value))
			return -1;
	return 0;
}

PyMODINIT_FUNC PyInit__native(void)
{
	PyObject *m;

	if (PyType_Ready(&ReaderType) < 0 || PyType_Ready(&RecorderType) < 0 ||
	    PyType_Ready(&PerfRingsType) < 0 ||
	    PyType_Ready(&TextFormatterType) < 0 || PyType_Ready(&AggregatorType) < 0 ||
	    PyType_Ready(&ColumnBufferType) < 0)
		return NULL;
	m = PyModule_Create(&native_module);
	if (!m)
		return NULL;
	DecodeError = PyErr_NewExceptionWithDoc(
		"probectl._native.DecodeError", DOC_DecodeError,
		PyExc_ValueError, NULL);
	if (!DecodeError)
		goto fail;
	Py_INCREF(DecodeError);
	if (PyModule_AddObject(m, "DecodeError", DecodeError) < 0)
		goto fail;
	Py_INCREF(&ReaderType);
	if (PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType) < 0)
		goto fail;
	Py_INCREF(&RecorderType);
	if (PyModule_AddObject(m, "Recorder", (PyObject *)&RecorderType) < 0)
		goto fail;
	Py_INCREF(&PerfRingsType);
	if (PyModule_AddObject(m, "PerfRings", (PyObject *)&PerfRingsType) < 0)
		goto fail;
	Py_INCREF(&TextFormatterType);
	if (PyModule_AddObject(m, "TextFormatter", (PyObject *)&TextFormatterType) < 0)
		goto fail;
	Py_INCREF(&ColumnBufferType);
	if (PyModule_AddObject(m, "ColumnBuffer", (PyObject *)&ColumnBufferType) < 0)
		goto fail;
	Py_INCREF(&AggregatorType);
	if (PyModule_AddObject(m, "Aggregator", (PyObject *)&AggregatorType) < 0)
		goto fail;
	if (PyModule_AddIntConstant(m, "LOC_FIXED", RB_LOC_FIXED) ||
	    PyModule_AddIntConstant(m, "LOC_DATA", RB_LOC_DATA) ||
	    PyModule_AddIntConstant(m, "LOC_REL", RB_LOC_REL) ||
	    PyModule_AddIntConstant(m, "LOC_TAIL", RB_LOC_TAIL) ||
	    PyModule_AddIntConstant(m, "KIND_INT", RB_KIND_INT) ||
	    PyModule_AddIntConstant(m, "KIND_STR", RB_KIND_STR) ||
	    PyModule_AddIntConstant(m, "KIND_BYTES", RB_KIND_BYTES) ||
	    PyModule_AddIntConstant(m, "KIND_INT_ARRAY", RB_KIND_INT_ARRAY) ||
	    PyModule_AddIntConstant(m, "KIND_STR_ARRAY", RB_KIND_STR_ARRAY) ||
	    PyModule_AddIntConstant(m, "MISSED_EVENTS", (long)RB_MISSED_EVENTS) ||
	    PyModule_AddIntConstant(m, "MISSED_STORED", RB_MISSED_STORED))
		goto fail;
	if (add_textfmt_constants(m))
		goto fail;
	return m;
fail:
	Py_DECREF(m);
	return NULL;
}
