"""A recording session: a private tracefs instance, events enabled with their filters, an optional
workload, the native per-CPU recorder, and a trace.dat file at the end — and nothing left behind.

The steps of :meth:`Recording.run`:

1. remove what crashed runs left (:func:`cleanup_stale`), expand the event globs and check every
   filter against its event's fields (errors here touch nothing);
2. fork the workload (``-- COMMAND``) stopped at a gate (a pipe it reads before ``exec``), so its
   pid is known before it runs;
3. create ``instances/probectl-<pid>``, set its buffer size, CPU mask, stack options and
   ``set_event_pid`` (with ``options/event-fork``), write the filters, start the recorder, enable
   the events, then open the gate;
4. wait for the workload, ``--duration``, Ctrl-C or SIGTERM, showing a live count on a terminal;
5. turn tracing off, disable the events, drain the recorder, read the per-CPU statistics (lost
   events), and remove the instance — in ``finally`` blocks, with Ctrl-C and SIGTERM held off, so
   that no failure leaves an event enabled;
6. write trace.dat with the metadata, the command names and thread groups of the recorded pids and
   the memory maps of the traced processes (:data:`OPTION_PROC_MAPS`, for user-space symbols).

A run killed with SIGKILL leaves its instance (and, for ``probectl trace``, its probes); the next
``record``/``trace`` run or ``probectl cleanup`` finds instances whose pid is dead by their name, and
probes through the state file the run left in :data:`STATE_DIRS`.
"""
from __future__ import annotations

import contextlib
import difflib
import errno
import json
import mmap
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import eq
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

from .errors import ProbectlError, TracefsError
from .events import EventDefinition
from .filters import Filter, apply_filter, compile_filter
from .formats import EventFormat
from .ringbuf import EventReader, PageLayout, Recorder
from .tracedat import collect_metadata, read_cpustats, write_tracedat
from .tracefs import Tracefs, os_error

INSTANCE_PREFIX = "probectl-"
_INSTANCE_RE = re.compile(r"probectl-(\d+)(?:-(\d+))?$")
STATE_DIRS = (Path("/run/probectl"), Path("/tmp/probectl-state"))
# probectl's option in trace.dat: /proc/PID/maps of the traced processes (file-backed lines),
# as blocks "pid PID\n<maps lines>\n\n". trace-cmd skips options it does not know.
OPTION_PROC_MAPS = 0x7E02
DEFAULT_OUTPUT = Path("probectl.dat")
_MAX_MAPS_PIDS = 4096
_NOT_ENABLEABLE = {"ftrace"}


def _notice_stderr(message: str) -> None:
    print(message, file=sys.stderr)


# ---- small tracefs helpers ----------------------------------------------------------------------


def _write(path: Path, text: str, what: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    except OSError as err:
        raise os_error(err, what, path) from None
    try:
        os.write(fd, text.encode())
    except OSError as err:
        raise os_error(err, what, path) from None
    finally:
        os.close(fd)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def parse_cpus(text: str, ncpus: Optional[int] = None) -> list[int]:
    """``0-3,6`` → [0, 1, 2, 3, 6]; checked against ``ncpus`` when given."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ProbectlError(f"bad CPU list {text!r}", "write CPUs as a list of numbers and ranges: 0-3,6")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ProbectlError(f"bad CPU range {part!r} in {text!r}", "write ranges low-high: 0-3")
        cpus.update(range(lo, hi + 1))
    if not cpus:
        raise ProbectlError(f"bad CPU list {text!r}", "name at least one CPU: -C 0 or -C 0-3")
    if ncpus is not None:
        bad = sorted(c for c in cpus if c >= ncpus)
        if bad:
            raise ProbectlError(f"CPU {bad[0]} does not exist (this machine has CPUs 0-{ncpus - 1})",
                                f"choose CPUs below {ncpus}")
    return sorted(cpus)


def cpu_mask(cpus: Sequence[int]) -> str:
    """The ``tracing_cpumask`` text for ``cpus``: hex words of 32 bits, comma-separated."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    words = []
    while True:
        words.append(f"{mask & 0xFFFFFFFF:08x}")
        mask >>= 32
        if not mask:
            break
    return ",".join(reversed(words))


def instance_cpus(instance: Path) -> int:
    try:
        return sum(1 for n in os.listdir(instance / "per_cpu") if re.fullmatch(r"cpu\d+", n))
    except OSError:
        return os.cpu_count() or 1


# ---- event selection ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRequest:
    """One ``-e PATTERN`` with the ``--filter`` that followed it."""

    pattern: str
    filter: Optional[str] = None


@dataclass
class SelectedEvent:
    group: str
    event: str
    format: EventFormat
    filter: Optional[Filter] = None

    @property
    def name(self) -> str:
        return f"{self.group}:{self.event}"


def select_events(tfs: Tracefs, requests: Sequence[EventRequest]) -> list[SelectedEvent]:
    """Expand the patterns (``GROUP:EVENT`` globs, or an event name alone) to existing events and
    check each filter against every event it applies to. Nothing is written."""
    if not requests:
        raise ProbectlError("no events to record", "name them with -e GROUP:EVENT (globs work: -e 'probe:*')")
    known = {(g, e) for g, e in tfs.event_names() if g not in _NOT_ENABLEABLE}
    chosen: dict[tuple[str, str], SelectedEvent] = {}
    for req in requests:
        pattern = req.pattern.replace("/", ":", 1) if ":" not in req.pattern else req.pattern
        hits = [(g, e) for g, e in tfs.tracepoints(pattern) if (g, e) in known]
        if not hits:
            names = sorted(f"{g}:{e}" for g, e in known)
            close = difflib.get_close_matches(pattern, names, n=3, cutoff=0.6)
            hint = (f"did you mean {' or '.join(close)}?" if close else
                    "list them with 'probectl tracepoints' (probe events: 'probectl list')")
            raise ProbectlError(f"no event matches {req.pattern!r}", hint)
        for g, e in hits:
            fmt = tfs.event_format(g, e)
            flt = None
            if req.filter is not None:
                try:
                    flt = compile_filter(req.filter, fmt)
                except ProbectlError as err:
                    if len(hits) > 1:
                        err.message = f"{g}:{e} (matched by {req.pattern!r}): {err.message}"
                        err.args = (err.message,)
                    raise
            if (g, e) in chosen and chosen[(g, e)].filter is not None and flt is None:
                continue  # keep the filter an earlier -e gave
            chosen[(g, e)] = SelectedEvent(g, e, fmt, flt)
    return list(chosen.values())


# ---- instances ----------------------------------------------------------------------------------


class Instance:
    """A private tracefs instance of this process: ``instances/probectl-<pid>[-N]``."""

    _counter = 0
    _counter_lock = threading.Lock()

    def __init__(self, tfs: Tracefs):
        self.tfs = tfs
        with Instance._counter_lock:
            Instance._counter += 1
            n = Instance._counter
        name = f"{INSTANCE_PREFIX}{os.getpid()}" + ("" if n == 1 else f"-{n}")
        self.path = tfs.root / "instances" / name
        self.created = False
        self.enabled: list[SelectedEvent] = []

    def create(self) -> None:
        try:
            os.mkdir(self.path)
        except FileExistsError:
            # our own pid's leftover (a previous run in this process that could not remove it)
            remove_instance(self.path)
            try:
                os.mkdir(self.path)
            except OSError as err:
                raise os_error(err, "create a tracefs instance", self.path) from None
        except OSError as err:
            raise os_error(err, "create a tracefs instance", self.path) from None
        self.created = True

    def write(self, name: str, text: str) -> None:
        _write(self.path / name, text, f"set {name} of the recording instance")

    @property
    def events_dir(self) -> Path:
        return self.path / "events"

    def configure(self, *, buffer_kb: Optional[int] = None, cpus: Optional[Sequence[int]] = None,
                  stacks: bool = False, pids: Sequence[int] = (), follow_forks: bool = True,
                  buffer_percent: Optional[int] = None) -> None:
        self.write("tracing_on", "0")
        if buffer_kb:
            self.write("buffer_size_kb", str(buffer_kb))
        if buffer_percent is not None:
            self.write("buffer_percent", str(buffer_percent))
        if cpus is not None:
            self.write("tracing_cpumask", cpu_mask(cpus))
        if stacks:
            self.write("options/stacktrace", "1")
            self.write("options/userstacktrace", "1")
        if pids:
            if follow_forks:
                self.write("options/event-fork", "1")
            self.write("set_event_pid", " ".join(str(p) for p in pids))

    def traced_pids(self) -> list[int]:
        return [int(p) for p in _read(self.path / "set_event_pid").split() if p.isdigit()]

    def enable(self, events: Sequence[SelectedEvent]) -> None:
        """Write the filters, then enable; on any failure the caller's teardown disables all."""
        for ev in events:
            if ev.filter is not None:
                apply_filter(self.events_dir, ev.group, ev.event, ev.filter)
        for ev in events:
            _write(self.events_dir / ev.group / ev.event / "enable", "1", f"enable {ev.name}")
            self.enabled.append(ev)

    def tracing(self, on: bool) -> None:
        self.write("tracing_on", "1" if on else "0")

    def stats(self, cpus: Sequence[int]) -> dict[int, dict[str, int]]:
        out = {}
        for cpu in cpus:
            out[cpu] = parse_cpustat(_read(self.path / "per_cpu" / f"cpu{cpu}" / "stats"))
        return out

    def remove(self) -> None:
        if self.created:
            remove_instance(self.path)
            self.created = False


def parse_cpustat(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            try:
                out[key.strip()] = int(value.split()[0]) if "." not in value else 0
            except (ValueError, IndexError):
                continue
    return out


def lost_of(stats: dict[str, int]) -> int:
    return stats.get("overrun", 0) + stats.get("dropped events", 0)


def remove_instance(path: Path) -> None:
    """Disable everything in an instance and remove it (retrying while the kernel is busy)."""
    for name, value in (("tracing_on", "0"), ("events/enable", "0"), ("set_event_pid", ""),
                        ("options/stacktrace", "0"), ("options/userstacktrace", "0")):
        with contextlib.suppress(OSError):
            fd = os.open(path / name, os.O_WRONLY | os.O_TRUNC)
            try:
                os.write(fd, value.encode() or b"\n")
            except OSError:
                pass
            finally:
                os.close(fd)
    last: Optional[OSError] = None
    for attempt in range(100):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as err:
            last = err
            if err.errno != errno.EBUSY:
                break
            time.sleep(0.02 * min(attempt + 1, 5))
    assert last is not None
    raise os_error(last, "remove the recording instance", path)


# ---- crash leftovers ----------------------------------------------------------------------------


def _state_dir() -> Optional[Path]:
    for d in STATE_DIRS:
        try:
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.access(d, os.W_OK):
                return d
        except OSError:
            continue
    return None


@contextlib.contextmanager
def probe_state(events: Sequence[EventDefinition]) -> Iterator[Optional[Path]]:
    """Note the probes a ``trace`` run added, so that the next run removes them if this one dies."""
    d = _state_dir()
    path = None
    if d is not None:
        path = d / f"trace-{os.getpid()}.json"
        data = {"pid": os.getpid(), "definitions": [_identity(e) for e in events],
                "events": [[e.group, e.event] for e in events]}
        try:
            path.write_text(json.dumps(data))
        except OSError:
            path = None
    try:
        yield path
    finally:
        if path is not None:
            with contextlib.suppress(OSError):
                path.unlink()


def _identity(d: EventDefinition) -> list:
    """What makes a probe the one a run added (the kernel prints places its own way: zero-padded
    uprobe offsets), so that cleanup never removes a probe someone else made under that name."""
    place = [d.uprobe_path, d.uprobe_offset] if d.is_uprobe else [d.place, 0]
    return [d.kind, d.group, d.event, *place]


def cleanup_stale(tfs: Tracefs, notice: Callable[[str], None] = _notice_stderr) -> list[str]:
    """Remove the instances (``probectl-<pid>``) and the ``trace`` probes of runs whose pid is dead.

    Returns what was removed, as text for the user.
    """
    removed: list[str] = []
    instances = tfs.root / "instances"
    try:
        names = sorted(os.listdir(instances))
    except OSError:
        names = []
    for name in names:
        m = _INSTANCE_RE.fullmatch(name)
        if not m or _pid_alive(int(m.group(1))):
            continue
        try:
            remove_instance(instances / name)
        except TracefsError as err:
            notice(f"probectl: could not remove the stale instance {name}: {err.message}")
            continue
        removed.append(f"instance {name}")
    for d in STATE_DIRS:
        try:
            files = sorted(d.glob("trace-*.json"))
        except OSError:
            continue
        for path in files:
            try:
                data = json.loads(path.read_text())
                pid = int(data["pid"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if _pid_alive(pid):
                continue
            wanted = {tuple(x) for x in data.get("definitions", []) if isinstance(x, list)}
            current = {(d_.group, d_.event): tuple(_identity(d_)) for d_ in tfs.definitions()}
            names_ = [(g, e) for g, e in data.get("events", []) if current.get((g, e)) in wanted]
            try:
                gone = tfs.remove(names_) if names_ else []
            except TracefsError as err:
                notice(f"probectl: could not remove probes of the dead run {pid}: {err.message}")
                continue
            removed += [f"probe {g}:{e}" for g, e in gone]
            with contextlib.suppress(OSError):
                path.unlink()
    return removed


# ---- the workload -------------------------------------------------------------------------------


class Workload:
    """``-- COMMAND ARGS``: forked now, held at a gate until :meth:`release`, then exec'd."""

    def __init__(self, argv: Sequence[str]):
        if not argv:
            raise ProbectlError("no command given after --")
        if "/" not in argv[0] and shutil.which(argv[0]) is None:
            raise ProbectlError(f"command not found: {argv[0]}", "give a program on $PATH or a path to it")
        if "/" in argv[0] and not os.access(argv[0], os.X_OK):
            raise ProbectlError(f"cannot run {argv[0]}: not an executable file")
        self.argv = list(argv)
        self.status: Optional[int] = None
        gate_r, self._gate = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: wait at the gate, then exec
            try:
                os.close(self._gate)
                os.close(err_r)
                if os.read(gate_r, 1) != b"g":
                    os._exit(127)  # probectl went away before the start: do not run untraced
                os.close(gate_r)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.execvp(self.argv[0], self.argv)
            except OSError as err:
                with contextlib.suppress(OSError):
                    os.write(err_w, str(err.errno).encode())
            finally:
                os._exit(127)
        os.close(gate_r)
        os.close(err_w)
        self.pid = pid
        self._err = err_r

    def release(self) -> None:
        """Let the command run; raise if it could not be executed."""
        try:
            os.write(self._gate, b"g")
        finally:
            os.close(self._gate)
            self._gate = -1
        data = b""
        while True:
            chunk = os.read(self._err, 64)
            if not chunk:
                break
            data += chunk
        os.close(self._err)
        self._err = -1
        if data:
            code = int(data.decode() or 0)
            self.wait()
            raise ProbectlError(f"cannot run {self.argv[0]}: {os.strerror(code)}")

    def poll(self) -> Optional[int]:
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.status = -1
                return self.status
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.01)
        return self.status

    def stop(self) -> None:
        """Make sure the command is gone: never started, or SIGTERM then SIGKILL."""
        for fd_name in ("_gate", "_err"):
            fd = getattr(self, fd_name, -1)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, fd_name, -1)
        if self.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        if self.wait(2.0) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.wait()


# ---- process names and maps ---------------------------------------------------------------------


def _proc_comm(pid: int) -> Optional[str]:
    try:
        return Path(f"/proc/{pid}/comm").read_text().rstrip("\n")
    except OSError:
        return None


def _proc_tgid(pid: int) -> Optional[int]:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Tgid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def read_maps(pid: int) -> Optional[str]:
    """The file-backed lines of /proc/PID/maps (what user-space symbols need), or None."""
    try:
        text = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return None
    lines = [l for l in text.splitlines() if len(l.split(None, 5)) == 6 and
             (l.split(None, 5)[5].startswith("/") or l.split(None, 5)[5] in ("[vdso]", "[uprobes]"))]
    return "\n".join(lines) if lines else None


def synthesize_maps(path: str, file_offset: int, address: int) -> Optional[str]:
    """Maps lines for ``path`` in a process where file offset ``file_offset`` is at ``address``
    (a uprobe's place and its ``__probe_ip``): every PT_LOAD segment at the same load bias.
    For processes that ended before their maps could be read."""
    from .debuginfo.elf import ElfFile

    try:
        with ElfFile(path) as elf:
            bias = address - elf.offset_to_vaddr(file_offset)
            lines = []
            for seg in elf.segments:
                if not seg.filesz:
                    continue
                start = (bias + seg.vaddr) & ~0xFFF
                end = (bias + seg.vaddr + seg.filesz + 0xFFF) & ~0xFFF
                perms = "r" + ("w" if seg.flags & 2 else "-") + ("x" if seg.flags & 1 else "-") + "p"
                lines.append(f"{start:x}-{end:x} {perms} {seg.offset & ~0xFFF:08x} 00:00 0 {path}")
    except (ProbectlError, OSError, ValueError):
        return None
    return "\n".join(lines) if lines else None


def encode_proc_maps(maps: dict[int, str]) -> bytes:
    return "".join(f"pid {pid}\n{text}\n\n" for pid, text in sorted(maps.items())).encode()


def decode_proc_maps(data: bytes) -> dict[int, list[Any]]:
    """The :data:`OPTION_PROC_MAPS` option → {tgid: [Mapping]} (bad lines are skipped)."""
    from .script import Mapping

    out: dict[int, list[Mapping]] = {}
    pid: Optional[int] = None
    for line in data.decode(errors="replace").split("\n"):
        if line.startswith("pid "):
            try:
                pid = int(line.split()[1])
            except (ValueError, IndexError):
                pid = None
            if pid is not None:
                out.setdefault(pid, [])
            continue
        parts = line.split(None, 5)
        if pid is None or len(parts) < 6:
            continue
        try:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            offset = int(parts[2], 16)
        except ValueError:
            continue
        out[pid].append(Mapping(lo, hi, offset, parts[5], parts[1]))
    return out


class ProcessWatch:
    """Names, thread groups and maps of traced processes, read while they are alive."""

    def __init__(self) -> None:
        self.comms: dict[int, str] = {}
        self.tgids: dict[int, int] = {}
        self.maps: dict[int, str] = {}

    def look(self, pids: Sequence[int], maps: bool = True) -> None:
        done: set[int] = set()
        for pid in pids:
            comm = _proc_comm(pid)
            if comm is None:
                continue
            self.comms[pid] = comm
            tgid = _proc_tgid(pid) or pid
            self.tgids[pid] = tgid
            if maps and tgid not in done and (tgid in self.maps or len(self.maps) < _MAX_MAPS_PIDS):
                done.add(tgid)
                text = read_maps(tgid)
                if text:
                    self.maps[tgid] = text


# ---- the recording ------------------------------------------------------------------------------


@dataclass
class RecordOptions:
    """What ``probectl record`` was asked for."""

    events: Sequence[EventRequest]
    output: Path = DEFAULT_OUTPUT
    cpus: Optional[Sequence[int]] = None  # None: every CPU
    pids: Sequence[int] = ()  # -p: only these processes (and their threads, and forks)
    command: Sequence[str] = ()  # -- COMMAND: run it, record while it runs
    system_wide: bool = False  # -a with a command: every process, not only the command's
    stacks: bool = False  # -g
    duration: Optional[float] = None
    buffer_kb: Optional[int] = None  # per CPU
    version: int = 7


@dataclass
class RecordResult:
    path: Path
    events: int
    lost: int
    lost_by_cpu: dict[int, int]
    bytes: int
    stopped_by: str  # "command", "duration", "SIGINT", "SIGTERM"
    command_status: Optional[int] = None
    selected: list[str] = field(default_factory=list)


class _Terminated(Exception):
    """SIGTERM arrived (raised from the signal handler, like KeyboardInterrupt for SIGINT)."""


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM raises :class:`_Terminated` in the main thread (SIGINT raises KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        raise _Terminated()

    old = signal.signal(signal.SIGTERM, on_term)
    # (SIGINT too, even when the shell started us with it ignored, as it does for '&' jobs:
    # 'kill -INT' is how scripts stop a recorder)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """Hold off SIGINT and SIGTERM while tearing down (a second Ctrl-C must not stop the clean-up);
    the signals that arrived are listed."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    got: list[int] = []

    def note(signum: int, frame: Any) -> None:
        got.append(signum)

    old = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class Recording:
    """One ``probectl record`` run (see the module documentation for the steps)."""

    def __init__(self, tfs: Tracefs, options: RecordOptions, *, notice: Callable[[str], None] = _notice_stderr,
                 progress: Optional[Callable[[int, int], None]] = None, progress_interval: float = 0.5):
        self.tfs = tfs
        self.options = options
        self.notice = notice
        self.progress = progress
        self.progress_interval = progress_interval
        self.instance: Optional[Instance] = None

    def run(self) -> RecordResult:
        opts = self.options
        for what in cleanup_stale(self.tfs, self.notice):
            self.notice(f"probectl: removed the leftover {what} of a dead run")
        selected = select_events(self.tfs, opts.events)
        output = Path(opts.output)
        if output.is_dir():
            raise ProbectlError(f"{output} is a directory", "give the file to write with -o FILE")
        ncpus = instance_cpus(self.tfs.root)
        cpus = list(opts.cpus) if opts.cpus is not None else list(range(ncpus))
        for p in opts.pids:
            if not _pid_alive(p) or _proc_comm(p) is None:
                raise ProbectlError(f"no process {p}", "give the pid of a running process to -p")
        workdir = output.parent if str(output.parent) else Path(".")
        try:
            tmp = Path(tempfile.mkdtemp(prefix=".probectl-", dir=workdir))
        except OSError as err:
            raise ProbectlError(f"cannot write in {workdir}: {err.strerror}",
                                "record to a writable directory (-o DIR/FILE)") from None
        workload: Optional[Workload] = None
        state = _RunState(Instance(self.tfs), cpus, ncpus, selected, ProcessWatch())
        self.instance = state.instance
        try:
            workload = state.workload = Workload(opts.command) if opts.command else None
            try:
                with stop_signals():
                    stopped_by = self._record(state, tmp)
            except BaseException:
                with signals_held():
                    self._teardown(state, quiet=True)
                raise
            with signals_held():
                meta = self._teardown(state, quiet=False)
                assert state.recorder is not None and state.layout is not None and meta is not None
                events, seen = _count_and_pids(state.recorder.files, state.layout)
                self._names(meta, seen, state)
                write_tracedat(output, meta, state.recorder.files, version=opts.version)
        finally:
            if workload is not None:
                workload.stop()
            shutil.rmtree(tmp, ignore_errors=True)
        lost = {cpu: lost_of(parse_cpustat(text)) for cpu, text in meta.cpustats.items()}
        return RecordResult(path=output, events=events, lost=sum(lost.values()), lost_by_cpu=lost,
                            bytes=output.stat().st_size, stopped_by=stopped_by,
                            command_status=workload.status if workload else None,
                            selected=[e.name for e in selected])

    def _record(self, state: "_RunState", tmp: Path) -> str:
        """Set up, record until the end condition; returns what ended it. Ctrl-C or SIGTERM before
        the recorder runs propagate (nothing was recorded); after, they end the recording."""
        opts, inst, workload = self.options, state.instance, state.workload
        try:
            inst.create()
            state.pids = self._traced_tids(opts, workload)
            inst.configure(buffer_kb=opts.buffer_kb, cpus=opts.cpus, stacks=opts.stacks, pids=state.pids)
            state.layout = PageLayout.from_header_page(_read(inst.events_dir / "header_page"))
            state.recorder = Recorder(inst.path, state.cpus, tmp, state.layout.page_size)
            state.watch.look(list(opts.pids) + ([workload.pid] if workload else []), maps=False)
            inst.enable(state.selected)
            state.recorder.start()
            inst.tracing(True)
            if workload is not None:
                workload.release()
                # (the gate returns once exec succeeded: the program and ld.so are mapped)
                state.watch.look([workload.pid], maps=True)
            return self._wait(state)
        except KeyboardInterrupt:
            if state.recorder is None or not state.recorder.running:
                raise
            return "SIGINT"
        except _Terminated:
            if state.recorder is None or not state.recorder.running:
                raise KeyboardInterrupt from None
            return "SIGTERM"

    def _teardown(self, state: "_RunState", *, quiet: bool) -> Any:
        """Every clean-up step, each attempted whatever the others did; returns the metadata of a
        complete recording. With ``quiet`` (an error is already on its way) failures are only
        reported; otherwise the first one is raised at the end."""
        inst = state.instance
        errors: list[BaseException] = []

        def step(fn: Callable[[], Any]) -> Any:
            try:
                return fn()
            except (ProbectlError, OSError) as err:
                errors.append(err)
                return None

        meta = None
        if inst.created:
            step(lambda: self._capture(state))
            step(lambda: inst.tracing(False))
            step(lambda: inst.write("events/enable", "0"))
        recorder_ok = False
        if state.recorder is not None:
            recorder_ok = step(lambda: state.recorder.stop() or True) is not None  # type: ignore[union-attr]
            state.recorder.close()
        if inst.created and recorder_ok:
            cpustats = read_cpustats(inst.path, state.cpus)
            meta = step(lambda: collect_metadata(inst.path, {e.group for e in state.selected},
                                                 root=self.tfs.root, cpus=state.ncpus))
            if meta is not None:
                meta.cpustats = cpustats
        if state.workload is not None:
            state.workload.stop()
        step(inst.remove)
        if errors:
            if quiet:
                for err in errors:
                    self.notice(f"probectl: while cleaning up: {err}")
            else:
                raise errors[0]
        return meta

    @staticmethod
    def _traced_tids(opts: RecordOptions, workload: Optional[Workload]) -> list[int]:
        pids: list[int] = []
        for p in opts.pids:
            try:
                pids += [int(t) for t in os.listdir(f"/proc/{p}/task")]
            except OSError:
                pids.append(p)
        if workload is not None and not opts.system_wide:
            pids.append(workload.pid)
        return sorted(set(pids))

    def _wait(self, state: "_RunState") -> str:
        opts, inst, workload = self.options, state.instance, state.workload
        start = time.monotonic()
        next_progress = start
        next_look = start
        while True:
            now = time.monotonic()
            if workload is not None and workload.poll() is not None:
                return "command"
            if opts.duration is not None and now - start >= opts.duration:
                return "duration"
            if now >= next_look:
                state.watch.look(self._watched(state), maps=True)
                next_look = now + 0.2
            if self.progress is not None and now >= next_progress:
                stats = inst.stats(state.cpus)
                events = sum(s.get("read events", 0) + s.get("entries", 0) for s in stats.values())
                self.progress(events, sum(lost_of(s) for s in stats.values()))
                next_progress = now + self.progress_interval
            wait = 0.05
            if opts.duration is not None:
                wait = min(wait, max(0.0, start + opts.duration - now))
            time.sleep(wait)

    def _watched(self, state: "_RunState") -> list[int]:
        """The processes whose names and maps are worth keeping: the traced ones."""
        pids = state.instance.traced_pids() if state.pids and state.instance.created else []
        pids += list(self.options.pids)
        if state.workload is not None:
            pids.append(state.workload.pid)
        return sorted(set(pids))

    def _capture(self, state: "_RunState") -> None:
        """Names and maps of the traced processes while they still exist."""
        state.watch.look(self._watched(state), maps=True)

    def _names(self, meta: Any, seen: set[int], state: "_RunState") -> None:
        """Command names and thread groups of every recorded pid into the metadata, and the maps of
        the traced processes (with stacks or probe events: of every recorded process still alive)."""
        watch = state.watch
        cmdlines: dict[int, str] = {}
        for line in meta.cmdlines.splitlines():
            pid, _, comm = line.strip().partition(" ")
            if pid.isdigit() and comm:
                cmdlines[int(pid)] = comm
        tgids: dict[int, int] = {}
        for line in meta.tgids.splitlines():
            a, _, b = line.partition(" ")
            if a.strip().isdigit() and b.strip().isdigit():
                tgids[int(a)] = int(b)
        probes = any(f.name in ("__probe_ip", "__probe_func") for e in state.selected for f in e.format.event_fields)
        missing = sorted(p for p in seen if p and p not in watch.comms)
        watch.look(missing[:_MAX_MAPS_PIDS], maps=self.options.stacks or probes)
        for pid, text in self._probe_maps(state).items():
            tgid = watch.tgids.get(pid, tgids.get(pid, pid))
            if tgid not in watch.maps and len(watch.maps) < _MAX_MAPS_PIDS:
                watch.maps[tgid] = text
        for pid in seen:
            if pid in watch.comms and pid not in cmdlines:
                cmdlines[pid] = watch.comms[pid]
            if pid in watch.tgids:
                tgids[pid] = watch.tgids[pid]
        meta.cmdlines = "".join(f"{p} {c}\n" for p, c in sorted(cmdlines.items()))
        meta.tgids = "".join(f"{p} {t}\n" for p, t in sorted(tgids.items()) if t)
        if watch.maps:
            meta.extra_options.append((OPTION_PROC_MAPS, encode_proc_maps(watch.maps)))


    def _probe_maps(self, state: "_RunState") -> dict[int, str]:
        """For processes whose maps could not be read: the mapping of each probed binary, placed
        by the runtime address of a uprobe event and the file offset of its definition."""
        places: dict[int, tuple[str, int, str]] = {}
        by_name = {}
        for d in self.tfs.definitions():
            if d.is_uprobe:
                by_name.setdefault((d.group, d.event), []).append(d)
        for ev in state.selected:
            defs = by_name.get((ev.group, ev.event), [])
            ip = "__probe_func" if ev.format.field("__probe_func") else "__probe_ip"
            if len(defs) == 1 and ev.format.field(ip):
                places[ev.format.id] = (defs[0].uprobe_path, defs[0].uprobe_offset, ip)
        if not places or state.recorder is None or state.layout is None:
            return {}
        found: dict[int, str] = {}
        for pid, (fid, address) in _first_addresses(state.recorder.files, state.layout,
                                                   [e.format for e in state.selected if e.format.id in places],
                                                   {fid: ip for fid, (_p, _o, ip) in places.items()},
                                                   skip=set(state.watch.maps)).items():
            path, offset, _ip = places[fid]
            text = synthesize_maps(path, offset, address)
            if text:
                found[pid] = text
        return found


def _first_addresses(files: dict[int, Path], layout: PageLayout, formats: list[EventFormat],
                     ip_fields: dict[int, str], skip: set[int]) -> dict[int, tuple[int, int]]:
    """pid → (format id, address) of one probe event of each pid not in ``skip``."""
    out: dict[int, tuple[int, int]] = {}
    with _mapped(files, layout) as streams:
        if not streams:
            return out
        reader = EventReader(streams, formats, layout, strict=False)
        try:
            for batch in reader.batches():
                ids = batch.id
                for fmt in formats:
                    mask = list(map(eq, ids, repeat(fmt.id)))
                    if not any(mask):
                        continue
                    ips = batch.column(fmt, ip_fields[fmt.id])
                    for pid, ip in zip(compress(batch.pid, mask), ips):
                        if pid not in out and pid not in skip:
                            out[pid] = (fmt.id, ip)
        finally:
            reader.close()
    return out


@contextlib.contextmanager
def _mapped(files: dict[int, Path], layout: PageLayout) -> Iterator[list[tuple[int, Any, int, int]]]:
    maps, streams = [], []
    try:
        for cpu, path in files.items():
            size = path.stat().st_size
            size -= size % layout.page_size
            if not size:
                continue
            with open(path, "rb") as f:
                m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            maps.append(m)
            streams.append((cpu, m, 0, size))
        yield streams
    finally:
        for m in maps:
            m.close()


@dataclass
class _RunState:
    instance: Instance
    cpus: list[int]
    ncpus: int
    selected: list[SelectedEvent]
    watch: ProcessWatch
    workload: Optional[Workload] = None
    recorder: Optional[Recorder] = None
    layout: Optional[PageLayout] = None
    pids: list[int] = field(default_factory=list)


def _count_and_pids(files: dict[int, Path], layout: PageLayout) -> tuple[int, set[int]]:
    """Events in the per-CPU files and the pids they carry (decoded natively, no field values)."""
    with _mapped(files, layout) as streams:
        if not streams:
            return 0, set()
        count, pids = 0, set()
        reader = EventReader(streams, [], layout, strict=False)
        try:
            for batch in reader.batches():
                count += len(batch)
                pids.update(batch.pid)
        finally:
            reader.close()
        return count, pids


# ---- streaming (probectl trace) -----------------------------------------------------------------


class LiveStream:
    """Events of a private instance as they arrive, for ``probectl trace``.

    Every ``interval`` seconds the pages of each CPU are read (``read()`` returns the partial page
    the kernel is still writing, so nothing waits for a page to fill) and decoded together, merged
    by time, into an :class:`EventReader` handed to ``on_pages``.
    """

    def __init__(self, tfs: Tracefs, selected: Sequence[SelectedEvent], *, command: Sequence[str] = (),
                 pids: Sequence[int] = (), system_wide: bool = False, buffer_kb: Optional[int] = None,
                 interval: float = 0.1, notice: Callable[[str], None] = _notice_stderr):
        self.tfs = tfs
        self.selected = list(selected)
        self.command = list(command)
        self.pids = list(pids)
        self.system_wide = system_wide
        self.buffer_kb = buffer_kb
        self.interval = interval
        self.notice = notice
        self.formats: list[EventFormat] = [e.format for e in self.selected]
        self.watch = ProcessWatch()
        self.lost = 0
        self.events = 0
        self.stopped_by = ""
        self.command_status: Optional[int] = None
        self.streaming = False

    def run(self, on_pages: Callable[[EventReader], None]) -> None:
        """Stream until the command ends, Ctrl-C or SIGTERM; then remove the instance."""
        workload = Workload(self.command) if self.command else None
        inst = Instance(self.tfs)
        fds: dict[int, int] = {}
        cpus = list(range(instance_cpus(self.tfs.root)))
        try:
            try:
                with stop_signals():
                    self._stream(inst, cpus, fds, workload, on_pages)
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
                on_pages: Callable[[EventReader], None]) -> None:
        try:
            inst.create()
            pids = Recording._traced_tids(RecordOptions(events=[], pids=self.pids, system_wide=self.system_wide),
                                          workload)
            inst.configure(buffer_kb=self.buffer_kb, pids=pids, buffer_percent=0)
            self.layout = PageLayout.from_header_page(_read(inst.events_dir / "header_page"))
            for cpu in cpus:
                path = inst.path / "per_cpu" / f"cpu{cpu}" / "trace_pipe_raw"
                try:
                    fds[cpu] = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError as err:
                    raise os_error(err, "read the recording instance", path) from None
            inst.enable(self.selected)
            inst.tracing(True)
            self.streaming = True
            if workload is not None:
                workload.release()
            next_look = 0.0
            while True:
                done = workload is not None and workload.poll() is not None
                now = time.monotonic()
                if pids and now >= next_look:  # names of the traced processes, while they live
                    self.watch.look(inst.traced_pids(), maps=False)
                    next_look = now + 0.5
                self._drain(fds, on_pages)
                if done:
                    self.stopped_by = "command"
                    return
                time.sleep(self.interval)
        except KeyboardInterrupt:
            if not self.streaming:
                raise
            self.stopped_by = "SIGINT"
        except _Terminated:
            if not self.streaming:
                raise KeyboardInterrupt from None
            self.stopped_by = "SIGTERM"

    def _teardown(self, inst: Instance, cpus: list[int], fds: dict[int, int], workload: Optional[Workload],
                  on_pages: Optional[Callable[[EventReader], None]], *, quiet: bool) -> None:
        errors: list[BaseException] = []

        def step(fn: Callable[[], Any]) -> None:
            try:
                fn()
            except (ProbectlError, OSError) as err:
                errors.append(err)

        if inst.created:
            step(lambda: inst.tracing(False))
            step(lambda: inst.write("events/enable", "0"))
            if on_pages is not None and fds:
                step(lambda: self._drain(fds, on_pages))
            self.lost = sum(lost_of(st) for st in inst.stats(cpus).values())
        for fd in fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        fds.clear()
        if workload is not None:
            workload.stop()
        step(inst.remove)
        if errors:
            if quiet:
                for err in errors:
                    self.notice(f"probectl: while cleaning up: {err}")
            else:
                raise errors[0]

    def _drain(self, fds: dict[int, int], on_pages: Callable[[EventReader], None]) -> None:
        page = self.layout.page_size
        streams = []
        for cpu, fd in fds.items():
            chunks = []
            while True:
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
        reader = EventReader(streams, self.formats, self.layout, source="the live trace")
        try:
            on_pages(reader)
        finally:
            reader.close()
