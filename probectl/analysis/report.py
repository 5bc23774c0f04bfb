"""Counts and summaries of recordings, as ``perf report --sort comm,sym`` prints them: what a report
is, its keys, and the checks of what the user asked for.

A report groups the events of recordings by sort keys and counts them:

* ``event``, ``comm``, ``pid``, ``tid``, ``cpu``, ``recording``, ``host``: the header columns;
* ``sym``: the probed function, the symbol of a probe event's ``__probe_ip`` (``__probe_func`` of a
  return probe) in its process (kernel addresses through the file's kallsyms), or of the field a
  tracepoint prints with ``%pS`` (kmem:kmalloc's ``call_site``); events without such an address have
  none (``[unknown]``);
* any field of the selected events (``-e``): the events that have the field are counted.

The rows are sorted by count (ties by key), with their share of the counted events. A ``--hist``
report counts an integer field in the kernel's log2 buckets instead (:mod:`.histogram`, as ``hist``
counts them), one histogram per value of the sort keys when there are some.

Two engines give the same answers: the native aggregator over trace.dat files
(:mod:`.report_aggregate`, the one ``hist -i`` counts with: no DuckDB to import, no column per
event), which takes the common shapes, and SQL over the decoder's columns and Parquet datasets
(:mod:`.report_sql`), which takes every shape.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from ..dataclass import dataclass, field
from ..errors import ProbectlError, did_you_mean
from ..formats import EventFormat, name_matches
from ..script.printfmt import symbol_fields

# The keys of every event, with the titles of their columns.
HEADER_KEYS = {"event": "Event", "comm": "Command", "pid": "Pid", "tid": "Tid", "cpu": "CPU",
               "recording": "Recording", "host": "Host"}
SYM_KEY = "sym"
KEY_TITLES = {**HEADER_KEYS, SYM_KEY: "Symbol"}
DEFAULT_KEYS = ("event",)
PROBE_ADDRESSES = ("__probe_ip", "__probe_func")  # (entry probes, return probes)


@dataclass
class ReportRow:
    keys: tuple
    count: int


@dataclass
class Report:
    """A count table: ``rows`` by count, of ``total`` selected events."""

    keys: list[str]
    total: int
    events: list[str]  # the selected events
    rows: list[ReportRow] = field(default_factory=list)

    def titles(self) -> list[str]:
        return [KEY_TITLES.get(k, k) for k in self.keys]


@dataclass
class Histogram:
    """A log2 histogram of ``field`` (bucket -> count) for one value of the sort keys (``keys``: values)."""

    field: str
    keys: dict[str, Any]
    counts: dict[int, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def parse_keys(text: Optional[str]) -> list[str]:
    """``comm,sym`` as a list of keys (a perf user's ``--sort`` text)."""
    if not text:
        return []
    keys = [k.strip() for k in text.split(",")]
    if any(not k for k in keys):
        raise ProbectlError(f"bad --sort {text!r}: an empty key", "give keys separated by commas, e.g. comm,sym")
    return keys


def matching_event_names(everything: Sequence[str], globs: Sequence[str], where: str) -> list[str]:
    """The events of ``everything`` (those the recordings hold, sorted) that match ``globs`` (all
    when none); ``where`` names the recordings (the files) in the error when they hold none."""
    if not everything:
        raise ProbectlError(f"{where} no events",
                            "nothing was recorded: check the events and filters given to 'probectl record'")
    if not globs:
        return list(everything)
    for g in globs:
        if not any(name_matches(e, g) for e in everything):
            raise ProbectlError(f"no event of the recordings matches {g!r}",
                                did_you_mean(g, everything) or f"the events: {', '.join(everything)}")
    return [e for e in everything if any(name_matches(e, g) for g in globs)]


def holding(files: Sequence[str]) -> str:
    """``a.dat holds`` / ``a.dat, b.dat hold``: the subject of :func:`matching_event_names`' error."""
    names = ", ".join(files) or "the recordings"
    return f"{names} {'holds' if len(files) == 1 else 'hold'}"


def check_keys(keys: Sequence[str], field_names: Sequence[str]) -> None:
    """Every sort key is a header key, ``sym`` or one of ``field_names`` (the selected events'), once."""
    known = [*KEY_TITLES, *field_names]
    for k in keys:
        if k not in known:
            raise ProbectlError(f"unknown sort key {k!r}", did_you_mean(k, known) or f"keys: {', '.join(known)}")
    if len(set(keys)) != len(keys):
        raise ProbectlError(f"a sort key is given twice: {','.join(keys)}")


def check_hist_field(value: str, field_names: Sequence[str], selected: Sequence[str],
                     type_of: Callable[[str], tuple[bool, str]]) -> None:
    """``--hist value`` names a field of the selected events, an integer in each that has it
    (``type_of(event)``: whether it is one there, and its type's name)."""
    if value not in field_names:
        raise ProbectlError(f"no field {value!r} in {', '.join(selected) or 'the recordings'}",
                            did_you_mean(value, field_names) or (f"fields: {', '.join(field_names)}" if field_names
                                                                 else "the events have no fields"))
    for event in selected:
        is_int, typ = type_of(event)
        if typ and not is_int:
            raise ProbectlError(f"--hist needs an integer field; {value!r} of {event} is {typ}",
                                "count its values with --sort " + value)


def address_field(fmt: Optional[EventFormat], fields: Sequence[str]) -> Optional[str]:
    """The field ``sym`` names in an event with ``fields`` and format ``fmt``: a probe event's probed
    address, else the first field a tracepoint's print format prints as a kernel symbol (%pS:
    kmem:kmalloc's call_site); None when the event has neither."""
    probe = next((a for a in PROBE_ADDRESSES if a in fields), None)
    if probe is not None:
        return probe
    return next(iter(symbol_fields(fmt)), None) if fmt is not None else None
