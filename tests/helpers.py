"""What the test modules share (drgn keeps the like in tests/__init__.py, pyelftools in test/utils.py):
running probectl, the gates that skip a test this machine cannot run, the programs built from
fixtures/, the kernel test data, tracefs snapshots and a FIFO reader. conftest.py files hold only
fixtures and pytest hooks, built from these.

A test that needs something this machine lacks is skipped with the reason (:func:`missing`); with
PROBECTL_REQUIRE_ALL=1 (set by .ci/run, where everything is installed) such a skip becomes a
failure, so nothing skips silently.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import select
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator, Mapping, NoReturn, Optional, Union

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
BUILD_DIR = Path(os.environ.get("PROBECTL_FIXTURE_BUILD", "/tmp/probectl-fixtures"))
TRACEFS = Path("/sys/kernel/tracing")


# --- gates ----------------------------------------------------------------------------------------

def missing(reason: str) -> NoReturn:
    """Skip the test for ``reason`` (something this machine lacks), or fail it under PROBECTL_REQUIRE_ALL=1."""
    if os.environ.get("PROBECTL_REQUIRE_ALL") == "1":
        pytest.fail(f"required in CI but missing: {reason}")
    pytest.skip(reason)


def require_tool(name: str, package: str) -> str:
    """The path of the program ``name``, or :func:`missing` naming the Debian ``package`` that has it."""
    path = shutil.which(name)
    if not path:
        missing(f"{name} ({package}) is not installed")
    return path


def require_tracefs() -> Path:
    """Root and a mounted tracefs with uprobe_events (mounted here if it is not), or a skip (a failure in CI)."""
    if os.geteuid() != 0:
        missing("live tracing tests need root")
    if not (TRACEFS / "uprobe_events").exists():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True)
    if not (TRACEFS / "uprobe_events").exists():
        missing(f"no tracefs with uprobe_events at {TRACEFS}")
    return TRACEFS


# --- running probectl -----------------------------------------------------------------------------

def probectl(*args: str, check: bool = True, env: Optional[Mapping[str, str]] = None,
             timeout: Optional[float] = None, cwd: Union[str, Path, None] = None,
             input: Optional[str] = None) -> subprocess.CompletedProcess:
    """``python -m probectl ARGS`` with this interpreter (so this checkout's probectl), its output as
    text. ``check``: assert that it exited 0 (its stderr is the message). ``env``: variables set over
    this process's environment. ``timeout`` (seconds), ``cwd`` and ``input`` as subprocess.run has them."""
    out = subprocess.run([sys.executable, "-m", "probectl", *args], capture_output=True, text=True,
                         env=None if env is None else {**os.environ, **env}, timeout=timeout, cwd=cwd, input=input)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def fails(*args: str, status: int = 1, **kw) -> str:
    """The stderr of a probectl run that must fail cleanly: an Error line, no traceback, exit ``status``
    1 (2 for a usage error, as click has it). ``kw`` as :func:`probectl` takes them."""
    out = probectl(*args, check=False, **kw)
    assert out.returncode == status, (out.returncode, out.stdout, out.stderr)
    assert "Traceback" not in out.stderr and "Error: " in out.stderr, out.stderr
    assert status != 1 or out.stderr.startswith("Error: "), out.stderr
    return out.stderr


# --- programs built from fixtures/, the kernel test data, sanitized drivers -----------------------

def sanitized_driver(tmp_path: Path, sources: list[str], sanitizer: str = "address,undefined") -> Path:
    """A standalone driver of native/ (``sources`` relative to it, the driver first) built with
    ``sanitizer`` (gcc -fsanitize=...): its path. Skips when gcc or the sanitizer's runtime is missing."""
    gcc = shutil.which("gcc")
    if not gcc:
        missing("gcc is needed to build the sanitizer driver")
    native = ROOT / "native"
    exe = tmp_path / Path(sources[0]).stem
    strict = ["-fno-sanitize-recover=undefined"] if "undefined" in sanitizer else []
    build = subprocess.run(
        [gcc, "-std=gnu99", "-O1", "-g", "-fno-omit-frame-pointer", f"-fsanitize={sanitizer}", *strict, "-pthread",
         "-Wall", "-Wextra", "-Werror", f"-I{native}", *(str(native / f) for f in sources), "-o", str(exe)],
        capture_output=True, text=True)
    if build.returncode and "cannot find" in build.stderr:
        missing(f"no {sanitizer} sanitizer runtime: {build.stderr.strip()[-300:]}")
    assert build.returncode == 0, build.stderr
    return exe


def run_sanitized(exe: Path, *args: str, timeout: int = 300) -> str:
    """Run a :func:`sanitized_driver` (leaks checked, halting on the first report): its output,
    after checking that no sanitizer spoke and it exited 0."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0", UBSAN_OPTIONS="print_stacktrace=1",
               TSAN_OPTIONS="halt_on_error=1")
    run = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env, timeout=timeout)
    assert "Sanitizer" not in run.stderr and "runtime error" not in run.stderr, run.stderr[-3000:]
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    return run.stdout


@functools.lru_cache(maxsize=None)
def _kernel_testdata(script: str = "kernel-testdata.sh") -> tuple[Optional[Path], str]:
    out = subprocess.run([str(ROOT / "tools" / script)], capture_output=True, text=True)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return None, out.stderr.strip()[-200:] or f"exit status {out.returncode}"
    return Path(lines[-1]), ""


def pyelftools_dwarfinfo(debuginfo):
    """pyelftools' DWARFInfo over the very sections a DebugInfo opened (mapped, inflated: a kernel's are
    not copied): the oracle the DWARF tests compare probectl's reader with."""
    from elftools.dwarf.dwarfinfo import DwarfConfig, DWARFInfo

    from probectl.debuginfo.dwarf.sections import DWARF_SECTIONS

    config = DwarfConfig(little_endian=debuginfo.little_endian, machine_arch="x64",
                         default_address_size=debuginfo.address_size)
    return DWARFInfo(config=config, **{arg: getattr(debuginfo.dwarf, arg) for arg in DWARF_SECTIONS})


def kernel_testdata_dir() -> Optional[Path]:
    """The kernel test data directory (tools/kernel-testdata.sh: Debian's cloud kernel with its DWARF
    vmlinux, bootable image and a few modules, downloaded and cached on first use), or None."""
    return _kernel_testdata()[0]


def kernel_testdata(*parts: str, script: str = "kernel-testdata.sh") -> Path:
    """A file of the kernel test data (``kernel_testdata("vmlinux")``); a skip (a failure in CI) when
    the data cannot be fetched or lacks it. ``script="kernel-testdata-arm64.sh"``: the arm64 kernel's."""
    directory, why = _kernel_testdata(script)
    if directory is None:
        missing(f"no kernel test data (tools/{script} failed: {why})")
    path = directory.joinpath(*parts)
    if not path.exists():
        missing(f"{path} is missing (tools/{script})")
    return path


def build_program(name: str, sources: list[Path], opt: str = "-O0", extra: tuple[str, ...] = (),
                  pie: bool = True, cc: str = "gcc") -> Path:
    """Build a program from C sources with ``cc`` (gcc) at ``opt`` (cached by the sources' paths and
    contents, the compiler and the flags: DWARF records the source paths, so a checkout elsewhere gets
    builds of its own)."""
    flags = [opt, "-g", "-fno-omit-frame-pointer", *extra]
    if not pie:
        flags.append("-no-pie")
    ident = b"".join(str(src).encode() + b"\0" + src.read_bytes() for src in sources) + " ".join(flags).encode()
    if cc != "gcc":
        ident += b"\0" + cc.encode()
    key = hashlib.sha1(ident).hexdigest()[:12]
    suffix = opt.lstrip("-") + ("" if pie else "-nopie") + ("" if cc == "gcc" else "-" + os.path.basename(cc).split("-")[0])
    out = BUILD_DIR / f"{name}-{suffix}-{key}"
    if not out.exists():
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run([cc, *flags, "-o", str(tmp), *map(str, sources)], check=True)
        tmp.rename(out)
    return out


AARCH64_GCC = "aarch64-linux-gnu-gcc"


def build_arm64_program(name: str, sources: list[Path], opt: str = "-O0", extra: tuple[str, ...] = ()) -> Path:
    """Build C sources for AArch64 with Debian's cross compiler (gcc-aarch64-linux-gnu: a skip, a
    failure in CI, without it), with the fixtures' flags; cached as build_program caches."""
    return build_program(name, sources, opt, extra, cc=require_tool(AARCH64_GCC, "gcc-aarch64-linux-gnu"))


def build_arm64_fixture(name: str, opt: str = "-O0") -> Path:
    """Build fixtures/<name>.c for AArch64; return the binary path."""
    return build_arm64_program(name, [FIXTURES / f"{name}.c"], opt)


def build_fixture(name: str, opt: str = "-O0", extra: tuple[str, ...] = (), pie: bool = True) -> Path:
    """Build fixtures/<name>.c; return the binary path."""
    return build_program(name, [FIXTURES / f"{name}.c"], opt, extra, pie)


def build_cxx_fixture(name: str, opt: str = "-O0") -> Path:
    """Build fixtures/<name>.cc with g++ (a skip, a failure in CI, without it) at ``opt``, with the C
    fixtures' flags; cached as build_program caches."""
    gxx = require_tool("g++", "g++")
    src = FIXTURES / f"{name}.cc"
    flags = [opt, "-g", "-fno-omit-frame-pointer"]
    ident = str(src).encode() + b"\0" + src.read_bytes() + " ".join(flags).encode()
    out = BUILD_DIR / f"{name}-cxx{opt}-{hashlib.sha1(ident).hexdigest()[:12]}"
    if not out.exists():
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run([gxx, *flags, "-o", str(tmp), str(src)], check=True)
        tmp.rename(out)
    return out


def build_rust_fixture(name: str, opt: str = "0", mangling: str = "legacy") -> Path:
    """Build fixtures/<name>.rs with rustc (Debian's rustc: a skip, a failure in CI, without it) at
    ``-C opt-level=opt``, with its DWARF, its symbols mangled by ``mangling`` (``legacy``, Debian's
    rustc's default, or ``v0``: ``-C symbol-mangling-version=v0``, the program's own; the standard
    library is legacy, as built); cached as build_program caches."""
    # (Debian's, as CI installs it, before a rustup toolchain that may be first on PATH)
    rustc = "/usr/bin/rustc" if os.access("/usr/bin/rustc", os.X_OK) else require_tool("rustc", "rustc")
    src = FIXTURES / f"{name}.rs"
    flags = ["-g", "-C", f"opt-level={opt}"] + (["-C", "symbol-mangling-version=v0"] if mangling == "v0" else [])
    ident = str(src).encode() + b"\0" + src.read_bytes() + " ".join(flags).encode() + rustc.encode()
    out = BUILD_DIR / f"{name}-rs{opt}{'-v0' if mangling == 'v0' else ''}-{hashlib.sha1(ident).hexdigest()[:12]}"
    if not out.exists():
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        subprocess.run([rustc, *flags, "--crate-name", name, "-o", str(tmp), str(src)], check=True)
        tmp.rename(out)
    return out


def build_go_fixture(name: str, gcflags: str = "", goarch: str = "") -> Path:
    """Build fixtures/<name>.go with Debian's go (golang-go; a skip, a failure in CI, without it), with
    ``gcflags`` (``all=-N -l``: unoptimised), for ``goarch`` (``arm64``; default: this machine's, as
    Go cross-compiles by itself); cached as build_program caches, by the source's path and contents
    and the flags. Static (no cgo), with its DWARF."""
    go = require_tool("go", "golang-go")
    src = FIXTURES / f"{name}.go"
    ident = str(src).encode() + b"\0" + src.read_bytes() + gcflags.encode() + (b"\0" + goarch.encode() if goarch else b"")
    out = BUILD_DIR / f"{name}-go{'-' + goarch if goarch else ''}-{hashlib.sha1(ident).hexdigest()[:12]}"
    if not out.exists():
        BUILD_DIR.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        env = {**os.environ, "CGO_ENABLED": "0", "GO111MODULE": "off", "GOFLAGS": "",
               "GOCACHE": str(BUILD_DIR / "go-cache"), "GOPATH": str(BUILD_DIR / "go-path"),
               **({"GOARCH": goarch} if goarch else {})}
        flags = [f"-gcflags={gcflags}"] if gcflags else []
        subprocess.run([go, "build", *flags, "-o", str(tmp), str(src)], check=True, env=env, cwd=BUILD_DIR)
        tmp.rename(out)
    return out


def build_static_pair(opt: str = "-O0", extra: tuple[str, ...] = ()) -> Path:
    """dwarf_static_a.c + dwarf_static_b.c linked into one program: static functions of one name in two CUs."""
    return build_program("dwarf_static", [FIXTURES / "dwarf_static_a.c", FIXTURES / "dwarf_static_b.c"], opt, extra)


def build_alias_pair(opt: str = "-O0") -> Path:
    """dwarf_alias_a.c + dwarf_alias_b.c linked into one program: global aliases of a function, and a
    static function named like one of them in the other CU."""
    return build_program("dwarf_alias", [FIXTURES / "dwarf_alias_a.c", FIXTURES / "dwarf_alias_b.c"], opt)


def build_alias_library(opt: str = "-O2") -> tuple[Path, Path]:
    """The alias fixture as a shared library stripped as distributions ship one (libc): only
    ``.dynsym`` left, the DWARF and ``.symtab`` in a debug file beside it, found by its
    ``.gnu_debuglink``; the static public_helper is then known by the debug file alone. Returns
    (the stripped library, the library before stripping: the same code at the same addresses,
    for perf, which does not follow the link)."""
    sources = [FIXTURES / "dwarf_alias_a.c", FIXTURES / "dwarf_alias_b.c"]
    ident = b"".join(str(src).encode() + b"\0" + src.read_bytes() for src in sources) + opt.encode()
    out = BUILD_DIR / f"libdwarf_alias-{opt.lstrip('-')}-{hashlib.sha1(ident).hexdigest()[:12]}"
    stripped, full = out / "libdwarf_alias.so", out / "full" / "libdwarf_alias.so"
    if not out.exists():
        if not shutil.which("objcopy"):
            missing("objcopy (binutils) is not installed")
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        (tmp / "full").mkdir(parents=True, exist_ok=True)
        lib = tmp / stripped.name
        subprocess.run(["gcc", opt, "-g", "-fPIC", "-shared", "-o", str(tmp / "full" / lib.name), *map(str, sources)],
                       check=True)
        shutil.copyfile(tmp / "full" / lib.name, lib)
        subprocess.run(["objcopy", "--only-keep-debug", str(lib), f"{lib}.debug"], check=True)
        subprocess.run(["objcopy", "--strip-all", f"--add-gnu-debuglink={lib}.debug", str(lib)], check=True)
        try:
            tmp.rename(out)
        except OSError:  # (built meanwhile by another test process)
            shutil.rmtree(tmp, ignore_errors=True)
    return stripped, full


def build_usdt(opt: str = "-O0") -> tuple[Path, Path]:
    """usdt_target (usdt_target.c + usdt_guarded.c) linked with libusdt_lib.so (usdt_lib.c), SDT probes from
    <sys/sdt.h> (Debian: systemtap-sdt-dev); returns (program, library). Skips when sdt.h is missing."""
    check = subprocess.run(["gcc", "-E", "-x", "c", "-", "-o", "/dev/null"], input="#include <sys/sdt.h>\n",
                           capture_output=True, text=True)
    if check.returncode != 0:
        missing("<sys/sdt.h> is missing (apt systemtap-sdt-dev)")
    flags = [opt, "-g", "-fno-omit-frame-pointer"]
    sources = [FIXTURES / n for n in ("usdt_lib.c", "usdt_target.c", "usdt_guarded.c")]
    ident = b"".join(str(src).encode() + b"\0" + src.read_bytes() for src in sources) + " ".join(flags).encode()
    out = BUILD_DIR / f"usdt-{opt.lstrip('-')}-{hashlib.sha1(ident).hexdigest()[:12]}"
    program, library = out / "usdt_target", out / "libusdt_lib.so"
    if not program.exists():
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        tmp.mkdir(parents=True)
        subprocess.run(["gcc", *flags, "-shared", "-fPIC", "-o", str(tmp / library.name), str(sources[0])], check=True)
        # The rpath names the final directory, which the rename below creates.
        subprocess.run(["gcc", *flags, "-o", str(tmp / program.name), *map(str, sources[1:]), f"-L{tmp}",
                        "-lusdt_lib", f"-Wl,-rpath,{out}"], check=True)
        try:
            tmp.rename(out)
        except OSError:  # another run built it first
            shutil.rmtree(tmp, ignore_errors=True)
    return program, library


# --- tracefs and FIFOs ----------------------------------------------------------------------------

def tracefs_snapshot() -> dict[str, str]:
    """What probectl promises to leave unchanged: dynamic events and instances."""
    snap = {}
    for name in ("uprobe_events", "kprobe_events", "dynamic_events"):
        path = TRACEFS / name
        if path.exists():
            snap[name] = path.read_text(errors="surrogateescape")
    instances = TRACEFS / "instances"
    if instances.is_dir():
        snap["instances"] = "\n".join(sorted(os.listdir(instances)))
    return snap


@contextlib.contextmanager
def added_probes(binary: Union[str, Path], definitions: list[str], groups: list[str]) -> Iterator[Path]:
    """The probe events of ``definitions`` on ``binary``, added for the block (which gets the binary)
    and deleted after it, every event of ``groups``; tracefs must then be as it was before."""
    before = tracefs_snapshot()
    probectl("add", "-x", str(binary), *definitions)
    try:
        yield Path(binary)
    finally:
        probectl("del", *(f"{g}:*" for g in groups), check=False)
        assert tracefs_snapshot() == before


class FifoReader:
    """Everything written to the FIFO ``path`` by the next writer, read on a thread.

    Opened at once and without blocking, so the reader is there when the writer comes (probectl
    refuses a FIFO that nobody reads rather than wait). The thread waits with poll(), not read(): a
    FIFO that never had a writer reads as at its end, but polls as readable only once data comes, or
    its writer has come and gone."""

    def __init__(self, path: Path):
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.chunks: list[bytes] = []
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while True:
            poller.poll()
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                return
            self.chunks.append(chunk)

    def result(self, timeout: float = 60) -> bytes:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the FIFO's writer did not close it"
        os.close(self.fd)
        return b"".join(self.chunks)
