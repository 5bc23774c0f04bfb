"""Symbol names as their programmers wrote them: C++ (Itanium ABI, ``_Z...``) and Rust's legacy
scheme (which is Itanium's, with a hash as the last part of the path) demangled by the C++ runtime's
own ``__cxa_demangle`` in libstdc++, found when probectl runs and called for a whole list at once by
the native extension (``_native.cxa_demangle``, native/demangle.c), or through ctypes
(:func:`cxa_demangle`, the reference, and the way when the extension finds no C++ runtime).

Why libstdc++ rather than a demangler written here or a PyPI package: the Itanium grammar is large
(templates, substitutions, lambdas, ABI tags) and libstdc++'s demangler is the one g++, gdb and perf
(through libiberty, the same code) print names with, so names match what the user sees in them; it
is on every system that runs a C++ program (Debian's libstdc++6, which apt itself needs). A PyPI
wrapper (cxxfilt) is the same call behind one more dependency. Rust's v0 scheme (``_R...``) is not
Itanium's and libstdc++ does not know it: :mod:`.rustv0` demangles it.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Sequence

from ..errors import DebugInfoError

if TYPE_CHECKING:
    from .elf import ElfFile

# A closure in a Rust legacy path: which of its function's closures it is, only the DWARF says
# (debuginfo.dwarf.funcnames spells it {closure#N}, as a v0 path does).
LEGACY_CLOSURE = "{{closure}}"
_RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")
_LLVM_COPY = re.compile(r"(E)\.[0-9]+$")
# gcc's copies of a function changed by its interprocedural passes: "f(int) [clone .isra.0]"
_CLONE = re.compile(r"( \[clone [^\]]*\])+$")
_ABI_TAG = re.compile(r"\[abi:[^\]]*\]")
_demangler = None


def _cxa_demangle():
    global _demangler
    if _demangler is None:
        # (ctypes, and find_library's look through the loader's cache, only where a name is demangled:
        # the name helpers below are text, which every definition of a C program passes through)
        import ctypes

        # (by its soname first: find_library runs ldconfig -p, and ctypes.util imports shutil,
        # subprocess and tempfile: a few milliseconds of every C++ add)
        path = "libstdc++.so.6"
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            import ctypes.util

            path = ctypes.util.find_library("stdc++") or path
            try:
                lib = ctypes.CDLL(path)
            except OSError as exc:
                raise DebugInfoError(
                    f"C++ names cannot be demangled: {path} cannot be loaded ({exc})",
                    hint="install the C++ runtime (Debian: libstdc++6), or give mangled names") from None
        fn = lib.__cxa_demangle
        fn.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        fn.restype = ctypes.c_void_p
        libc = ctypes.CDLL(None)  # (the process's own libc, which Python runs on: its free)
        libc.free.argtypes = [ctypes.c_void_p]
        _demangler = (fn, libc.free)
    return _demangler


def is_mangled(name: str) -> bool:
    """A C++ or Rust (legacy or v0) mangled name."""
    return name.startswith("_Z") or name.startswith("_R")


def demangle(name: str) -> Optional[str]:
    """The demangled ``name`` (``shop::Cart::add(shop::Item const&, int)``; a Rust legacy path
    without its hash; a Rust v0 path as :func:`.rustv0.demangle_v0` writes it for probe points, the
    same as the legacy one's), or None when it is not a mangled name (or not a valid one)."""
    return demangle_all((name,))[0]


def demangle_all(names: Sequence[str]) -> list[Optional[str]]:
    """:func:`demangle` of each of ``names``, the C++ runtime called once for all of them
    (``_native.cxa_demangle``: a large C++ library lists 9,500 names, which ctypes called one by one
    in three times the time)."""
    out: list[Optional[str]] = []
    asked: list[str] = []  # (the Itanium names for the C++ runtime, at the positions in ``at``)
    at: list[int] = []
    for name in names:
        if name.startswith("_Z"):
            itanium = _itanium_part(name) if "@" in name or "." in name else name
            rust = _rust_legacy(itanium)
            if rust is None:
                at.append(len(out))
                asked.append(itanium)
            out.append(rust)
        elif name.startswith("_R"):
            from .rustv0 import demangle_v0

            out.append(demangle_v0(name))
        else:
            out.append(None)
    if asked:
        from .. import _native

        texts = _native.cxa_demangle(asked)
        if texts is None:  # (no C++ runtime in reach of the extension: ctypes's search, or its error)
            texts = [cxa_demangle(name) for name in asked]
        for k, text in zip(at, texts):
            if text is not None and "::h" in text and _RUST_HASH.search(text):
                text = _rust_unescaped(_RUST_HASH.sub("", text))
            out[k] = text
    return out


def _itanium_part(name: str) -> str:
    """The Itanium name in a symbol's name: without its version (``@GLIBCXX_3.4``) and LLVM's suffixes."""
    name = name.split("@", 1)[0]
    if "." in name:
        # (LLVM's copies of a function local to a unit, as rustc's and clang's ThinLTO make them, which
        # the Itanium demangler does not take: the function they copy)
        name = name.partition(".llvm.")[0]
        name = _LLVM_COPY.sub(r"\1", name)  # (LLVM's numbered copies of a local object: "E.0")
    return name


def cxa_demangle(name: str) -> Optional[str]:
    """``name`` demangled by libstdc++'s ``__cxa_demangle`` through ctypes, or None when it refuses
    it: the reference ``_native.cxa_demangle`` equals, and the way when the extension finds no C++
    runtime."""
    import ctypes

    fn, free = _cxa_demangle()
    status = ctypes.c_int(0)
    out = fn(name.encode("utf-8", "surrogateescape"), None, None, ctypes.byref(status))
    if not out or status.value != 0:
        if out:
            free(out)
        return None
    try:
        return ctypes.string_at(out).decode("utf-8", "replace")
    finally:
        free(out)


# Rust's legacy scheme writes the characters an Itanium name cannot hold as $NAME$ or $uHEX$
# (rustc_symbol_mangling/legacy.rs), and '::' inside a type as '..'.
_RUST_ESCAPES = {"SP": "@", "BP": "*", "RF": "&", "LT": "<", "GT": ">", "LP": "(", "RP": ")", "C": ","}
_RUST_ESCAPE = re.compile(r"\$(SP|BP|RF|LT|GT|LP|RP|C|u[0-9a-f]{2,6})\$")


_RUST_HASH_PART = re.compile(r"h[0-9a-f]{16}")


def _rust_legacy(name: str) -> Optional[str]:
    """A Rust legacy symbol's path (``_ZN`` + length-prefixed parts, the last its hash, + ``E``), read
    here: libstdc++'s demangler refuses some long ones that c++filt reads (a 1,100-byte drop_in_place of
    an iterator adapter's closure: "invalid mangled name"); None for anything else."""
    if not name.startswith("_ZN") or not name.endswith("E"):
        return None
    parts, pos, end = [], 3, len(name) - 1
    while pos < end:
        digits = pos
        while digits < end and name[digits].isdigit():
            digits += 1
        if digits == pos or name[pos] == "0":
            return None
        length = int(name[pos:digits])
        if digits + length > end:
            return None
        parts.append(name[digits:digits + length])
        pos = digits + length
    if len(parts) < 2 or not _RUST_HASH_PART.fullmatch(parts[-1]):
        return None
    return _rust_unescaped("::".join(parts[:-1]))


def _rust_unescaped(name: str) -> str:
    """A Rust legacy path with its escapes undone: ``{{closure}}``, ``<impl Foo for Bar>``."""
    def one(m: re.Match) -> str:
        code = m.group(1)
        return chr(int(code[1:], 16)) if code[0] == "u" else _RUST_ESCAPES[code]

    name = re.sub(r"(^|::)_(?=\$)", r"\1", name)  # (a part that starts with an escape gets a '_' before it)
    return _RUST_ESCAPE.sub(one, name).replace("..", "::")


def without_parameters(demangled: str) -> str:
    """The name of a demangled function without its parameter list and qualifiers
    (``shop::Cart::add(int) const`` → ``shop::Cart::add``); a template's arguments stay
    (``shop::Cart::scale<int>``), and ``operator()`` keeps its own parentheses. A name without a
    parameter list (a Rust path, whose generic arguments may hold ``fn(u8) -> u8``) is the name."""
    demangled = without_clone(demangled)
    if not has_parameters(demangled):
        return demangled
    depth = 0
    end = len(demangled)
    # The parameter list is the last top-level '(...)' group: walk back from the end over the
    # brackets alone (funcs does this for every symbol of a library: 9,400 of libstdc++'s), found in
    # the reversed text, so that the brackets of a long class name before the list are not visited.
    last = len(demangled) - 1
    for m in _BRACKETS.finditer(demangled[::-1]):
        c = m.group()
        if c in ")>":
            depth += 1
        else:
            depth -= 1
            if depth == 0 and c == "(":
                end = last - m.start()
                break
    name = demangled[:end] or demangled
    return _without_return_type(name)


_BRACKETS = re.compile(r"[()<>]")
_HEAD_END = re.compile(r"[<(]")
_BRACKETS_OR_SPACE = re.compile(r"[()<> ]")


def _without_return_type(name: str) -> str:
    """A function template's demangled name starts with its return type (``int shop::f<int>``):
    the name is after the last space outside brackets that is not ``operator``'s own
    (``operator new``, ``operator int``)."""
    if " " not in name:
        return name
    depth = 0
    cut = 0
    for m in _BRACKETS_OR_SPACE.finditer(name):
        c = m.group()
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif depth == 0 and not name.endswith("operator", 0, m.start()):
            cut = m.end()
    return name[cut:]


_PARAMETER_LIST_END = re.compile(r"\)(\s*(const|volatile))*$")


def has_parameters(name: str) -> bool:
    """A function name written with its parameter list (and qualifiers): ``f(int)``, ``g() const``."""
    return "(" in name and (name.endswith(")") or _PARAMETER_LIST_END.search(name) is not None)


def without_abi_tags(demangled: str) -> str:
    """A demangled name without its ABI tags (``shop::f[abi:cxx11](int)`` → ``shop::f(int)``: g++ tags
    a function that returns a std::string so): no programmer writes them, and gdb takes the name
    without them."""
    return _ABI_TAG.sub("", demangled) if "[abi:" in demangled else demangled


def function_name(demangled: str) -> str:
    """A demangled function's name as its programmers write it: without its parameter list, return
    type and ABI tags (``std::string shop::describe[abi:cxx11](int)`` → ``shop::describe``)."""
    return without_abi_tags(without_parameters(demangled))


def without_clone(demangled: str) -> str:
    """A demangled name without gcc's clone suffixes (``f(int) [clone .isra.0]`` → ``f(int)``): the
    clone is the function the source defines, compiled once more."""
    return _CLONE.sub("", demangled) if " [clone " in demangled else demangled


# Bump when what function_rows lists changes, so older lists kept on disk are not trusted.
_ROWS_FORMAT = 5  # (4: no function the DWARF defines without code; 5: nor one whose code was discarded)
# From this many demangled names on, the list is kept on disk (fewer cost less than reading it back).
_KEEP_FROM = 1000


def function_rows(elf: "ElfFile", demangled: bool = True,
                  closures: Optional[Callable[[str, int], str]] = None,
                  inlined: Optional[Callable[[], Iterable[str]]] = None,
                  probed: Optional[Callable[[str], bool]] = None) -> dict[str, tuple[int, int]]:
    """The functions ``funcs`` lists of ``elf``: name → (address, size), a symbol of a version
    other than the default also under ``NAME@VERSION``; with ``demangled``, C++ and Rust names
    demangled (:func:`demangled_names`, ``closures`` spelling a legacy Rust path's closures), and the
    functions of a program with mangled names that its DWARF defines under a linkage name no symbol
    has (``inlined()`` gives those names: a function inlined at every call, which ``add`` probes in
    its inline instances) at address 0, size 0, each only when ``probed(name)`` says ``add`` finds code
    for one of the names it is listed for (checked for those rows alone: most of libstdc++'s are
    copies the linker discarded, 610 of 647); a list kept on disk by the file's build-id, size and
    time when it has many (demangling every symbol of a large C++ library is most of the command:
    9,600 of libstdc++'s)."""
    from . import indexcache

    key = indexcache.file_key(elf.path, elf.build_id) if demangled else ""
    if demangled:
        stored = indexcache.load("demangled-functions", key, (_ROWS_FORMAT,))
        kept = _kept_rows(stored) if stored is not None else None
        if kept is not None:
            return kept
    rows: dict[str, tuple[int, int]] = {}
    for sym in elf.functions():
        rows.setdefault(sym.name, (sym.value, sym.size))
        if sym.version and not sym.default_version:
            rows.setdefault(sym.versioned_name, (sym.value, sym.size))
    if not demangled:
        return rows
    mangled = sum(1 for name in rows if is_mangled(name))
    listed = demangled_names(rows, closures)
    if mangled and inlined is not None:
        candidates: dict[str, list[str]] = {}
        names = [name for name in inlined() if is_mangled(name) and name not in rows]
        fulls = demangle_all(names)
        names = [name for name, full in zip(names, fulls) if full is not None]
        for name, written in zip(names, signatures([full for full in fulls if full is not None])):
            if written not in listed:
                candidates.setdefault(written, []).append(name)
        for full, names in candidates.items():
            if probed is None or any(probed(name) for name in names):
                listed[full] = (0, 0)
    rows = listed
    if mangled >= _KEEP_FROM:
        indexcache.store("demangled-functions", key, (_ROWS_FORMAT,), (tuple(rows), tuple(rows.values())))
    return rows


def _kept_rows(stored: tuple) -> Optional[dict[str, tuple[int, int]]]:
    """The rows of a kept list, or None for a payload not of their shape."""
    if len(stored) != 2 or not isinstance(stored[0], tuple) or not isinstance(stored[1], tuple) \
            or len(stored[0]) != len(stored[1]):
        return None
    names, values = stored
    if not all(type(n) is str for n in names) or not all(
            type(v) is tuple and len(v) == 2 and type(v[0]) is int and type(v[1]) is int for v in values):
        return None
    return dict(zip(names, values))


def demangled_names(rows: dict[str, tuple[int, int]],
                    closures: Optional[Callable[[str, int], str]] = None) -> dict[str, tuple[int, int]]:
    """A listing of symbols (name → (address, size)) with each mangled name demangled, as
    ``funcs`` shows them; a name that demangles to nothing stays as it is, and the names of one
    function at one address (a constructor's C1 and C2) are listed once. ``closures(name, address)``
    spells the closures of a legacy Rust path (``{{closure}}``) as v0 does."""
    fulls = demangle_all(list(rows))
    if closures is not None:
        fulls = [closures(full, row[0]) if full is not None and LEGACY_CLOSURE in full else full
                 for full, row in zip(fulls, rows.values())]
    written = iter(signatures([full for full in fulls if full is not None]))
    out: dict[str, tuple[int, int]] = {}
    for (name, row), full in zip(rows.items(), fulls):
        out.setdefault(next(written) if full is not None else name, row)
    return out


def signature(demangled: str) -> str:
    """A demangled function as written in a probe point: without a template's return type
    (``int shop::Cart::scale<int>(int)`` → ``shop::Cart::scale<int>(int)``)."""
    if ">(" not in demangled:
        # (the demangler writes a return type only for a function template, whose arguments end
        # right before its parameter list, and other words before a name ("virtual thunk to ",
        # "operator new") with spaces before any bracket: most names of a library, a class
        # template's methods with the spaces of its arguments too, need no walk over brackets)
        head = _HEAD_END.search(demangled)
        if " " not in (demangled[:head.start()] if head is not None else demangled):
            return demangled
    name = without_parameters(demangled)
    at = demangled.find(name)
    return demangled[at:] if at >= 0 else demangled


def signatures(texts: Sequence[str]) -> list[str]:
    """:func:`signature` of each of ``texts``, the ASCII ones in C (``_native.demangled_signatures``,
    native/demangle.c: this walk over brackets was a tenth of a cold funcs of a large C++ library)."""
    from .. import _native

    return [written if written is not None else signature(text)
            for text, written in zip(texts, _native.demangled_signatures(texts))]


def matches_function(name: str, pattern: str) -> bool:
    """A glob over a listed function: its whole name, or a demangled name without its parameters."""
    import fnmatch

    name = without_abi_tags(name)
    return fnmatch.fnmatchcase(name, pattern) or ("(" in name and fnmatch.fnmatchcase(without_parameters(name), pattern))
