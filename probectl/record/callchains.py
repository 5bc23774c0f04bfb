"""User stacks as perf records them (``record -g``): a perf event per recorded event and CPU,
opened on the event's id (``PERF_TYPE_TRACEPOINT``, as ``perf record -a -e EVENT -g`` does), whose
samples carry the user callchain, copied from their mmap rings by the native copier beside the ftrace
pages, then written into the recording as ``probectl:user_callchain`` records after their events.

Why perf's callchain and not ftrace's ``options/userstacktrace``: ftrace's user stack holds 8 frames,
and at a function-entry uprobe it misses the caller (the frame is not set up yet); perf's callchain
holds up to ``kernel.perf_event_max_stack`` frames and the kernel puts the return address in place
when the probed instruction is a function's ``push %rbp``. The kernel part is excluded
(``exclude_callchain_kernel``): ftrace's ``kernel_stack`` records keep the kernel stacks. Code that
keeps no frame pointers gets its stacks from copies of the user stack instead (:mod:`.stackcopies`).

A uprobe event cannot be enabled for ftrace and for perf at once (the kernel refuses the second with
EINTR): a uprobe's events are taken from perf alone, each sample carrying the event's record as ftrace
would write it (``PERF_SAMPLE_RAW``), which is written into the CPU's pages in time order, its
callchain after it. perf's events are per CPU; a recording of some processes (``-p``, ``-- COMMAND``)
opens them on each of the traced threads with ``inherit``, so that, as the instance's ``event-fork``
does, the threads and processes they start are sampled too, and no other process is.

A sample of a tracepoint or kprobe joins its ftrace event by CPU, thread, event type and the nearest
time (:func:`probectl.tracedat.callchain.write_with_callchains`): the instance records with trace_clock
``perf``, the clock of perf's samples (ftrace's default ``local`` clock is offset from it), and both
handlers run in the same hit of the tracepoint, in an order the kernel does not promise (the order their
probes were registered in, which other users of the tracepoint decide).
"""
from __future__ import annotations

import ctypes
import errno as errno_mod
import fcntl
import os
import platform
import struct
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .. import ringbuf
from ..arch import Arch, host, known_names
from ..dataclass import replace
from ..errors import DebugInfoError, ProbectlError
from ..events import EventDefinition
from ..tracedat import parse_cmdlines, parse_tgids
from ..tracedat.writer import CpuPages
from ..tracedat.callchain import (BARE, ENTRY, RAW, STACK, all_format_ids, callchain_formats, free_event_id,
                                  perf_names, write_with_callchains)
from .selection import SelectedEvent
from .stackcopies import UnwindStats, unwind_stack_copies, walk_registers

# The trace clock that is perf's sample clock (local_clock), so that both time their records alike.
PERF_TRACE_CLOCK = "perf"
DEFAULT_MAX_STACK = 127  # perf's default, when /proc/sys/kernel/perf_event_max_stack is unreadable
RING_DATA_PAGES = 256  # per CPU without -m (1 MiB with 4 KiB pages)

_SYSCALL = {"x86_64": 298, "aarch64": 241, "i686": 336, "i386": 336, "armv7l": 364, "riscv64": 241,
            "ppc64le": 319, "s390x": 331}

PERF_TYPE_TRACEPOINT = 2
SAMPLE_TID, SAMPLE_TIME, SAMPLE_CALLCHAIN, SAMPLE_CPU, SAMPLE_IDENTIFIER = 1 << 1, 1 << 2, 1 << 5, 1 << 7, 1 << 16
SAMPLE_RAW, SAMPLE_REGS_USER, SAMPLE_STACK_USER = 1 << 10, 1 << 12, 1 << 13
SAMPLE_TYPE = SAMPLE_IDENTIFIER | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN
# At a function's entry (x86-64) the return address is the word at the stack pointer: a uprobe there
# also takes the user stack pointer and that word (see entry_fixup_supported).
ENTRY_SAMPLE_TYPE = SAMPLE_REGS_USER | SAMPLE_STACK_USER
_FLAG_DISABLED, _FLAG_INHERIT, _FLAG_MMAP, _FLAG_COMM, _FLAG_WATERMARK = 1, 1 << 1, 1 << 8, 1 << 9, 1 << 14
_FLAG_SAMPLE_ID_ALL, _FLAG_EXCLUDE_CALLCHAIN_KERNEL, _FLAG_MMAP2, _FLAG_COMM_EXEC = 1 << 18, 1 << 21, 1 << 23, 1 << 24
_FLAG_EXCLUDE_CALLCHAIN_USER = 1 << 22
_OPEN_FD_CLOEXEC, _OPEN_PID_CGROUP = 8, 4  # perf_event_open's flags
_FORMAT_LOST = 1 << 4  # read_format: the samples the event lost
_ATTR_SIZE = 112  # PERF_ATTR_SIZE_VER5: up to sample_max_stack

# ioctl numbers: _IO('$', n), and _IOW('$', 6, char *) for the filter
_IOC_ENABLE, _IOC_DISABLE, _IOC_SET_OUTPUT = 0x2400, 0x2401, 0x2405
_IOC_SET_FILTER = 0x40082406 if struct.calcsize("P") == 8 else 0x40042406



def ring_pages(buffer_kb: Optional[int]) -> int:
    """Data pages of a CPU's perf ring: ``-m KB`` (the ftrace buffer's size) rounded up to a power of two."""
    if not buffer_kb:
        return RING_DATA_PAGES
    pages = max(1, buffer_kb * 1024 // os.sysconf("SC_PAGESIZE"))
    return 1 << (pages - 1).bit_length()


def max_stack() -> int:
    """``kernel.perf_event_max_stack``: the deepest callchain the kernel gives."""
    try:
        return max(1, int(Path("/proc/sys/kernel/perf_event_max_stack").read_text()))
    except (OSError, ValueError):
        return DEFAULT_MAX_STACK


def entry_fixup_supported() -> bool:
    """Whether the return address at a function's entry is on the stack (x86-64), where a sample
    takes it; elsewhere it is in a register (AArch64's x30), and ``-g`` copies such events' stacks
    instead (record's RecorderPart.arm)."""
    arch = host()
    return arch is not None and arch.call_pushes_return_address


def _host_arch() -> Arch:
    arch = host()
    if arch is None:
        raise ProbectlError(f"probectl takes user stacks on {known_names()} only, not on {platform.machine()}",
                            "record without -g or --call-graph on this machine")
    return arch


def _attr(event_id: int, stack: int, wakeup_bytes: int, entry: bool, raw: bool, inherit: bool,
          comm: bool, copy: int = 0, user_stack: bool = True, lost: bool = True) -> bytes:
    """``copy``: the bytes of user stack each sample copies, with the user registers (``--call-graph
    dwarf``: :mod:`probectl.record.stackcopies`), or 0. ``comm``: the ring also gets the command name
    of each exec (PERF_RECORD_COMM) and each executable mapping made (PERF_RECORD_MMAP2): a uprobe's events come from perf alone, and the kernel's
    saved_cmdlines knows only the tasks ftrace wrote events of; a process that ends before its maps
    are read has its user frames named from these. ``lost``: a read() of the event gives the samples
    it lost (``PERF_FORMAT_LOST``, Linux 6.0)."""
    flags = _FLAG_DISABLED | _FLAG_WATERMARK | _FLAG_SAMPLE_ID_ALL | _FLAG_EXCLUDE_CALLCHAIN_KERNEL
    if inherit:
        flags |= _FLAG_INHERIT
    if not user_stack:  # (an empty callchain: the record alone, for --cgroup without -g)
        flags |= _FLAG_EXCLUDE_CALLCHAIN_USER
    if comm:
        flags |= _FLAG_COMM | _FLAG_COMM_EXEC | _FLAG_MMAP | _FLAG_MMAP2
    if copy:
        regs, stack_bytes = _host_arch().perf_regs_unwind_mask, copy
    elif entry:  # (the stack pointer, and the word there)
        arch = _host_arch()
        regs, stack_bytes = 1 << arch.perf_regs_dwarf.index(arch.stack_pointer), 8
    else:
        regs, stack_bytes = 0, 0
    sample_type = SAMPLE_TYPE | (ENTRY_SAMPLE_TYPE if regs else 0) | (SAMPLE_RAW if raw else 0)
    attr = struct.pack("=IIQQQQQIIQQQQIi", PERF_TYPE_TRACEPOINT, _ATTR_SIZE, event_id, 1, sample_type,
                       _FORMAT_LOST if lost else 0, flags,
                       wakeup_bytes, 0, 0, 0, 0, regs, stack_bytes, 0)
    attr += bytes(_ATTR_SIZE - len(attr))
    # sample_max_stack (u16 at 108)
    return attr[:108] + struct.pack("=H", min(stack, 0xFFFF)) + attr[110:]


_libc = None


def _perf_event_open(attr: bytes, pid: int, cpu: int, flags: int = _OPEN_FD_CLOEXEC) -> int:
    global _libc
    nr = _SYSCALL.get(platform.machine())
    if nr is None:
        raise ProbectlError(f"perf_event_open is not known on {platform.machine()}",
                            "record without -g on this machine")
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(attr, len(attr))
    for _ in range(100):
        fd = _libc.syscall(nr, buf, pid, cpu, -1, flags)  # (pid -1: every task on the CPU)
        if fd >= 0:
            return fd
        err = ctypes.get_errno()
        if err != errno_mod.EINTR:
            break
    raise OSError(err, os.strerror(err))


class Callchains:
    """The perf events of a recording's stacks, their rings copied to ``out_dir/cpuN.perf``."""

    def __init__(self, events: Sequence[SelectedEvent], cpus: Sequence[int], out_dir: Path,
                 entry_events: Sequence[int] = (), raw_events: Sequence[int] = (),
                 data_pages: int = RING_DATA_PAGES, tids: Sequence[int] = (), stack_events: Sequence[int] = (),
                 stack_copy: int = 0, cgroup: Optional[int] = None, stacks: bool = True,
                 layout: Optional[ringbuf.PageLayout] = None):
        """``stack_events``: the format ids of events whose samples copy ``stack_copy`` bytes of the
        user stack with the registers, unwound when the recording ends (:mod:`.stackcopies`);
        ``entry_events``: the format ids of uprobes at a function's first instruction, whose
        samples also take the word at the stack pointer, the return address into the caller (the
        kernel's callchain has it only when the function starts with ``push %rbp``); ``raw_events``
        those whose samples carry the event's record (the uprobes, not enabled in the instance);
        ``tids`` the threads to sample (with the tasks they start), or none for every process;
        ``cgroup`` an open cgroup directory, whose tasks alone are sampled (:mod:`.cgroups`); ``stacks``
        False: the samples carry no user stack, and their records are written without one.

        ``layout``: the instance's page layout. When every event's samples carry their record and
        none a stack copy, the pages are then written as the rings are read (``out_dir/cpuN.pages``,
        :class:`probectl.ringbuf.PageStream`): the CPU's pages need nothing else, and the records are
        neither copied to a file nor read again when the recording ends."""
        self.cpus = list(cpus)
        self.files = {cpu: Path(out_dir) / f"cpu{cpu}.perf" for cpu in self.cpus}
        self.pages: dict[int, CpuPages] = {}  # the pages written as the rings were read (see ``layout``)
        self.streamed: list[ringbuf.Streamed] = []  # what each CPU's stream wrote, once stopped
        # (the highest id free: the kernel gives new events the lowest, so one made while this records
        # takes another; add_callchains checks it against the file's formats)
        self.callchain_id = free_event_id(ev.format.id for ev in events)
        self.stack = max_stack()
        self.ids: dict[int, int] = {}  # perf sample id -> ftrace event id
        self.entry_ids: set[int] = set()  # perf sample ids of entry uprobes
        self.raw_ids: set[int] = set()  # perf sample ids whose samples carry their event's record
        self.stack_ids: set[int] = set()  # perf sample ids whose samples carry a stack copy
        self.bare = not stacks  # (the records without callchain records)
        copied = set(stack_events) if stack_copy else set()
        entry = set(entry_events) - copied if entry_fixup_supported() else set()
        raw = set(raw_events)
        self._fds: list[int] = []
        self._fd_cpus: dict[int, int] = {}  # each event's CPU
        # (a sample lost when the ring is full is reported by a PERF_RECORD_LOST in the ring only
        # once a later record fits: those lost last are known from read(), where the kernel has it)
        self._lost_format = True
        # (stack copies walked as they come: per process its maps text and unwinder, the files' CFI)
        self._walkers: Optional[dict[int, tuple[str, Any]]] = None
        self._frames: Any = None
        self._leaders: list[int] = []
        self._outs: list[int] = []
        self._rings: Optional[ringbuf.PerfRings] = None
        attr_cache: dict[tuple[int, bool, bool], bytes] = {}
        followers: list[tuple[int, int]] = []  # (event, the CPU's first event, whose ring it writes to)
        wakeup = data_pages * os.sysconf("SC_PAGESIZE") // 4
        try:
            for cpu in self.cpus:
                leader = -1
                for ev, tid in ((ev, tid) for ev in events for tid in (tids or [-1])):
                    is_entry, is_raw, is_copied = ev.format.id in entry, ev.format.id in raw, ev.format.id in copied
                    comm = ev is events[0]  # (one event of each thread and CPU reports them)
                    def attr() -> bytes:
                        return attr_cache.setdefault((ev.format.id, comm, self._lost_format), _attr(
                            ev.format.id, self.stack, wakeup, is_entry, is_raw, bool(tids), comm,
                            stack_copy if is_copied else 0, stacks, self._lost_format))

                    try:
                        try:
                            fd = _open(attr(), tid, cpu, cgroup)
                        except OSError as err:
                            if err.errno != errno_mod.EINVAL or not self._lost_format:
                                raise
                            self._lost_format = False  # (a kernel before 6.0)
                            fd = _open(attr(), tid, cpu, cgroup)
                    except OSError as err:
                        if err.errno == errno_mod.ESRCH:
                            continue  # (a thread that has ended)
                        raise ProbectlError(f"cannot open a perf event on {ev.name} (CPU {cpu}) for its stacks: "
                                            f"{err.strerror}", _hint(err.errno)) from None
                    self._fds.append(fd)
                    self._fd_cpus[fd] = cpu
                    if ev.filter is not None:
                        try:
                            fcntl.ioctl(fd, _IOC_SET_FILTER, ev.filter.text.encode() + b"\0")
                        except OSError as err:
                            raise ProbectlError(f"the kernel refused the filter of {ev.name} on its perf event: "
                                                f"{err.strerror}", "record without -g, or with a simpler filter"
                                                ) from None
                    perf_id = _event_perf_id(fd)
                    self.ids[perf_id] = ev.format.id
                    if is_entry:
                        self.entry_ids.add(perf_id)
                    if is_raw:
                        self.raw_ids.add(perf_id)
                    if is_copied:
                        self.stack_ids.add(perf_id)
                    if leader < 0:
                        leader = fd
                    else:
                        followers.append((fd, leader))
                if leader < 0:
                    raise ProbectlError("the traced processes ended before their stacks could be recorded",
                                        "record a running process")
                self._leaders.append(leader)
                self._outs.append(_create(self.files[cpu]))
            stream = None
            walk = _native_walk(self.stack) if self.stack_ids else None
            if layout is not None and self.ids and self.raw_ids == set(self.ids) and (walk or not self.stack_ids):
                self.pages = {cpu: CpuPages(Path(out_dir) / f"cpu{cpu}.pages", layout.page_size) for cpu in self.cpus}
                for cpu in self.cpus:
                    self._outs.append(_create(self.pages[cpu].path))
                    # (the pages from the first page boundary: room for the head of the trace.dat
                    # that is made of this file, see probectl.tracedat.writer.write_tracedat)
                    os.lseek(self._outs[-1], layout.page_size, os.SEEK_SET)
                stream = ringbuf.PageStream(self._outs[len(self.cpus):], self.events(), layout, self.callchain_id,
                                            walk)
                if walk is not None:
                    from ..debuginfo.dwarf.unwind import CallFrameFiles

                    self._walkers, self._frames = {}, CallFrameFiles()
            self._rings = ringbuf.PerfRings(self.cpus, self._leaders, self._outs[:len(self.cpus)], data_pages,
                                            stream=stream)
            # (redirected once the ring is mapped: the kernel refuses a ring that does not exist yet)
            for fd, leader in followers:
                fcntl.ioctl(fd, _IOC_SET_OUTPUT, leader)
        except BaseException:
            self.close()
            raise

    def events(self) -> list[tuple[int, int, int]]:
        """(perf id, ftrace event id, flags) of each perf event, as the native writers take them."""
        return [(perf_id, event, (RAW if perf_id in self.raw_ids else 0) | (ENTRY if perf_id in self.entry_ids else 0)
                 | (STACK if perf_id in self.stack_ids else 0) | (BARE if self.bare else 0))
                for perf_id, event in self.ids.items()]

    def counted(self) -> Optional[tuple[int, set[int]]]:
        """The events written and their threads, when the pages were written as the rings were read
        (and no stack was left to unwind at the end)."""
        if not self.pages or any(s.whole for s in self.streamed):
            return None
        return sum(s.events for s in self.streamed), {tid for s in self.streamed for tid in s.tids}

    def give_rules(self, maps: Callable[[int], str]) -> None:
        """Give the rules the native walks of stack copies wanted since the last call (see
        :class:`probectl.ringbuf.PageStream`), from the call-frame information of the files of each
        process's ``maps(pid)`` (its /proc/PID/maps text). A process whose maps are not known, or an
        address in none of them, gets no rule: its stacks go whole, unwound when the recording ends."""
        if self._rings is None or self._walkers is None:
            return
        wanted = self._rings.wanted()
        if not wanted:
            return
        from ..debuginfo.dwarf.unwind import Unwinder
        from ..tracedat.procmaps import decode_proc_maps, encode_proc_maps

        rules = []
        for pid, address in wanted:
            walker = self._walkers.get(pid)
            text = maps(pid)
            if walker is None or walker[0] != text:  # (maps read again: mappings made since)
                parsed = decode_proc_maps(encode_proc_maps({pid: text})).get(pid, [])
                walker = self._walkers[pid] = (text, Unwinder(parsed, self._frames, self.stack))
            rule = walker[1].simple_rule(address) if text else None
            rules.append((pid, address, rule or (_RULE_NONE, 0, 0, 0, 0, 0)))
        self._rings.put_rules(rules)

    def start(self) -> None:
        """Start copying, then enable the events."""
        assert self._rings is not None
        self._rings.start()
        for fd in self._fds:
            fcntl.ioctl(fd, _IOC_ENABLE, 0)

    def stop(self) -> list[ringbuf.PerfRingStats]:
        """Disable the events, drain the rings; the per-CPU counters."""
        for fd in self._fds:
            try:
                fcntl.ioctl(fd, _IOC_DISABLE, 0)
            except OSError:
                pass
        if self._rings is None:
            return []
        stats = self._rings.stop()
        self.streamed = self._rings.streamed()
        if self._lost_format:
            lost: dict[int, int] = {}
            for fd, cpu in self._fd_cpus.items():
                try:
                    _count, n = struct.unpack("=QQ", os.read(fd, 16))
                except (OSError, struct.error):
                    continue
                lost[cpu] = lost.get(cpu, 0) + n
            stats = [replace(s, lost=max(s.lost, lost.get(s.cpu, 0))) for s in stats]
        return stats

    def stats(self) -> list[ringbuf.PerfRingStats]:
        return self._rings.stats() if self._rings is not None else []

    def close(self) -> None:
        if self._rings is not None:
            self._rings.close()
            self._rings = None
        if self._frames is not None:
            self._frames.close()
            self._frames, self._walkers = None, None
        for fd in self._fds + self._outs:
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds, self._outs, self._leaders = [], [], []
        self._fd_cpus = {}


_IOC_ID = 0x80082407  # _IOR('$', 7, u64 *): PERF_EVENT_IOC_ID


_RULE_NONE = 2  # native/unwind.h: UW_RULE_OTHER, no rule the walk can use


def _native_walk(max_frames: int) -> Optional[tuple[int, int, int, int, int]]:
    """(nregs, ip, sp, bp, max_frames) of the native walk of stack copies as the rings are read, on a
    machine whose stacks it walks (x86-64), or None."""
    from ..arch import x86_64

    arch = host()
    if arch is not x86_64.ARCH:
        return None
    return (*walk_registers(arch), max_frames)


def _open(attr: bytes, tid: int, cpu: int, cgroup: Optional[int]) -> int:
    if cgroup is None:
        return _perf_event_open(attr, tid, cpu)
    return _perf_event_open(attr, cgroup, cpu, _OPEN_FD_CLOEXEC | _OPEN_PID_CGROUP)


def _create(path: Path) -> int:
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    except OSError as err:
        raise ProbectlError(f"cannot create {path}: {err.strerror}", "record to a writable directory") from None


def _event_perf_id(fd: int) -> int:
    buf = bytearray(8)
    fcntl.ioctl(fd, _IOC_ID, buf)
    return struct.unpack("=Q", buf)[0]


def _hint(err: Optional[int]) -> str:
    if err in (errno_mod.EACCES, errno_mod.EPERM):
        return "record as root (or lower kernel.perf_event_paranoid)"
    if err == errno_mod.EMFILE:
        return "raise the open file limit (ulimit -n): -g opens a perf event per event and CPU"
    return "record without -g"


def add_callchains(meta: Any, files: dict[int, CpuPages], chains: Callchains, layout: ringbuf.PageLayout,
                   tmp: Path, proc_maps: Optional[dict[int, str]] = None,
                   unwound: Optional[Callable[[UnwindStats], None]] = None
                   ) -> tuple[dict[int, CpuPages], dict[int, list[str]]]:
    """Per-CPU page files with the events perf recorded and each event's user callchain after it (see
    :func:`probectl.tracedat.callchain.write_with_callchains`); probectl's event format in ``meta``,
    and the command names and thread groups of the tasks that exec'd while perf sampled, which the
    kernel's saved_cmdlines lacks when their events came from perf alone. Also returns, per process,
    the maps lines of the executable mappings perf reported. The samples' stack copies are unwound
    first, from the call-frame information of the files of ``proc_maps`` (/proc/PID/maps texts by
    process) and of the mappings perf reported; ``unwound`` is told how that went."""
    event_id = chains.callchain_id
    if event_id in all_format_ids(meta.ftrace_formats, meta.event_formats):
        raise ProbectlError(f"the kernel gave event id {event_id}, which this recording took for its stacks, "
                            "to an event made while it recorded", "record again")
    events = chains.events()
    unwound_chains: dict[int, tuple[bytes, bytes]] = {}
    if chains.stack_ids:
        unwound_chains, stats = unwind_stack_copies(chains.files, events, proc_maps or {}, chains.stack)
        stats.complete += sum(s.walked for s in chains.streamed)  # (walked as they came)
        if unwound is not None:
            unwound(stats)
    whole = {cpu: s.whole for cpu, s in zip(chains.cpus, chains.streamed)}
    out: dict[int, CpuPages] = {}
    names: dict[int, str] = {}
    tgids: dict[int, int] = {}
    maps: dict[int, list[str]] = {}
    for cpu, path in files.items():
        perf = chains.files.get(cpu)
        if cpu in chains.pages and whole.get(cpu) and perf is not None:  # (the stacks not walked, by time)
            out[cpu] = CpuPages(tmp / f"cpu{cpu}.merged")
            _written, _left, comms, cpu_maps = write_with_callchains(
                chains.pages[cpu], perf, out[cpu].path, layout, event_id, events, chains=unwound_chains.get(cpu))
        elif cpu in chains.pages:  # (the instance recorded nothing: every event came from perf)
            out[cpu] = chains.pages[cpu]
            comms, cpu_maps = perf_names(perf) if perf is not None else ([], {})
        elif perf is None or not perf.exists() or not perf.stat().st_size:
            out[cpu] = path
            continue
        else:
            assert not path.offset
            out[cpu] = CpuPages(tmp / f"cpu{cpu}.merged")
            _written, _left, comms, cpu_maps = write_with_callchains(
                path if path.path.exists() else None, perf, out[cpu].path, layout, event_id, events,
                chains=unwound_chains.get(cpu))
        for pid, lines in cpu_maps.items():
            maps.setdefault(pid, []).extend(lines)
        for pid, tid, name in comms:
            names[tid] = name
            tgids[tid] = pid
    meta.event_formats = callchain_formats(meta.event_formats, event_id)
    # (an exec perf reported is newer than saved_cmdlines, which may name an earlier task of that pid)
    cmdlines, groups = parse_cmdlines(meta.cmdlines), parse_tgids(meta.tgids)
    meta.cmdlines = "".join(f"{tid} {name}\n" for tid, name in sorted({**cmdlines, **names}.items()))
    meta.tgids = "".join(f"{tid} {pid}\n" for tid, pid in sorted({**groups, **tgids}.items()))
    return out, maps


def uprobe_events(definitions: Sequence[EventDefinition], events: Sequence[SelectedEvent]) -> list[int]:
    """Format ids of the ``events`` that are uprobes (taken from perf alone, see the module documentation)."""
    names = {(d.group, d.event) for d in definitions if d.is_uprobe}
    return [ev.format.id for ev in events if (ev.group, ev.event) in names]


def entry_uprobes(definitions: Sequence[EventDefinition], events: Sequence[SelectedEvent]) -> list[int]:
    """Format ids of the ``events`` that are uprobes (not return probes) at a function's first
    instruction: the return address into their caller is the word at the stack pointer. An event
    with several places counts only if all of them are such."""
    by_name: dict[tuple[str, str], list[EventDefinition]] = {}
    for d in definitions:
        if d.is_uprobe:
            by_name.setdefault((d.group, d.event), []).append(d)
    starts: dict[str, set[int]] = {}
    out = []
    for ev in events:
        defs = by_name.get((ev.group, ev.event), [])
        if not defs or any(d.kind != "p" for d in defs):
            continue
        if all(d.uprobe_offset in _function_starts(d.uprobe_path, starts) for d in defs):
            out.append(ev.format.id)
    return out


def _function_starts(path: str, cache: dict[str, set[int]]) -> set[int]:
    """File offsets of the functions of an ELF file (none for a file that cannot be read)."""
    from ..debuginfo.elf import ElfFile  # (only a recording of uprobes with stacks reads ELF files)

    if path not in cache:
        offsets: set[int] = set()
        try:
            with ElfFile(path) as elf:
                for sym in elf.functions():
                    try:
                        offsets.add(elf.vaddr_to_offset(sym.value))
                    except DebugInfoError:
                        pass
        except (DebugInfoError, OSError):
            pass
        cache[path] = offsets
    return cache[path]
