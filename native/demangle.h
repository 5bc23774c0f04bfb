/* SPDX-License-Identifier: GPL-2.0-only */
// demangle.h - C++ (Itanium ABI) names demangled by the C++ runtime's own __cxa_demangle, found when the
// process runs: the one libstdc++ (or any C++ runtime) already loaded, else libstdc++.so.6 loaded then,
// so that the extension links no C++ runtime and a system without one only lacks this.
//
// probectl/debuginfo/demangle.py keeps every rule of which names go to the demangler and what is done
// with its text (Rust's legacy paths, LLVM's copies, symbol versions); this is its call of
// __cxa_demangle for a whole list at once, where ctypes cost more than the demangling (a large C++
// library lists 9,500 names), and the walk of its signature() over a text's brackets, which took as
// long again.
#ifndef PROBECTL_DEMANGLE_H
#define PROBECTL_DEMANGLE_H

#include <stddef.h>

typedef char *dmg_cxa_demangle_fn(const char *mangled, char *buf, size_t *size, int *status);

// The process's __cxa_demangle, or libstdc++.so.6's (loaded now and kept); NULL when there is none.
dmg_cxa_demangle_fn *dmg_demangler(void);

// @name demangled by @fn: a string the caller free()s, or NULL for a name that is not a valid mangled
// name (or when memory ran out).
char *dmg_demangle(dmg_cxa_demangle_fn *fn, const char *name);

// Where the name of the demangled function @text (@len bytes of ASCII) starts after its return type, as
// probectl/debuginfo/demangle.py's signature() finds it, the reference this equals on every ASCII text:
// the text from there is the function as a probe point writes it (``int f<int>(int)`` -> ``f<int>(int)``).
size_t dmg_signature_start(const char *text, size_t len);

#endif
