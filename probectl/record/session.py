"""One traced run, as ``record``, ``trace``, ``hist`` and ``latency`` make it: the probes added for the
run, a private tracefs instance scoped to a command, processes or everything, what the run does with
the instance (its :class:`RunPart` objects: a recorder, a live stream, hist triggers), the command, the
wait, and a teardown on every way out.

The steps of :meth:`TracedRun.trace`:

1. fork the command (``-- COMMAND``) stopped at a gate (:class:`~probectl.record.workload.Workload`), so
   that its pid is known before it runs;
2. create ``instances/probectl-<pid>``, size its buffer, set its CPU mask and stack options, and scope
   it (``set_event_pid`` with ``options/event-fork``; run system-wide, probectl's own thread and the
   threads it starts are left out, or a reader would record its own reads);
3. ``arm`` every part (readers opened, filters and triggers written, events enabled), turn tracing on,
   tell the parts it started, open the gate;
4. wait for the command, the duration, Ctrl-C or SIGTERM, ``tick``-ing the parts; Ctrl-C or SIGTERM
   before the parts are armed stop the run as an error (nothing was traced), after it they end it;
5. turn tracing off, disable the events, ``stop`` every part (last to first: the last events read,
   triggers removed), read the lost-event counts, stop the command and remove the instance — with
   Ctrl-C and SIGTERM held off, each step attempted whatever the others did.

The probes a run adds (:meth:`TracedRun.events_of`) are noted in a state file before they are written,
so that a run killed with SIGKILL leaves them to the next run or ``probectl cleanup``, and removed when
the run closes.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from ..dataclass import dataclass
from ..events import EventDefinition
from ..notice import notice_stderr
from ..tracefs import Tracefs
from .cleanup import cleanup_stale, probe_state
from .instance import Instance, lost_of
from .processes import traced_tids
from .teardown import CleanupSteps, Terminated, signals_held, stop_signals
from .workload import Workload

if TYPE_CHECKING:
    from ..target import Target


@dataclass(frozen=True)
class RunScope:
    """What a run traces and for how long: the command's processes (``-- COMMAND``; with
    ``system_wide`` every process while it runs), ``pids`` (their threads and children), or everything;
    until the command ends, ``duration`` seconds pass, Ctrl-C or SIGTERM."""

    command: Sequence[str] = ()
    pids: Sequence[int] = ()
    system_wide: bool = False
    duration: Optional[float] = None


class RunPart:
    """What a run does with its instance: hooks :class:`TracedRun` calls in order, each a no-op unless
    overridden."""

    interval = 0.05  # seconds between ticks

    def arm(self, run: "TracedRun") -> None:
        """Before tracing is on: open readers, write filters and triggers, enable events."""

    def started(self, run: "TracedRun") -> None:
        """Tracing is on; the command has not been let go yet."""

    def tick(self, run: "TracedRun", now: float) -> None:
        """While the run lasts, about every :attr:`interval` seconds (``now``: ``time.monotonic()``)."""

    def stop(self, run: "TracedRun", step: CleanupSteps, complete: bool) -> None:
        """Tracing is off, the instance still there: read the last events, take out what the kernel
        would keep the instance for (triggers). Each step through ``step``; ``complete`` is False
        when an error is on its way (read nothing more then, only clean up)."""


class TracedRun:
    """One traced run (see the module documentation); a context manager that removes the probes it
    added when it closes.

    After :meth:`trace`: :attr:`stopped_by` ("command", "duration", "SIGINT", "SIGTERM"),
    :attr:`command_status` (:attr:`command_exit`), :attr:`lost` and :attr:`lost_by_cpu`."""

    def __init__(self, tfs: Tracefs, scope: RunScope = RunScope(), *,
                 notice: Callable[[str], None] = notice_stderr):
        self.tfs = tfs
        self.scope = scope
        self.notice = notice
        self.instance: Optional[Instance] = None
        self.workload: Optional[Workload] = None
        self.cpus: list[int] = []
        self.pids: list[int] = []  # what set_event_pid holds ([]: every process)
        self.armed = False
        self.stopped_by = ""
        self.command_status: Optional[int] = None
        self.lost = 0
        self.lost_by_cpu: dict[int, int] = {}
        self.definitions: list[EventDefinition] = []  # of the probes the run added
        self._probes = contextlib.ExitStack()
        self._stale_removed = False

    @property
    def command_exit(self) -> Optional[int]:
        """The exit status of the command (``-- COMMAND``) when the run ended because the command did,
        as a shell gives it (128 + N for a command ended by signal N); probectl ends with it, as perf
        record and perf stat end with their command's. None without a command, or when the run ended
        it (a duration, Ctrl-C)."""
        if self.stopped_by != "command" or self.command_status is None:
            return None
        return self.command_status if self.command_status >= 0 else 128 - self.command_status

    # ---- the probes of the run ------------------------------------------------------------------

    def __enter__(self) -> "TracedRun":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the probes the run added (and forget their state file)."""
        self._probes.close()

    def remove_stale(self) -> None:
        """Remove what runs killed with SIGKILL left (their instances, probes and synthetic events);
        once a run."""
        if self._stale_removed:
            return
        self._stale_removed = True
        for what in cleanup_stale(self.tfs, self.notice):
            self.notice(f"probectl: removed the leftover {what} of a dead run")

    def events_of(self, words: Sequence[str], target: Callable[[], "Target"]) -> list[list[tuple[str, str]]]:
        """The events each of ``words`` names: an existing ``GROUP:EVENT`` as it is (see
        :meth:`Tracefs.named_event`), else a probe definition on ``target()`` (made when first
        needed), added now and removed when the run closes. One list of (group, event) a word."""
        self.remove_stale()
        out: list[list[tuple[str, str]]] = []
        definitions: list[str] = []
        for word in words:
            name = self.tfs.named_event(word)
            out.append([name] if name is not None else [])
            if name is None:
                definitions.append(word)
        if not definitions:
            return out
        made = target()
        for k, word in enumerate(words):
            if out[k]:
                continue
            out[k] = self.add_probes([word], made)
        return out

    def add_probes(self, definitions: Sequence[str], target: "Target") -> list[tuple[str, str]]:
        """Resolve and add ``definitions`` for the run (warnings said through the notice); their
        events, in order. Noted in a state file before they are written, so that a killed run's probes
        are found by the next one; added without holding the add lock for the run (it may last for
        hours)."""
        from ..probes import ProbeSet, definitions as definitions_of  # (the resolver's imports: DWARF, grammars)

        self.remove_stale()
        probes = ProbeSet.resolve(list(definitions), target, self.tfs.features)
        for warning in probes.warnings:
            self.notice(f"Warning: {warning}")
        if not probes.resolved:
            return []
        stack = self._probes
        defs = definitions_of(probes.add(self.tfs, force=True,
                                         before_write=lambda defs: stack.enter_context(probe_state(defs))))
        names = list(dict.fromkeys((d.group, d.event) for d in defs))
        stack.callback(self.tfs.remove, names)
        self.definitions.extend(defs)
        return names

    # ---- the traced part ------------------------------------------------------------------------

    def trace(self, parts: Sequence[RunPart], *, buffer_kb: Optional[int] = None,
              cpus: Optional[Sequence[int]] = None, stacks: bool = False,
              trace_clock: Optional[str] = None, buffer_percent: Optional[int] = None) -> str:
        """Trace with ``parts`` until the run stops (see the module documentation); what stopped it.
        ``cpus`` limits the CPUs traced (None: all), ``stacks`` writes each event's kernel stack
        after it (a recording takes the user stacks from perf: record/callchains.py), ``trace_clock``
        is the instance's clock, ``buffer_percent`` is how full a CPU's buffer is before a reader wakes."""
        from ..tracedat import instance_cpus

        scope = self.scope
        self.cpus = list(cpus) if cpus is not None else list(range(instance_cpus(self.tfs.root)))
        self.workload = Workload(scope.command) if scope.command else None
        self.instance = Instance(self.tfs)
        try:
            try:
                with stop_signals():
                    self.stopped_by = self._run(parts, buffer_kb, cpus, (stacks, trace_clock),
                                                buffer_percent)
            except BaseException:
                with signals_held():
                    self._teardown(parts, quiet=True)
                raise
            with signals_held():
                self._teardown(parts, quiet=False)
        finally:
            if self.workload is not None:
                self.workload.stop()
                self.command_status = self.workload.status
        return self.stopped_by

    def _run(self, parts: Sequence[RunPart], buffer_kb: Optional[int], cpus: Optional[Sequence[int]],
             stacks: tuple[bool, Optional[str]], buffer_percent: Optional[int]) -> str:
        inst, workload = self.instance, self.workload
        assert inst is not None
        try:
            inst.create()
            command = workload.pid if workload is not None and not self.scope.system_wide else None
            self.pids = traced_tids(self.scope.pids, command)
            inst.configure(buffer_kb=buffer_kb, cpus=cpus, stacks=stacks[0], trace_clock=stacks[1], pids=self.pids,
                           buffer_percent=buffer_percent)
            if not self.pids:
                # Traced system-wide, probectl's own syscalls would be traced too: a reader's
                # poll/read/splice for every page it moves (raw_syscalls:*, a feedback loop), and
                # this thread's. The threads it starts from now on (a recorder's) inherit the exclusion.
                inst.untrace(threading.get_native_id(), follow_forks=True)
            for part in parts:
                part.arm(self)
            self.armed = True
            inst.tracing(True)
            for part in parts:
                part.started(self)
            if workload is not None:
                workload.release()
            return self._wait(parts)
        except KeyboardInterrupt:
            if not self.armed:
                raise
            return "SIGINT"
        except Terminated:
            if not self.armed:
                raise KeyboardInterrupt from None
            return "SIGTERM"

    def _wait(self, parts: Sequence[RunPart]) -> str:
        workload, duration = self.workload, self.scope.duration
        interval = min((part.interval for part in parts), default=RunPart.interval)
        deadline = time.monotonic() + duration if duration is not None else None
        while True:
            done = workload is not None and workload.poll() is not None
            now = time.monotonic()
            expired = deadline is not None and now >= deadline
            for part in parts:
                part.tick(self, now)
            if done:
                return "command"
            if expired:
                return "duration"
            wait = interval if deadline is None else min(interval, max(0.0, deadline - now))
            time.sleep(wait)

    def _teardown(self, parts: Sequence[RunPart], *, quiet: bool) -> None:
        """Every clean-up step, each attempted whatever the others did. With ``quiet`` (an error is
        already on its way) failures are only reported; otherwise the first one is raised at the end."""
        inst = self.instance
        assert inst is not None
        step = CleanupSteps()
        if inst.created:
            step(lambda: inst.tracing(False))
            step(lambda: inst.write("events/enable", "0"))
        for part in reversed(parts):
            step(lambda: part.stop(self, step, not quiet))
        if inst.created:
            self.lost_by_cpu = {cpu: lost_of(stats) for cpu, stats in inst.stats(self.cpus).items()}
            self.lost = sum(self.lost_by_cpu.values())
        if self.workload is not None:
            self.workload.stop()
        step(inst.remove)
        step.finish(quiet, self.notice)
