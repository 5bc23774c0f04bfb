"""The tracefs layer: finding (and mounting) tracefs, what this kernel supports, adding and removing
dynamic events atomically, and reading event formats.

tracefs is the source of truth: nothing here caches what is defined. ``Tracefs.add`` writes one
definition per ``write()`` and, on the first one the kernel rejects, removes the ones it already
added and raises a :class:`TracefsError` that carries the kernel's own ``error_log`` entry (message,
command and caret). Concurrent probectl runs serialise on :meth:`Tracefs.lock`.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import fnmatch
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, Sequence

from .dataclass import dataclass
from .errors import EventExistsError, ProbectlError, TracefsError, did_you_mean
from .events import MAX_DEFINITION_LINE, EventDefinition, definition_bytes
from .notice import notice_stderr

if TYPE_CHECKING:
    from .formats import EventFormat

DEFAULT_MOUNT = Path("/sys/kernel/tracing")
DEBUGFS_TRACING = Path("/sys/kernel/debug/tracing")
MOUNT_COMMAND = f"mount -t tracefs nodev {DEFAULT_MOUNT}"
LOCK_PATHS = (Path("/run/lock/probectl.lock"), Path("/tmp/probectl.lock"))


PROBE_FILES = ("kprobe_events", "uprobe_events")
# Entries of events/ that are files, not event systems.
_EVENTS_FILES = {"enable", "filter", "header_page", "header_event"}
# Patterns (compiled by re when first used: an `add` reads no definitions and names no event):
# GROUP:EVENT or GROUP/EVENT as the kernel names events (a group may hold '.' and '-'): the shape of no
# probe definition, for FUNC:LINE and SRC:LINE have a number after ':', an SDT point begins with '%' or
# 'sdt_', and [GROUP:]EVENT=POINT has its '='.
_EVENT_NAME = r"(?!sdt_)([A-Za-z_][\w.-]*)[:/]([A-Za-z_]\w*)\Z"
# A uprobe place as the kernel prints it: PATH:0x<16 hex digits>[(0xREF_CTR)].
_UPROBE_PLACE = r".+:0x[0-9a-fA-F]+(\(0x[0-9a-fA-F]+\))?"
# The hint of a name that matches no event.
LIST_EVENTS_HINT = "list them with 'probectl tracepoints' (probe events: 'probectl list')"


@dataclass(frozen=True)
class Features:
    """What this kernel's probe events support, from the tracefs files present and its ``README``.

    The ``README`` is the only stable way to detect features (perf and the kernel's own ftrace
    self-tests grep it); each flag names the README text it looks for.
    """

    uprobe_events: bool = False
    kprobe_events: bool = False
    dynamic_events: bool = False
    x_types: bool = False  # "type: ... x8/16/32/64," — hexadecimal types
    multiprobe: bool = False  # "Create/append/" — a second p: with an existing name appends a probe
    immediates: bool = False  # "\imm-value," — immediate fetch arguments
    user_deref: bool = False  # "u]<offset>" — +u<offset>(...) user-memory dereference
    ref_ctr: bool = False  # "ref_ctr_offset" — uprobe semaphores (USDT)
    btf_args: bool = False  # "<argname>" — function arguments by BTF name
    symstr: bool = False  # "symstr" type
    kretprobe_offset: bool = False  # "place (kretprobe): " — SYM+OFF%return
    array_types: bool = False  # "<type>\[<array-size>\]" — :x8[4] style array types
    retprobe_args: bool = False  # "kernel return probes support: ... $arg<N>" — $argN at a kretprobe
    entry_args: bool = False  # "$stack<index>, ... $arg<N>" — $argN at a function entry
    char_type: bool = False  # "type: ... char," — the char type
    dentry_types: bool = False  # "%pd/%pD" types
    error_log: bool = False  # the error_log file exists

    # README glob patterns, as perf's ftrace_readme_table uses them (plus a few newer ones).
    _PATTERNS = {
        "x_types": "*type: * x8/16/32/64,*",
        "multiprobe": "*Create/append/*",
        "immediates": "*\\imm-value,*",
        "user_deref": "*u]<offset>*",
        "ref_ctr": "*ref_ctr_offset*",
        "btf_args": "*<argname>*",
        "symstr": "*symstr*",
        "kretprobe_offset": "*place (kretprobe): *",
        "array_types": "*<type>\\[<array-size>\\]*",
        "retprobe_args": "*return probes support:*$arg<N>*",
        "entry_args": "*$stack<index>*$arg<N>*",
        "char_type": "*, char, string*",
        "dentry_types": "*%pd/%pD*",
    }

    @classmethod
    def detect(cls, readme: str, files: Iterable[str] = ()) -> "Features":
        """Features from the README text and the names of the files at the top of tracefs."""
        present = set(files)
        lines = readme.splitlines()
        found = {}
        for flag, pattern in cls._PATTERNS.items():
            longest = max(pattern.split("*"), key=len)  # (only the lines holding it can match)
            found[flag] = any(_line_matches(line, pattern) for line in lines if longest in line)
        return cls(
            uprobe_events="uprobe_events" in present,
            kprobe_events="kprobe_events" in present,
            dynamic_events="dynamic_events" in present,
            error_log="error_log" in present,
            **found,
        )


def _line_matches(line: str, pattern: str) -> bool:
    """Whether the README ``line`` matches ``pattern`` whole, where ``*`` is the only wildcard (any
    characters) and everything else is literal, ``[`` and ``\\`` too. (Matched piece by piece,
    leftmost first, which is exact for ``*``-only patterns: compiling a regex per pattern was a cost
    of every command that opens tracefs.)"""
    first, *pieces = pattern.split("*")
    if not pieces:
        return line == first
    last = pieces.pop()
    if len(line) < len(first) + len(last) or not line.startswith(first) or not line.endswith(last):
        return False
    at, end = len(first), len(line) - len(last)
    for piece in pieces:
        at = line.find(piece, at, end)
        if at < 0:
            return False
        at += len(piece)
    return True


# --------------------------------------------------------------------------------------------
# error_log


# The kernel prints each entry as "[%5llu.%06u] LOCATION: error: MESSAGE", then "  Command: TEXT" and a
# caret line (kernel/trace/trace.c tracing_err_log_seq_show): an entry starts at its time stamp. (A
# pattern, compiled by re when an error is read, as the patterns above are.)
_ENTRY_START = r"\[\s*\d+\.\d+\]"


def parse_error_log(text: str) -> list[str]:
    """Split ``error_log`` into entries: ``[ts] location: error: msg``, ``Command: ...``, caret line.

    Each entry keeps its lines (joined by newlines, without a trailing one); the caret line may be
    missing its final newline in the file.
    """
    entries: list[list[str]] = []
    for line in text.splitlines():
        if re.match(_ENTRY_START, line) or not entries:
            entries.append([line])
        else:
            entries[-1].append(line)
    return ["\n".join(lines).rstrip() for lines in entries if any(l.strip() for l in lines)]


def new_error_log_entries(before: str, after: str) -> list[str]:
    """The entries of ``error_log`` text ``after`` that were not in ``before``, in order: what the
    writes between the two reads added, with those of any other writer meanwhile. (Entries carry
    their time stamp; the kernel keeps only the last few, so ``after`` need not start with
    ``before``.)"""
    old = set(parse_error_log(before))
    return [e for e in parse_error_log(after) if e not in old]


def new_error_log_entry(before: str, after: str) -> str:
    """The last entry of :func:`new_error_log_entries` ('' for none): the one a single write added,
    when it logged one, whatever other writers logged before it."""
    added = new_error_log_entries(before, after)
    return added[-1] if added else ""


def _entry_message(entry: str) -> str:
    """The kernel's message of an error_log entry (``Invalid register name``)."""
    first = entry.splitlines()[0]
    m = re.match(r"\[\s*[\d.]+\]\s*[^:]*:\s*error:\s*(.*)", first)
    return m.group(1).strip() if m else first


def _entry_command(entry: str) -> Optional[str]:
    for line in entry.splitlines()[1:]:
        m = re.match(r"\s*Command:\s?(.*)$", line)
        if m:
            return m.group(1)
    return None


def _same_command(logged: str, written: str) -> bool:
    """The kernel logs the command re-joined from its words; it may also shorten a long one."""
    a, b = " ".join(logged.split()), " ".join(written.split())
    return a == b or (len(a) > 40 and b.startswith(a))


# --------------------------------------------------------------------------------------------
# errors for users


class UnknownEventError(TracefsError):
    """An event that does not exist in tracefs (with a did-you-mean when one is close)."""


def write_once(path: Path, data: bytes, append: bool) -> None:
    """``data`` in one write() to a tracefs control file, which takes each write as one command:
    appended, or replacing what the file holds (``append`` False truncates). OSError as the kernel
    gives it, or EIO for a short write."""
    fd = os.open(path, os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    try:
        written = os.write(fd, data)
    finally:
        os.close(fd)
    if written != len(data):
        raise OSError(errno.EIO, f"short write ({written} of {len(data)} bytes)")


def os_error(err: OSError, action: str, path: Path | str = "") -> TracefsError:
    """Turn an OSError from a tracefs access into a TracefsError that says what to do."""
    where = f" ({path})" if path else ""
    reason = os.strerror(err.errno) if err.errno else str(err)
    if err.errno in (errno.EACCES, errno.EPERM):
        return TracefsError(
            f"no permission to {action}{where}: {reason}",
            "run probectl as root (sudo); reading events also works after "
            f"'sudo mount -o remount,mode=755 {DEFAULT_MOUNT}'; if you are root, the kernel may be "
            "locked down (see /sys/kernel/security/lockdown)",
        )
    if err.errno == errno.ENOENT:
        return TracefsError(f"cannot {action}{where}: it does not exist",
                            f"is tracefs mounted? try 'sudo {MOUNT_COMMAND}'")
    if err.errno == errno.EROFS:
        return TracefsError(f"cannot {action}{where}: tracefs is mounted read-only",
                            f"remount it read-write: 'sudo mount -o remount,rw {DEFAULT_MOUNT}'")
    return TracefsError(f"cannot {action}{where}: {reason}")


# --------------------------------------------------------------------------------------------
# finding and mounting tracefs


def find_mount(mounts: str) -> Optional[Path]:
    """The tracefs directory named by /proc/mounts text: a tracefs mount, or debugfs + /tracing."""
    tracefs: list[Path] = []
    debugfs: list[Path] = []
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[2] not in ("tracefs", "debugfs"):
            continue
        # /proc/mounts escapes spaces and tabs in paths as octal (\040, \011)
        point = Path(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[1]) if "\\" in parts[1]
                     else parts[1])
        if parts[2] == "tracefs":
            tracefs.append(point)
        else:
            debugfs.append(point / "tracing")
    tracefs.sort(key=lambda p: p != DEFAULT_MOUNT)  # prefer the standard place
    candidates = tracefs + debugfs
    return candidates[0] if candidates else None


def _mount_tracefs(target: Path) -> None:
    """mount(2) tracefs on ``target``; raises TracefsError saying why it could not."""
    import ctypes.util  # only to mount tracefs: not imported by every command

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.mount(b"nodev", os.fsencode(target), b"tracefs", 0, None) == 0:
        return
    code = ctypes.get_errno()
    if code == errno.ENODEV:
        raise TracefsError("this kernel has no tracefs",
                           "use a kernel built with CONFIG_FTRACE and CONFIG_TRACING")
    if code == errno.EPERM:
        raise TracefsError(f"tracefs is not mounted and mounting it on {target} was refused",
                           "mount it from the host or a privileged shell: " f"'sudo {MOUNT_COMMAND}'")
    raise TracefsError(f"cannot mount tracefs on {target}: {os.strerror(code)}", f"try 'sudo {MOUNT_COMMAND}'")


class Tracefs:
    """A mounted tracefs: ``root`` is its directory, ``features`` what its kernel supports."""

    def __init__(self, root: Path | str):
        self.root = Path(root)
        try:
            names = os.listdir(self.root)
        except OSError as err:
            raise os_error(err, "use tracefs", self.root) from None
        try:
            readme = (self.root / "README").read_text()
        except OSError:
            # (a tracefs remounted mode=755 for reading may still keep README to root)
            readme = ""
        if "README" not in names and "events" not in names:
            raise TracefsError(f"{self.root} is not a tracefs directory",
                               f"mount tracefs there: 'sudo {MOUNT_COMMAND}'")
        self.features = Features.detect(readme, names)

    def __repr__(self) -> str:
        return f"Tracefs({str(self.root)!r})"

    @classmethod
    def open(cls, *, mount: bool = True, notice: Callable[[str], None] = notice_stderr,
             path: Path | str | None = None) -> "Tracefs":
        """Find tracefs (``path`` if given), mounting it at /sys/kernel/tracing when root and absent."""
        if path is not None:
            return cls(path)
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            mounts = ""
        found = find_mount(mounts)
        candidates = [found] if found else []
        candidates += [p for p in (DEFAULT_MOUNT, DEBUGFS_TRACING) if p not in candidates]
        denied: Optional[tuple[OSError, Path]] = None
        for candidate in candidates:
            try:
                # (listing debugfs/tracing also automounts tracefs there on kernels that do that)
                names = os.listdir(candidate)
            except PermissionError as err:
                denied = denied or (err, candidate)
                continue
            except OSError:
                continue
            if "README" in names or "events" in names:
                return cls(candidate)
        if denied is not None:
            raise os_error(denied[0], "use tracefs", denied[1])
        if os.geteuid() != 0:
            raise TracefsError("tracefs is not mounted",
                               f"mount it as root: 'sudo {MOUNT_COMMAND}', then run probectl as root")
        if not mount:
            raise TracefsError("tracefs is not mounted", f"mount it: '{MOUNT_COMMAND}'")
        if not DEFAULT_MOUNT.is_dir():
            raise TracefsError(f"{DEFAULT_MOUNT} does not exist, so tracefs cannot be mounted there",
                               "use a kernel built with CONFIG_FTRACE and CONFIG_TRACING")
        _mount_tracefs(DEFAULT_MOUNT)
        notice(f"mounted tracefs at {DEFAULT_MOUNT}")
        return cls(DEFAULT_MOUNT)

    # ---- reading ------------------------------------------------------------------------

    def _read(self, name: str) -> str:
        # (surrogateescape: a path that is not UTF-8 in a definition reads back as probectl wrote it,
        # definition_bytes, and is removed by the same name)
        try:
            return (self.root / name).read_text(errors="surrogateescape")
        except OSError as err:
            raise os_error(err, f"read {name}", self.root / name) from None

    def read_error_log(self) -> str:
        """The text of ``error_log`` ('' when this kernel has none)."""
        if not self.features.error_log:
            return ""
        try:
            return (self.root / "error_log").read_text(errors="surrogateescape")
        except OSError:
            return ""

    def _definition_lines(self) -> list[tuple[str, str]]:
        """(file, line) of every line of the probe-event files; dynamic_events only adds what they lack."""
        lines: list[tuple[str, str]] = []
        seen: set[str] = set()
        files = [name for name in PROBE_FILES if (self.root / name).exists()]
        if len(files) < len(PROBE_FILES) and (self.root / "dynamic_events").exists():
            files.append("dynamic_events")
        for name in files:
            for line in self._read(name).splitlines():
                line = line.strip()
                if line and not line.startswith("#") and line not in seen:
                    seen.add(line)
                    lines.append((name, line))
        return lines

    def _definitions_by_file(self) -> list[tuple[str, EventDefinition]]:
        result = []
        for name, line in self._definition_lines():
            if name == "dynamic_events":
                head = line.split(None, 1)[0]
                if not re.fullmatch(r"[pr]\d*(:.*)?", head):
                    continue  # f:, t:, e:, s: (synthetic) and other kinds are not ours to manage
                parts = line.split()
                is_uprobe = len(parts) > 1 and bool(re.fullmatch(_UPROBE_PLACE, parts[1].split("%", 1)[0]))
            else:
                is_uprobe = name == "uprobe_events"
            try:
                result.append((name, EventDefinition.parse(line, is_uprobe=is_uprobe)))
            except ProbectlError:
                continue  # something newer than we understand: not ours to parse
        return result

    def definitions(self) -> list[EventDefinition]:
        """Every kprobe/uprobe event definition the kernel holds, whoever added it.

        A multi-probe event (several probes appended to one name) gives one definition per probe.
        """
        return [d for _, d in self._definitions_by_file()]

    def event_names(self) -> set[tuple[str, str]]:
        """(group, event) of every event in events/ — tracepoints, dynamic and synthetic events."""
        names: set[tuple[str, str]] = set()
        events = self.root / "events"
        try:
            systems = [e for e in os.scandir(events) if e.is_dir() and e.name not in _EVENTS_FILES]
        except OSError as err:
            raise os_error(err, "list events", events) from None
        for system in systems:
            try:
                names.update((system.name, e.name) for e in os.scandir(system.path) if e.is_dir())
            except FileNotFoundError:
                continue  # the group went away meanwhile (its last event was removed)
        return names

    def tracepoints(self, pattern: str = "*") -> list[tuple[str, str]]:
        """(system, event) of the events matching a glob on ``system:event`` (or on the event alone)."""
        result = []
        for system, event in self.event_names():
            if ":" in pattern:
                hit = fnmatch.fnmatchcase(f"{system}:{event}", pattern)
            else:
                hit = fnmatch.fnmatchcase(event, pattern) or fnmatch.fnmatchcase(f"{system}:{event}", pattern)
            if hit:
                result.append((system, event))
        return sorted(result)

    def named_event(self, word: str) -> Optional[tuple[str, str]]:
        """The existing event ``word`` names as GROUP:EVENT (or GROUP/EVENT); None when ``word`` is a
        probe definition. The one rule where a word may be either (hist, latency, trace): a word
        shaped like an event's name that names none is no definition either, so it is refused here
        with the events it may mean, not parsed as one into a syntax error."""
        name = tuple(word.replace("/", ":", 1).split(":", 1))
        if len(name) == 2 and name in self.event_names():
            return name[0], name[1]
        shaped = re.match(_EVENT_NAME, word)
        if shaped is None:
            return None
        raise self._unknown_event(shaped[1], shaped[2])

    def event_format(self, group: str, event: str) -> "EventFormat":
        """The parsed ``events/<group>/<event>/format``."""
        path = self.root / "events" / group / event / "format"
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise self._unknown_event(group, event) from None
        except NotADirectoryError:
            raise self._unknown_event(group, event) from None
        except OSError as err:
            raise os_error(err, "read the format of", f"{group}:{event}") from None
        from .formats import EventFormat  # adding probes does not read formats

        return EventFormat.parse(text, group)

    def _unknown_event(self, group: str, event: str) -> UnknownEventError:
        wanted = f"{group}:{event}"
        known = [f"{g}:{e}" for g, e in self.event_names()]
        hint = did_you_mean(wanted, known, cutoff=0.7) or LIST_EVENTS_HINT
        return UnknownEventError(f"no event {wanted}", hint)

    # ---- changing -----------------------------------------------------------------------

    def _file_for(self, definition: EventDefinition) -> str:
        """The file a definition is written to: its kind's own file, else dynamic_events."""
        own, config = (("uprobe_events", "CONFIG_UPROBE_EVENTS") if definition.is_uprobe
                       else ("kprobe_events", "CONFIG_KPROBE_EVENTS"))
        if (self.root / own).exists():
            return own
        if (self.root / "dynamic_events").exists():
            return "dynamic_events"
        kind = "uprobes" if definition.is_uprobe else "kprobes"
        raise TracefsError(f"this kernel does not support {kind}: {self.root / own} does not exist",
                           f"use a kernel built with {config}=y")

    def _write(self, name: str, text: str) -> None:
        """One command line, appended (never truncating: that would clear all events)."""
        write_once(self.root / name, definition_bytes(text + "\n"), append=True)

    def add(self, defs: Sequence[EventDefinition]) -> None:
        """Create every event of ``defs``, or none of them.

        Names already in use raise EventExistsError before anything is written. When the kernel
        rejects a definition, the ones this call added are removed again and the TracefsError
        carries the kernel's error_log entry for the failed write.
        """
        defs = list(defs)
        if not defs:
            return
        with self.lock():
            files = [self._file_for(d) for d in defs]
            for d in defs:
                if not d.group or not d.event:
                    # (the kernel would pick a name, and then the event could not be rolled back)
                    raise TracefsError(f"the definition {d.render()!r} has no group/event name")
                text = d.render()
                if len(definition_bytes(text)) > MAX_DEFINITION_LINE:
                    raise TracefsError(
                        f"the definition of {d.full_name} is {len(definition_bytes(text))} bytes long; "
                        f"the kernel accepts at most {MAX_DEFINITION_LINE}",
                        "fetch fewer arguments, or split them over several events")
            names = {(d.group, d.event) for d in defs}
            taken = sorted(names & self.event_names())
            if taken:
                raise EventExistsError.taken(taken)
            added: list[tuple[str, EventDefinition]] = []
            for d, name in zip(defs, files):
                before = self.read_error_log()
                try:
                    self._write(name, d.render())
                except OSError as err:
                    log = self._new_log_entries(before, d.render())
                    rollback = self._rollback(added)
                    raise self._add_error(d, name, err, log, rollback) from None
                if not any((a.group, a.event) == (d.group, d.event) for _, a in added):
                    added.append((name, d))

    def _new_log_entries(self, before: str, command: str) -> str:
        new = new_error_log_entries(before, self.read_error_log())
        # other processes may log errors meanwhile: keep the entries for our command
        ours = [e for e in new if _same_command(_entry_command(e) or "", command)]
        return "\n".join(ours)

    def _rollback(self, added: list[tuple[str, EventDefinition]]) -> list[str]:
        """Remove what this add() created; returns the names that could not be removed."""
        failed = []
        for name, d in reversed(added):
            try:
                self._write(name, d.render_removal())
            except FileNotFoundError:
                pass
            except OSError:
                failed.append(d.full_name)
        return failed

    def _add_error(self, d: EventDefinition, name: str, err: OSError, log: str,
                   rollback_failed: list[str]) -> TracefsError:
        reason = _entry_message(log.split("\n\n")[0]) if log else (os.strerror(err.errno) if err.errno else str(err))
        message = f"the kernel rejected the definition of {d.full_name}: {reason}"
        if not log:
            message += f"\n  {d.render()}"
        if err.errno in (errno.EACCES, errno.EPERM):
            hint = os_error(err, "write").hint
        elif err.errno == errno.EEXIST:
            hint = "an event of this name (or this exact probe) already exists; choose another name"
        elif err.errno == errno.ENOENT and d.is_uprobe:
            hint = f"check that {d.uprobe_path} exists"
            if d.uprobe_path.startswith("/proc/"):  # (a container's file, reached through its process)
                hint += " (through a process's root: the process must still run)"
        elif not log:
            hint = "the kernel logged no details in error_log; 'dmesg | tail' may say more"
            if name == "dynamic_events":
                hint += f" (this kernel has no {'uprobe' if d.is_uprobe else 'kprobe'}_events file)"
        else:
            hint = "the caret shows where the kernel stopped reading the definition"
        if rollback_failed:
            hint += "; these events of the same add could not be removed again: " + ", ".join(rollback_failed)
        return TracefsError(message, hint, log)

    def remove(self, names: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """Remove kprobe/uprobe events by (group, event); returns the ones removed.

        Names that are not probe events are skipped. Events in use (enabled, or open in a
        recording) are left alone and reported together in one TracefsError after the rest are gone.
        """
        removed: list[tuple[str, str]] = []
        busy: list[tuple[str, str]] = []
        with self.lock():
            holders: dict[tuple[str, str], str] = {}
            name: Optional[str]
            for name, d in self._definitions_by_file():
                holders.setdefault((d.group, d.event), name)
            for group, event in dict.fromkeys(names):
                name = holders.get((group, event))
                if name is None:
                    continue
                try:
                    self._write(name, f"-:{group}/{event}")
                except FileNotFoundError:
                    continue  # someone else removed it meanwhile
                except OSError as err:
                    if err.errno == errno.EBUSY:
                        busy.append((group, event))
                        continue
                    raise os_error(err, f"remove {group}:{event}", self.root / name) from None
                removed.append((group, event))
        if busy:
            raise self._busy_error(busy, removed)
        return removed

    def _busy_error(self, busy: list[tuple[str, str]], removed: list[tuple[str, str]]) -> TracefsError:
        shown = ", ".join(f"{g}:{e}" for g, e in busy)
        enabled = []
        for group, event in busy:
            enabled += [str(p.relative_to(self.root)) for p in self._enable_files(group, event)
                        if _read_flag(p)]
        hint = "stop the recording that uses it, or disable it"
        if enabled:
            hint += ": " + "; ".join(f"echo 0 > {self.root / p}" for p in enabled)
        if removed:
            hint += " (removed meanwhile: " + ", ".join(f"{g}:{e}" for g, e in removed) + ")"
        return TracefsError(f"cannot remove {shown}: in use (enabled, or open in a recording)", hint)

    def _enable_files(self, group: str, event: str) -> list[Path]:
        paths = [self.root / "events" / group / event / "enable"]
        instances = self.root / "instances"
        with contextlib.suppress(OSError):
            paths += [instances / i / "events" / group / event / "enable" for i in sorted(os.listdir(instances))]
        return paths

    # ---- the lock -----------------------------------------------------------------------

    _lock_state = threading.local()

    @contextlib.contextmanager
    def lock(self, notice: Callable[[str], None] = notice_stderr) -> Iterator[Path]:
        """Hold probectl's lock (flock on /run/lock/probectl.lock, or /tmp/probectl.lock).

        Choosing event names and creating the events happen under it, so two ``probectl add`` runs
        do not pick the same name. Re-entrant within a thread.
        """
        state = Tracefs._lock_state
        if getattr(state, "depth", 0):
            state.depth += 1
            try:
                yield state.path
            finally:
                state.depth -= 1
            return
        fd, path = _open_lock_file()
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                notice(f"waiting for another probectl run to finish (lock {path})")
                fcntl.flock(fd, fcntl.LOCK_EX)
            state.depth, state.path = 1, path
            try:
                yield path
            finally:
                state.depth = 0
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _open_lock_file() -> tuple[int, Path]:
    last: Optional[OSError] = None
    for path in LOCK_PATHS:
        for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
            try:
                return os.open(path, flags | os.O_CLOEXEC, 0o644), path
            except OSError as err:
                last = err
    assert last is not None
    raise TracefsError(f"cannot open probectl's lock file: {last.strerror}",
                       f"make {LOCK_PATHS[0].parent} or {LOCK_PATHS[1].parent} writable")


def _read_flag(path: Path) -> bool:
    try:
        return path.read_text().strip().startswith("1")
    except OSError:
        return False
