"""What the kernel's fetch arguments can express: apart from the member-chain walker
(:mod:`.fetch`), so that a definition without C expressions (``malloc size=%di``) knows the kernel's
options without importing the walker and its place and type models (start-up it would not use)."""
from __future__ import annotations

from ..dataclass import dataclass


@dataclass(frozen=True)
class FetchOptions:
    """What this kernel's fetch arguments can express, as its tracefs README lists them; the defaults
    are what perf assumes when it only prints definitions (``-D`` without tracefs)."""

    x_types: bool = True  # x8..x64 types ("type: ... x8/16/32/64")
    immediates: bool = True  # \IMM arguments ("\imm-value")
    args_at_return: bool = False  # $argN at return probes ("kernel return probes support: ... $arg<N>")
    ref_ctr: bool = True  # uprobe reference counters, PATH:OFF(REF) ("ref_ctr_offset"), for SDT semaphores
