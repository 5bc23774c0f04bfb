"""Event naming as perf probe does it: ProbePoints of one definition → EventDefinitions with free names.

Argument names made from expressions (``w->next->id`` → ``id``) are made C identifiers of at most 32
characters and unique within the event (``id``, ``id_1``), avoiding the names the user gave, the
fields every event has and the kernel's ``argN`` names of unnamed arguments; names the user gave are
left as they are, for :mod:`.kernel_rules` to refuse if the kernel would.

Group: the user's, else ``sdt_PROVIDER`` for an SDT probe, else ``probe`` / ``probe_<binary>``. Event: the
user's, else the SDT probe's NAME or the function (``FUNC_L<N>`` for ``FUNC:N``), cut at the first ``.`` or ``@``
(a qualified name, a Go program's, made whole into one: :func:`qualified_event_name`); ``__return`` for return probes. A taken name is an error
unless --force, which picks ``_1``, ``_2``...; on kernels that can append probes to an event (README
"Create/append"), every point of one definition shares its event, otherwise the extra points get suffixes.
"""
from __future__ import annotations

import re

from ..errors import EventExistsError, ProbeSemanticError
from ..events import EventDefinition, FetchArg
from ..resolve import ProbePoint
from ..resolve.cxx import spell_cxx_name
from ..resolve.fetchresult import StringPart
from ..resolve.points import ResolvedArg
from ..spec import ProbeSpec
from ..spec.names import check_group_name
from ..spec.tree import RESERVED_ARG_NAMES
from .kernel_rules import MAX_ARG_NAME_LEN, kernel_arg_name

MAX_EVENT_NAME_LEN = 64
MAX_EVENT_INDEX = 1024


def event_base_name(probe: ProbeSpec, point: ProbePoint) -> str:
    """The event name before any ``__return`` or ``_N`` suffix."""
    if probe.event:
        return probe.event
    pt = probe.point
    if pt.sdt is not None:
        return point.function  # the note's NAME, as perf names SDT events
    if point.qualified_name is not None:
        base = qualified_event_name(spell_cxx_name(point.qualified_name))
    else:
        if pt.function and pt.address is None and not any(c in pt.function for c in "*?["):
            base = pt.function
        else:
            base = point.function
        base = re.split(r"[.@]", base.lstrip("."), maxsplit=1)[0]
        base = re.sub(r"[^A-Za-z0-9_]+", "_", base) or "probe"
    if pt.line is not None and pt.function and pt.lazy is None and pt.offset is None:
        base = f"{base}_L{pt.line}"
    if base[0].isdigit():
        base = "_" + base
    return base


# What a name made from a qualified function may take of the kernel's limit: room is left for the
# "__return" of a return probe and an "_N" suffix.
MAX_QUALIFIED_BASE_LEN = MAX_EVENT_NAME_LEN - 1 - len("__return") - len("_999")


def qualified_event_name(function: str) -> str:
    """The event name of a qualified function: each run of characters an event name cannot hold
    becomes one '_' (``main.(*Server).poll`` → ``main_Server_poll``, as perf names the functions of
    languages other than C). A name too long for the kernel keeps its end, the most particular part,
    after a hash of the whole name, so that two long names of one package stay apart, and a name stays
    the same from run to run."""
    base = re.sub(r"[^A-Za-z0-9]+", "_", function).strip("_") or "probe"
    if len(base) > MAX_QUALIFIED_BASE_LEN:
        import hashlib

        digest = hashlib.sha1(function.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        tail = base[len(base) - (MAX_QUALIFIED_BASE_LEN - len(digest) - 2):]
        if "_" in tail[1:]:
            tail = tail[tail.index("_", 1) + 1:]  # (from the start of a part of the name)
        base = f"h{digest}_{tail}"
    return base


def assign_events(
    probe: ProbeSpec,
    points: list[ProbePoint],
    *,
    group: str,
    taken: set[tuple[str, str]],
    force: bool,
    multiprobe: bool,
    is_uprobe: bool,
) -> list[EventDefinition]:
    """Name every point of one definition; ``taken`` (group, event) pairs are updated with the new names.
    The places of one event must fetch arguments of the same names and types (the kernel refuses
    another: "Argument type or name is different from existing probe"): a place whose arguments differ
    (an instantiation of a generic function for floats beside the one for ints) gets an event of its
    own, ``NAME_1``."""
    defs: list[EventDefinition] = []
    # (group, base name) → (the arguments' names and types, the event name) chosen in this definition
    shared: dict[tuple[str, str], list[tuple[tuple, str]]] = {}
    default_group = group
    for point in points:
        group = probe.group or point.group or default_group
        _check_group(group)
        base = event_base_name(probe, point)
        if point.is_return or point.at_return_instruction:
            base += "__return"
        args = fetch_args(point.args)
        signature = tuple((a.name, a.type) for a in args)
        same = [event for sig, event in shared.get((group, base), ()) if sig == signature]
        if multiprobe and same:
            event = same[0]
        else:
            allow_suffix = force or (bool(defs) and (not multiprobe or (group, base) in shared))
            event = _free_name(group, base, taken, allow_suffix)
            shared.setdefault((group, base), []).append((signature, event))
            taken.add((group, event))
        defs.append(
            EventDefinition(
                kind="r" if point.is_return else "p",
                group=group,
                event=event,
                place=point.place,
                args=args,
                is_uprobe=is_uprobe,
            )
        )
    return defs


def _check_group(group: str) -> None:
    check_group_name(group)  # (the default group comes from a file name, an SDT group from a provider)
    if len(group) >= MAX_EVENT_NAME_LEN:
        raise ProbeSemanticError(f"the group name '{group}' is too long (at most {MAX_EVENT_NAME_LEN - 1} characters)",
                                 hint="name the group: GROUP:EVENT=...")


def _free_name(group: str, base: str, taken: set[tuple[str, str]], allow_suffix: bool) -> str:
    if len(base) >= MAX_EVENT_NAME_LEN:
        raise ProbeSemanticError(f"the event name '{base}' is too long (at most {MAX_EVENT_NAME_LEN - 1} characters)",
                                 hint="give a shorter name with EVENT=...")
    if (group, base) not in taken:
        return base
    if not allow_suffix:
        raise EventExistsError.taken([(group, base)])
    for i in range(1, MAX_EVENT_INDEX):
        name = f"{base}_{i}"
        if (group, name) not in taken:
            if len(name) >= MAX_EVENT_NAME_LEN:
                break
            return name
    raise EventExistsError(f"too many events named {group}:{base}_N", hint="remove some with 'probectl del'")


def _part_name(name: str, part: StringPart) -> str:
    from ..formats import string_part_name  # (the event formats' module: only a counted string's parts need it)

    return string_part_name(name, part.role, part.variant, part.value, part.member)


def fetch_args(args: tuple[ResolvedArg, ...]) -> tuple[FetchArg, ...]:
    """The arguments written for ``args``, named by :func:`argument_names`; the hidden parts of a
    counted string (a Go or Rust string, a std::string: its length, its first bytes) follow its text
    as ``NAME__len`` and ``NAME__head`` (:func:`probectl.formats.string_part_name`), which the
    decoders read its text with. They move the kernel's numbering of the later arguments, so
    unnamed arguments are then named as the kernel would have named them (``arg2``)."""
    counted = any(a.parts for a in args)
    out = []
    for i, (a, name) in enumerate(zip(args, argument_names(args))):
        name = name or (kernel_arg_name(i) if counted else "")
        out.append(FetchArg(fetch=a.fetch, name=name, type=a.type))
        out.extend(FetchArg(fetch=p.fetch, name=_part_name(name, p), type=p.type) for p in a.parts)
    return tuple(out)


def argument_names(args: tuple[ResolvedArg, ...]) -> list[str]:
    """The names to write for ``args``: given names as they are, unnamed ones left to the kernel,
    names made from expressions fitted to the kernel's rules (room left for a counted string's
    ``__head`` and ``__len`` names) and made unique as perf does (``id``, ``id_1``)."""
    def with_parts(name: str, a: ResolvedArg) -> list[str]:
        return [name] + [_part_name(name, p) for p in a.parts]

    taken = set(RESERVED_ARG_NAMES)
    taken.update(n for a in args if a.named for n in with_parts(a.name, a))
    taken.update(kernel_arg_name(i) for i, a in enumerate(args) if not a.name)
    names = []
    for a in args:
        if a.named or not a.name:
            names.append(a.name)
            continue
        room = MAX_ARG_NAME_LEN - max((len(_part_name("", p)) for p in a.parts), default=0)
        base = re.sub(r"[^A-Za-z0-9_]", "_", a.name)
        if not base or base[0].isdigit():
            base = "_" + base
        base = base[:room]
        name, i = base, 0
        while taken.intersection(with_parts(name, a)):
            i += 1
            suffix = f"_{i}"
            name = base[:room - len(suffix)] + suffix
        taken.update(with_parts(name, a))
        names.append(name)
    return names
