/* SPDX-License-Identifier: GPL-2.0-only */
// pyglue.h - what the CPython glue files (pymodule.c, pyreader.c, pycolumns.c, pytextout.c,
// pyformatter.c, pyrecorder.c, pyperfring.c, pyaggregate.c, pyunwind.c, pyfold.c, pydwscan.c, pydemangle.c,
// pysymtab.c) share: the
// Reader and TextFormatter objects, the types,
// and a few helpers. Not part of the C core (ringbuf.h, textfmt.h).
#ifndef PROBECTL_PYGLUE_H
#define PROBECTL_PYGLUE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdbool.h>

#include "docstrings.h"	// (the docstrings of probectl/_native.pyi: tools/regenerate_native_docstrings.py)
#include "ringbuf.h"
#include "tables.h"
#include "textfmt.h"

#define SCACHE_SIZE	4096
#define SCACHE_MAX_LEN	256

struct scache_entry {
	uint64_t hash;
	uint32_t len;
	uint8_t *key;
	PyObject *obj;
};

typedef struct {
	PyObject_HEAD
	struct rb_reader reader;
	bool reader_ready;
	struct rb_schema *schema;
	struct rb_event_format *formats;
	struct rb_field *fields;
	struct rb_batch batch;
	bool batch_ready;
	Py_buffer *views;
	size_t nviews;
	bool busy;
	bool finished;
	unsigned long long short_records;
	uint64_t serial;		// names the schema for the text formatter (textfmt.h)
	struct tab_plan *plan;		// the time slices of plan_slices(), or NULL
	struct scache_entry *scache;
} ReaderObject;

// The plans and tables of native/textfmt.c, and the Python callables that fill them on demand:
//   plan(id) -> None (not printed), True (each event through line()), or a sequence of ops,
//               each bytes (a literal) or (src, conv, flags, letter, cast_size, cast_signed,
//               width, prec, field, index) (see textfmt.h)
//   thread(tid) -> (comm as UTF-8 bytes, tgid)
//   symbol(tgid, addr) -> name as UTF-8 bytes
//   line(row) -> the text of one event (str or bytes) from its read_rows() tuple
typedef struct {
	PyObject_HEAD
	struct tf_formatter *f;
	PyObject *plan_fn, *thread_fn, *symbol_fn, *line_fn;
	bool busy;
} TextFormatterObject;

extern PyObject *DecodeError;
extern PyTypeObject ReaderType, TextFormatterType, RecorderType, PerfRingsType, AggregatorType, ColumnBufferType;

int get_layout(struct rb_layout *layout, int long_size, int big_endian, Py_ssize_t page_size);
PyObject *raise_decode_error(int err, int cpu, size_t page_offset, size_t pos);
// One stream of a trace as Python gives it, (cpu, buffer, offset, size): its buffer held in
// *@view (PyBuffer_Release it), its bytes at *@data, *@size of them, checked to lie in the buffer.
// 0, or -1 with an exception and nothing held.
int stream_item(PyObject *item, int *cpu, Py_buffer *view, const uint8_t **data, size_t *size);
// The sequence @streams of such items set on @reader (rb_reader_init'ed here with @layout and
// @strict), their buffers held in *@views (*@nviews of them) until streams_release. 0, or -1 with
// an exception and nothing left to release.
int streams_open(PyObject *streams, const struct rb_layout *layout, bool strict,
		 struct rb_reader *reader, Py_buffer **views, size_t *nviews);
void streams_release(struct rb_reader *reader, Py_buffer *views, size_t nviews);
int tf_append_line(TextFormatterObject *tf, PyObject *row);
PyObject *id_list(const uint8_t *seen);
PyObject *write_callchains(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *perf_names(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *unwind_copies(PyObject *self, PyObject *args, PyObject *kwargs);

// A rule tuple (kind, cfa_reg, cfa_off, ra_off, bp_rule, bp_off) of unwind.h's values into *@ret;
// 0, or -1 with an exception. (pyunwind.c)
struct uw_rule;
int parse_rule(PyObject *o, struct uw_rule *ret);
PyObject *fold_stacks(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *dwarf_definitions(PyObject *self, PyObject *args);
PyObject *dwarf_instances(PyObject *self, PyObject *args);
PyObject *cxa_demangle(PyObject *self, PyObject *args);
PyObject *demangled_signatures(PyObject *self, PyObject *args);
PyObject *elf_symbols(PyObject *self, PyObject *args);

// The (perf id, ftrace event id, flags) of @events_o into a new map (PyMem_Free it), *@count entries;
// NULL with an exception on error. (pyperfring.c)
struct cm_event_map *event_map(PyObject *events_o, size_t *count);

// The ints of the sequence @obj (CPUs, file descriptors) into *@ret (PyMem_Calloc'd, *@n of them; the
// caller frees it); 0, or -1 with an exception (@what: the TypeError's text). (pyrecorder.c)
int int_list(PyObject *obj, const char *what, Py_ssize_t *n, int **ret);

// A field spec (offset, size, loc, kind, elem_size, signed[, bound_size, bound_offset, head_size,
// head_offset]: a C++ vector's begin pointer for RB_KIND_INT_ARRAY), as
// probectl.ringbuf.field_spec makes it, into *@f; 0, or -1 with an exception. (pyreader.c)
int parse_field(PyObject *item, struct rb_field *f);

// The next batch of up to @max events into self->batch: the count (0 at the end), or -1.
Py_ssize_t reader_fill(ReaderObject *self, Py_ssize_t max);

// The read_rows() tuple of event @i of self->batch.
PyObject *reader_row_tuple(ReaderObject *self, Py_ssize_t i);

// Resolve what tf_format() stopped for by asking Python; 0, or -1 with an exception.
int formatter_resolve_need(TextFormatterObject *tf, ReaderObject *reader, int status,
			   const struct tf_need *need, size_t *pos);

// pycolumns.c
PyObject *Reader_read_tables(ReaderObject *self, PyObject *args, PyObject *kwargs);
PyObject *Reader_plan_slices(ReaderObject *self, PyObject *args);
PyObject *Reader_read_slices(ReaderObject *self, PyObject *args, PyObject *kwargs);
void reader_free_plan(ReaderObject *self);

// pytextout.c
PyObject *event_ids(PyObject *self, PyObject *args, PyObject *kwargs);
PyObject *Reader_format_text(ReaderObject *self, PyObject *args, PyObject *kwargs);

#endif // PROBECTL_PYGLUE_H
