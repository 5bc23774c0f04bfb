"""What a trace.dat file holds besides the pages (:class:`TraceMetadata`), gathered from tracefs,
and the magic, versions and option ids of trace-cmd's format that the writer and the reader share."""
from __future__ import annotations

import os
import re
import struct
from enum import IntEnum
from pathlib import Path
from typing import Iterable, Optional

from .. import __version__
from ..dataclass import dataclass, field
from ..ringbuf import PageLayout

MAGIC = b"\x17\x08\x44tracing"
FILE_VERSIONS = (6, 7)
SECTION_COMPRESSED = 1
V6_OPTIONS = b"options  \0"
V6_FLYRECORD = b"flyrecord\0"
V6_LATENCY = b"latency  \0"
# probectl's own option: the content of ``saved_tgids`` (pid -> thread group id), which trace-cmd
# has no place for. Readers skip options they do not know (trace-cmd 3.1 silently), and the id is
# far above trace-cmd's (25 in 3.4).
OPTION_SAVED_TGIDS = 0x7E01


class Option(IntEnum):
    """Option (and v7 section) ids of trace-cmd's files."""

    DONE = 0
    DATE = 1
    CPUSTAT = 2
    BUFFER = 3
    TRACECLOCK = 4
    UNAME = 5
    HOOK = 6
    OFFSET = 7
    CPUCOUNT = 8
    VERSION = 9
    PROCMAPS = 10
    TRACEID = 11
    TIME_SHIFT = 12
    GUEST = 13
    TSC2NSEC = 14
    STRINGS = 15
    HEADER_INFO = 16
    FTRACE_EVENTS = 17
    EVENT_FORMATS = 18
    KALLSYMS = 19
    PRINTK = 20
    CMDLINES = 21
    BUFFER_TEXT = 22


@dataclass
class TraceMetadata:
    """Everything of a trace.dat file but the pages.

    ``event_formats`` is a list of (system, [format text, ...]); texts are kept as the kernel
    wrote them so that other readers can parse them their way (the writer makes two changes that
    trace-cmd needs: :func:`probectl.formats.for_libtraceevent`). ``trace_clock`` is the content of
    the ``trace_clock`` file (``[local] global ...``); ``cpustats`` maps a CPU to the content of
    its ``per_cpu/cpuN/stats``.
    """

    header_page: str
    header_event: str
    page_size: int
    cpus: int
    long_size: int = 8  # user-space long of the recording machine (the kernel's is in header_page)
    big_endian: bool = False
    ftrace_formats: list[str] = field(default_factory=list)
    event_formats: list[tuple[str, list[str]]] = field(default_factory=list)
    kallsyms: bytes = b""
    printk_formats: bytes = b""
    cmdlines: str = ""
    tgids: str = ""
    trace_clock: str = "[local]"
    uname: str = ""
    version: str = f"probectl {__version__}"
    trace_id: int = 0
    cpustats: dict[int, str] = field(default_factory=dict)
    extra_options: list[tuple[int, bytes]] = field(default_factory=list)  # e.g. PROCMAPS, DATE

    @property
    def clock(self) -> str:
        """The clock in use: the bracketed name of ``trace_clock`` (``local`` by default)."""
        return clock_name(self.trace_clock)


def clock_name(trace_clock: str) -> str:
    m = re.search(r"\[([^\]]+)\]", trace_clock)
    if m:
        return m.group(1)
    words = trace_clock.split()
    return words[0] if len(words) == 1 else "local"


def parse_cmdlines(text: str) -> dict[int, str]:
    """``saved_cmdlines`` text (``PID COMM`` lines) → {pid: comm}; other lines are skipped."""
    comms: dict[int, str] = {}
    for line in text.splitlines():
        pid, _, comm = line.strip().partition(" ")
        if pid.isdigit() and comm:
            comms[int(pid)] = comm
    return comms


def parse_tgids(text: str) -> dict[int, int]:
    """``saved_tgids`` text (``PID TGID`` lines) → {pid: tgid}; other lines are skipped."""
    tgids: dict[int, int] = {}
    for line in text.splitlines():
        pid, _, tgid = line.partition(" ")
        if pid.strip().isdigit() and tgid.strip().isdigit():
            tgids[int(pid)] = int(tgid)
    return tgids


def instance_cpus(instance: Path) -> int:
    """The CPUs of a tracefs instance (or of the root): its ``per_cpu/cpuN`` entries."""
    try:
        return sum(1 for n in os.listdir(instance / "per_cpu") if re.fullmatch(r"cpu\d+", n))
    except OSError:
        return os.cpu_count() or 1


def _read_text(path: Path) -> str:
    return path.read_text(errors="replace")


def _format_texts(events_dir: Path) -> list[str]:
    texts: list[str] = []
    try:
        names = sorted(os.listdir(events_dir))
    except OSError:
        return texts
    for name in names:
        try:
            texts.append(_read_text(events_dir / name / "format"))
        except (NotADirectoryError, FileNotFoundError):
            continue
    return texts


def _readable_kallsyms() -> bytes:
    """/proc/kallsyms, or b'' when its addresses are hidden."""
    try:
        data = Path("/proc/kallsyms").read_bytes()
    except OSError:
        return b""
    return data if kallsyms_addresses_shown(data) else b""


# A line whose address is not all zeros.
_NONZERO_ADDRESS = re.compile(rb"^0*[1-9a-fA-F][0-9a-fA-F]* ", re.M)


def kallsyms_addresses_shown(text: bytes) -> bool:
    """Whether a kallsyms text has the addresses: without privileges every one reads as zero. Not
    just its first line's: SMP kernels start with per-CPU symbols, whose offsets begin at zero
    (``0000000000000000 A fixed_percpu_data``)."""
    return _NONZERO_ADDRESS.search(text) is not None


def read_cpustats(instance: Path | str, cpus: Iterable[int]) -> dict[int, str]:
    """``per_cpu/cpuN/stats`` of an instance, for the CPUSTAT options (read them at stop time)."""
    stats = {}
    for cpu in cpus:
        try:
            stats[cpu] = _read_text(Path(instance) / "per_cpu" / f"cpu{cpu}" / "stats")
        except OSError:
            continue
    return stats


def collect_metadata(instance: Path | str, systems: Iterable[str], *, root: Path | str | None = None,
                     kallsyms: bool = True, cpus: Optional[int] = None) -> TraceMetadata:
    """Gather the metadata of a recording from tracefs.

    ``instance`` is the recording instance's directory (or the tracefs root), ``systems`` the
    event systems recorded (every format of each is stored, as trace-cmd does), ``root`` the
    tracefs root (default: two levels above an instance), which has ``saved_cmdlines`` and
    ``printk_formats``. ``cpus`` defaults to the instance's ``per_cpu`` entries.
    """
    instance = Path(instance)
    if root is None:
        root = instance.parent.parent if instance.parent.name == "instances" else instance
    root = Path(root)
    events = instance / "events"
    header_page = _read_text(events / "header_page")
    layout = PageLayout.from_header_page(header_page)
    if cpus is None:
        cpus = instance_cpus(instance)
    event_formats = []
    for system in sorted(set(systems)):
        if system == "ftrace":
            continue
        texts = _format_texts(events / system)
        if texts:
            event_formats.append((system, texts))

    def optional(path: Path, names: bool = False) -> str:
        try:
            # (names are bytes any process chooses: those that are not UTF-8 are kept, as surrogates)
            return path.read_bytes().decode("utf-8", "surrogateescape") if names else _read_text(path)
        except OSError:
            return ""

    u = os.uname()
    return TraceMetadata(
        header_page=header_page,
        header_event=_read_text(events / "header_event"),
        page_size=layout.page_size,
        cpus=cpus,
        long_size=struct.calcsize("l"),
        big_endian=struct.pack("=H", 1) == b"\0\1",
        ftrace_formats=_format_texts(events / "ftrace"),
        event_formats=event_formats,
        kallsyms=_readable_kallsyms() if kallsyms else b"",
        printk_formats=optional(root / "printk_formats").encode(),
        cmdlines=optional(root / "saved_cmdlines", names=True),
        tgids=optional(root / "saved_tgids"),
        trace_clock=optional(instance / "trace_clock").strip() or "[local]",
        uname=f"{u.sysname} {u.nodename} {u.release} {u.version} {u.machine}",
        trace_id=int.from_bytes(os.urandom(8), "little"),
    )
