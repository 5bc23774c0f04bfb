"""Events of a private instance as they arrive, for ``probectl trace``: no file, the pages of every
CPU read and decoded as the kernel writes them."""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import threading
import time
from typing import Callable, Optional, Sequence

from ..formats import EventFormat
from ..notice import notice_stderr
from ..ringbuf import EventReader, PageLayout
from ..tracedat import instance_cpus
from ..tracefs import Tracefs, os_error
from . import Instance, lost_of
from .processes import ProcessWatch, traced_tids
from .selection import SelectedEvent
from .teardown import CleanupSteps, Terminated, signals_held, stop_signals
from .workload import Workload


class LiveStream:
    """Events of a private instance as they arrive, for ``probectl trace``.

    Every ``interval`` seconds the pages of each CPU are read (``read()`` returns the partial page
    the kernel is still writing, so nothing waits for a page to fill) and decoded together, merged
    by time, into an :class:`EventReader` handed to ``on_pages``.
    """

    def __init__(self, tfs: Tracefs, selected: Sequence[SelectedEvent], *, command: Sequence[str] = (),
                 pids: Sequence[int] = (), system_wide: bool = False, buffer_kb: Optional[int] = None,
                 interval: float = 0.1, duration: Optional[float] = None, stacks: bool = False,
                 notice: Callable[[str], None] = notice_stderr):
        self.tfs = tfs
        self.selected = list(selected)
        self.command = list(command)
        self.pids = list(pids)
        self.system_wide = system_wide
        self.buffer_kb = buffer_kb
        self.interval = interval
        self.duration = duration
        self.stacks = stacks
        self.raw = False
        self.notice = notice
        self.formats: list[EventFormat] = [e.format for e in self.selected]
        self.watch = ProcessWatch()
        self.lost = 0
        self.events = 0
        self.stopped_by = ""
        self.command_status: Optional[int] = None
        self.streaming = False
        self.instance: Optional[Instance] = None
        self._on_stop: Optional[Callable[[], None]] = None
        self._drain_pages = _buffer_pages("", 4096)

    def run_pages(self, on_pages: Callable[[list, PageLayout], None],
                  on_start: Optional[Callable[[], None]] = None,
                  on_stop: Optional[Callable[[], None]] = None) -> None:
        """As :meth:`run`, handing each batch undecoded: the ``(cpu, buffer, offset, size)`` streams
        of the CPUs that had events, and their layout (for a native consumer such as the
        aggregator of ``probectl hist``, which needs no Python object per event)."""
        self.raw = True
        self.run(on_pages, on_start, on_stop)  # type: ignore[arg-type]

    def run(self, on_pages: Callable[[EventReader], None], on_start: Optional[Callable[[], None]] = None,
            on_stop: Optional[Callable[[], None]] = None) -> None:
        """Stream until the command ends, ``duration`` passes, Ctrl-C or SIGTERM; then remove the
        instance. ``on_start`` is called once the events are being traced, before the command starts
        (it may write more into :attr:`instance`, such as triggers); ``on_stop`` when tracing has
        stopped and the last pages are read, before the instance is removed (to take that back out:
        the kernel keeps an instance that has triggers)."""
        workload = Workload(self.command) if self.command else None
        inst = self.instance = Instance(self.tfs)
        self._on_stop = on_stop
        fds: dict[int, int] = {}
        cpus = list(range(instance_cpus(self.tfs.root)))
        try:
            try:
                with stop_signals():
                    self._stream(inst, cpus, fds, workload, on_pages, on_start)
            except BaseException:
                with signals_held():
                    self._teardown(inst, cpus, fds, workload, None, quiet=True)
                raise
            with signals_held():
                self._teardown(inst, cpus, fds, workload, on_pages, quiet=False)
        finally:
            if workload is not None:
                workload.stop()
                self.command_status = workload.status

    def _stream(self, inst: Instance, cpus: list[int], fds: dict[int, int], workload: Optional[Workload],
                on_pages: Callable[[EventReader], None], on_start: Optional[Callable[[], None]]) -> None:
        try:
            inst.create()
            command = workload.pid if workload is not None and not self.system_wide else None
            pids = traced_tids(self.pids, command)
            inst.configure(buffer_kb=self.buffer_kb, pids=pids, buffer_percent=0, stacks=self.stacks)
            if not pids:
                inst.untrace(threading.get_native_id())  # the thread that reads the pages
            self.layout = PageLayout.from_header_page(inst.read("events/header_page"))
            self._drain_pages = _buffer_pages(inst.read("buffer_size_kb"), self.layout.page_size)
            for cpu in cpus:
                path = inst.path / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw"
                try:
                    fds[cpu] = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError as err:
                    raise os_error(err, "read the recording instance", path) from None
            inst.enable(self.selected)
            inst.tracing(True)
            self.streaming = True
            if on_start is not None:
                on_start()
            if workload is not None:
                workload.release()
            next_look = 0.0
            deadline = time.monotonic() + self.duration if self.duration else None
            while True:
                done = workload is not None and workload.poll() is not None
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    self._drain_whole(fds, on_pages)
                    self.stopped_by = "duration"
                    return
                if pids and now >= next_look:  # names of the traced processes, while they live
                    self.watch.look(inst.traced_pids(), maps=False)
                    next_look = now + 0.5
                self._drain_whole(fds, on_pages)
                if done:
                    self.stopped_by = "command"
                    return
                time.sleep(self.interval)
        except KeyboardInterrupt:
            if not self.streaming:
                raise
            self.stopped_by = "SIGINT"
        except Terminated:
            if not self.streaming:
                raise KeyboardInterrupt from None
            self.stopped_by = "SIGTERM"

    def _teardown(self, inst: Instance, cpus: list[int], fds: dict[int, int], workload: Optional[Workload],
                  on_pages: Optional[Callable[[EventReader], None]], *, quiet: bool) -> None:
        step = CleanupSteps()
        if inst.created:
            step(lambda: inst.tracing(False))
            step(lambda: inst.write("events/enable", "0"))
            if on_pages is not None and fds:
                step(lambda: self._drain(fds, on_pages))
            self.lost = sum(lost_of(st) for st in inst.stats(cpus).values())
            if self._on_stop is not None:
                step(self._on_stop)
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        fds.clear()
        if workload is not None:
            workload.stop()
        step(inst.remove)
        step.finish(quiet, self.notice)

    def _drain_whole(self, fds: dict[int, int], on_pages: Callable[[EventReader], None]) -> None:
        """:meth:`_drain`, never cut in two by Ctrl-C or SIGTERM: pages read from the kernel are
        gone from its buffer, so they are always handed on; a signal that arrived meanwhile stops
        the stream right after."""
        with signals_held() as got:
            self._drain(fds, on_pages)
        if signal.SIGTERM in got:
            raise Terminated()
        if signal.SIGINT in got:
            raise KeyboardInterrupt

    def _drain(self, fds: dict[int, int], on_pages: Callable[[EventReader], None]) -> None:
        page = self.layout.page_size
        streams = []
        for cpu, fd in fds.items():
            chunks = []
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
            on_pages(streams, self.layout)  # type: ignore[call-arg]
            return
        reader = EventReader(streams, self.formats, self.layout, source="the live trace")
        try:
            on_pages(reader)
        finally:
            reader.close()


def _buffer_pages(buffer_size_kb: str, page_size: int) -> int:
    """Pages of one CPU's ring buffer, from the instance's ``buffer_size_kb`` ("1408", or "7 (expanded:
    1408)" before first use), plus the reader page; 1024 pages when it cannot be read."""
    numbers = [int(word) for word in buffer_size_kb.replace("(", " ").replace(")", " ").split() if word.isdigit()]
    if not numbers:
        return 1024
    return max(numbers) * 1024 // page_size + 1
