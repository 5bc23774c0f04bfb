// SPDX-License-Identifier: GPL-2.0-only
// pydemangle.c - probectl._native.cxa_demangle(): a list of C++ names through __cxa_demangle (demangle.h)
// in one call, each as probectl/debuginfo/demangle.py's ctypes call gives it; demangled_signatures():
// their texts as probe points write them, as demangle.py's signature() does.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "pyglue.h"

// The demangled text of the str @name (its UTF-8 bytes, surrogate escapes as the bytes they stand
// for, read to the first NUL as a C string is), decoded as UTF-8 with bad bytes replaced, or None;
// a new reference, NULL with an exception.
static PyObject *demangled(dmg_cxa_demangle_fn *fn, PyObject *name)
{
	PyObject *encoded = NULL, *s;
	const char *bytes;
	char *out;

	if (!PyUnicode_Check(name)) {
		PyErr_Format(PyExc_TypeError, "cxa_demangle() takes str names, not %.100s", Py_TYPE(name)->tp_name);
		return NULL;
	}
	// (an ASCII name's bytes are the str's own; others are encoded as the Python side encodes them)
	if (PyUnicode_IS_ASCII(name)) {
		bytes = (const char *)PyUnicode_DATA(name);
	} else {
		encoded = PyUnicode_AsEncodedString(name, "utf-8", "surrogateescape");
		if (!encoded)
			return NULL;
		bytes = PyBytes_AS_STRING(encoded);
	}
	out = dmg_demangle(fn, bytes);
	Py_XDECREF(encoded);
	if (!out)
		Py_RETURN_NONE;
	s = PyUnicode_DecodeUTF8(out, (Py_ssize_t)strlen(out), "replace");
	free(out);
	return s;
}

PyObject *cxa_demangle(PyObject *self, PyObject *args)
{
	dmg_cxa_demangle_fn *fn;
	PyObject *names, *seq, *out;
	Py_ssize_t n;

	(void)self;
	if (!PyArg_ParseTuple(args, "O", &names))
		return NULL;
	seq = PySequence_Fast(names, "cxa_demangle() takes a sequence of names");
	if (!seq)
		return NULL;
	fn = dmg_demangler();
	if (!fn) {
		Py_DECREF(seq);
		Py_RETURN_NONE;
	}
	n = PySequence_Fast_GET_SIZE(seq);
	out = PyList_New(n);
	if (!out)
		goto fail;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *text = demangled(fn, PySequence_Fast_GET_ITEM(seq, i));

		if (!text)
			goto fail;
		PyList_SET_ITEM(out, i, text);
	}
	Py_DECREF(seq);
	return out;
fail:
	Py_XDECREF(out);
	Py_DECREF(seq);
	return NULL;
}

PyObject *demangled_signatures(PyObject *self, PyObject *args)
{
	PyObject *texts, *seq, *out;
	Py_ssize_t n;

	(void)self;
	if (!PyArg_ParseTuple(args, "O", &texts))
		return NULL;
	seq = PySequence_Fast(texts, "demangled_signatures() takes a sequence of texts");
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	out = PyList_New(n);
	if (!out)
		goto fail;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *text = PySequence_Fast_GET_ITEM(seq, i), *written;
		Py_ssize_t len;
		size_t at;

		if (!PyUnicode_Check(text)) {
			PyErr_Format(PyExc_TypeError, "demangled_signatures() takes str texts, not %.100s",
				     Py_TYPE(text)->tp_name);
			goto fail;
		}
		if (!PyUnicode_IS_ASCII(text)) {
			// (Python's "\s" knows more spaces than ASCII's: such a text is left to the reference)
			Py_INCREF(Py_None);
			PyList_SET_ITEM(out, i, Py_None);
			continue;
		}
		len = PyUnicode_GET_LENGTH(text);
		at = dmg_signature_start((const char *)PyUnicode_DATA(text), (size_t)len);
		if (at) {
			written = PyUnicode_Substring(text, (Py_ssize_t)at, len);
			if (!written)
				goto fail;
		} else {
			Py_INCREF(text);
			written = text;
		}
		PyList_SET_ITEM(out, i, written);
	}
	Py_DECREF(seq);
	return out;
fail:
	Py_XDECREF(out);
	Py_DECREF(seq);
	return NULL;
}
