// SPDX-License-Identifier: GPL-2.0-only
// demangle.c - __cxa_demangle found at run time and called for one name (demangle.h).

#include <dlfcn.h>
#include <stdlib.h>

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
