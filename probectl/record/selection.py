"""The events a recording or a live stream takes: ``-e`` patterns with the ``--filter`` that followed
each, expanded to the existing events and every filter checked against each event's fields."""
from __future__ import annotations

from typing import Optional, Sequence

from ..dataclass import dataclass
from ..errors import ProbectlError, did_you_mean
from ..filters import Filter, compile_filter
from ..formats import EventFormat
from ..tracefs import LIST_EVENTS_HINT, Tracefs
from .enumnames import EnumNames

_NOT_ENABLEABLE = {"ftrace"}


@dataclass(frozen=True)
class EventRequest:
    """One ``-e PATTERN`` with the ``--filter`` that followed it."""

    pattern: str
    filter: Optional[str] = None


@dataclass
class SelectedEvent:
    group: str
    event: str
    format: EventFormat
    filter: Optional[Filter] = None

    @property
    def name(self) -> str:
        return f"{self.group}:{self.event}"


def expand_event_requests(tfs: Tracefs, requests: Sequence[EventRequest]) -> list[SelectedEvent]:
    """Expand the patterns (``GROUP:EVENT`` globs, or an event name alone) to existing events and
    check each filter against every event it applies to. Nothing is written."""
    if not requests:
        raise ProbectlError("no events to record", "name them with -e GROUP:EVENT (globs work: -e 'probe:*')")
    known = {(g, e) for g, e in tfs.event_names() if g not in _NOT_ENABLEABLE}
    enum_names = EnumNames(tfs.definitions())
    chosen: dict[tuple[str, str], SelectedEvent] = {}
    for req in requests:
        pattern = req.pattern.replace("/", ":", 1) if ":" not in req.pattern else req.pattern
        hits = [(g, e) for g, e in tfs.tracepoints(pattern) if (g, e) in known]
        if not hits:
            names = sorted(f"{g}:{e}" for g, e in known)
            hint = did_you_mean(pattern, names) or LIST_EVENTS_HINT
            raise ProbectlError(f"no event matches {req.pattern!r}", hint)
        for g, e in hits:
            fmt = tfs.event_format(g, e)
            flt = None
            if req.filter is not None:
                try:
                    flt = compile_filter(req.filter, fmt, enums=enum_names.for_event(g, e))
                except ProbectlError as err:
                    if len(hits) > 1:
                        err.message = f"{g}:{e} (matched by {req.pattern!r}): {err.message}"
                        err.args = (err.message,)
                    raise
            if (g, e) in chosen and chosen[(g, e)].filter is not None and flt is None:
                continue  # keep the filter an earlier -e gave
            chosen[(g, e)] = SelectedEvent(g, e, fmt, flt)
    return list(chosen.values())
