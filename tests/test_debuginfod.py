"""Debug files from debuginfod: a real local server (Debian's ``debuginfod -F DIR``) serves the debug parts of
fixtures that were split off with objcopy; probectl resolves source-level definitions on the stripped binaries
through elfutils' libdebuginfod, shares its cache, and says clearly what each server answered.

A slow server and one that serves a file of the wrong build-id cannot be made from debuginfod itself (it
indexes files by their real build-ids and answers at once), so those two are small HTTP servers of the test's
own, answering libdebuginfod's real requests. Every test has a cache directory of its own
(``DEBUGINFOD_CACHE_PATH``), so that nothing is left in the user's and no answer is cached across tests.
"""
from __future__ import annotations

import ctypes
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import build_fixture, missing, probectl

from probectl.debuginfo.elf import ElfFile


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split_debug(binary: Path, out_dir: Path, name: str, strip: str = "--strip-debug") -> tuple[Path, Path]:
    """(stripped binary, its debug file), as distributions split them."""
    stripped, debug = out_dir / "bin" / name, out_dir / "srv" / f"{name}.debug"
    stripped.parent.mkdir(parents=True, exist_ok=True)
    debug.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(binary), str(debug)], check=True)
    subprocess.run(["objcopy", strip, str(binary), str(stripped)], check=True)
    return stripped, debug


def build_id(path: Path) -> str:
    with ElfFile(path) as elf:
        return elf.build_id


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A debuginfod serving the debug files of uprobe_target (-O0, stripped of DWARF) and dwarf_structs
    (-O2, stripped of everything); yields (url, {name: stripped binary}, {name: original})."""
    exe = shutil.which("debuginfod")
    if exe is None:
        missing("debuginfod (apt debuginfod) is not installed")
    try:
        ctypes.CDLL("libdebuginfod.so.1")
    except OSError:
        missing("libdebuginfod.so.1 (apt libdebuginfod1) is not installed")
    root = tmp_path_factory.mktemp("debuginfod")
    originals = {"uprobe_target": build_fixture("uprobe_target", "-O0"),
                 "dwarf_structs": build_fixture("dwarf_structs", "-O2")}
    stripped = {"uprobe_target": split_debug(originals["uprobe_target"], root, "uprobe_target")[0],
                "dwarf_structs": split_debug(originals["dwarf_structs"], root, "dwarf_structs", "--strip-all")[0]}
    port = free_port()
    log = open(root / "debuginfod.log", "w")
    proc = subprocess.Popen([exe, "-F", "-d", str(root / "db.sqlite"), "-p", str(port), "-t", "0", "-g", "0",
                             str(root / "srv")], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wanted = [build_id(p) for p in originals.values()]
        deadline = time.monotonic() + 60
        while wanted and time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{url}/buildid/{wanted[0]}/debuginfo", timeout=5).read(1)
                wanted.pop(0)
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.2)
        assert not wanted, (root / "debuginfod.log").read_text()[-2000:]
        yield url, stripped, originals
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def probectl_with_servers(*args: str, urls: str, cache: Path, timeout: str = "10") -> subprocess.CompletedProcess:
    """probectl with DEBUGINFOD_URLS ``urls``, its cache in ``cache`` and DEBUGINFOD_TIMEOUT ``timeout``."""
    return probectl(*args, check=False, timeout=120,
                    env={"DEBUGINFOD_URLS": urls, "DEBUGINFOD_CACHE_PATH": str(cache), "DEBUGINFOD_TIMEOUT": timeout})


def args_of(definitions: str) -> list[list[str]]:
    return [line.split()[2:] for line in definitions.strip().splitlines()]


def test_source_definitions_resolve_on_the_stripped_binary(server, tmp_path):
    url, stripped, originals = server
    cache = tmp_path / "cache"
    probe = "add_ints:2 a b"
    local = probectl_with_servers("add", "-D", "-x", str(originals["uprobe_target"]), probe, urls="", cache=cache)
    assert local.returncode == 0, local.stderr
    fetched = probectl_with_servers("add", "-D", "-x", str(stripped["uprobe_target"]), probe, urls=url, cache=cache)
    assert fetched.returncode == 0, fetched.stderr
    assert args_of(fetched.stdout) == args_of(local.stdout) == [["a=-4(%bp):s32", "b=-8(%bp):s32"]]
    assert local.stdout.split()[1].rsplit(":", 1)[1] == fetched.stdout.split()[1].rsplit(":", 1)[1]
    bid = build_id(originals["uprobe_target"])
    assert f"fetched from {url} into {cache / bid / 'debuginfo'}" in fetched.stderr
    assert build_id(cache / bid / "debuginfo") == bid


def test_a_binary_without_symbols_is_found_through_the_fetched_dwarf(server, tmp_path):
    """dwarf_structs was stripped of its symbol table too: its functions are known from the DWARF only."""
    url, stripped, originals = server
    local = probectl_with_servers("vars", "-x", str(originals["dwarf_structs"]), "paint", urls="", cache=tmp_path)
    fetched = probectl_with_servers("vars", "-x", str(stripped["dwarf_structs"]), "paint", urls=url, cache=tmp_path)
    assert local.returncode == 0 and fetched.returncode == 0, fetched.stderr
    assert fetched.stdout == local.stdout


def test_the_second_run_uses_the_cache(server, tmp_path):
    url, stripped, _ = server
    cache = tmp_path / "cache"
    first = probectl_with_servers("lines", "-x", str(stripped["uprobe_target"]), "add_ints", urls=url, cache=cache)
    assert first.returncode == 0, first.stderr
    # The server is not asked again: a run whose only server is down still succeeds, from the cache.
    second = probectl_with_servers("lines", "-x", str(stripped["uprobe_target"]), "add_ints", urls="http://127.0.0.1:1",
                      cache=cache)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert "from the debuginfod cache" in second.stderr


def test_without_servers_the_error_says_where_it_looked(server, tmp_path):
    _, stripped, _ = server
    out = probectl_with_servers("lines", "-x", str(stripped["uprobe_target"]), "add_ints", urls="", cache=tmp_path)
    assert out.returncode == 1 and out.stderr.startswith("Error: ") and "Traceback" not in out.stderr
    assert "no separate debug file was found" in out.stderr and "DEBUGINFOD_URLS" in out.stderr


def test_server_down(server, tmp_path):
    _, stripped, _ = server
    down = f"http://127.0.0.1:{free_port()}"
    out = probectl_with_servers("lines", "-x", str(stripped["uprobe_target"]), "add_ints", urls=down, cache=tmp_path)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "no debuginfod server has the debuginfo of" in out.stderr
    assert f"{down}: " in out.stderr and "connect" in out.stderr.lower()


def test_not_found_names_each_server_and_its_answer(server, tmp_path):
    url, _, _ = server
    other = build_fixture("dwarf_inline", "-O0")  # (its debug file is not on the server)
    stripped = tmp_path / "dwarf_inline"
    subprocess.run(["objcopy", "--strip-debug", str(other), str(stripped)], check=True)
    down = f"http://127.0.0.1:{free_port()}"
    out = probectl_with_servers("lines", "-x", str(stripped), "main", urls=f"{url} {down}", cache=tmp_path / "both")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"(build-id {build_id(other)})" in out.stderr
    assert f"{url}: HTTP 404 (not found)" in out.stderr
    assert f"{down}: " in out.stderr
    # A 404 from every server is remembered by libdebuginfod (an empty cache file), which then asks no
    # server for a while: say so.
    only = probectl_with_servers("lines", "-x", str(stripped), "main", urls=url, cache=tmp_path / "one")
    assert only.returncode == 1 and f"{url}: HTTP 404 (not found)" in only.stderr
    again = probectl_with_servers("lines", "-x", str(stripped), "main", urls=url, cache=tmp_path / "one")
    assert again.returncode == 1 and "debuginfod's cache remembers that no server had" in again.stderr
    assert f"remove {tmp_path / 'one' / build_id(other) / 'debuginfo'}" in again.stderr


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""
    delay = 0.0

    def do_GET(self):  # noqa: N802 (http.server's name)
        time.sleep(self.delay)
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.body)))
            self.end_headers()
            self.wfile.write(self.body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def own_server():
    """Start an HTTP server of the test's own with a handler class; yields a starter returning its URL."""
    servers = []

    def start(handler) -> str:
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def test_slow_server_times_out(server, tmp_path, own_server):
    _, stripped, _ = server
    handler = type("Slow", (_Handler,), {"delay": 8.0, "body": b"x"})
    url = own_server(handler)
    started = time.monotonic()
    out = probectl_with_servers("lines", "-x", str(stripped["uprobe_target"]), "add_ints", urls=url, cache=tmp_path, timeout="1")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"{url}: timed out" in out.stderr, out.stderr
    assert time.monotonic() - started < 60  # (not a timing assertion: it must merely not hang)


def test_a_file_of_another_build_id_is_refused(server, tmp_path, own_server):
    url_real, stripped, originals = server
    handler = type("Wrong", (_Handler,), {"body": build_fixture("dwarf_inline", "-O0").read_bytes()})
    url = own_server(handler)
    cache = tmp_path / "cache"
    out = probectl_with_servers("lines", "-x", str(stripped["uprobe_target"]), "add_ints", urls=url, cache=cache)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    bid = build_id(originals["uprobe_target"])
    assert f"{url} sent a file for build-id {bid} that does not belong to it" in out.stderr, out.stderr
    assert not (cache / bid / "debuginfo").exists()
    # The next run, with the right server, fetches the right file.
    good = probectl_with_servers("lines", "-x", str(stripped["uprobe_target"]), "add_ints", urls=url_real, cache=cache)
    assert good.returncode == 0, good.stderr


def test_kernel_vmlinux_by_the_running_kernels_build_id(server, tmp_path, monkeypatch):
    """No server here has the running kernel's vmlinux, so the running kernel's build-id is replaced by the
    fixture's (the one thing mocked): the request, the cache and the switch to the fetched file are real."""
    from probectl.resolve import Resolver
    from probectl.target import Target
    from probectl.target import kernel

    url, _, originals = server
    bid = build_id(originals["uprobe_target"])
    monkeypatch.setenv("DEBUGINFOD_URLS", url)
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path))
    monkeypatch.setattr(kernel, "running_build_id", lambda: bid)
    resolver = Resolver(Target(kind="kprobe"))
    source = resolver.source(required=True)
    assert resolver.target.path == tmp_path / bid / "debuginfo"
    assert source is not None and any("the running kernel" in note for note in resolver.notes)


class _Trickle(_Handler):
    """Sends its body in 64 KiB pieces, 2 MiB a second: a download that lasts about a second and a half."""

    def do_GET(self):  # noqa: N802
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.body)))
            self.end_headers()
            for start in range(0, len(self.body), 1 << 16):
                self.wfile.write(self.body[start:start + (1 << 16)])
                time.sleep(1 / 32)
        except (BrokenPipeError, ConnectionResetError):
            pass


def run_on_a_terminal(args: list[str], env: dict) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal (stdout a pipe); return the exit status and what the terminal got."""
    import pty

    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the other side is closed
            break
        if not data:
            break
        chunks.append(data)
    proc.communicate(timeout=120)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


def test_a_long_download_shows_progress_on_a_terminal_only(server, tmp_path, own_server):
    """A debug file padded to 3 MiB (an ELF file with zeros appended keeps its build-id), sent slowly."""
    _, stripped, originals = server
    debug = tmp_path / "padded.debug"
    subprocess.run(["objcopy", "--only-keep-debug", str(originals["uprobe_target"]), str(debug)], check=True)
    body = debug.read_bytes() + bytes(3 << 20)
    url = own_server(type("Padded", (_Trickle,), {"body": body}))
    args = [sys.executable, "-m", "probectl", "lines", "-x", str(stripped["uprobe_target"]), "add_ints"]
    env = dict(os.environ, DEBUGINFOD_URLS=url, DEBUGINFOD_CACHE_PATH=str(tmp_path / "tty"))
    status, terminal = run_on_a_terminal(args, env)
    assert status == 0, terminal
    assert "probectl: fetching" in terminal and "/3.0 MiB" in terminal and "[####" in terminal, terminal
    piped = probectl_with_servers(*args[3:], urls=url, cache=tmp_path / "pipe")
    assert piped.returncode == 0, piped.stderr
    assert "fetching" not in piped.stderr and "fetched from" in piped.stderr


@pytest.fixture(scope="module")
def source_server(tmp_path_factory):
    """A debuginfod that alone sees the sources: the program is built in SRC, its source then moved away and
    mounted back over SRC inside the server's own mount namespace (unshare -m), so the server reads
    SRC/uprobe_target.c and probectl, outside, finds nothing there. Yields (url, stripped binary, source text)."""
    exe, unshare = shutil.which("debuginfod"), shutil.which("unshare")
    if exe is None:
        missing("debuginfod (apt debuginfod) is not installed")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) for a private mount namespace")
    root = tmp_path_factory.mktemp("srcserver")
    src, hidden = root / "src", root / "hidden"
    src.mkdir()
    hidden.mkdir()
    text = (Path(__file__).resolve().parent.parent / "fixtures" / "uprobe_target.c").read_text()
    (src / "uprobe_target.c").write_text(text)
    binary = root / "uprobe_target"
    subprocess.run(["gcc", "-O0", "-g", "-o", str(binary), str(src / "uprobe_target.c")], check=True)
    stripped, _debug = split_debug(binary, root, "uprobe_target")
    (src / "uprobe_target.c").rename(hidden / "uprobe_target.c")
    port = free_port()
    log = open(root / "debuginfod.log", "w")
    script = (f'mount --bind "{hidden}" "{src}" && exec "{exe}" -F -d "{root}/db.sqlite" -p {port} -t 0 -g 0 '
              f'"{root}/srv"')
    proc = subprocess.Popen([unshare, "-m", "--propagation", "private", "sh", "-c", script], stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    bid = build_id(binary)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/buildid/{bid}/source{src}/uprobe_target.c", timeout=5).read(1)
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.fail((root / "debuginfod.log").read_text()[-2000:])
                time.sleep(0.2)
        yield url, stripped, text, binary
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_lines_fetches_the_source(source_server, tmp_path):
    url, stripped, text, binary = source_server
    out = probectl_with_servers("lines", "-x", str(stripped), "add_ints", urls=url, cache=tmp_path)
    assert out.returncode == 0, out.stderr
    body = [line.split(None, 1)[-1] for line in out.stdout.splitlines()[1:] if line.strip()]
    assert "PROBED int add_ints(int a, int b)" in out.stdout and "return a + b;" in out.stdout
    assert all(line.strip() in text for line in body)
    # Without servers the binary's own DWARF is there, its source is not.
    without = probectl_with_servers("lines", "-x", str(binary), "add_ints", urls="", cache=tmp_path / "none")
    assert without.returncode == 1 and "source file" in without.stderr and "not found" in without.stderr
    down = f"http://127.0.0.1:{free_port()}"
    refused = probectl_with_servers("lines", "-x", str(binary), "add_ints", urls=down, cache=tmp_path / "none")
    assert refused.returncode == 1 and "no debuginfod server has the source" in refused.stderr
    assert f"{down}: " in refused.stderr


def test_lazy_pattern_fetches_the_source(source_server, tmp_path):
    url, stripped, _, _ = source_server
    out = probectl_with_servers("add", "-D", "-x", str(stripped), "add_ints;return*", urls=url, cache=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("p:probe_uprobe_target/add_ints ")


def test_ctrl_c_during_a_download_stops_it_and_leaves_no_cache_entry(server, tmp_path, own_server):
    """SIGINT while libdebuginfod downloads (16 MiB at 2 MiB/s): the transfer is cancelled, probectl exits
    as interrupted, and neither a partial file nor a remembered miss is left in the cache."""
    _, stripped, originals = server
    url = own_server(type("Big", (_Trickle,), {"body": bytes(16 << 20)}))
    cache = tmp_path / "cache"
    env = dict(os.environ, DEBUGINFOD_URLS=url, DEBUGINFOD_CACHE_PATH=str(cache))
    proc = subprocess.Popen([sys.executable, "-m", "probectl", "lines", "-x", str(stripped["uprobe_target"]),
                             "add_ints"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    time.sleep(2)
    proc.send_signal(2)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not (cache / build_id(originals["uprobe_target"])).exists()


def test_user_frames_of_a_stripped_binary_are_named_from_the_fetched_debug_file(server, tmp_path, monkeypatch):
    """script's user symbols (script/symbols.py): dwarf_structs stripped of its symbol table names its
    functions only through its debug file, which no local path has and the server sends."""
    from probectl.script.symbols import UserSymbols
    from probectl.tracedat.procmaps import Mapping

    url, stripped, originals = server
    with ElfFile(originals["dwarf_structs"]) as elf:
        paint = elf.find_functions("paint")[0]
        offset = elf.vaddr_to_offset(paint.value + 4)
    maps = {7: [Mapping(0x400000, 0x400000 + (1 << 20), 0, str(stripped["dwarf_structs"]))]}
    monkeypatch.setenv("DEBUGINFOD_URLS", "")
    assert UserSymbols(maps).lookup(7, 0x400000 + offset) is None
    monkeypatch.setenv("DEBUGINFOD_URLS", url)
    monkeypatch.setenv("DEBUGINFOD_CACHE_PATH", str(tmp_path / "cache"))
    assert UserSymbols(maps).lookup(7, 0x400000 + offset) == ("paint", 4, str(stripped["dwarf_structs"]))
