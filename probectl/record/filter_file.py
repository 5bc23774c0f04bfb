"""An event's ``filter`` file in tracefs: writing a checked filter, and the kernel's own message
and caret when it still refuses one."""
from __future__ import annotations

import errno
from pathlib import Path

from ..errors import TracefsError
from ..filters.tree import Filter
from ..tracefs import os_error, write_once


class FilterRejectedError(TracefsError):
    """The kernel refused a filter; ``kernel_log`` holds its message and caret (from the filter file)."""


def _filter_path(instance_events_dir: Path, group: str, event: str) -> Path:
    return Path(instance_events_dir) / group / event / "filter"


def _write(path: Path, text: str) -> None:
    write_once(path, text.encode(), append=False)


_KERNEL_HINTS = {
    "Function not found": "the name after .function must be a kernel function listed in /proc/kallsyms",
    "Invalid cpulist": "CPU numbers must be below the number of possible CPUs "
                       "(/sys/devices/system/cpu/possible)",
}


def apply_filter(instance_events_dir: Path, group: str, event: str, flt: Filter) -> None:
    """Write ``flt`` to ``<instance_events_dir>/<group>/<event>/filter``.

    When the kernel refuses it (EINVAL), its message and caret are read back from the filter file,
    the filter is cleared (so the event is left unfiltered, not half-configured) and a
    FilterRejectedError carries them; enable the event only after this returns.
    """
    path = _filter_path(instance_events_dir, group, event)
    try:
        _write(path, flt.text)
    except OSError as err:
        if err.errno != errno.EINVAL:
            raise os_error(err, f"set the filter of {group}:{event}", path) from None
        try:
            answer = path.read_text()
        except OSError:
            answer = ""
        try:
            _write(path, "0")
        except OSError:
            pass
        raise _rejected(group, event, flt, answer) from None


def _rejected(group: str, event: str, flt: Filter, answer: str) -> FilterRejectedError:
    lines = [line.rstrip() for line in answer.rstrip("\n").splitlines()]
    if not any("^" in line or "error" in line.lower() for line in lines):
        lines = [flt.text, "(the kernel gave no reason)"]
    kernel_log = "\n".join(f"  {line}" for line in lines)
    hint = next((h for message, h in _KERNEL_HINTS.items() if message in answer),
                "the kernel's own check refused a filter that probectl's checks accepted; "
                "its message above says what to change")
    if flt.source.strip() != flt.text:
        hint += f" (probectl wrote {flt.source.strip()!r} as {flt.text!r})"
    return FilterRejectedError(f"the kernel rejected the filter for {group}:{event}", hint, kernel_log)


def clear_filter(instance_events_dir: Path, group: str, event: str) -> None:
    """Remove the filter of ``<group>:<event>`` (writes ``0`` to its filter file)."""
    path = _filter_path(instance_events_dir, group, event)
    try:
        _write(path, "0")
    except OSError as err:
        raise os_error(err, f"clear the filter of {group}:{event}", path) from None
