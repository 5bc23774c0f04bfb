"""The Python API for scripts over recorded traces.

::

    import probectl

    with probectl.read_trace("probectl.dat") as trace:
        for ev in trace:                                   # one Event at a time
            if ev.name == "probe_libc:malloc" and ev["size"] > 4096:
                print(trace.comm(ev.pid), ev.ts, ev["size"])

        for batch in trace.batches():                      # columns, decoded natively
            sizes = batch.column("probe_libc:malloc", "size")   # memoryview of ints
            ...

Both read probectl's and trace-cmd's trace.dat files (versions 6 and 7, compressed or not).
Events come out merged by time across CPUs. ``ev.fields`` maps field names to values: numbers as
ints, strings as str, arrays as tuples.

A recording made with ``-g`` (``record -g``, ``--call-graph dwarf``) has the stacks of its events,
named as ``script`` names them::

        for ev, stack in trace.stacks("probe_libc:malloc"):
            callers = [f.name for f in stack.user]           # innermost first: malloc, its caller, ...
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, NamedTuple, Optional, Sequence

from .formats import EventFormat, event_matches
from .ringbuf import Columns, Event
from .tracedat import TraceFile, open_trace


class Frame(NamedTuple):
    """One frame of a stack: its address, the function there (``[unknown]`` when nothing names it),
    the offset into it, and the file (``[kernel.kallsyms]``, a library's path, a JIT map)."""

    address: int
    name: str
    offset: int
    dso: str


class Stack(NamedTuple):
    """The stacks recorded with an event: the user and the kernel frames, innermost first (either empty
    when the recording has none of that kind for the event)."""

    user: list[Frame]
    kernel: list[Frame]


class Trace:
    """An open trace.dat file: iterate it for :class:`~probectl.ringbuf.Event` objects, or use
    :meth:`batches` for columnar access at native speed."""

    def __init__(self, path: Path | str):
        self.file: TraceFile = open_trace(path)

    @property
    def path(self) -> Path:
        return self.file.path

    @property
    def formats(self) -> list[EventFormat]:
        """The formats of the events the file can hold."""
        return list(self.file.formats.values())

    def format(self, name: str) -> Optional[EventFormat]:
        """The format of ``system:event`` (None when the file has none)."""
        system, _, event = name.partition(":")
        for f in self.file.formats.values():
            if f.system == system and f.name == event:
                return f
        return None

    def _formats(self, events: Sequence[str]) -> Optional[list[EventFormat]]:
        if not events:
            return None
        return [f for f in self.file.formats.values() if any(event_matches(f, g) for g in events)]

    def __iter__(self) -> Iterator[Event]:
        return self.events()

    def events(self, *events: str) -> Iterator[Event]:
        """Every event in time order; with ``events`` only those: ``-e``'s globs, as ``script`` takes
        them (a ``system:event`` glob, or a glob on the event's name alone)."""
        reader = self.file.reader(formats=self._formats(events))
        try:
            for ev in reader.events():
                if ev.format is not None or not events:
                    yield ev
        finally:
            reader.close()

    def batches(self, *events: str, max_events: int = 1 << 20) -> Iterator[Columns]:
        """Columnar batches (see :class:`~probectl.ringbuf.Columns`): ``ts``, ``cpu``, ``pid``,
        ``id`` per event, and :meth:`Columns.column` per event field. With ``events`` only those
        formats are decoded (the other records keep their common columns)."""
        reader = self.file.reader(formats=self._formats(events))
        try:
            yield from reader.batches(max_events)
        finally:
            reader.close()

    def stacks(self, *events: str) -> Iterator[tuple[Event, Stack]]:
        """Every event in time order (with ``events``, only those, as :meth:`events` takes them) with
        its stacks; a stack record itself (``ftrace:kernel_stack``, ``probectl:user_callchain``) is no
        event here."""
        from .script import events_with_frames  # (the joining and naming of stacks is script's)

        formats = self.file.formats
        for row, frames in events_with_frames(self.file, events):
            ts, cpu, event_id, pid, flags, preempt, values = row[:7]
            user = [Frame(a, n, o, d) for kind, a, n, o, d in frames if kind == "user"]
            kernel = [Frame(a, n, o, d) for kind, a, n, o, d in frames if kind == "kernel"]
            yield Event(ts, cpu, event_id, pid, flags, preempt, formats.get(event_id), values), Stack(user, kernel)

    def comm(self, pid: int) -> str:
        """The command name of a pid, from the names saved in the file."""
        return self.file.comm(pid)

    def tgid(self, pid: int) -> int:
        """The thread group (process) of a thread, when the file knows it."""
        return self.file.tgids.get(pid, pid)

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> "Trace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_trace(path: Path | str) -> Trace:
    """Open a trace.dat file for reading (see :class:`Trace`)."""
    return Trace(path)
