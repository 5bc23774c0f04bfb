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
// a new reference, NULL with an exception. (@demangler: where the dmg_cxa_demangle_fn to call is.)
static PyObject *demangled(PyObject *name, void *demangler)
{
	dmg_cxa_demangle_fn *fn = *(dmg_cxa_demangle_fn **)demangler;
	PyObject *encoded = NULL, *s;
	const char *bytes;
	char *out;

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

static PyObject *nothing(PyObject *name, void *unused)
{
	(void)name;
	(void)unused;
	Py_RETURN_NONE;
}

// The signature of the demangled text @text (a str), or None for one not all ASCII (Python's "\s"
// knows more spaces than ASCII's: such a text is left to the reference); a new reference, NULL with an
// exception.
static PyObject *signature(PyObject *text, void *unused)
{
	Py_ssize_t len = PyUnicode_GET_LENGTH(text);
	size_t at;

	(void)unused;
	if (!PyUnicode_IS_ASCII(text))
		Py_RETURN_NONE;
	at = dmg_signature_start((const char *)PyUnicode_DATA(text), (size_t)len);
	if (at)
		return PyUnicode_Substring(text, (Py_ssize_t)at, len);
	Py_INCREF(text);
	return text;
}

// The list of @one(item, @ctx) of each str of the sequence @texts (@what: the function, for the
// TypeErrors); NULL with an exception.
static PyObject *each_text(PyObject *texts, const char *what, PyObject *(*one)(PyObject *, void *), void *ctx)
{
	PyObject *seq, *out;
	Py_ssize_t n;

	seq = PySequence_Fast(texts, "takes a sequence of str");
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	out = PyList_New(n);
	if (!out)
		goto fail;
	for (Py_ssize_t i = 0; i < n; i++) {
		PyObject *text = PySequence_Fast_GET_ITEM(seq, i), *done;

		if (!PyUnicode_Check(text)) {
			PyErr_Format(PyExc_TypeError, "%s() takes str items, not %.100s", what, Py_TYPE(text)->tp_name);
			goto fail;
		}
		done = one(text, ctx);
		if (!done)
			goto fail;
		PyList_SET_ITEM(out, i, done);
	}
	Py_DECREF(seq);
	return out;
fail:
	Py_XDECREF(out);
	Py_DECREF(seq);
	return NULL;
}

PyObject *cxa_demangle(PyObject *self, PyObject *args)
{
	dmg_cxa_demangle_fn *fn;
	PyObject *names, *out;

	(void)self;
	if (!PyArg_ParseTuple(args, "O", &names))
		return NULL;
	fn = dmg_demangler();
	out = each_text(names, "cxa_demangle", fn ? demangled : nothing, &fn);
	if (out && !fn) {	// (no C++ runtime to call: the caller's way)
		Py_DECREF(out);
		Py_RETURN_NONE;
	}
	return out;
}

PyObject *demangled_signatures(PyObject *self, PyObject *args)
{
	PyObject *texts;

	(void)self;
	if (!PyArg_ParseTuple(args, "O", &texts))
		return NULL;
	return each_text(texts, "demangled_signatures", signature, NULL);
}
