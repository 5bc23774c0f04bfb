"""The kernel's side of ``hist`` and ``latency``: hist trigger and synthetic event texts made from
checked keys, and the kernel's ``hist`` file read back into the same :class:`HistTable` that the
user-space aggregator gives (Documentation/trace/histogram.rst is the reference for both)."""
from __future__ import annotations

import re
from typing import Optional, Sequence

from ..dataclass import dataclass
from ..errors import AnalysisError
from .keys import KeyPart
from .table import HistRow, HistTable

TABLE_SIZE = 8192  # entries of a trigger's map (the kernel's default is 2048)


def hist_trigger(keys: Sequence[KeyPart], value: Optional[KeyPart] = None, *, filter_text: str = "",
                 size: int = TABLE_SIZE) -> str:
    """``hist:keys=…:vals=…:size=N [if FILTER]`` for ``keys`` (and the summed ``value``)."""
    text = "hist:keys=" + ",".join(k.trigger_text() for k in keys)
    if value is not None:
        text += f":vals=hitcount,{value.name}"
    text += f":size={size}"
    return text + _if(filter_text)


def _if(filter_text: str) -> str:
    """A trigger's filter clause (nothing without a filter)."""
    return f" if {filter_text}" if filter_text else ""


def remove_trigger(text: str) -> str:
    """What removes a trigger written as ``text``: the same text behind '!'."""
    return "!" + text


@dataclass(frozen=True)
class LatencyTriggers:
    """A synthetic event and the triggers that fill it with the time from start to end,
    matched on the same key, and the histogram of it."""

    synthetic: str  # line for synthetic_events
    synthetic_name: str
    start: str  # trigger of the start event
    end: str  # trigger of the end event
    histogram: str  # trigger of the synthetic event


def latency_triggers(name: str, start_event: str, start_keys: Sequence[KeyPart],
                     end_keys: Sequence[KeyPart], timestamp: str = "common_timestamp.usecs", *,
                     start_filter: str = "", end_filter: str = "") -> LatencyTriggers:
    """The texts for a latency between ``start_event`` (``group.event``, as onmatch() names it) and
    the event the end trigger is written to, keyed by ``start_keys``/``end_keys`` (the thread when
    both are ``pid``), in the unit of ``timestamp`` (``common_timestamp.usecs``: µs; ``common_timestamp``:
    ns). A start the ``start_filter`` rejects saves no time stamp, so nothing is measured from it; an
    end the ``end_filter`` rejects matches nothing. Latencies are kept exactly and bucketed when read back."""
    var = f"{name}_ts0"
    start = f"hist:keys={','.join(k.trigger_text() for k in start_keys)}:{var}={timestamp}" + _if(start_filter)
    end = (f"hist:keys={','.join(k.trigger_text() for k in end_keys)}:{name}_lat={timestamp}-${var}"
           f":onmatch({start_event}).trace({name},${name}_lat)" + _if(end_filter))
    return LatencyTriggers(synthetic=f"{name} u64 lat", synthetic_name=name, start=start, end=end,
                           histogram=f"hist:keys=lat:sort=lat:size={TABLE_SIZE}")


# ---- reading the hist file -------------------------------------------------------------------------

_VAL = re.compile(r"(\w+):\s*(-?\d+)")
_TOTAL = re.compile(r"^\s*(Hits|Entries|Dropped):\s*(\d+)")


def _entries(text: str) -> list[tuple[str, str]]:
    """The ``{ keys } values`` entries of the first histogram in ``text`` (a stack key spans lines)."""
    out: list[tuple[str, str]] = []
    current: list[str] = []
    for line in text.splitlines():
        if not current:
            if line.startswith("{ "):
                current = [line]
            elif line.startswith("Totals:") and out:
                break
            else:
                continue
        else:
            current.append(line)
        joined = "\n".join(current)
        close = joined.rfind("} hitcount:")
        if close >= 0:
            out.append((joined[2:close].rstrip(), joined[close + 2:]))
            current = []
    return out


def _key_value(part: KeyPart, text: str):
    text = text.strip()
    if part.is_pseudo and part.name == "stacktrace":
        return ";".join(line.strip() for line in text.splitlines() if line.strip())
    if part.is_thread_name:
        return text.rsplit("[", 1)[0].strip()
    if part.modifier == "log2":
        m = re.fullmatch(r"~ 2\^(\d+)", text)
        if m:
            return int(m.group(1))
    elif part.modifier == "buckets":
        m = re.fullmatch(r"~ (\d+)-\d+", text)
        if m:
            return int(m.group(1))
    elif part.modifier == "syscall":
        m = re.search(r"\[\s*(\d+)\]$", text)
        if m:
            return int(m.group(1))
    elif part.modifier in ("sym", "sym-offset"):
        m = re.match(r"\[([0-9a-f]+)\]", text)
        if m:
            return int(m.group(1), 16)
    elif part.modifier == "hex":
        try:
            return int(text, 16)
        except ValueError:
            pass
    elif part.is_text:
        return text
    else:
        try:
            return int(text)
        except ValueError:
            pass
    raise AnalysisError(f"cannot read the kernel's histogram key {part.label}: {text!r}",
                        "this kernel prints its hist file in a way probectl does not know; report it")


def parse_hist(text: str, event: str, keys: Sequence[KeyPart], value: Optional[KeyPart] = None) -> HistTable:
    """The kernel's ``hist`` file (its first histogram) as a HistTable keyed by ``keys``."""
    labels = [k.trigger_text().split(".", 1)[0] for k in keys]
    rows = []
    for keytext, valtext in _entries(text):
        values = []
        rest = keytext
        for i, (part, label) in enumerate(zip(keys, labels)):
            if not rest.startswith(label + ":"):
                raise AnalysisError(f"cannot read the kernel's histogram entry {{ {keytext} }}",
                                    f"expected the key {label} there")
            rest = rest[len(label) + 1:]
            if i + 1 < len(keys):
                cut = rest.find(", " + labels[i + 1] + ":")
                if cut < 0:
                    raise AnalysisError(f"cannot read the kernel's histogram entry {{ {keytext} }}")
                values.append(_key_value(part, rest[:cut]))
                rest = rest[cut + 2:]
            else:
                values.append(_key_value(part, rest))
        vals = dict(_VAL.findall(valtext))
        total = int(vals[value.name]) if value is not None and value.name in vals else None
        rows.append(HistRow(tuple(values), int(vals.get("hitcount", 0)), total))
    dropped = 0
    for line in text.splitlines():
        m = _TOTAL.match(line)
        if m and m.group(1) == "Dropped":
            dropped = int(m.group(2))
            break
    table = HistTable(event, list(keys), value.name if value else None, rows, "kernel", dropped=dropped)
    if any(k.is_thread_name for k in keys):  # execname keys are per pid: add up the names
        i = next(i for i, k in enumerate(keys) if k.is_thread_name)
        table.merge_by(lambda name: name, i)
    return table
