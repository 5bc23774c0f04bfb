// SPDX-License-Identifier: GPL-2.0-only
// pydwscan.c - probectl._native.dwarf_definitions(): a DWARF unit's definitions for the name index
// (dwscan.h), as (is a function, name, (unit offset, DIE offset)) tuples; dwarf_instances(): its inline
// instances by their abstract origin.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "dwscan.h"
#include "pyglue.h"

// The str of @n, from @strings (keyed by where it is) or decoded as the reference decodes it
// (UTF-8, bad bytes replaced) and kept there; a new reference, NULL with an exception.
static PyObject *name_str(const struct dws_sections *sec, const struct dws_name *n, PyObject *strings)
{
	const uint8_t *base;
	size_t size;
	PyObject *key, *s;

	switch (n->where) {
	case DWS_STR:
		base = sec->str;
		size = sec->str_size;
		break;
	case DWS_LINE_STR:
		base = sec->line_str;
		size = sec->line_str_size;
		break;
	default:
		base = sec->info;
		size = sec->info_size;
		break;
	}
	key = PyLong_FromUnsignedLongLong((unsigned long long)n->offset << 2 | n->where);
	if (!key)
		return NULL;
	s = PyDict_GetItemWithError(strings, key);
	if (s) {
		Py_INCREF(s);
		Py_DECREF(key);
		return s;
	}
	if (PyErr_Occurred()) {
		Py_DECREF(key);
		return NULL;
	}
	const uint8_t *start = base + n->offset, *nul = memchr(start, 0, size - n->offset);

	s = PyUnicode_DecodeUTF8((const char *)start, nul ? nul - start : (Py_ssize_t)(size - n->offset), "replace");
	if (s && PyDict_SetItem(strings, key, s)) {
		Py_DECREF(s);
		s = NULL;
	}
	Py_DECREF(key);
	return s;
}

static int append_definition(PyObject *out, bool is_function, PyObject *name, PyObject *ref)
{
	PyObject *t = PyTuple_Pack(3, is_function ? Py_True : Py_False, name, ref);
	int err;

	if (!t)
		return -1;
	err = PyList_Append(out, t);
	Py_DECREF(t);
	return err;
}

static void get_section(const Py_buffer *view, const uint8_t **p, size_t *size)
{
	*p = view->buf;
	*size = (size_t)view->len;
}

/*
 * The unit tuple @unit into @u, and .debug_info into @sec from @info_base of @info: 0, or -1 with an
 * exception.
 */
static int get_unit(const Py_buffer *info, Py_ssize_t info_base, PyObject *unit, struct dws_sections *sec,
		    struct dws_unit *u)
{
	unsigned long long offset, end, die_offset, abbrev_offset;
	unsigned int offset_size, address_size, version;

	if (!PyArg_ParseTuple(unit, "KKKKIII;a unit is (offset, end, DIE offset, abbrev offset, offset size, "
			      "address size, version)", &offset, &end, &die_offset, &abbrev_offset, &offset_size,
			      &address_size, &version))
		return -1;
	if (info_base < 0 || info_base > info->len || offset_size > 255 || address_size > 255 || version > 65535) {
		PyErr_SetString(PyExc_ValueError, "info_base must be within info; sizes and version as a unit header has them");
		return -1;
	}
	sec->info = (const uint8_t *)info->buf + info_base;
	sec->info_size = (size_t)(info->len - info_base);
	*u = (struct dws_unit){ .offset = offset, .end = end, .die_offset = die_offset, .abbrev_offset = abbrev_offset,
				.offset_size = (uint8_t)offset_size, .address_size = (uint8_t)address_size,
				.version = (uint16_t)version };
	return 0;
}

// Whether a scan that returned @err answered: 1; else 0 with *@ret None (the unit given up), or with
// MemoryError (-1: no memory).
static int answered(int err, PyObject **ret)
{
	if (err < 0)
		PyErr_NoMemory();
	else if (err == DWS_UNSUPPORTED)
		*ret = Py_NewRef(Py_None);
	return !err;
}

PyObject *dwarf_definitions(PyObject *self, PyObject *args)
{
	Py_buffer info_buf, abbrev_buf, str_buf, line_str_buf, str_offsets_buf;
	Py_ssize_t info_base;
	PyObject *unit, *strings, *out = NULL, *ret = NULL, *ref = NULL;
	struct dws_sections sec = { 0 };
	struct dws_unit u;
	struct dws_scan *scan = NULL;
	const struct dws_definition *defs;
	size_t count;
	int err;

	(void)self;
	if (!PyArg_ParseTuple(args, "y*ny*y*y*y*OO!", &info_buf, &info_base, &abbrev_buf, &str_buf,
			      &line_str_buf, &str_offsets_buf, &unit, &PyDict_Type, &strings))
		return NULL;
	if (get_unit(&info_buf, info_base, unit, &sec, &u))
		goto out;
	get_section(&abbrev_buf, &sec.abbrev, &sec.abbrev_size);
	get_section(&str_buf, &sec.str, &sec.str_size);
	get_section(&line_str_buf, &sec.line_str, &sec.line_str_size);
	get_section(&str_offsets_buf, &sec.str_offsets, &sec.str_offsets_size);
	scan = dws_scan_new();
	Py_BEGIN_ALLOW_THREADS
	err = scan ? dws_definitions(scan, &sec, &u, &defs, &count) : -1;
	Py_END_ALLOW_THREADS
	if (!answered(err, &ret))
		goto out;
	out = PyList_New(0);
	if (!out)
		goto out;
	for (size_t i = 0; i < count; i++) {
		const struct dws_definition *d = &defs[i];
		PyObject *name = NULL, *linkage = NULL;
		int bad = 0;

		Py_XDECREF(ref);
		ref = Py_BuildValue("(KK)", (unsigned long long)u.offset, (unsigned long long)d->die_offset);
		if (!ref)
			goto out;
		if (d->name.where != DWS_NOWHERE) {
			name = name_str(&sec, &d->name, strings);
			bad = !name || append_definition(out, d->is_function, name, ref);
		}
		if (!bad && d->linkage.where != DWS_NOWHERE) {
			linkage = name_str(&sec, &d->linkage, strings);
			// (a name and a linkage name that are the same string are listed once)
			int same = !linkage ? -1 : name ? PyObject_RichCompareBool(name, linkage, Py_EQ) : 0;

			bad = same < 0 || (!same && append_definition(out, d->is_function, linkage, ref));
		}
		Py_XDECREF(name);
		Py_XDECREF(linkage);
		if (bad)
			goto out;
	}
	ret = Py_NewRef(out);
out:
	Py_XDECREF(ref);
	Py_XDECREF(out);
	dws_scan_free(scan);
	PyBuffer_Release(&info_buf);
	PyBuffer_Release(&abbrev_buf);
	PyBuffer_Release(&str_buf);
	PyBuffer_Release(&line_str_buf);
	PyBuffer_Release(&str_offsets_buf);
	return ret;
}

// Offset @at of the scan made a section offset by adding @unit_base: a new int, NULL with an exception.
static PyObject *section_offset(uint64_t at, unsigned long long unit_base)
{
	return PyLong_FromUnsignedLongLong((unsigned long long)at + unit_base);
}

// One instance's (offset, caller offset or None) appended to @by_origin's list of its origin: 0, or -1.
static int add_instance(PyObject *by_origin, const struct dws_instance *in, unsigned long long unit_base)
{
	PyObject *origin, *dies, *die, *caller, *t;
	int err = -1;

	origin = section_offset(in->origin, unit_base);
	if (!origin)
		return -1;
	dies = PyDict_GetItemWithError(by_origin, origin);	// (borrowed)
	if (!dies) {
		if (PyErr_Occurred())
			goto out;
		dies = PyList_New(0);
		if (!dies)
			goto out;
		err = PyDict_SetItem(by_origin, origin, dies);
		Py_DECREF(dies);	// (the dict holds it)
		if (err)
			goto out;
		err = -1;
	}
	die = section_offset(in->die_offset, unit_base);
	caller = in->caller == DWS_NO_CALLER ? Py_NewRef(Py_None) : section_offset(in->caller, unit_base);
	t = die && caller ? PyTuple_Pack(2, die, caller) : NULL;
	Py_XDECREF(die);
	Py_XDECREF(caller);
	if (t) {
		err = PyList_Append(dies, t);
		Py_DECREF(t);
	}
out:
	Py_DECREF(origin);
	return err;
}

PyObject *dwarf_instances(PyObject *self, PyObject *args)
{
	Py_buffer info_buf, abbrev_buf;
	Py_ssize_t info_base;
	unsigned long long unit_base;
	PyObject *unit, *unit_base_o, *out = NULL, *ret = NULL;
	struct dws_sections sec = { 0 };
	struct dws_unit u;
	struct dws_scan *scan = NULL;
	const struct dws_instance *found;
	size_t count;
	int err;

	(void)self;
	if (!PyArg_ParseTuple(args, "y*ny*OO!", &info_buf, &info_base, &abbrev_buf, &unit, &PyLong_Type, &unit_base_o))
		return NULL;
	// (a negative base refused: K would take it modulo 2**64)
	unit_base = PyLong_AsUnsignedLongLong(unit_base_o);
	if ((unit_base == (unsigned long long)-1 && PyErr_Occurred()) || get_unit(&info_buf, info_base, unit, &sec, &u))
		goto out;
	get_section(&abbrev_buf, &sec.abbrev, &sec.abbrev_size);
	scan = dws_scan_new();
	Py_BEGIN_ALLOW_THREADS
	err = scan ? dws_instances(scan, &sec, &u, unit_base, &found, &count) : -1;
	Py_END_ALLOW_THREADS
	if (!answered(err, &ret))
		goto out;
	out = PyDict_New();
	if (!out)
		goto out;
	for (size_t i = 0; i < count; i++)
		if (add_instance(out, &found[i], unit_base))
			goto out;
	ret = Py_NewRef(out);
out:
	Py_XDECREF(out);
	dws_scan_free(scan);
	PyBuffer_Release(&info_buf);
	PyBuffer_Release(&abbrev_buf);
	return ret;
}
