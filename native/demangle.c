// SPDX-License-Identifier: GPL-2.0-only
// demangle.c - __cxa_demangle found at run time and called for one name (demangle.h).

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"

static const char CXA_DEMANGLE[] = "__cxa_demangle";

dmg_cxa_demangle_fn *dmg_demangler(void)
{
	static dmg_cxa_demangle_fn *found;
	static int looked;
	void *sym, *lib;

	if (looked)
		return found;
	looked = 1;
	// (a C++ runtime the process has loaded already, as ctypes or DuckDB load one: no second one)
	sym = dlsym(RTLD_DEFAULT, CXA_DEMANGLE);
	if (!sym) {
		// (kept open for the process's life: the function is called on every list)
		lib = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
		if (lib) {
			sym = dlsym(lib, CXA_DEMANGLE);
			if (!sym)
				dlclose(lib);
		}
	}
	// (ISO C has no conversion of an object pointer to a function pointer; POSIX's dlsym needs one)
	*(void **)&found = sym;
	return found;
}

char *dmg_demangle(dmg_cxa_demangle_fn *fn, const char *name)
{
	int status = 0;
	char *out = fn(name, NULL, NULL, &status);

	if (out && status != 0) {
		free(out);
		out = NULL;
	}
	return out;
}

// A demangled text without gcc's clone suffixes (without_clone(): the regular expression
// "( \[clone [^\]]*\])+$" taken out): text[0, cut) and text[resume, len), the characters between left
// out. Read through text_at(), as the text the other steps see.
struct dmg_text {
	const char *s;
	size_t len;		// of what is left
	size_t cut, skip;	// characters [cut, cut + skip) of s are left out
};

static char text_at(const struct dmg_text *t, size_t i)
{
	return t->s[i < t->cut ? i : i + t->skip];
}

static const char CLONE[] = " [clone ";

static int starts_with(const char *s, size_t len, size_t at, const char *word, size_t n)
{
	return at <= len && len - at >= n && !memcmp(s + at, word, n);
}

// Python's "$" after a match ending at @at: the end of the text, or right before a newline that ends it.
static int at_end(const char *s, size_t len, size_t at)
{
	return at == len || (at + 1 == len && s[at] == '\n');
}

static void without_clone(struct dmg_text *t, const char *s, size_t len)
{
	t->s = s;
	t->len = len;
	t->cut = len;
	t->skip = 0;
	// (the leftmost start from which whole clone groups reach the end)
	for (size_t start = 0; start + sizeof(CLONE) - 1 <= len; start++) {
		size_t at = start;

		if (!starts_with(s, len, start, CLONE, sizeof(CLONE) - 1))
			continue;
		while (starts_with(s, len, at, CLONE, sizeof(CLONE) - 1)) {
			const char *close = memchr(s + at + sizeof(CLONE) - 1, ']', len - at - (sizeof(CLONE) - 1));

			if (!close)
				break;
			at = (size_t)(close - s) + 1;
			if (at_end(s, len, at)) {
				t->cut = start;
				t->skip = at - start;
				t->len = len - t->skip;
				return;
			}
		}
	}
}

// Python's "\s" on an ASCII character.
static int is_space(char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

static int text_starts_with(const struct dmg_text *t, size_t at, const char *word, size_t n)
{
	if (at > t->len || t->len - at < n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (text_at(t, at + i) != word[i])
			return 0;
	return 1;
}

// has_parameters(): a '(' and, after the last ')', only qualifiers ("\)(\s*(const|volatile))*$").
static int has_parameters(const struct dmg_text *t)
{
	size_t i, at = 0;
	int open = 0, close = 0;

	for (i = 0; i < t->len; i++) {
		char c = text_at(t, i);

		open |= c == '(';
		if (c == ')') {
			close = 1;
			at = i + 1;
		}
	}
	if (!open || !close)
		return 0;
	for (;;) {
		if (at == t->len || (at + 1 == t->len && text_at(t, at) == '\n'))
			return 1;
		while (at < t->len && is_space(text_at(t, at)))
			at++;
		if (text_starts_with(t, at, "const", 5))
			at += 5;
		else if (text_starts_with(t, at, "volatile", 8))
			at += 8;
		else
			return 0;
	}
}

// The end of the name before the parameter list (without_parameters()): the last top-level '(' found
// walking back over the brackets; the whole text when there is none, or when it is first.
static size_t name_end(const struct dmg_text *t)
{
	long depth = 0;

	for (size_t i = t->len; i-- > 0;) {
		char c = text_at(t, i);

		if (c == ')' || c == '>') {
			depth++;
		} else if (c == '(' || c == '<') {
			depth--;
			if (depth == 0 && c == '(')
				return i ? i : t->len;
		}
	}
	return t->len;
}

// The start of the name after its return type (_without_return_type()): after the last space outside
// brackets that does not follow "operator", in characters [0, end).
static size_t name_start(const struct dmg_text *t, size_t end)
{
	long depth = 0;
	size_t cut = 0;

	for (size_t i = 0; i < end; i++) {
		char c = text_at(t, i);

		if (c == '<' || c == '(')
			depth++;
		else if (c == '>' || c == ')')
			depth--;
		else if (c == ' ' && depth == 0 && !(i >= 8 && text_starts_with(t, i - 8, "operator", 8)))
			cut = i + 1;
	}
	return cut;
}

// The first place in @s where characters [from, to) of @t are (str.find()), or @len when nowhere.
static size_t find_part(const char *s, size_t len, const struct dmg_text *t, size_t from, size_t to)
{
	size_t n = to - from;

	if (!n)
		return 0;
	for (size_t at = 0; at + n <= len; at++) {
		size_t i = 0;

		while (i < n && s[at + i] == text_at(t, from + i))
			i++;
		if (i == n)
			return at;
	}
	return len;
}

// Whether ">(" is in @text.
static int has_template_call(const char *text, size_t len)
{
	for (const char *p = text; (p = memchr(p, '>', len - (size_t)(p - text))); p++)
		if ((size_t)(p - text) + 1 < len && p[1] == '(')
			return 1;
	return 0;
}

size_t dmg_signature_start(const char *text, size_t len)
{
	struct dmg_text t;
	const char *head;
	size_t end, start, at;

	// (the demangler writes a return type only before a function template's name, whose arguments
	// end right before its parameter list; other words before a name have a space before any
	// bracket: most names need no walk)
	if (!has_template_call(text, len)) {
		head = NULL;
		for (size_t i = 0; i < len && !head; i++)
			if (text[i] == '<' || text[i] == '(')
				head = text + i;
		if (!memchr(text, ' ', head ? (size_t)(head - text) : len))
			return 0;
	}
	without_clone(&t, text, len);
	if (!has_parameters(&t)) {
		end = t.len;
		start = 0;
	} else {
		end = name_end(&t);
		start = name_start(&t, end);
	}
	at = find_part(text, len, &t, start, end);
	return at < len ? at : 0;
}
