"""C++ functions (and Rust's, whose legacy symbols are mangled as C++'s are) by the names their
programmers write: ``shop::Cart::add`` (every overload: one probe
each, with a notice), ``shop::overloaded(long, int)`` (one overload), ``shop::Cart::scale<int>``,
``shop::Cart::operator<``, ``shop::Cart::~Cart``, and globs over those (``'shop::Cart::*'``).

The program's function symbols are demangled (:mod:`probectl.debuginfo.demangle`) and matched by
their name without parameters, or with them when the name gives them (spaces aside); each match is
then probed by its mangled symbol, the route every symbol takes (its DWARF found at its address, so
arguments and member chains work as for C). Symbols at one address (a constructor's complete and
base-object variants, ``C1``/``C2``) are one function.
"""
from __future__ import annotations

import fnmatch
import re
from typing import TYPE_CHECKING

from .. import spec as S
from ..dataclass import dataclass, replace
from ..errors import ProbectlError, ProbePointNotFound, ResolveError, did_you_mean
from .points import ProbePoint

if TYPE_CHECKING:
    from . import Resolver


@dataclass(frozen=True)
class CxxFunction:
    """One function symbol with its demangled name (``full``) and the name a programmer writes, that
    name without its parameters and ABI tags (``name``: ``shop::describe`` of
    ``shop::describe[abi:cxx11](int)``)."""

    mangled: str
    full: str
    name: str
    address: int

    @classmethod
    def of(cls, mangled: str, full: str, address: int) -> "CxxFunction":
        from ..debuginfo.demangle import function_name

        return cls(mangled, full, function_name(full), address)


# Mangling schemes of other languages, by their symbols' first characters: such a name is probed as
# the symbol it is (never demangled here), and one that is no symbol of the program is said to be so.
_FOREIGN_MANGLING = (("_D", "D"), ("$s", "Swift"), ("$S", "Swift"), ("_$s", "Swift"), ("_$S", "Swift"), ("$e", "Swift"))


def _foreign_mangling(name: str) -> "str | None":
    """The language whose mangling ``name`` has (``_D4main3fooFZv``: D, a length after ``_D``), or None."""
    for prefix, language in _FOREIGN_MANGLING:
        after = name[len(prefix):len(prefix) + 1]
        if name.startswith(prefix) and (after.isdigit() if language == "D" else after.isalnum()):
            return language
    return None


def check_mangled_name(resolver: "Resolver", name: str) -> None:
    """A mangled name that is no symbol of the target: ResolveError when it demangles to nothing, or
    is mangled as another language's (D, Swift) are, rather than "not found"."""
    language = _foreign_mangling(name)
    if not name.startswith(("_Z", "_R")) and language is None:
        return
    if resolver.elf.find_functions(name):
        return
    from ..debuginfo.demangle import demangle  # (a symbol of the program, the common case, needs no demangler)

    hint = "list the functions by their names with 'probectl funcs -x BINARY', by their symbols with --no-demangle"
    if language is not None:
        raise ResolveError(f"'{name}' is no symbol of the program; it is mangled as {language} names are, which "
                           "probectl does not demangle (it names C++ and Rust functions by their demangled names)",
                           hint=f"a {language} function is probed by its symbol as the program has it: 'probectl "
                                "funcs --no-demangle -x BINARY' lists them")
    if name.startswith("_R") and demangle(name) is None:
        raise ResolveError(f"'{name}' is no symbol of the program and demangles to nothing: it is not a valid Rust "
                           "v0 mangled name", hint=hint)
    if name.startswith("_Z") and demangle(name) is None:
        raise ResolveError(f"'{name}' is no symbol of the program and demangles to nothing: it is not a valid C++ "
                           "(Itanium ABI) mangled name", hint=hint)


def names_cxx_function(name: str) -> bool:
    """A point's function written as a qualified C++ name or with a parameter list."""
    if "::" in name or name.startswith("~"):
        return True
    if "(" not in name:  # (no parameter list: a C name or a mangled one, which need no demangler module)
        return False
    from ..debuginfo.demangle import has_parameters

    return has_parameters(name)


def _mangled_part(pattern: str) -> str:
    """What the mangled symbol of every function ``pattern`` names holds: the last part of its name
    as the Itanium scheme writes a source name, its length then itself (``9_M_append``); "" when
    that is not known (a glob, an operator, a constructor or destructor)."""
    from ..debuginfo.demangle import function_name
    from ..debuginfo.dwarf.die import is_glob

    name = function_name(pattern)
    if is_glob(name):
        return ""
    depth, starts = 0, [0]
    for i, c in enumerate(name):
        depth += c == "<"
        depth -= c == ">"
        if depth == 0 and name.startswith("::", i):
            starts.append(i + 2)
    parts = [name[a:b - 2 if b else None].split("<", 1)[0] for a, b in zip(starts, starts[1:] + [0])]
    part = parts[-1]
    if len(parts) > 1 and parts[-2] == part:
        return ""  # (a constructor: C1/C2 stand for its name, and its class may be abbreviated, "Ss")
    return f"{len(part)}{part}" if re.fullmatch(r"[A-Za-z_]\w*", part) and part != "operator" else ""


def cxx_functions(resolver: "Resolver", pattern: str = "") -> list[CxxFunction]:
    """The demangled function symbols of the target, one per address; with ``pattern``, only
    those whose symbols can be what it names (demangling each symbol of a large library is most
    of the work: the others are passed over by their bytes). All of them are cached on the resolver."""
    part = _mangled_part(pattern) if pattern else ""
    if part and resolver._cxx_functions is None:
        return _demangled(resolver, part)
    if resolver._cxx_functions is None:
        resolver._cxx_functions = _demangled(resolver, "")
    return resolver._cxx_functions


def _demangled(resolver: "Resolver", part: str) -> list[CxxFunction]:
    """The demangled function symbols holding ``part`` ("": all), one per address."""
    from ..debuginfo.demangle import LEGACY_CLOSURE, demangle, is_mangled

    seen: set[int] = set()
    out = []
    symbols = resolver.elf.functions_holding(_spellings(part)) if part and part.isascii() else resolver.elf.functions()
    for sym in symbols:
        if not is_mangled(sym.name) or sym.value in seen or not sym.value or not _may_hold(sym.name, part):
            continue
        if "cold" in sym.name.split(".")[1:]:
            continue  # (gcc's cold part of a function, f.cold: code the function jumps to, not a function)
        full = demangle(sym.name)
        if full is None:
            continue
        if LEGACY_CLOSURE in full:
            full = _closures_spelled(resolver, full, sym.value)
        seen.add(sym.value)
        out.append(CxxFunction.of(sym.name, full, sym.value))
    return out


def _closures_spelled(resolver: "Resolver", full: str, address: int) -> str:
    """A legacy Rust path's closures as v0 spells them (``{closure#0}``), from the program's DWARF."""
    from ..debuginfo.dwarf.funcnames import spell_closures

    source = resolver.source(required=False)
    return spell_closures(source.debuginfo, full, address) if source is not None else full


def _spellings(part: str) -> tuple[str, ...]:
    """How a mangled symbol can write the identifier ``part`` (``3add``): as Itanium and v0 do, and
    v0's with '_' after the length (before a name that starts with '_')."""
    digits = len(part) - len(part.lstrip("0123456789"))
    return (part, f"{part[:digits]}_{part[digits:]}")


def _may_hold(symbol: str, part: str) -> bool:
    """A symbol can name a function whose last part is ``part`` (``3add``): Itanium and Rust's v0
    both write an identifier as its length then itself; v0 puts a '_' between them before a name
    that starts with '_' or a digit, and writes a name that is not ASCII in punycode ('u' first),
    which only the demangled name shows."""
    if not part or part in symbol:
        return True
    if not symbol.startswith("_R"):
        return False
    return _spellings(part)[1] in symbol or not part.isascii()


def _without_generic_arguments(name: str) -> str:
    """A Rust path without the generic arguments of its last part (``show::<&str>`` → ``show``)."""
    if not name.endswith(">"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ">" and name[i - 1:i] != "-":  # (not the arrow of "fn(u8) -> u8")
            depth += 1
        elif name[i] == "<":
            depth -= 1
        if depth == 0:
            return name[:i - 2] if name.startswith("::", i - 2) else name
    return name


def without_template_arguments(name: str) -> str:
    """A C++ name with the template arguments of each of its parts left out, as a programmer names
    every instance of a template (``shop::Box<int>::get<long>`` → ``shop::Box::get``); an operator's
    own symbol stays (``operator<``, ``operator<<``, ``operator->``)."""
    out, depth, parens, i = [], 0, 0, 0
    while i < len(name):
        if depth == 0 and name.startswith("operator", i) and (i == 0 or name[i - 1] in ": "):
            end = i + len("operator")
            symbol = re.match(r"\s*(<=>|<<=|>>=|->\*|<<|>>|<=|>=|->|<|>)", name[end:])
            if symbol is not None:
                end += symbol.end()
            out.append(name[i:end])
            i = end
            continue
        c = name[i]
        if depth and c in "()":  # (an argument that is an expression: "f<(1>2)>")
            parens += 1 if c == "(" else -1
        elif c == "<" and not parens:
            depth += 1
        elif c == ">" and depth and not parens:
            depth -= 1
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out).rstrip()


def _squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def match_cxx(resolver: "Resolver", pattern: str, functions: "list[CxxFunction] | None" = None) -> list[CxxFunction]:
    """The functions ``pattern`` names (see the module docstring) among ``functions`` (None: the
    target's function symbols); ResolveError for an overload selector that names more than one."""
    from ..debuginfo.demangle import has_parameters, signature, without_abi_tags, without_clone, without_parameters
    from ..debuginfo.dwarf.die import is_glob

    if functions is None:
        functions = cxx_functions(resolver, pattern)
    pattern = without_abi_tags(pattern)  # (as funcs lists a name, with them: the same function)
    with_params = has_parameters(pattern)
    glob = is_glob(without_parameters(pattern) if with_params else pattern)
    want = _squeeze(pattern)
    found, exact = [], []
    for fn in functions:
        if with_params:
            full = _squeeze(without_abi_tags(signature(without_clone(fn.full))))
            if glob:
                hit = fnmatch.fnmatchcase(full, want)
            else:
                # (a member's "f(int) const" is picked by "f(int)" too, unless another is exactly that)
                hit = full == want or re.sub(r"(const|volatile|&|&&)+$", "", full) == want
                if full == want:
                    exact.append(fn)
        else:
            name = _squeeze(fn.name)
            hit = fnmatch.fnmatchcase(name, want) if glob else name == want
            if not hit and not glob and "<" not in want:
                if fn.mangled.startswith("_R"):
                    # (a Rust v0 symbol names a generic function's instance, show::<&str>, which a
                    # legacy one leaves out: the function's path names all of them on both builds)
                    hit = _without_generic_arguments(name) == want
                elif "<" in name:
                    # (a template's name without its arguments names all its instances, as in gdb)
                    hit = _squeeze(without_template_arguments(fn.name)) == want
        if hit:
            found.append(fn)
    if exact:
        found = exact
    signatures = {without_clone(fn.full) for fn in found}
    if with_params and not glob and len(signatures) > 1:
        listed = "\n  ".join(sorted(signatures))
        raise ResolveError(f"'{pattern}' names {len(signatures)} functions:\n  {listed}",
                           hint="write the whole parameter list with its qualifiers (' const', ' volatile') to pick "
                                "one")
    return found


def resolve_cxx(resolver: "Resolver", probe: S.ProbeSpec) -> list[ProbePoint]:
    """The points of a definition whose point names C++ functions: each matched function probed by
    its mangled symbol, its events named from its qualified name."""
    points: list[ProbePoint] = []
    generic = "<" in (probe.point.function or "")
    for fn, point in cxx_points(resolver, probe.point, probe.text):
        # (a Rust generic function's instances named by its path share its event, as on a legacy build)
        name = fn.name if generic or not fn.mangled.startswith("_R") else _without_generic_arguments(fn.name)
        try:
            resolved = resolver._resolve(replace(probe, point=point))
        except ProbectlError as err:
            hint_as_written(err, fn.mangled, fn.name)
            raise
        for p in resolved:
            points.append(replace(p, qualified_name=name))
    return points


def hint_as_written(err: ProbectlError, mangled: str, name: str) -> None:
    """A hint that names the function by its mangled symbol ('probectl lines -x BIN FUNC') names it
    as the user does, ``name``, quoted for the shell as the command's other words are."""
    if mangled in err.hint:
        import shlex

        err.hint = err.hint.replace(mangled, shlex.quote(name))


def cxx_points(resolver: "Resolver", point: S.PointSpec, text: str) -> list[tuple[CxxFunction, S.PointSpec]]:
    """The functions a point written with a C++ name names, each with the point at its mangled
    symbol (for ``add`` and ``vars``); a notice when a name without parameters names several."""
    from ..debuginfo.demangle import has_parameters
    from ..debuginfo.dwarf.die import is_glob

    assert point.function is not None
    found = match_cxx(resolver, point.function)
    if not found:
        found = match_cxx(resolver, point.function, inlined_only(resolver, point.function))
    if not found:
        from ..debuginfo.demangle import without_parameters

        functions = cxx_functions(resolver)
        base = without_parameters(point.function)
        overloads = [fn.full for fn in functions if _squeeze(fn.name) == _squeeze(base)]
        if overloads:
            hint = "its overloads: " + ", ".join(overloads)
        else:
            names = sorted({fn.name for fn in functions})
            hint = did_you_mean(point.function, names, sep=", ") or "list them with 'probectl funcs -x BINARY'"
        raise ProbePointNotFound(point.text, hint=hint)
    resolver._check_count(text, len(found))
    if len(found) > 1 and not is_glob(point.function) and not has_parameters(point.function):
        listed = ", ".join(fn.full for fn in found)
        fulls = {fn.full for fn in found}
        instances = {fn.name for fn in found}
        kind = "generic" if found[0].mangled.startswith("_R") else "template"
        pick = (f"; pick one by its {kind} arguments ('{found[0].name}')" if len(instances) == len(found) else
                f"; pick one with its parameters ('{found[0].full}')" if len(fulls) == len(found) else
                " (a destructor's or constructor's variants: the same source function)" if len(fulls) == 1 else "")
        resolver.notes.append(f"'{point.function}' names {len(found)} functions ({listed}): each is probed{pick}")
    return [(fn, replace(point, function=fn.mangled, text=point.text)) for fn in found]


def inlined_only(resolver: "Resolver", pattern: str) -> list[CxxFunction]:
    """The functions DWARF defines under the last part of ``pattern``'s name that have no symbol
    (inlined at every call: ``always_inline``, or a small inline member at -O2), known by the
    linkage name DWARF gives them (a member's declaration in its class holds it), demangled: the
    linkage names of the name index that hold the part as it is mangled (``5clear``), or, when that
    is not known (a constructor, an operator), of the definitions DWARF names with it. Each is
    probed by that name, which the DWARF resolver finds in every inline instance, as perf does given
    the mangled name; one whose code the linker discarded (a COMDAT copy, or the inline instances in
    one: at address 0) is left out, as ``funcs`` leaves it out. Globs are left to the symbols."""
    from ..debuginfo.demangle import demangle, is_mangled, without_parameters
    from ..debuginfo.dwarf.die import die_linkage_name, is_glob

    name = without_parameters(pattern)
    last = name[_last_part_start(name):]
    if is_glob(last):
        return []
    source = resolver.source(required=False)
    if source is None:
        return []
    debuginfo = source.debuginfo
    part = _mangled_part(pattern)
    if part:
        # (DWARF spells a template's arguments its own way, __has_single_bit<long unsigned int>, and
        # a name looked up gives the first definition of each unit: the linkage names say it all)
        linkages = [n for n in debuginfo.function_names_holding(_spellings(part)) if is_mangled(n)]
    else:
        linkages = [die_linkage_name(fn.die) or "" for fn in debuginfo.find_functions(last)]
    out: dict[str, CxxFunction] = {}
    for linkage in linkages:
        if not linkage or linkage in out or resolver.elf.find_functions(linkage) \
                or not debuginfo.finds_code(linkage):
            continue
        full = demangle(linkage)
        if full is not None:
            out[linkage] = CxxFunction.of(linkage, full, 0)
    return list(out.values())


def _last_part_start(name: str) -> int:
    """Where the last ``::`` part of a qualified name starts (``::`` inside ``<...>`` are not parts)."""
    depth, start = 0, 0
    for i, c in enumerate(name):
        depth += c == "<"
        depth -= c == ">"
        if depth == 0 and name.startswith("::", i):
            start = i + 2
    return start


_OPERATORS = [("<<=", "lshift_assign"), (">>=", "rshift_assign"), ("<=>", "spaceship"), ("->*", "arrow_star"),
              ("()", "call"), ("[]", "index"), ("->", "arrow"), ("<<", "lshift"), (">>", "rshift"), ("<=", "le"),
              (">=", "ge"), ("==", "eq"), ("!=", "ne"), ("&&", "and"), ("||", "or"), ("++", "inc"), ("--", "dec"),
              ("+=", "plus_assign"), ("-=", "minus_assign"), ("*=", "mul_assign"), ("/=", "div_assign"),
              ("%=", "mod_assign"), ("&=", "and_assign"), ("|=", "or_assign"), ("^=", "xor_assign"), ("<", "lt"),
              (">", "gt"), ("+", "plus"), ("-", "minus"), ("*", "mul"), ("/", "div"), ("%", "mod"), ("^", "xor"),
              ("&", "bitand"), ("|", "bitor"), ("~", "compl"), ("!", "not"), ("=", "assign"), (",", "comma")]


def spell_cxx_name(name: str) -> str:
    """A C++ name with the parts an event name would lose spelled in words: an operator's symbol
    (``operator<`` → ``operator_lt``) and a destructor's tilde (``~Cart`` → ``Cart_dtor``), so that
    ``operator<``, ``operator>``, a constructor and the destructor get different events."""
    m = re.search(r"operator\s*(\S+)$", name)
    if m:
        for symbol, word in _OPERATORS:
            if m.group(1) == symbol:
                return name[:m.start()] + "operator_" + word
    return re.sub(r"(^|::)~([A-Za-z_]\w*)", r"\1\2_dtor", name)


def rust_main(resolver: "Resolver") -> "CxxFunction | None":
    """A Rust program's own main (``CRATE::main``, which the runtime's C ``main`` calls through
    ``std::rt::lang_start``), when one function is so named; None otherwise."""
    found = [fn for fn in cxx_functions(resolver, "crate::main") if re.fullmatch(r"[A-Za-z_]\w*::main", fn.name)]
    return found[0] if len(found) == 1 else None
