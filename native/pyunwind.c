// SPDX-License-Identifier: GPL-2.0-only
// pyunwind.c - probectl._native.unwind_copies(): the stack copies of a CPU's perf records unwound by
// simple rules (unwind.h), the samples they cannot take handed back to Python.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "chainmerge.h"
#include "pyglue.h"
#include "unwind.h"

int parse_rule(PyObject *o, struct uw_rule *ret)
{
	int kind, cfa_reg, bp_rule;
	long long cfa_off, ra_off, bp_off;

	if (!PyArg_ParseTuple(o, "iiLLiL", &kind, &cfa_reg, &cfa_off, &ra_off, &bp_rule, &bp_off))
		return -1;
	if (kind < UW_RULE_STEP || kind > UW_RULE_OTHER || (cfa_reg != UW_SP && cfa_reg != UW_BP) ||
	    bp_rule < UW_BP_SAME || bp_rule > UW_BP_LOST) {
		PyErr_SetString(PyExc_ValueError,
				"a rule is (kind, cfa_reg, cfa_off, ra_off, bp_rule, bp_off) of unwind.h's values");
		return -1;
	}
	*ret = (struct uw_rule){ .kind = (uint8_t)kind, .cfa_reg = (uint8_t)cfa_reg, .bp_rule = (uint8_t)bp_rule,
				 .cfa_off = cfa_off, .ra_off = ra_off, .bp_off = bp_off };
	return 0;
}

// The rule of an address from the Python callable @ctx, rule_of(pid, address): None (anything but a
// simple rule) or a rule tuple (parse_rule).
static int rule_from_python(void *ctx, uint32_t pid, uint64_t address, struct uw_rule *ret)
{
	PyObject *got = PyObject_CallFunction((PyObject *)ctx, "IK", pid, (unsigned long long)address);
	int err;

	if (!got)
		return -1;
	ret->kind = UW_RULE_OTHER;
	err = got == Py_None ? 0 : parse_rule(got, ret);
	Py_DECREF(got);
	return err;
}

// A growable buffer of u64.
struct words {
	uint64_t *v;
	size_t n, cap;
};

static int words_add(struct words *w, const uint64_t *v, size_t n)
{
	if (w->n + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;

		while (cap < w->n + n)
			cap *= 2;
		uint64_t *more = PyMem_Realloc(w->v, cap * sizeof(*more));

		if (!more)
			return -1;
		w->v = more;
		w->cap = cap;
	}
	memcpy(w->v + w->n, v, n * sizeof(*v));
	w->n += n;
	return 0;
}

PyObject *unwind_copies(PyObject *self, PyObject *args, PyObject *kwargs)
{
	static char *kwlist[] = { "perf", "events", "nregs", "ip", "sp", "bp", "max_frames", "rule_of", NULL };
	Py_buffer records;
	PyObject *events_o, *rule_of, *others = NULL, *ret = NULL;
	unsigned int nregs, max_frames;
	int ip_i, sp_i, bp_i;
	struct cm_args a = { 0 };
	struct cm_result res = { 0 };
	struct cm_event_map *map = NULL;
	struct cm_stack *st = NULL;
	struct uw_cache *cache = NULL;
	struct words index = { 0 }, pool = { 0 };
	uint64_t *out = NULL;
	size_t count = 0;

	(void)self;
	if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*OIiiiIO", kwlist, &records, &events_o, &nregs, &ip_i, &sp_i,
					 &bp_i, &max_frames, &rule_of))
		return NULL;
	if (!PyCallable_Check(rule_of) || ip_i < 0 || sp_i < 0 || (unsigned int)ip_i >= nregs ||
	    (unsigned int)sp_i >= nregs || (bp_i >= 0 && (unsigned int)bp_i >= nregs) || !max_frames ||
	    max_frames > 65536) {
		PyErr_SetString(PyExc_ValueError,
				"rule_of must be callable, ip, sp and bp register indices below nregs, max_frames 1..65536");
		goto out;
	}
	map = event_map(events_o, &a.nmap);
	if (!map)
		goto out;
	a.perf = records.buf;
	a.perf_len = (size_t)records.len;
	a.map = map;
	a.stack_nregs = nregs;
	int err;

	Py_BEGIN_ALLOW_THREADS
	err = cm_stacks(&a, &st, &count, &res);
	Py_END_ALLOW_THREADS
	cache = uw_cache_new();
	out = PyMem_Malloc(max_frames * sizeof(*out));
	others = PyList_New(0);
	if (err || !cache || !out || !others) {
		if (!PyErr_Occurred())
			PyErr_NoMemory();
		goto out;
	}
	for (size_t i = 0; i < count; i++) {
		const struct cm_stack *x = &st[i];
		struct uw_sample s = { .pid = x->pid, .stack = x->stack, .stack_len = x->stack_len };
		uint64_t triple[3] = { x->offset, pool.n, 0 };
		uint32_t n = 0;
		enum uw_result r;

		memcpy(&s.ip, x->regs + 8 * ip_i, 8);
		memcpy(&s.sp, x->regs + 8 * sp_i, 8);
		if (bp_i >= 0) {
			memcpy(&s.bp, x->regs + 8 * bp_i, 8);
			s.bp_known = true;
		}
		r = uw_unwind(&s, max_frames, cache, rule_from_python, rule_of, out, &n);
		if (r == UW_FAIL) {
			if (!PyErr_Occurred())
				PyErr_NoMemory();
			goto out;
		}
		if (r == UW_OTHER) {
			PyObject *t = Py_BuildValue("(nKIIKy#KK)", (Py_ssize_t)(index.n / 3), (unsigned long long)x->offset,
						    x->pid, x->tid, (unsigned long long)x->ts, (const char *)x->regs,
						    (Py_ssize_t)(8 * nregs), (unsigned long long)(x->stack - a.perf),
						    (unsigned long long)x->stack_len);

			if (!t || PyList_Append(others, t)) {
				Py_XDECREF(t);
				goto out;
			}
			Py_DECREF(t);
		} else {
			triple[2] = n;
			if (words_add(&pool, out, n)) {
				PyErr_NoMemory();
				goto out;
			}
		}
		if (words_add(&index, triple, 3)) {
			PyErr_NoMemory();
			goto out;
		}
	}
	ret = Py_BuildValue("(y#y#O)", index.v ? (const char *)index.v : "", (Py_ssize_t)(8 * index.n),
			    pool.v ? (const char *)pool.v : "", (Py_ssize_t)(8 * pool.n), others);
out:
	Py_XDECREF(others);
	uw_cache_free(cache);
	PyMem_Free(out);
	PyMem_Free(index.v);
	PyMem_Free(pool.v);
	free(st);
	free(res.comms);
	free(res.mmaps);
	PyMem_Free(map);
	PyBuffer_Release(&records);
	return ret;
}
