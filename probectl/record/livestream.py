"""The events of a traced run's instance as they arrive, for ``probectl trace`` and the analyses that
count in user space: no file, the pages of every CPU read and decoded as the kernel writes them."""
from __future__ import annotations

import contextlib
import errno
import os
import signal
from typing import Any, Callable, Optional, Sequence

from ..formats import EventFormat
from ..ringbuf import EventReader, PageLayout
from ..tracefs import os_error
from .processes import ProcessWatch
from .selection import SelectedEvent
from .session import RunPart, TracedRun
from .teardown import CleanupSteps, Terminated, signals_held


class LiveStream(RunPart):
    """Streams the events of ``selected`` out of a traced run (:meth:`TracedRun.trace` with this part
    and ``buffer_percent=0``, so that nothing waits for a page to fill).

    Every :attr:`interval` seconds the pages of each CPU are read (``read()`` returns the partial page
    the kernel is still writing) and decoded together, merged by time, into an :class:`EventReader`
    handed to ``on_pages`` — or, with ``raw``, handed undecoded: the ``(cpu, buffer, offset, size)``
    streams of the CPUs that had events and their :class:`PageLayout`, for a native consumer such as
    the aggregator of ``probectl hist``, which needs no Python object per event. ``on_start`` is called
    once the events are traced, before the command starts.
    """

    def __init__(self, selected: Sequence[SelectedEvent], on_pages: Callable[..., None], *, raw: bool = False,
                 on_start: Optional[Callable[[], None]] = None, interval: float = 0.1,
                 watch: Optional[ProcessWatch] = None):
        self.selected = list(selected)
        self.on_pages = on_pages
        self.raw = raw
        self.on_start = on_start
        self.interval = interval
        self.formats: list[EventFormat] = [e.format for e in self.selected]
        self.watch = watch if watch is not None else ProcessWatch()  # (names of the traced processes)
        self.layout: Optional[PageLayout] = None
        self._fds: dict[int, int] = {}
        self._drain_pages = _buffer_pages("", 4096)
        self._next_look = 0.0

    def arm(self, run: TracedRun) -> None:
        inst = run.instance
        assert inst is not None
        self.layout = PageLayout.from_header_page(inst.read("events/header_page"))
        self._drain_pages = _buffer_pages(inst.read("buffer_size_kb"), self.layout.page_size)
        for cpu in run.cpus:
            path = inst.path / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw"
            try:
                self._fds[cpu] = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as err:
                raise os_error(err, "read the recording instance", path) from None
        inst.enable(self.selected)

    def started(self, run: TracedRun) -> None:
        if self.on_start is not None:
            self.on_start()

    def tick(self, run: TracedRun, now: float) -> None:
        if run.pids and now >= self._next_look:  # names of the traced processes, while they live
            assert run.instance is not None
            self.watch.look(run.instance.traced_pids(), maps=False)
            self._next_look = now + 0.5
        self._drain_whole()

    def stop(self, run: TracedRun, step: CleanupSteps, complete: bool) -> None:
        if complete and self._fds:
            step(self._drain)
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()

    def _drain_whole(self) -> None:
        """:meth:`_drain`, never cut in two by Ctrl-C or SIGTERM: pages read from the kernel are
        gone from its buffer, so they are always handed on; a signal that arrived meanwhile stops
        the stream right after."""
        with signals_held() as got:
            self._drain()
        if signal.SIGTERM in got:
            raise Terminated()
        if signal.SIGINT in got:
            raise KeyboardInterrupt

    def _drain(self) -> None:
        assert self.layout is not None
        page = self.layout.page_size
        streams: list[tuple[int, Any, int, int]] = []
        for cpu, fd in self._fds.items():
            chunks: list[bytes] = []
            # At most what the buffer can hold: each read() returns the partial page being written,
            # and when the stream's own reads are traced (raw_syscalls:*, system-wide) every read adds
            # an event, so reading "until empty" would never end and keep every page in memory.
            while len(chunks) < self._drain_pages:
                try:
                    data = os.read(fd, page)
                except BlockingIOError:
                    break
                except OSError as err:
                    if err.errno == errno.EINTR:
                        continue
                    raise os_error(err, "read the recording instance") from None
                if not data:
                    break
                chunks.append(data.ljust(page, b"\0"))
            if chunks:
                blob = b"".join(chunks)
                streams.append((cpu, blob, 0, len(blob)))
        if not streams:
            return
        if self.raw:
            self.on_pages(streams, self.layout)
            return
        reader = EventReader(streams, self.formats, self.layout, source="the live trace")
        try:
            self.on_pages(reader)
        finally:
            reader.close()


def _buffer_pages(buffer_size_kb: str, page_size: int) -> int:
    """Pages of one CPU's ring buffer, from the instance's ``buffer_size_kb`` ("1408", or "7 (expanded:
    1408)" before first use), plus the reader page; 1024 pages when it cannot be read."""
    numbers = [int(word) for word in buffer_size_kb.replace("(", " ").replace(")", " ").split() if word.isdigit()]
    if not numbers:
        return 1024
    return max(numbers) * 1024 // page_size + 1
