"""What every answer over a recording names the same way, whichever engine counts it (the native
aggregator of ``report``, or DuckDB over the decoder's columns): the header columns of an event,
the events a file holds, the recording's name and host. No Arrow, no DuckDB here: ``report``
imports this module on its fast path."""
from __future__ import annotations

from pathlib import Path

from ..formats import EventFormat
from ..script import STACK_EVENTS
from ..tracedat import TraceFile

# The header columns of every event table, with what they hold.
HEADER: dict[str, str] = {
    "ts": "time stamp, ns (the trace clock)",
    "cpu": "CPU the event was recorded on",
    "tid": "thread id (common_pid)",
    "pid": "thread group id (the process; the thread id when the file does not know it)",
    "comm": "command name (from the file's saved cmdlines; '<...>' unknown)",
}
UNKNOWN_COMM = "<...>"
# Up to this many formats in a file (probectl's recordings hold some 20), all are parsed and given to
# the decoder; above (trace-cmd's files from tracefs hold some 1,500), a walk over the pages finds
# the ones used first. The walk reads every record header: a fifth of the decoding's time.
PARSE_ALL_FORMATS = 256


def header_name(fmt: EventFormat, name: str) -> str:
    """The name of header column ``name`` in the table of ``fmt`` (``common_name`` when a field has it)."""
    field = fmt.field(name)
    return f"common_{name}" if field is not None and not field.is_common else name


def event_formats(trace: TraceFile) -> list[EventFormat]:
    """The formats whose events are counted and tabled: all the file's (those of the records
    present, when it has very many), but ftrace's stack records (which belong to the event before)."""
    every = trace.present_formats() if len(trace.format_texts) > PARSE_ALL_FORMATS else trace.formats.values()
    return [f for f in every if (f.system, f.name) not in STACK_EVENTS]


def thread_names(trace: TraceFile) -> dict[int, str]:
    """Thread id -> command name, from the file's saved cmdlines (``<idle>`` for 0; a thread not
    there is :data:`UNKNOWN_COMM`)."""
    return {0: "<idle>", **trace.cmdlines}


def host_of(trace: TraceFile) -> str:
    """The machine a file was recorded on: the node name of its uname option (else 'unknown')."""
    parts = trace.uname.split()
    return parts[1] if len(parts) > 1 else "unknown"


def recording_name(path: Path) -> str:
    name = path.name
    return name[:-4] if name.endswith(".dat") and len(name) > 4 else name
