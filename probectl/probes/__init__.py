"""A set of definitions added together: parsed, resolved against one target and named as perf names
them, then written all or none (the steps `add` and `trace` share; perf's ``__add_probe_trace_events``)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from ..dataclass import dataclass, field
from ..errors import TargetError
from ..events import EventDefinition
from ..resolve import MAX_POINTS, ProbePoint, Resolver
from ..resolve.fetch_options import FetchOptions
from ..spec import ProbeSpec, parse_probe
from ..target import Target
from .kernel_rules import check_definitions
from .naming import assign_events

if TYPE_CHECKING:
    from ..tracefs import Features, Tracefs

# What naming gives: each definition with the event definitions of its points.
Named = list[tuple[ProbeSpec, list[EventDefinition]]]


@dataclass
class ProbeSet:
    """Definitions resolved against ``target`` for a kernel with ``features`` (None: no tracefs to ask,
    as for -D without root); ``warnings`` are perf-style notices for the user."""

    target: Target
    resolved: list[tuple[ProbeSpec, list[ProbePoint]]]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    features: Optional[Features] = None

    @classmethod
    def resolve(cls, texts: list[str], target: Target, features: Optional[Features] = None, *,
                source_dir: Optional[str] = None, use_btf: bool = False,
                max_points: Optional[int] = MAX_POINTS) -> "ProbeSet":
        """Parse and resolve ``texts``; a definition expanding to more than ``max_points`` places
        (None: no limit) is an error."""
        specs = [parse_probe(text) for text in texts]
        resolver = Resolver(target, fetch_options(features), source_dir=source_dir, use_btf=use_btf,
                            max_points=max_points)
        # (each point as the program names it, once: resolved so, and its events named from it)
        named = [resolver.as_named(spec) for spec in specs]
        resolved = [(spec, resolver.resolve(spec)) for spec in named]
        return cls(target, resolved, resolver.warnings, resolver.notes, features)

    @property
    def multiprobe(self) -> bool:
        """Every point of a definition shares its event (kernels that append probes to an event)."""
        return self.features.multiprobe if self.features else True

    def name(self, taken: Optional[set[tuple[str, str]]] = None, *, force: bool) -> Named:
        """Event definitions per spec, with names free of ``taken`` (updated with them); no ``taken``
        names them as if no event existed (what -D shows). Every definition is checked against the
        kernel's rules (KernelRuleError), so what -D shows is what the kernel takes."""
        taken = set() if taken is None else taken
        named = [(spec, assign_events(spec, points, group=self.target.default_group, taken=taken, force=force,
                                      multiprobe=self.multiprobe, is_uprobe=self.target.is_uprobe))
                 for spec, points in self.resolved]
        check_definitions(definitions(named), self.features, self.target.arch)
        return named

    def add(self, tfs: Tracefs, *, force: bool = False, dry_run: bool = False,
            before_write: Optional[Callable[[list[EventDefinition]], object]] = None) -> Named:
        """Name the events after the ones tracefs holds and create them all or none, under probectl's
        lock so that concurrent runs do not pick the same names. ``dry_run`` names them and writes
        nothing; ``before_write`` is called with the definitions just before they are written. A
        target of another machine than this one (an AArch64 program on x86-64) is refused before
        anything is written: this kernel cannot run its code, and its registers are not this kernel's."""
        if not dry_run:
            check_native(self.target)
        with tfs.lock():
            named = self.name(set(tfs.event_names()), force=force)
            if not dry_run:
                defs = definitions(named)
                if before_write is not None:
                    before_write(defs)
                tfs.add(defs)
        return named


def check_native(target: Target) -> None:
    """TargetError when ``target`` is code for another machine than the one probectl runs on."""
    if target.foreign:
        import platform

        arch = target.arch
        raise TargetError(f"{target.path} is an {arch.name} {'program' if target.is_uprobe else 'kernel'}, and this "
                          f"kernel runs on {platform.machine()}: its probes can be added only by a kernel of that "
                          "machine", hint=f"print the definitions with 'probectl add -D' and add them on an "
                                          f"{arch.name} machine")


def fetch_options(features: Optional[Features]) -> FetchOptions:
    """What the kernel's fetch arguments can express, from its tracefs README (without tracefs, what
    perf assumes for -D)."""
    if features is None:
        return FetchOptions()
    return FetchOptions(x_types=features.x_types, immediates=features.immediates,
                        args_at_return=features.retprobe_args, ref_ctr=features.ref_ctr)


def definitions(named: Named) -> list[EventDefinition]:
    """The event definitions of every spec, in order."""
    return [d for _, defs in named for d in defs]
