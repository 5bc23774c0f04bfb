"""A set of definitions added together: parsed, resolved against one target and named as perf names
them, ready to be written all or none (the steps `add` and `trace` share)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..events import EventDefinition
from .naming import assign_events
from ..resolve import ProbePoint, Resolver
from ..resolve.fetch import FetchOptions
from ..target import Target
from ..spec import ProbeSpec, parse_probe


@dataclass
class ProbeSet:
    """Definitions resolved against ``target``; ``warnings`` are perf-style notices for the user."""

    target: Target
    resolved: list[tuple[ProbeSpec, list[ProbePoint]]]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def resolve(cls, texts: list[str], target: Target, *, x_types: bool = True, immediates: bool = True,
                retprobe_args: bool = False, source_dir: Optional[str] = None, use_btf: bool = False) -> "ProbeSet":
        specs = [parse_probe(text) for text in texts]
        resolver = Resolver(target, FetchOptions(x_types, immediates, retprobe_args), source_dir=source_dir,
                            use_btf=use_btf)
        resolved = [(spec, resolver.resolve(spec)) for spec in specs]
        return cls(target, resolved, resolver.warnings, resolver.notes)

    def name(self, taken: set[tuple[str, str]], *, force: bool, multiprobe: bool
             ) -> list[tuple[ProbeSpec, list[EventDefinition]]]:
        """Event definitions per spec, with free names (``taken`` is updated with them)."""
        return [(spec, assign_events(spec, points, group=self.target.default_group, taken=taken, force=force,
                                     multiprobe=multiprobe, is_uprobe=self.target.is_uprobe))
                for spec, points in self.resolved]
