"""Parallel cold runs build an index once: the builder holds ``flock`` on the index's lock file in the
cache directory, the others say they wait for it and then read what it built. A lock held by a
killed process never blocks (the kernel releases it), and a lock file that is not a regular file of
the user's (a FIFO, a link) or an unsafe cache directory means building alone, as without a cache."""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import build_fixture
from probectl.debuginfo.dwarf import DebugInfo

WAITING = "waiting for another probectl building the index for "
BUILDING = "building the dwarf-names index of "


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), PROBECTL_DEBUG="1")
    env.pop("PROBECTL_NO_CACHE", None)
    return env


def _start(cache: Path, binary: Path, out: Path) -> subprocess.Popen:
    # (main@FILE: a function named with its source file is searched by name, which builds the names
    # index; a plain global name is found at its symbol's address and builds none)
    return subprocess.Popen([sys.executable, "-m", "probectl", "vars", "-x", str(binary), "main@dwarf_structs.c"],
                            stdout=open(out.with_suffix(".out"), "w"), stderr=open(out.with_suffix(".err"), "w"),
                            env=_env(cache))


def _lock_path(cache: Path, binary: Path) -> Path:
    return cache / "probectl" / f".lock-dwarf-names-{DebugInfo.open(binary).index_key}"


@pytest.fixture
def cache(tmp_path) -> Path:
    base = tmp_path / "cache"
    (base / "probectl").mkdir(parents=True, mode=0o700)
    base.chmod(0o700)
    return base


def test_parallel_cold_runs_wait_for_one_builder(cache, tmp_path):
    binary = build_fixture("dwarf_structs", "-O2")
    lock = _lock_path(cache, binary)
    holder = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(holder, fcntl.LOCK_EX)  # as another probectl building the index would
    runs = [_start(cache, binary, tmp_path / f"run{i}") for i in range(4)]
    try:
        deadline = time.monotonic() + 120
        while not all(WAITING in (tmp_path / f"run{i}.err").read_text() for i in range(4)):
            assert time.monotonic() < deadline, "the runs did not all wait for the lock"
            assert all(r.poll() is None for r in runs), "a run ended while the index was locked"
            time.sleep(0.1)
    finally:
        os.close(holder)  # the "other builder" ends without having stored anything
    for r in runs:
        assert r.wait(timeout=120) == 0
    errs = [(tmp_path / f"run{i}.err").read_text() for i in range(4)]
    outs = {(tmp_path / f"run{i}.out").read_text() for i in range(4)}
    assert all(f"{WAITING}{binary}" in e for e in errs)
    assert sum(e.count(BUILDING) for e in errs) == 1, errs  # one of them built it, the others read it
    assert len(outs) == 1 and "main" in outs.pop()
    assert any(p.name.startswith("dwarf-names-") for p in (cache / "probectl").iterdir())


def test_a_killed_builder_does_not_block(cache, tmp_path):
    binary = build_fixture("dwarf_structs", "-O2")
    lock = _lock_path(cache, binary)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(lock)!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "held\n"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    run = _start(cache, binary, tmp_path / "run")
    assert run.wait(timeout=120) == 0
    err = (tmp_path / "run.err").read_text()
    assert WAITING not in err and BUILDING in err
    assert lock.exists()  # the stale lock file stays, harmless


@pytest.mark.parametrize("kind", ["fifo", "symlink", "unsafe-dir"])
def test_without_a_usable_lock_each_run_builds_alone(cache, tmp_path, kind):
    binary = build_fixture("dwarf_structs", "-O2")
    lock = _lock_path(cache, binary)
    if kind == "fifo":
        os.mkfifo(lock, 0o600)
    elif kind == "symlink":
        os.symlink("/dev/zero", lock)
    else:
        (cache / "probectl").chmod(0o777)  # writable by others: no cache, no lock
    runs = [_start(cache, binary, tmp_path / f"run{i}") for i in range(2)]
    for r in runs:
        assert r.wait(timeout=120) == 0
    errs = [(tmp_path / f"run{i}.err").read_text() for i in range(2)]
    assert not any(WAITING in e for e in errs)
    if kind == "unsafe-dir":  # (no cache at all: the index is built in memory, nothing is stored there)
        assert not any(p.name.startswith("dwarf-names-") for p in (cache / "probectl").iterdir())
    else:  # (the index was built, so the lock was in the way; the later run may read what the first stored)
        assert any(BUILDING in e for e in errs), errs
    outs = {(tmp_path / f"run{i}.out").read_text() for i in range(2)}
    assert len(outs) == 1
