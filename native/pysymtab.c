// SPDX-License-Identifier: GPL-2.0-only
// pysymtab.c - probectl._native.elf_symbols(): the named symbols of a whole ELF symbol table (elfsym.h)
// as probectl/debuginfo/symtab.py's SymbolTables._decode_symbols makes them, the reference this equals:
// names decoded with surrogate escapes, versions from a NAME@VERSION name or the .gnu.version table,
// section indexes from SHT_SYMTAB_SHNDX, each symbol an object of the given class with its fields set.

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "elfsym.h"
#include "pyglue.h"

#define SHN_UNDEF	0
#define SHN_ABS		0xFFF1
#define SHN_XINDEX	0xFFFF
#define VERSYM_HIDDEN	0x8000

// The fields of a symbol, in the order of the dataclass's (interned once).
static const char *const FIELD_NAMES[] = { "name", "value", "size", "type", "bind", "shndx", "version",
					   "default_version", "table" };
#define NFIELDS (sizeof(FIELD_NAMES) / sizeof(FIELD_NAMES[0]))
static PyObject *field_keys[NFIELDS];

static int intern_fields(void)
{
	for (size_t i = 0; i < NFIELDS; i++) {
		if (field_keys[i])
			continue;
		field_keys[i] = PyUnicode_InternFromString(FIELD_NAMES[i]);
		if (!field_keys[i])
			return -1;
	}
	return 0;
}

static PyObject *decoded(const uint8_t *p, size_t len)
{
	return PyUnicode_DecodeUTF8((const char *)p, (Py_ssize_t)len, "surrogateescape");
}

// An unsigned integer of the tuple @t at @i (the caller checked @i), or -1 with an exception.
static long long item_number(PyObject *t, Py_ssize_t i)
{
	long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));

	if (v < 0 && !PyErr_Occurred())
		PyErr_SetString(PyExc_ValueError, "elf_symbols(): a negative table value");
	return v;
}

// An object of @cls with @fields (NFIELDS new references, taken whether it succeeds or not) as its
// attributes, as object.__new__(cls) and an update of its __dict__ make it; NULL with an exception.
static PyObject *make_symbol(PyTypeObject *cls, PyObject **fields)
{
	PyObject *obj = NULL, *dict = NULL;
	size_t i;

	for (i = 0; i < NFIELDS; i++)
		if (!fields[i])
			goto out;
	obj = cls->tp_alloc(cls, 0);
	if (!obj)
		goto out;
	dict = PyObject_GenericGetDict(obj, NULL);
	if (!dict)
		goto fail;
	for (i = 0; i < NFIELDS; i++)
		if (PyDict_SetItem(dict, field_keys[i], fields[i]))
			goto fail;
	goto out;
fail:
	Py_CLEAR(obj);
out:
	Py_XDECREF(dict);
	for (i = 0; i < NFIELDS; i++)
		Py_XDECREF(fields[i]);
	return obj;
}

// The name, version and default flag of the named entry @index whose name is @p (@len bytes): into
// @fields; 0, or -1 with an exception.
static int name_and_version(const uint8_t *p, size_t len, Py_ssize_t index, uint16_t shndx, PyObject *versions,
			    PyObject *version_names, PyObject **name, PyObject **version, PyObject **is_default)
{
	const uint8_t *at = memchr(p, '@', len);

	*version = Py_None;
	*is_default = Py_True;
	if (at && at > p) {	// NAME@VERSION (another file's) or NAME@@VERSION (the default)
		size_t n = (size_t)(at - p), skip = len > n + 1 && at[1] == '@' ? 2 : 1;

		*name = decoded(p, n);
		*version = decoded(at + skip, len - n - skip);
		*is_default = skip == 2 ? Py_True : Py_False;
		if (!*name || !*version) {
			Py_XDECREF(*name);
			Py_XDECREF(*version);
			return -1;
		}
		return 0;
	}
	*name = decoded(p, len);
	if (!*name)
		return -1;
	if (!at && versions != Py_None && index < PyTuple_GET_SIZE(versions)) {
		long long ndx = item_number(versions, index);
		PyObject *key, *entry;

		if (ndx < 0)
			goto fail;
		key = PyLong_FromLongLong(ndx & ~VERSYM_HIDDEN);
		if (!key)
			goto fail;
		entry = PyDict_GetItemWithError(version_names, key);
		Py_DECREF(key);
		if (!entry) {
			if (PyErr_Occurred())
				goto fail;
		} else {
			int defined_here, same;

			if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
				PyErr_SetString(PyExc_TypeError, "elf_symbols(): a version is (name, defined here)");
				goto fail;
			}
			defined_here = PyObject_IsTrue(PyTuple_GET_ITEM(entry, 1));
			if (defined_here < 0)
				goto fail;
			*version = PyTuple_GET_ITEM(entry, 0);
			*is_default = defined_here && !(ndx & VERSYM_HIDDEN) && shndx != SHN_UNDEF ? Py_True : Py_False;
			if (shndx == SHN_ABS) {	// (the marker symbol of a version definition: no version)
				same = PyObject_RichCompareBool(*version, *name, Py_EQ);
				if (same < 0)
					goto fail;
				if (same)
					*version = Py_None;
			}
		}
	}
	Py_INCREF(*version);
	return 0;
fail:
	Py_DECREF(*name);
	return -1;
}

PyObject *elf_symbols(PyObject *self, PyObject *args)
{
	Py_buffer raw, strtab;
	int is64, big_endian;
	PyObject *versions, *version_names, *xindex, *table, *types, *binds, *indexes = NULL, *symbols = NULL;
	PyObject *result = NULL;
	PyTypeObject *cls;
	Py_ssize_t bad = -1;
	size_t count;

	(void)self;
	if (!PyArg_ParseTuple(args, "y*y*ppOO!OO!UO!O!", &raw, &strtab, &is64, &big_endian, &versions, &PyDict_Type,
			      &version_names, &xindex, &PyType_Type, &cls, &table, &PyTuple_Type, &types,
			      &PyTuple_Type, &binds))
		return NULL;
	if ((versions != Py_None && !PyTuple_Check(versions)) || (xindex != Py_None && !PyTuple_Check(xindex))) {
		PyErr_SetString(PyExc_TypeError, "elf_symbols(): versions and xindex are tuples or None");
		goto out;
	}
	if (PyTuple_GET_SIZE(types) != 16 || PyTuple_GET_SIZE(binds) != 16) {
		PyErr_SetString(PyExc_ValueError, "elf_symbols(): 16 type names and 16 binding names");
		goto out;
	}
	if (intern_fields())
		goto out;
	indexes = PyList_New(0);
	symbols = PyList_New(0);
	if (!indexes || !symbols)
		goto out;
	count = (size_t)raw.len / esym_entry_size(is64);
	for (size_t i = 0; i < count; i++) {
		struct esym_entry e;
		const uint8_t *name_at;
		size_t len;
		uint16_t shndx;
		PyObject *fields[NFIELDS] = { 0 }, *sym, *index;

		esym_read(raw.buf, i, is64, big_endian, &e);
		if (!e.name)
			continue;
		if (esym_name(strtab.buf, (size_t)strtab.len, e.name, &len)) {
			bad = (Py_ssize_t)i;	// (the caller says which entry, as the reference does)
			break;
		}
		if (!len)
			continue;
		name_at = (const uint8_t *)strtab.buf + e.name;
		if (name_and_version(name_at, len, (Py_ssize_t)i, e.shndx, versions, version_names, &fields[0],
				     &fields[6], &fields[7]))
			goto out;
		Py_INCREF(fields[7]);
		shndx = e.shndx;
		fields[5] = NULL;
		if (shndx == SHN_XINDEX && xindex != Py_None && (Py_ssize_t)i < PyTuple_GET_SIZE(xindex)) {
			fields[5] = PyTuple_GET_ITEM(xindex, (Py_ssize_t)i);
			Py_INCREF(fields[5]);
		} else {
			fields[5] = PyLong_FromLong(shndx);
		}
		fields[1] = PyLong_FromUnsignedLongLong(e.value);
		fields[2] = PyLong_FromUnsignedLongLong(e.size);
		fields[3] = PyTuple_GET_ITEM(types, e.info & 0xF);
		fields[4] = PyTuple_GET_ITEM(binds, e.info >> 4);
		fields[8] = table;
		Py_INCREF(fields[3]);
		Py_INCREF(fields[4]);
		Py_INCREF(fields[8]);
		sym = make_symbol(cls, fields);
		if (!sym)
			goto out;
		index = PyLong_FromSize_t(i);
		if (!index || PyList_Append(indexes, index) || PyList_Append(symbols, sym)) {
			Py_XDECREF(index);
			Py_DECREF(sym);
			goto out;
		}
		Py_DECREF(index);
		Py_DECREF(sym);
	}
	result = Py_BuildValue("(OOn)", indexes, symbols, bad);
out:
	Py_XDECREF(indexes);
	Py_XDECREF(symbols);
	PyBuffer_Release(&raw);
	PyBuffer_Release(&strtab);
	return result;
}
