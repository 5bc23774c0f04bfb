"""The cache can be planted by another user (probectl runs as root, with ``sudo -E`` and a shared
``XDG_CACHE_HOME``) and can hold anything: it never runs code, never hangs, never reads without
bound. A pickle planted as the grammar cache is never unpickled, whether its directory or the file
is another user's or writable by others; a FIFO, a link to /dev/zero, a huge sparse file, another
user's or a group-writable file in place of a cache file is a cache miss: the command finishes at
once with what an uncached run prints."""
from __future__ import annotations

import hashlib
import lzma
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, build_fixture
from probectl import cachedir
from probectl.grammars import cache_name
from probectl.target import kernel

NOBODY = 65534
# A symbol, and C expressions in a function found by name (with @SRC: the DWARF name index; a
# global function alone is found at its symbol's address, which builds no index).
DEFINITIONS = ("main", "add_ints@uprobe_target.c a b")
# The grammar kept in the cache is the filters' (probe definitions are parsed by the generated
# probectl/spec/probe_tables.py): each run parses this filter, then resolves the definitions.
FILTER = 'common_pid == 42 && comm ~ "bash*"'
_FILTER_THEN_ADD = """
import sys
from probectl.filters.syntax import parse_filter
print(parse_filter(sys.argv[1]))
sys.argv = ["probectl", "add", "-D", "-x"] + sys.argv[2:]
from probectl.cli import main
main()
"""


class Planted:
    """Unpickled, writes the marker file: a pickle that runs code."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "unpickled"))


@pytest.fixture(scope="module")
def binary():
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build the fixtures")
    return build_fixture("uprobe_target")


def _run(binary: Path, cache: Path | None, *definitions: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if cache is None:
        env["PROBECTL_NO_CACHE"] = "1"
    else:
        env.pop("PROBECTL_NO_CACHE", None)
        env["XDG_CACHE_HOME"] = str(cache)
    return subprocess.run([sys.executable, "-c", _FILTER_THEN_ADD, FILTER, str(binary), *definitions],
                          capture_output=True, text=True, env=env, timeout=20)


@pytest.fixture(scope="module")
def uncached(binary):
    out = _run(binary, None, *DEFINITIONS)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _warm(binary: Path, base: Path) -> Path:
    """A cache directory filled by one run: the grammar and the name index of ``binary``."""
    out = _run(binary, base, *DEFINITIONS)
    assert out.returncode == 0, out.stderr
    directory = base / "probectl"
    assert (directory / cache_name("filter.lark")).is_file() and list(directory.glob("dwarf-names-*.bin"))
    return directory


def _check(out: subprocess.CompletedProcess, uncached: str) -> None:
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stdout == uncached


def _evil(marker: Path) -> bytes:
    return pickle.dumps(Planted(marker))


@pytest.mark.parametrize("where", ["directory of another user", "file of another user", "group-writable file",
                                   "other-writable file"])
def test_planted_grammar_pickle_is_never_unpickled(binary, uncached, tmp_path, where):
    """The planted file has a valid header (the hash of what the parser was made from, the checksum
    of the pickle): only the owner and mode checks stand between it and pickle."""
    marker = tmp_path / "marker"
    directory = _warm(binary, tmp_path / "xdg")
    grammar = directory / cache_name("filter.lark")
    good = grammar.read_bytes()
    magic = b"probectl lark parser\n"
    assert good.startswith(magic)
    evil = _evil(marker)
    grammar.write_bytes(good[:len(magic) + 32] + hashlib.sha256(evil).digest() + evil)
    # and the file earlier versions let lark unpickle, with lark's header
    (directory / "grammar-filter.lark-cache").write_bytes(b"0" * 64 + b"\n" + evil + evil)
    if where == "directory of another user":
        os.chown(directory, NOBODY, NOBODY)
    elif where == "file of another user":
        os.chown(grammar, NOBODY, NOBODY)
    else:
        grammar.chmod(0o620 if where == "group-writable file" else 0o602)
    for definitions in (DEFINITIONS, ("main",)):
        out = _run(binary, tmp_path / "xdg", *definitions)
        assert not marker.exists(), "a planted pickle was unpickled"
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    _check(_run(binary, tmp_path / "xdg", *DEFINITIONS), uncached)
    assert not marker.exists()


def test_own_grammar_cache_is_used_and_checked(binary, uncached, tmp_path):
    """The cache of one's own is read back; a pickle in it whose checksum does not match (a damaged
    file) is not unpickled either."""
    marker = tmp_path / "marker"
    directory = _warm(binary, tmp_path / "xdg")
    grammar = directory / cache_name("filter.lark")
    good = grammar.read_bytes()
    magic = b"probectl lark parser\n"
    assert grammar.stat().st_mode & 0o777 == 0o600
    _check(_run(binary, tmp_path / "xdg", *DEFINITIONS), uncached)
    assert grammar.read_bytes() == good  # read, not rewritten
    damaged = good[:len(good) - len(_evil(marker))] + _evil(marker)
    grammar.write_bytes(damaged)
    _check(_run(binary, tmp_path / "xdg", *DEFINITIONS), uncached)
    assert not marker.exists()
    rewritten = grammar.read_bytes()
    assert rewritten != damaged and rewritten[:len(magic) + 32] == good[:len(magic) + 32]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _sparse(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(64 << 30)


def _other_user(path: Path) -> None:
    os.chown(path, NOBODY, NOBODY)


def _group_writable(path: Path) -> None:
    path.chmod(0o660)


HOSTILE = {"fifo": _fifo, "dev-zero": _dev_zero, "sparse": _sparse, "other-user": _other_user,
           "group-writable": _group_writable}


@pytest.mark.parametrize("kind", ["grammar", "index"])
@pytest.mark.parametrize("hostile", list(HOSTILE))
def test_hostile_cache_files_are_misses(binary, uncached, tmp_path, kind, hostile):
    """In place of the grammar cache or of the name index file: the run finishes at once (the
    timeout is a few seconds), exits 0 with the uncached output, and replaces the file."""
    directory = _warm(binary, tmp_path / "xdg")
    pattern = cache_name("filter.lark") if kind == "grammar" else "dwarf-names-*.bin"
    (path,) = directory.glob(pattern)
    good = path.read_bytes()
    if hostile not in ("other-user", "group-writable"):  # those two keep valid contents
        path.unlink()
    HOSTILE[hostile](path)
    start = time.monotonic()
    _check(_run(binary, tmp_path / "xdg", *DEFINITIONS), uncached)
    assert time.monotonic() - start < 10
    assert path.is_file() and not path.is_symlink() and path.stat().st_uid == os.geteuid()
    assert path.stat().st_mode & 0o777 == 0o600 and path.stat().st_size > 0
    if kind == "index":
        assert path.read_bytes() == good


@pytest.mark.parametrize("hostile", list(HOSTILE))
def test_read_file_refuses_hostile_files(tmp_path, hostile):
    path = tmp_path / "file"
    if hostile in ("other-user", "group-writable"):
        path.write_bytes(b"data")
    HOSTILE[hostile](path)
    assert cachedir.read_file(path, 1 << 20) is None
    assert cachedir.open_file(path, 1 << 40) is None or hostile == "sparse"


def test_read_file_bounds(tmp_path):
    path = tmp_path / "file"
    assert cachedir.read_file(path, 10) is None  # missing
    assert cachedir.write_file(path, b"0123456789")
    assert path.stat().st_mode & 0o777 == 0o600
    assert cachedir.read_file(path, 10) == b"0123456789"
    assert cachedir.read_file(path, 9) is None
    assert [p.name for p in tmp_path.iterdir()] == ["file"]  # no temporary file left


def test_write_file_replaces_links_without_following_them(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("kept")
    path = tmp_path / "file"
    path.symlink_to(victim)
    assert cachedir.write_file(path, b"new")
    assert victim.read_text() == "kept" and not path.is_symlink() and path.read_bytes() == b"new"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert cachedir.write_file(fifo, b"new") and fifo.read_bytes() == b"new"


def test_cache_dir_is_the_users_own(tmp_path, monkeypatch):
    """The directory is made with mode 0700; another user's, a group- or other-writable one, a link,
    or one in a parent others can change (world-writable, not sticky) turns caching off."""
    monkeypatch.delenv("PROBECTL_NO_CACHE", raising=False)
    base = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", str(base))
    directory = base / "probectl"
    assert cachedir.cache_dir() == directory
    assert directory.stat().st_mode & 0o777 == 0o700 and base.stat().st_mode & 0o777 == 0o700
    os.chown(directory, NOBODY, NOBODY)
    assert cachedir.cache_dir() is None
    os.chown(directory, os.geteuid(), os.getegid())
    for mode in (0o770, 0o707, 0o775):
        directory.chmod(mode)
        assert cachedir.cache_dir() is None
    directory.chmod(0o755)
    assert cachedir.cache_dir() == directory
    base.chmod(0o777)  # others can rename it away and put theirs in its place
    assert cachedir.cache_dir() is None
    base.chmod(0o1777)  # sticky, as /tmp: they cannot
    assert cachedir.cache_dir() == directory
    base.chmod(0o700)
    os.chown(base, NOBODY, NOBODY)
    assert cachedir.cache_dir() is None
    os.chown(base, os.geteuid(), os.getegid())
    shutil.rmtree(directory)
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    directory.symlink_to(tmp_path / "elsewhere")
    assert cachedir.cache_dir() is None
    directory.unlink()
    directory.write_text("")
    assert cachedir.cache_dir() is None


def test_hostile_unpacked_module_is_unpacked_again(binary, tmp_path):
    """An unpacked module is used again only if it is a regular file of one's own, of sane size,
    that starts as an ELF file."""
    packed = tmp_path / "mod.ko.xz"
    packed.write_bytes(lzma.compress(binary.read_bytes()))
    cache = tmp_path / "cache"
    first = kernel._unpacked(packed, cache)
    assert first.parent == cache and first.read_bytes() == binary.read_bytes()
    assert cache.stat().st_mode & 0o777 == 0o700 and first.stat().st_mode & 0o777 == 0o600
    for hostile in [*HOSTILE, "not-elf"]:
        first.unlink()
        if hostile == "not-elf":
            first.write_bytes(b"\0" * 100)
        elif hostile in ("other-user", "group-writable"):
            first.write_bytes(binary.read_bytes())
        if hostile != "not-elf":
            HOSTILE[hostile](first)
        again = kernel._unpacked(packed, cache)
        assert again.read_bytes() == binary.read_bytes(), hostile
        assert not again.is_symlink() and again.stat().st_uid == os.geteuid() and again.stat().st_mode & 0o022 == 0
    os.chown(cache, NOBODY, NOBODY)  # another user's directory: a directory of the run's own
    other = kernel._unpacked(packed, cache)
    assert other.parent != cache and other.read_bytes() == binary.read_bytes()
