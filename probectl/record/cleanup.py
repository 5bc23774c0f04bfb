"""What runs leave behind: removing a tracefs instance, noting the probes a ``trace`` run adds, and
removing the instances and probes of runs whose process is dead (``probectl cleanup``)."""
from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import re
import time
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from ..errors import TracefsError
from ..events import EventDefinition
from ..notice import notice_stderr
from ..tracefs import Tracefs, os_error, write_once
from .processes import pid_alive

INSTANCE_PREFIX = "probectl-"
_INSTANCE_RE = re.compile(r"probectl-(\d+)(?:-(\d+))?$")
# The synthetic event of a ``latency`` run in the kernel: ``probectl_lat_<pid>`` (event names take no '-').
SYNTHETIC_PREFIX = "probectl_lat_"
_SYNTHETIC_RE = re.compile(r"(?:synthetic/)?probectl_lat_(\d+)\b")
STATE_DIRS = (Path("/run/probectl"), Path("/tmp/probectl-state"))
_BATCHES = itertools.count()  # (a state file per batch of probes a run adds)


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
    """Note the probes a ``trace`` run added, so that the next run removes them if this one dies. A run
    that adds probes more than once (``latency``: its start, then its end) notes each batch in a file of
    its own: one file for the run kept only the last batch, and a killed run's start probe stayed."""
    d = _state_dir()
    path = None
    if d is not None:
        path = d / f"trace-{os.getpid()}-{next(_BATCHES)}.json"
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


def cleanup_stale(tfs: Tracefs, notice: Callable[[str], None] = notice_stderr) -> list[str]:
    """Remove the instances (``probectl-<pid>``), the ``trace`` probes and the ``latency`` synthetic
    events (``probectl_lat_<pid>``) of runs whose pid is dead.

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
        if not m or pid_alive(int(m.group(1))):
            continue
        try:
            remove_instance(instances / name)
        except TracefsError as err:
            notice(f"probectl: could not remove the stale instance {name}: {err.message}")
            continue
        removed.append(f"instance {name}")
    removed += _remove_stale_synthetic(tfs, notice)
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
            if pid_alive(pid):
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


def _remove_stale_synthetic(tfs: Tracefs, notice: Callable[[str], None]) -> list[str]:
    """The synthetic events of dead ``latency`` runs (after their instances, whose triggers use them)."""
    path = tfs.root / "synthetic_events"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    removed = []
    for line in lines:
        m = _SYNTHETIC_RE.match(line)
        if not m or pid_alive(int(m.group(1))):
            continue
        name = SYNTHETIC_PREFIX + m.group(1)
        try:  # (one write without a seek: open(…, "a") seeks to the end, which synthetic_events refuses)
            write_once(path, f"!{name}\n".encode(), append=True)
        except OSError as err:
            notice(f"probectl: could not remove the stale synthetic event {name}: {err.strerror}")
            continue
        removed.append(f"synthetic event {name}")
    return removed
