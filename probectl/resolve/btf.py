"""Kernel probe points whose C arguments come from BTF: at function entry and return, where the
x86-64 calling convention says where each parameter is, so no DWARF is needed."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from .. import spec as S
from ..dataclass import replace
from ..errors import ResolveError, ValueTooWideError
from .btf_fetch import btf_fetch, btf_params, btf_retval_type
from .points import ProbePoint, ResolvedArg, is_untyped_retval

if TYPE_CHECKING:
    from . import Resolver


def resolve_btf_points(resolver: "Resolver", probe: S.ProbeSpec) -> list[ProbePoint]:
    """The probe points of a definition at kernel function entries or returns, arguments from BTF."""
    point = probe.point
    btf = resolver.btf
    points = []
    for function, address, offset in resolver.symbol_sites(point):
        if offset:
            raise ResolveError(f"'{probe.text}': BTF describes a function's arguments at its entry and "
                               "return only, not at an offset",
                               hint="give a vmlinux with debug information (-k) for other places")
        name = re.split(r"[.]", function, maxsplit=1)[0]
        args: list[ResolvedArg] = []
        for arg in probe.args:
            if isinstance(arg.expr, S.SpecialVar) and arg.expr.name in ("params", "vars"):
                for param in btf_params(btf, name, at_return=point.is_return, options=resolver.options):
                    try:
                        found = btf_fetch(btf, name, S.Variable(param), None, at_return=point.is_return,
                                          options=resolver.options)
                    except ValueTooWideError as wide:  # as the DWARF side's $params leaves it out
                        resolver.warnings.append(f"{wide.message}: ${arg.expr.name} leaves it out (fetch its "
                                                 f"members)")
                        continue
                    args.append(ResolvedArg(found.fetch, found.type, found.default_name, arg.text))
            elif arg.is_c_expr:
                found = btf_fetch(btf, name, arg.expr, arg.type, at_return=point.is_return,
                                  options=resolver.options, user_access=arg.user)
                args.append(ResolvedArg(found.fetch, found.type, arg.name or found.default_name, arg.text,
                                        named=bool(arg.name)))
            else:
                resolved = resolver.render_arg(arg, address, not point.is_return)
                if is_untyped_retval(arg):
                    resolved = replace(resolved, type=btf_retval_type(btf, name, resolver.options))
                args.append(resolved)
        points.append(ProbePoint(function=function, offset=offset, address=address,
                                 place=resolver.place(function, address, offset), is_return=point.is_return,
                                 args=tuple(args)))
    return points
