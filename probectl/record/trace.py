"""What ``probectl trace`` streams: the events of the probes it adds for the run and of the existing
events it was asked for (``-e``), all under its one ``--filter``, read from a private instance as they
happen (a :class:`~probectl.record.session.TracedRun` with a :class:`~probectl.record.livestream.LiveStream`),
and the names of the live processes that made them."""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from ..events import EventDefinition
from ..filters import compile_filter
from ..formats import EventFormat
from ..notice import notice_stderr
from ..ringbuf import EventReader
from ..tracefs import Tracefs
from .enumnames import EnumNames
from .livestream import LiveStream
from .processes import ProcessWatch, proc_comm, proc_ids, proc_tgid
from .selection import EventRequest, SelectedEvent, expand_event_requests
from .session import RunScope, TracedRun

if TYPE_CHECKING:
    from ..target import Target


class LiveNames:
    """Names of live processes, for streamed events: the kernel's saved_cmdlines (the name at the
    time of the event; read again when a pid is missing), else /proc, else what the stream saw
    (``known``)."""

    def __init__(self, root: Path, known: dict[int, str]):
        self.root = root
        self.known = known
        self.saved: dict[int, str] = {}
        self._read_at = 0.0

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._read_at < 0.05:
            return
        self._read_at = now
        try:
            # (a comm is bytes: a name that is not UTF-8 is kept escaped, never an error)
            for line in (self.root / "saved_cmdlines").read_text(errors="backslashreplace").splitlines():
                pid, _, comm = line.partition(" ")
                if pid.isdigit() and comm and comm != "<...>":
                    self.saved[int(pid)] = comm
        except OSError:
            pass

    def comm(self, tid: int) -> str:
        if tid == 0:
            return "<idle>"
        if tid not in self.saved:
            self._refresh()
        if tid in self.saved:
            return self.saved[tid]
        comm = proc_comm(tid)
        return comm if comm is not None else self.known.get(tid, "<...>")

    def tgid(self, tid: int) -> int:
        return proc_tgid(tid) or tid

    def nspid(self, tid: int) -> int:
        return proc_ids(tid)[1] or tid


def trace_selection(tfs: Tracefs, defs: Sequence[EventDefinition], patterns: Sequence[str] = (),
                    filter_text: Optional[str] = None) -> list[SelectedEvent]:
    """The events of the probes ``defs`` (enum names in the filter from their debug information),
    then those of the ``patterns`` that are not among them; every one with ``filter_text``."""
    names = list(dict.fromkeys((d.group, d.event) for d in defs))
    enums = EnumNames(list(defs))
    selected: list[SelectedEvent] = []
    for g, e in names:
        fmt = tfs.event_format(g, e)
        flt = compile_filter(filter_text, fmt, enums=enums.for_event(g, e)) if filter_text else None
        selected.append(SelectedEvent(g, e, fmt, flt))
    if patterns:
        seen = set(names)
        for ev in expand_event_requests(tfs, [EventRequest(p, filter_text) for p in patterns]):
            if (ev.group, ev.event) not in seen:
                selected.append(ev)
    return selected


class LiveTrace:
    """A ``probectl trace`` run: the probes of its definitions added for it, their events and those of the
    existing events it was asked for streamed from a private instance (scoped as ``scope`` says) until
    the command ends, Ctrl-C or SIGTERM, and the probes removed when it closes (a context manager)."""

    def __init__(self, tfs: Tracefs, scope: RunScope, *, buffer_kb: Optional[int] = None,
                 notice: Callable[[str], None] = notice_stderr):
        self.tfs = tfs
        self.traced = TracedRun(tfs, scope, notice=notice)
        self.buffer_kb = buffer_kb
        self.selected: list[SelectedEvent] = []
        self.watch = ProcessWatch()
        self.names = LiveNames(tfs.root, self.watch.comms)

    def __enter__(self) -> "LiveTrace":
        return self

    def __exit__(self, *exc: object) -> None:
        self.traced.close()

    def select(self, words: Sequence[str], target: Callable[[], Target], patterns: Sequence[str] = (),
               filter_text: Optional[str] = None) -> None:
        """The events to stream: each of ``words`` an existing ``GROUP:EVENT`` or a definition on
        ``target()`` (added now, for the run), and the events of ``patterns``; every one with
        ``filter_text``."""
        self.traced.remove_stale()
        named = [self.tfs.named_event(word) for word in words]
        definitions = [word for word, name in zip(words, named) if name is None]
        if definitions:
            self.traced.add_probes(definitions, target())
        patterns = [*patterns, *(":".join(name) for name in named if name is not None)]
        self.selected = trace_selection(self.tfs, self.traced.definitions, patterns, filter_text)

    @property
    def added(self) -> list[str]:
        """The events of the probes added for the run (what the start notice names)."""
        return list(dict.fromkeys(d.full_name for d in self.traced.definitions))

    @property
    def formats(self) -> list[EventFormat]:
        """The formats of the streamed events (what a formatter is set up with)."""
        return [e.format for e in self.selected]

    @property
    def lost(self) -> int:
        """Events the kernel dropped (known once :meth:`run` returns)."""
        return self.traced.lost

    @property
    def command_exit(self) -> Optional[int]:
        """The command's exit status when the trace ended with it (:attr:`TracedRun.command_exit`)."""
        return self.traced.command_exit

    def run(self, on_pages: Callable[[EventReader], None], on_start: Optional[Callable[[], None]] = None) -> None:
        """Stream, handing each batch of events to ``on_pages`` (``on_start`` is called once the events
        are traced); the instance is gone when it returns."""
        stream = LiveStream(self.selected, on_pages, on_start=on_start, watch=self.watch)
        self.traced.trace([stream], buffer_kb=self.buffer_kb, buffer_percent=0)
