"""Fetch arguments for C expressions from DWARF: a variable found at an address (perf's
``find_variable``), its place evaluated from its location (``convert_variable_location``) and its
member chain walked by :func:`probectl.resolve.fetch.fetch_chain` over DWARF types; ``$vars``,
``$params`` and the variable listings of ``probectl vars`` (perf ``-V``); ``$retval``'s type.
"""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Optional

from .. import spec as S
from ..arch import Arch, for_machine, machine_name
from ..debuginfo.dwarf import types as T
from ..debuginfo.dwarf.die import die_name, guarded
from ..debuginfo.dwarf.types import DWARF_TYPES
from ..debuginfo.dwarf.units import DIE
from ..debuginfo.dwarf.variables import find_variable, variable_place
from ..debuginfo.place import Pieces
from ..errors import LocationError, ResolveError, ValueTooWideError, VariableUnavailable
from .fetch import fetch_chain
from .fetch_options import FetchOptions
from .fetchresult import FetchResult, ListedVariable
from .render import RenderOptions, check_readable

if TYPE_CHECKING:
    from ..debuginfo.dwarf import DebugInfo


@guarded
def fetch_variable(debuginfo: "DebugInfo", function: Optional[DIE], address: int, variable: S.Variable,
                   cast: Optional[S.TypeSpec] = None,
                   *, options: FetchOptions = FetchOptions(), symbol_base: Optional[int] = None,
                   user_access: bool = False) -> FetchResult:
    """The fetch argument reading ``variable`` (a ``spec.Variable``: name and accessors) at
    ``address`` in scope ``function`` (a function or inline-instance DIE, or a ``Function``;
    None: the function containing the address), with an optional ``spec.TypeSpec`` cast.

    ``options``: what the kernel's fetch arguments can express (``x<bits>`` types, ``\\imm``).
    ``symbol_base``: write globals as uprobe ``@+FILEOFFSET`` relative to it (see
    ``RenderOptions``) instead of perf's ``@name+off``. ``user_access`` (kprobe ``@user``):
    every dereference through a pointer reads user memory (``+u0(...)``), as perf writes it.

    Raises VariableNotFound, VariableUnavailable (with the lines where it can be fetched),
    TypeMismatchError for chain/cast mistakes.
    """
    scope = getattr(function, "die", function)
    found = find_variable(debuginfo, variable.name, address, scope)
    arch = debuginfo_arch(debuginfo)
    place = variable_place(debuginfo, found.die, address, partial(check_readable, opts=RenderOptions(arch=arch)))
    opts = RenderOptions(arch=arch, symbol_base=symbol_base, immediates=options.immediates, user_access=user_access)
    try:
        return fetch_chain(DWARF_TYPES, T.type_of(found.die), place, variable, cast, opts, options.x_types)
    except LocationError as exc:
        raise VariableUnavailable(f"'{S.render_expr(variable)}' cannot be fetched at 0x{address:x}: {exc.message}",
                                  exc.hint, variable.name, address, [], [], exc.reason) from None


def debuginfo_arch(debuginfo: "DebugInfo") -> Arch:
    """The machine whose registers ``debuginfo``'s locations number."""
    arch = for_machine(debuginfo.machine)
    if arch is None:
        raise ResolveError(f"{debuginfo.path} describes a program for {machine_name(debuginfo.machine)}, "
                           "whose registers probectl does not know")
    return arch


# --- $params / $vars / listings -------------------------------------------------------------------


def _walk_vars(debuginfo: "DebugInfo", scope: DIE, address: int, tags: tuple[str, ...]):
    """perf's die_find_child walk: children in DIE order, descending into the DIEs whose code
    contains the address (lexical blocks and inline instances)."""
    for child in debuginfo.children(scope):
        if child.tag in tags:
            yield child
        if child.tag in ("DW_TAG_lexical_block", "DW_TAG_inlined_subroutine") and \
                debuginfo.die_contains(child, address):
            yield from _walk_vars(debuginfo, child, address, tags)


def _fetchable(debuginfo: "DebugInfo", var: DIE, address: int, in_pieces: bool = False) -> bool:
    """The variable can be read at ``address`` (``in_pieces``: or member by member, where it is split
    over several registers, as a Go slice is: a listing shows it, $params cannot fetch it whole; a Go
    string in two registers is fetched whole, as its text)."""
    name = die_name(var)
    if not name:
        return False
    place = None
    try:
        opts = RenderOptions(arch=debuginfo_arch(debuginfo))
        place = variable_place(debuginfo, var, address, partial(check_readable, opts=opts))
        fetch_chain(DWARF_TYPES, T.type_of(var), place, S.Variable(name), None, opts, True)
        return True
    except ValueTooWideError:
        return True  # there to read, member by member (listed; $vars leaves it out with a warning)
    except ResolveError:
        return in_pieces and isinstance(place, Pieces) and len(place.values) > 1


@guarded
def expand_variables(debuginfo: "DebugInfo", scope, address: int, params_only: bool = False) -> list[str]:
    """``$params`` (``params_only``) or ``$vars`` at ``address`` in ``scope`` (a function or inline
    instance): the names of the parameters (and locals) that can be fetched there, in perf's
    order (DIE order, nested scopes containing the address included), each name once."""
    scope = getattr(scope, "die", scope)
    tags = ("DW_TAG_formal_parameter",) if params_only else ("DW_TAG_formal_parameter", "DW_TAG_variable")
    names: list[str] = []
    for var in _walk_vars(debuginfo, scope, address, tags):
        name = die_name(var)
        if name and name not in names and _fetchable(debuginfo, var, address):
            names.append(name)
    return names


@guarded
def available_variables(debuginfo: "DebugInfo", scope, address: int, externs: bool = False
                        ) -> list[ListedVariable]:
    """The ``perf probe -V`` listing at one address: parameters and locals of ``scope`` that can
    be fetched there (``externs``: and the CU's global variables), sorted and deduplicated the
    way perf prints them (by ``"type\\tname"``)."""
    scope = getattr(scope, "die", scope)
    seen: dict[str, ListedVariable] = {}
    for var in _walk_vars(debuginfo, scope, address, ("DW_TAG_formal_parameter", "DW_TAG_variable")):
        name = die_name(var)
        if not name or not _fetchable(debuginfo, var, address, in_pieces=True):
            continue
        kind = "param" if var.tag == "DW_TAG_formal_parameter" else "local"
        item = ListedVariable(T.variable_type_name(var), name, kind)
        seen.setdefault(f"{item.c_type}\t{name}", item)
    if externs:
        for var in debuginfo.cu_variables(scope.cu):
            name = die_name(var)
            if not name or not _fetchable(debuginfo, var, address):
                continue
            item = ListedVariable(T.variable_type_name(var), name, "global")
            seen.setdefault(f"{item.c_type}\t{name}", item)
    listed = [seen[k] for k in sorted(seen)]
    # A C++ member function's object first (perf sorts it among the others by its type's name).
    return sorted(listed, key=lambda item: item.name != "this" or item.kind != "param")


@guarded
def retval_type(debuginfo: "DebugInfo", function, options: FetchOptions = FetchOptions()) -> tuple[str, str]:
    """(kernel type, C type) of a function's return value, for ``$retval`` (("", "void") for
    void functions)."""
    die = getattr(function, "die", function)
    t = T.type_of(die)
    if t is None:
        return "", "void"
    return T.kernel_type(t, None, options.x_types), T.type_name(t) or "(unknown_type)"


