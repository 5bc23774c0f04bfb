"""Debug files fetched from debuginfod servers (``$DEBUGINFOD_URLS``) by build-id, through elfutils'
``libdebuginfod`` (ctypes), as perf, gdb, bpftrace and SystemTap fetch them.

The library is the natural client: it reads the same environment (``DEBUGINFOD_URLS``,
``DEBUGINFOD_TIMEOUT``, ``DEBUGINFOD_CACHE_PATH``…), asks every server in parallel, and keeps its
cache (``$DEBUGINFOD_CACHE_PATH``, default ``~/.cache/debuginfod_client/<build-id>/debuginfo``) in
the format gdb and perf share, so a file one of them fetched is not fetched again, and the other way
round. What it does not do, this module adds: a message that names each server and its answer
(from the library's verbose log), a progress bar on a terminal, and a check that the file served
has the build-id asked for (a server that answers with the wrong file is an error, and the file is
taken out of the cache again so that it does not poison the next run).
"""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Optional

from ..dataclass import dataclass
from ..debuginfo.elf import ElfFile
from ..errors import DebugInfoError, ProbectlError

LIBRARY = "libdebuginfod.so.1"
# A download shows a progress bar (on a terminal) once it has taken this long.
PROGRESS_AFTER_S = 1.0
# (ctypes, and ctypes.util's subprocess, are imported when a server is asked: a definition resolved
# from local files, the common case, does not pay for them.)


def server_urls() -> list[str]:
    """The servers of ``$DEBUGINFOD_URLS`` (space-separated), in order."""
    return os.environ.get("DEBUGINFOD_URLS", "").split()


def cache_dir() -> Path:
    """Where libdebuginfod keeps what it fetched (its own rule, so that we can say it)."""
    if os.environ.get("DEBUGINFOD_CACHE_PATH"):
        return Path(os.environ["DEBUGINFOD_CACHE_PATH"])
    legacy = Path.home() / ".debuginfod_client_cache"
    if legacy.is_dir():
        return legacy
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "debuginfod_client"


@dataclass(frozen=True)
class Fetched:
    """A debug file from debuginfod: where it is and whether it was already in the cache."""

    path: Path
    from_cache: bool
    server: Optional[str] = None  # the server that sent it (None: from the cache)


class _Library:
    """The few entry points of libdebuginfod probectl uses."""

    def __init__(self) -> None:
        import ctypes
        import ctypes.util

        self.progress_fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_long, ctypes.c_long)
        try:
            lib = ctypes.CDLL(LIBRARY)
        except OSError:
            raise DebugInfoError(f"DEBUGINFOD_URLS is set, but {LIBRARY} (elfutils' debuginfod client) is missing",
                                 hint="install it (Debian: apt install libdebuginfod1)") from None
        lib.debuginfod_begin.restype = ctypes.c_void_p
        lib.debuginfod_end.argtypes = [ctypes.c_void_p]
        for name in ("debuginfod_find_debuginfo", "debuginfod_find_executable"):
            getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_void_p)]
        lib.debuginfod_find_source.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                               ctypes.POINTER(ctypes.c_void_p)]
        lib.debuginfod_set_progressfn.argtypes = [ctypes.c_void_p, self.progress_fn]
        lib.debuginfod_set_verbose_fd.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.lib = lib
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.free.argtypes = [ctypes.c_void_p]
        self.free = libc.free


_LIBRARY: list[_Library] = []


def _library() -> _Library:
    if not _LIBRARY:
        _LIBRARY.append(_Library())
    return _LIBRARY[0]


class _Progress:
    """A one-line progress bar on stderr, drawn only on a terminal and only for a download that lasts."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.start = time.monotonic()
        self.drawn = False
        self.interrupted = False
        self.live = sys.stderr.isatty()

    def interrupt(self, _signum, _frame) -> None:
        """SIGINT while the library downloads: a KeyboardInterrupt raised in its callback would be lost
        in ctypes, so the callback cancels the transfer and the interrupt is raised after it."""
        self.interrupted = True

    def __call__(self, _client, done: int, total: int) -> int:
        if self.live and not self.interrupted and time.monotonic() - self.start >= PROGRESS_AFTER_S:
            if total > 0:
                width = 30
                filled = int(width * min(done, total) / total)
                text = (f"\rprobectl: fetching {self.what} [{'#' * filled}{'.' * (width - filled)}] "
                        f"{done / 2**20:.1f}/{total / 2**20:.1f} MiB")
            else:
                text = f"\rprobectl: fetching {self.what} {done / 2**20:.1f} MiB"
            sys.stderr.write(text)
            sys.stderr.flush()
            self.drawn = True
        return 1 if self.interrupted else 0

    def finish(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


def fetch_debuginfo(build_id: str, what: str, *, kind: str = "debuginfo", source: Optional[str] = None) -> Fetched:
    """The debug file (``kind`` ``debuginfo``), executable (``executable``) or source file (``source``, the
    absolute path ``source``) of ``build_id`` from the servers of ``$DEBUGINFOD_URLS``; ``what`` names it
    in messages (``/usr/bin/foo``, ``vmlinux``).

    Raises DebugInfoError naming every server and its answer when none has it, and when a debug file
    or executable served does not carry ``build_id``."""
    import ctypes
    import signal
    import tempfile
    import threading

    urls = server_urls()
    if not urls:
        raise DebugInfoError("DEBUGINFOD_URLS is not set", hint="set it to the debuginfod servers to ask")
    lib = _library()
    # (libdebuginfod's cache names: debuginfo, executable, source-#path#with#hashes)
    cached = cache_dir() / build_id / (kind if source is None else "source" + source.replace("/", "#"))
    existed = cached.is_file()
    was_cached = existed and cached.stat().st_size > 0
    # An empty file is libdebuginfod's memory of a failed query: it asks no server again for a while.
    remembered_miss = existed and not was_cached
    client = lib.lib.debuginfod_begin()
    if not client:
        raise DebugInfoError("libdebuginfod could not start a client")
    progress = _Progress(what)
    callback = lib.progress_fn(progress)
    path_out = ctypes.c_void_p()
    in_main = threading.current_thread() is threading.main_thread()
    old_handler = signal.signal(signal.SIGINT, progress.interrupt) if in_main else None
    with tempfile.TemporaryFile() as log:
        try:
            lib.lib.debuginfod_set_progressfn(client, callback)
            lib.lib.debuginfod_set_verbose_fd(client, log.fileno())
            if kind == "source":
                fd = lib.lib.debuginfod_find_source(client, build_id.encode(), 0, (source or "").encode(),
                                                    ctypes.byref(path_out))
            else:
                fd = getattr(lib.lib, f"debuginfod_find_{kind}")(client, build_id.encode(), 0, ctypes.byref(path_out))
        finally:
            lib.lib.debuginfod_end(client)
            progress.finish()
            if in_main:
                signal.signal(signal.SIGINT, old_handler)
        log.seek(0)
        answers, server = _answers(log.read().decode("utf-8", "replace"))
    path = None
    if fd >= 0:
        os.close(fd)
        path = Path(ctypes.string_at(path_out.value).decode()) if path_out.value else cached
        lib.free(path_out)
    if progress.interrupted:
        if path is None and not existed:
            _forget_miss(cached)  # (a cancelled download is no answer to remember)
        raise KeyboardInterrupt
    if path is None and remembered_miss:
        raise DebugInfoError(f"debuginfod's cache remembers that no server had the {kind} of {what} "
                             f"(build-id {build_id}), so no server was asked again",
                             hint=f"remove {cached} to ask them now (libdebuginfod asks again after "
                                  "cache_miss_s, 10 minutes by default)")
    if path is None:
        if server is not None:
            answers[server] = "began to send it, then failed"
        listing = "\n".join(f"  {url}: {answers.get(url, 'no answer')}" for url in urls)
        wanted = kind if source is None else f"source {source}"
        # libdebuginfod's own error is the answer of whichever server finished last (a 404 or a refused
        # connection, from one run to the next): the listing says what each answered, so it is only worth
        # saying when some server's answer is missing from the listing.
        reason = "" if all(url in answers for url in urls) else f": {os.strerror(-fd)}"
        raise DebugInfoError(f"no debuginfod server has the {wanted} of {what} (build-id {build_id})"
                             f"{reason}; asked:\n{listing}",
                             hint="check DEBUGINFOD_URLS and the servers; DEBUGINFOD_TIMEOUT sets the timeout in "
                                  "seconds (default 90)")
    if kind != "source":
        _check_build_id(path, build_id, server or "the cache")
    return Fetched(path, was_cached, None if was_cached else server)


def _forget_miss(cached: Path) -> None:
    try:
        if cached.is_file() and cached.stat().st_size == 0:
            cached.unlink()
        cached.parent.rmdir()  # (only if nothing else of that build-id is cached)
    except OSError:
        pass


def _check_build_id(path: Path, build_id: str, source: str) -> None:
    """A debug file that is not the one asked for is worse than none: refuse it and take it out of the cache."""
    problem: Optional[str]
    try:
        with ElfFile(path) as elf:
            found = elf.build_id
    except ProbectlError as exc:
        found, problem = None, exc.message
    else:
        problem = None if found == build_id else f"its build-id is {found or 'missing'}"
    if problem is None:
        return
    try:
        path.unlink()
    except OSError:
        pass
    raise DebugInfoError(f"{source} sent a file for build-id {build_id} that does not belong to it: {problem}",
                         hint="the server's index is wrong; the file was removed from the debuginfod cache")


def _answers(log: str) -> tuple[dict[str, str], Optional[str]]:
    """Each server's last answer, and the server the file came from, from libdebuginfod's verbose log."""
    urls: dict[str, str] = {}  # index → the server's base URL
    answers: dict[str, str] = {}
    committed = None
    for line in log.splitlines():
        m = re.match(r"init server (\d+) (\S+?)/buildid$", line)
        if m:
            urls[m.group(1)] = m.group(2)
            continue
        m = re.match(r"url (\d+) (.*)$", line)
        if m and m.group(1) in urls and not m.group(2).startswith(("http://", "https://", "file://")):
            answers[urls[m.group(1)]] = _short(m.group(2))
            continue
        m = re.match(r"committed to url (\d+)$", line)
        if m:
            committed = urls.get(m.group(1))
    if committed is not None:
        answers.setdefault(committed, "sent it")
    return answers, committed


def _short(answer: str) -> str:
    """libcurl's words, shortened: ``The requested URL returned error: 404`` → ``HTTP 404 (not found)``."""
    m = re.search(r"returned error: (\d+)", answer)
    if m:
        code = int(m.group(1))
        return f"HTTP {code}" + (" (not found)" if code == 404 else "")
    if any(word in answer.lower() for word in ("timed out", "timeout", "too slow")):
        return f"timed out ({answer})"
    return answer


def fetch_note(fetched: Fetched, what: str) -> str:
    """Where a fetched debug file came from, for the user."""
    if fetched.from_cache:
        return f"debug information of {what} from the debuginfod cache ({fetched.path})"
    return f"debug information of {what} fetched from {fetched.server or 'debuginfod'} into {fetched.path}"


def source_fetcher(binary: Path):
    """A callable getting ``binary``'s source files from debuginfod by absolute path (for
    :func:`probectl.debuginfo.dwarf.sources.find_source`); None without servers or build-id."""
    if not server_urls():
        return None
    with ElfFile(binary) as elf:
        build_id = elf.build_id
    if not build_id:
        return None

    def fetch(path: str) -> Path:
        return fetch_debuginfo(build_id, str(binary), kind="source", source=path).path

    return fetch


def fetch_for_binary(binary: Path) -> Optional[Fetched]:
    """The debug file of ``binary`` from debuginfod by its build-id; None when no server is configured.

    Raises DebugInfoError when the binary has no build-id to ask for, or no server has it."""
    if not server_urls():
        return None
    with ElfFile(binary) as elf:
        build_id = elf.build_id
    if not build_id:
        raise DebugInfoError(f"{binary} has no build-id, which debuginfod servers need to find its debug file",
                             hint="link it with -Wl,--build-id, or install its debug file locally")
    return fetch_debuginfo(build_id, str(binary))
