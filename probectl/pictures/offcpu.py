"""Off-CPU time: how long each thread was blocked, attributed to the stack it blocked in.

From ``sched:sched_switch`` and ``sched:sched_wakeup`` recorded with stacks (``record -g``). The switch
event runs in the context of the task leaving the CPU, so its stack is where that task blocked. A task
that left in a sleeping state (``prev_state`` not running: a preempted task is runnable, not blocked)
is blocked from that switch until its wakeup; without a wakeup in the file (not recorded, or woken
before the recording saw it), until it is switched in again, which adds its wait on the run queue (or,
when that switch is not in the file either, until it next leaves the CPU).
A task still blocked when the recording ends is not counted: its time is unknown.
"""
from __future__ import annotations

from collections import Counter
from functools import partial
from typing import Any, Callable, Optional, Sequence

from ..errors import ProbectlError
from ..script.stacks import records_with_stacks
from .stacks import Selection, StackCounts, stack_folder

SWITCH = "sched:sched_switch"
WAKEUPS = ("sched:sched_wakeup", "sched:sched_wakeup_new")
# prev_state: the kernel's TASK_REPORT states are the low bits; TASK_REPORT_MAX (0x100 on the
# kernels since 4.14, 0x80 or 0x400 elsewhere) marks a preempted task, which is runnable.
_STATE_MASK = 0x7F
# The tracepoint's own frames, innermost in every sched_switch stack: where the event was written, not
# where the task blocked (that ends in __schedule).
_TRACING_FRAMES = ("trace_event_raw_event_", "__traceiter_", "perf_trace_", "__bpf_trace_")


def _blocked_stack(folded_stack: str) -> str:
    parts = folded_stack.split(";")
    while len(parts) > 1 and parts[-1].startswith(_TRACING_FRAMES):
        parts.pop()
    return ";".join(parts)


class BlockedTime:
    """The blocked intervals of threads, from their switches and wakeups in time order, summed per
    stack (``counts``, ns) as they end."""

    def __init__(self, counts: Counter):
        self.counts = counts
        self.intervals = 0
        self.blocked: dict[int, list] = {}  # tid -> [switched out at, stack, woken at or None]

    def switch(self, ts: int, prev_tid: int, prev_state: int, next_tid: int, stack: Optional[Callable[[], str]]) -> None:
        """A switch from ``prev_tid`` (leaving in ``prev_state``) to ``next_tid``; ``stack()`` is the
        folded stack of the one leaving, None when it is not counted (no stack, not selected)."""
        # the one coming in ends its blocked time; so does the one leaving, when its switch in is
        # not in the file (a recording scoped to a command misses the idle task's switch to it)
        for ended in (next_tid, prev_tid):
            start = self.blocked.pop(ended, None)
            if start is not None:
                self.counts[start[1]] += (start[2] if start[2] is not None else ts) - start[0]
                self.intervals += 1
        if prev_tid and prev_state & _STATE_MASK and stack is not None:
            self.blocked[prev_tid] = [ts, _blocked_stack(stack()), None]

    def wakeup(self, ts: int, tid: int) -> None:
        start = self.blocked.get(tid)
        if start is not None and start[2] is None:
            start[2] = ts


def _field_index(fmt: Any, name: str) -> int:
    names = [f.name for f in fmt.event_fields]
    if name not in names:
        raise ProbectlError(f"{fmt.full_name} has no field {name!r} (its fields: {', '.join(names)})",
                            "the off-CPU analysis needs the kernel's sched_switch and sched_wakeup formats")
    return names.index(name)


def off_cpu_stacks(trace: Any, comms: Sequence[str] = (), pids: Sequence[int] = (),
                   progress: Optional[Callable[[int], None]] = None) -> StackCounts:
    """Blocked time in ns per folded stack (kernel frames marked ``_[k]``); ``progress(records read)``
    as the file is read."""
    formats = trace.present_formats()
    by_name = {f.full_name: f for f in formats}
    switch = by_name.get(SWITCH)
    if switch is None:
        raise ProbectlError(f"{trace.where} has no {SWITCH} events to measure off-CPU time from",
                            "record them with stacks: probectl record -g -e sched:sched_switch "
                            "-e sched:sched_wakeup -- COMMAND")
    folded, formats = stack_folder(trace, ())
    keep = Selection(folded, comms, pids)
    prev_pid, prev_state, next_pid = (_field_index(switch, n) for n in ("prev_pid", "prev_state", "next_pid"))
    wakeup_pid = {f.id: _field_index(f, "pid") for name, f in by_name.items() if name in WAKEUPS}

    time = BlockedTime(folded.counts)
    for rec in records_with_stacks(trace, formats, progress=progress):
        ts, _cpu, event_id, _tid, _flags, _preempt, values = rec.row[:7]
        if values is None:
            continue
        if event_id == switch.id:
            counted = rec.stacks and keep(rec)
            time.switch(ts, values[prev_pid], values[prev_state], values[next_pid],
                        partial(folded.stack, rec) if counted else None)
        elif event_id in wakeup_pid:
            time.wakeup(ts, values[wakeup_pid[event_id]])
    counts = time.counts
    if not counts:
        chosen = [f"comm {c}" for c in comms] + [f"pid {p}" for p in pids]
        raise ProbectlError(f"{trace.where} shows no thread blocking and running again"
                            + (f" for {', '.join(chosen)}" if chosen else ""),
                            "record sched:sched_switch with -g (stacks) while the workload runs; "
                            "check the selection (--comm, --pid)")
    return StackCounts(counts, "ns", time.intervals)
