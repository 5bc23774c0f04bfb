"""Run the real probectl inside Debian's cloud kernel booted in qemu (which has kprobes).

``vmtest.busybox_guest`` boots the kernel with a busybox initramfs that writes definitions itself; this module
adds what probectl needs to run there, so ``add``/``list``/``record``/``script``/``trace``/``del`` are
tested on a kernel with kprobes, hist triggers and synthetic events::

    run = run_probectl_in_guest(kernel_dir, [
        "probectl add tcp_sendmsg size",
        "probectl list",
    ])
    run.steps[0].status, run.steps[1].stdout, run.steps[1].stderr

Each step is shell text run by busybox sh (as root, in /tmp, which is kept between steps) where
``probectl`` runs this checkout's package with the venv's interpreter and libraries.  The guest sees:

- two NVMe namespaces of one controller (NVMe and ext4 are built into the cloud kernel, so no module
  has to be loaded; the kernel has no 9p):
  ``nvme0n1`` is the *software image*, mounted read-only on ``/sw``: the interpreter and its standard
  library, the shared libraries they need, the venv's site-packages and this checkout's ``probectl/``
  and ``grammar/`` at their host paths, and a probectl cache warmed on the host for the kernel;
  ``nvme0n2`` is the *kernel image*, mounted read-only on ``/kernel``: the kernel test-data directory
  (``vmlinux`` with DWARF, ``modules/``), also reachable where perf looks for it
  (``/usr/lib/debug/boot/vmlinux-RELEASE``);
- an initramfs with busybox and ``/init``, which mounts proc, sysfs, devtmpfs, tracefs and a tmpfs on
  ``/tmp``, links ``/usr``, ``/lib``, ``/lib64`` and the image's other top directories (the checkout's,
  wherever it is: ``/work``, ``/home``, or each entry of ``/tmp``) into ``/sw``, brings up ``lo``, and
  runs the steps one by one.

Both images are ext4 file systems made without mounting anything (``mkfs.ext4 -d DIR``) and cached in
``$PROBECTL_GUEST_CACHE`` (default ``/var/cache/probectl/guest``): the software image under a hash of
the contents of everything it holds, the kernel image under the kernel directory's path, size and time.
Each step's stdout and stderr go back base64-encoded on the second serial port, framed by ``@@`` lines
(see GUEST_INIT), so neither binary output nor kernel messages can break the framing.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence, Union

from vmtest.busybox_guest import (AARCH64_GUEST, INIT_MOUNTS, X86_64_GUEST, Cpio, FramedReport, GuestError, GuestMachine,
                                  _fetched_dir, _newest_dir, _read, guest_busybox, missing_requirements)

ROOT = Path(__file__).resolve().parent.parent
GUEST_CACHE = Path(os.environ.get("PROBECTL_GUEST_CACHE", "/var/cache/probectl/guest"))
MKFS = "mkfs.ext4"
# The AArch64 guest's Python: Debian's arm64 packages unpacked by tools/python-arm64.sh, and the cross
# compiler of the native extension (apt gcc-aarch64-linux-gnu).
ARM64_PYTHON_CACHE = Path(os.environ.get("PROBECTL_ARM64_PYTHON_CACHE", "/var/cache/probectl/python-arm64"))
CROSS_CC = "aarch64-linux-gnu-gcc"
# Python's own flags for an extension (sysconfig's CFLAGS without the host's hardening extras), then setup.py's.
NATIVE_CFLAGS = ("-shared", "-fPIC", "-DNDEBUG", "-fwrapv", "-O2", "-std=gnu99", "-Wall", "-Wextra")

# The checkout's files the guest needs, relative to ROOT (fixtures/: the sources of the fixture
# programs, which line probes on them read).
CHECKOUT_PARTS = ("probectl", "grammar", "pyproject.toml", "fixtures")
# Parts of the standard library no probectl command imports; left out to keep the image small.
STDLIB_SKIP = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "pydoc_data",
               "config-3.11-x86_64-linux-gnu", "config-3.11-aarch64-linux-gnu"}
# probectl commands run here before the image is made, with the image's cache directory as
# XDG_CACHE_HOME, so the guest finds the kernel's indexes made (DWARF name index, kprobe rules): what
# takes seconds here takes minutes under TCG.  KERNEL stands for the kernel test-data directory.
WARM_COMMANDS = (("add", "-D", "-k", "KERNEL/vmlinux", "tcp_sendmsg size sk->__sk_common.skc_state"),
                 ("add", "-D", "-k", "KERNEL/vmlinux", "tcp_sendmsg sysctl_max_skb_frags"),
                 ("add", "-D", "-k", "KERNEL/vmlinux", "tcp_sendmsg_locked:96 copied size_goal"))
# Software images kept in the cache (the newest; each is about 500 MB).
KEEP_IMAGES = 3


@dataclass
class Step:
    """One step of the script: the shell text, its exit status and its output."""

    command: str
    status: int
    stdout: str
    stderr: str
    seconds: float  # as the guest's clock measured it (TCG time)

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass
class GuestRun:
    steps: list[Step]
    console: str  # the kernel console (first serial port)
    seconds: float = 0.0  # qemu start to exit
    boot_seconds: float = 0.0  # qemu start to the first step (as the guest's uptime said)
    images_seconds: float = 0.0  # building (or finding) the images
    files: dict[str, bytes] = field(default_factory=dict)  # ``fetch`` paths -> contents

    def transcript(self) -> str:
        """Every step's command, status, time and output, for people (and for docs with real output)."""
        parts = [f"images {self.images_seconds:.1f} s, boot {self.boot_seconds:.1f} s, qemu {self.seconds:.1f} s\n"]
        for s in self.steps:
            parts.append(f"# {s.command}   [exit {s.status}, {s.seconds:.1f} s]\n{s.stdout}")
            if s.stderr:
                parts.append(f"--- stderr\n{s.stderr}")
        return "".join(parts)

    def step(self, command_prefix: str) -> Step:
        """The first step whose command starts with ``command_prefix``."""
        for s in self.steps:
            if s.command.startswith(command_prefix):
                return s
        raise KeyError(command_prefix)


# --- the images ---------------------------------------------------------------------------------------

def _shared_libraries(paths: Sequence[Path]) -> set[Path]:
    """The shared libraries ``paths`` (executables and extension modules) load, as ldd finds them."""
    found: set[Path] = set()
    for path in paths:
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout
        for m in re.finditer(r"(/\S+\.so[.\d]*) \(0x", out):
            found.add(Path(m.group(1)))
    return found


def _software_layout(machine: GuestMachine) -> dict[str, Path]:
    """Image path (relative, host layout) -> host file or directory, for everything the guest runs:
    this machine's interpreter, or (AArch64) Debian's arm64 one, with the venv and the checkout."""
    venv = Path(sys.prefix)
    site = Path(sysconfig.get_paths()["purelib"])
    # At the host's paths, where the venv's pyvenv.cfg (its home) leads the interpreter to its stdlib.
    interpreter_name = os.path.realpath(sys.executable)[1:]
    stdlib_name = sysconfig.get_paths()["stdlib"][1:]
    if machine is X86_64_GUEST:
        interpreter, stdlib = Path("/", interpreter_name), Path("/", stdlib_name)
    else:
        root = arm64_python_root()
        interpreter, stdlib = root / "usr/bin/python3.11", root / "usr/lib/python3.11"
    layout: dict[str, Path] = {interpreter_name: interpreter}
    for child in sorted(stdlib.iterdir()):
        if child.name not in STDLIB_SKIP and child.name != "site-packages" and child.name != "dist-packages":
            layout[f"{stdlib_name}/{child.name}"] = child
    if machine is X86_64_GUEST:
        layout[str(site)[1:]] = site
    else:  # the pure-Python packages: this machine's native ones (duckdb, pyarrow, isal, mypy) cannot load there
        for child in sorted(site.iterdir()):
            if not _holds_native_code(child):
                layout[str(child)[1:]] = child
    layout[str(venv / "pyvenv.cfg")[1:]] = venv / "pyvenv.cfg"
    for part in CHECKOUT_PARTS:
        layout[str(ROOT / part)[1:]] = ROOT / part
    if machine is X86_64_GUEST:
        binaries = [interpreter] + [p for d in (stdlib / "lib-dynload", site, ROOT / "probectl")
                                    for p in d.rglob("*.so")]
        for lib in _shared_libraries(binaries):
            real = Path(os.path.realpath(lib))
            # Under the name the loader asks for (the soname), in /usr/lib/... (the image's /lib is a link).
            name = str(lib)[1:]
            name = "usr/" + name if name.startswith(("lib/", "lib64/")) else name
            layout[name] = real
    else:
        # The libraries of the packages tools/python-arm64.sh unpacked (merged /usr), and the extension
        # built for AArch64 beside this machine's (the interpreter looks for its own suffix only).
        layout["usr/lib/aarch64-linux-gnu"] = root / "usr/lib/aarch64-linux-gnu"
        layout["usr/lib/ld-linux-aarch64.so.1"] = root / "usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1"
        layout[str(ROOT / "probectl" / "_native.cpython-311-aarch64-linux-gnu.so")[1:]] = cross_native(root)
    return layout


def _holds_native_code(path: Path) -> bool:
    """Whether ``path`` (an entry of site-packages) is or holds a compiled extension or library."""
    if path.is_file():
        return path.suffix == ".so"
    return any(path.rglob("*.so"))


def find_arm64_python() -> Optional[Path]:
    """The root of Debian's arm64 Python unpacked by tools/python-arm64.sh ($PROBECTL_ARM64_PYTHON_DIR,
    else the newest complete one in the cache), or None."""
    found = _newest_dir("PROBECTL_ARM64_PYTHON_DIR", ARM64_PYTHON_CACHE, ("complete", "root/usr/bin/python3.11"))
    return found / "root" if found is not None else None


def fetch_arm64_python() -> Path:
    """Run tools/python-arm64.sh (downloads 14 MB of Debian's arm64 packages on first use): the root."""
    return _fetched_dir("python-arm64.sh") / "root"


def arm64_python_root() -> Path:
    root = find_arm64_python()
    if root is None:
        raise GuestError("no arm64 Python (run tools/python-arm64.sh)")
    return root


def cross_native(root: Path) -> Path:
    """probectl's native extension built for AArch64 by CROSS_CC against the arm64 Python's headers
    under ``root``; kept in the guest cache under a hash of its sources and the flags."""
    sources = sorted((ROOT / "native").glob("*.c"))
    h = hashlib.sha256(f"{CROSS_CC} {NATIVE_CFLAGS} {root}\n".encode())
    for f in sorted((ROOT / "native").glob("*.[ch]")):
        h.update(f.name.encode() + b"\0" + hashlib.sha256(f.read_bytes()).digest())
    built = GUEST_CACHE / "native" / f"_native-aarch64-{h.hexdigest()[:24]}.so"
    if built.is_file():
        return built
    built.parent.mkdir(parents=True, exist_ok=True)
    partial = built.with_name(f".{built.name}.{os.getpid()}")
    try:
        done = subprocess.run([CROSS_CC, *NATIVE_CFLAGS, f"-I{ROOT / 'native'}", f"-I{root / 'usr/include/python3.11'}",
                               f"-I{root / 'usr/include'}", *map(str, sources), "-o", str(partial)],
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise GuestError(f"{CROSS_CC} could not build the native extension:\n{done.stderr[-3000:]}")
        os.replace(partial, built)
    finally:
        partial.unlink(missing_ok=True)
    return built


def _tree_digest(layout: dict[str, Path], kernel_release: str, machine: GuestMachine) -> str:
    """A hash of everything in ``layout``: the contents of this checkout's files (``__pycache__``
    excepted: made from the rest), the sizes and times of the others'."""
    h = hashlib.sha256(f"layout 1 {kernel_release} {machine.name} {WARM_COMMANDS}\n".encode())
    h.update(Path(__file__).read_bytes())
    for name, host in sorted(layout.items()):
        files = [host] if host.is_file() else sorted(p for p in host.rglob("*")
                                                    if p.is_file() and "__pycache__" not in p.parts)
        for f in files:
            h.update(f"{name}/{f.relative_to(host) if f != host else ''}\0".encode())
            if ROOT in f.parents:  # this checkout: its contents
                h.update(hashlib.sha256(f.read_bytes()).digest())
            else:  # the interpreter, libraries and venv (300 MB): their sizes and times
                st = f.stat()
                h.update(f"{st.st_size} {st.st_mtime_ns}\0".encode())
    return h.hexdigest()[:24]


def kernel_release(kernel_dir: Path) -> str:
    """The kernel's release string (the directory is named after it by tools/kernel-testdata.sh)."""
    return kernel_dir.name


def _make_ext4(staging: Path, image: Path, label: str) -> None:
    """An ext4 image of ``staging`` (written next to ``image`` and renamed: others may build it too)."""
    size = sum(p.lstat().st_size for p in staging.rglob("*")) + (64 << 20)
    size = int(size * 1.15) // (1 << 20) + 1
    partial = image.with_name(f".{image.name}.{os.getpid()}")
    try:
        subprocess.run([MKFS, "-q", "-F", "-L", label, "-E", "root_owner=0:0", "-d", str(staging),
                        str(partial), f"{size}M"], check=True, capture_output=True, timeout=1200)
        os.replace(partial, image)
    finally:
        partial.unlink(missing_ok=True)


def _link_or_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True, copy_function=_link_file,
                        ignore=shutil.ignore_patterns(*STDLIB_SKIP))
    else:
        _link_file(src, dst)


def _link_file(src, dst) -> None:
    if os.path.lexists(dst):
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def software_image(kernel_dir: Path, machine: GuestMachine = X86_64_GUEST) -> Path:
    """The software image for this checkout, kernel and machine: built when its contents changed."""
    layout = _software_layout(machine)
    release = kernel_release(kernel_dir)
    image = GUEST_CACHE / f"software-{_tree_digest(layout, release, machine)}.ext4"
    if image.is_file():
        os.utime(image)  # (newest used: kept by _prune_software_images)
        return image
    GUEST_CACHE.mkdir(parents=True, exist_ok=True)
    # Bytecode made here (the guest's file system is read-only; compiling there takes long).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "probectl")], check=False,
                   capture_output=True)
    with tempfile.TemporaryDirectory(prefix="probectl-guest-", dir=GUEST_CACHE) as tmp:
        staging = Path(tmp) / "root"
        for name, host in layout.items():
            if not (staging / name).exists():  # a library inside site-packages is there already
                _link_or_copy(host, staging / name)
        for name, target in (("lib", "usr/lib"), ("lib64", "usr/lib64"), ("bin", "usr/bin")):
            (staging / name).symlink_to(target)
        venv_bin = staging / str(Path(sys.prefix) / "bin")[1:]
        venv_bin.mkdir(parents=True, exist_ok=True)
        (venv_bin / "python").symlink_to(os.path.realpath(sys.executable))
        debug = staging / "usr/lib/debug/boot"
        debug.mkdir(parents=True, exist_ok=True)
        (debug / f"vmlinux-{release}").symlink_to("/kernel/vmlinux")
        cache = staging / "probectl-cache"
        cache.mkdir(mode=0o700)
        _warm_cache(cache, kernel_dir)
        _make_ext4(staging, image, "probectl-sw")
    _prune_software_images(keep=image)
    return image


def _prune_software_images(keep: Path) -> None:
    """Remove all but the KEEP_IMAGES newest software images (other checkouts' too: they rebuild)."""
    images = sorted(GUEST_CACHE.glob("software-*.ext4"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in [p for p in images if p != keep][KEEP_IMAGES - 1:]:
        old.unlink(missing_ok=True)


def _warm_cache(cache: Path, kernel_dir: Path) -> None:
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), PYTHONPATH=str(ROOT))
    for command in WARM_COMMANDS:
        args = [a.replace("KERNEL/", f"{kernel_dir}/") for a in command]
        subprocess.run([sys.executable, "-m", "probectl", *args], env=env, capture_output=True, timeout=600)


def kernel_image(kernel_dir: Path) -> Path:
    """The kernel directory (vmlinux with DWARF, modules/) as an image: built once per kernel."""
    vmlinux = kernel_dir / "vmlinux"
    st = vmlinux.stat()
    key = hashlib.sha256(f"{kernel_dir.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:24]
    image = GUEST_CACHE / f"kernel-{kernel_release(kernel_dir)}-{key}.ext4"
    if image.is_file():
        return image
    GUEST_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="probectl-guest-", dir=GUEST_CACHE) as tmp:
        staging = Path(tmp) / "root"
        staging.mkdir()
        for child in kernel_dir.iterdir():
            if child.name != "tmp":
                _link_or_copy(child, staging / child.name)
        _make_ext4(staging, image, "probectl-kernel")
    return image


def missing_guest_requirements(kernel_dir: Optional[Path], machine: GuestMachine = X86_64_GUEST) -> list[str]:
    """What this machine lacks for run_probectl_in_guest, as readable reasons (empty when all is there)."""
    reasons = missing_requirements(kernel_dir, machine)
    if not shutil.which(MKFS):
        reasons.append(f"{MKFS} is not installed (apt e2fsprogs)")
    if machine is AARCH64_GUEST:
        if find_arm64_python() is None:
            reasons.append("no arm64 Python (run tools/python-arm64.sh)")
        if not shutil.which(CROSS_CC):
            reasons.append(f"{CROSS_CC} is not installed (apt gcc-aarch64-linux-gnu)")
    if kernel_dir is not None and not (kernel_dir / "vmlinux").is_file():
        reasons.append(f"no vmlinux in {kernel_dir}")
    return reasons


# --- the guest ----------------------------------------------------------------------------------------

# The longest step of the guest tests takes well under a minute under TCG.
STEP_SECONDS = 300

# Steps are files /steps/NNN; each one's output is sent as
#   @@step N STATUS START END (the guest's uptime) / base64 of stdout / @@stderr / base64 of stderr / @@end
# after "@@begin UPTIME"; then, for each file asked for, @@file PATH / base64 / @@end, and finally @@done.
GUEST_INIT = INIT_MOUNTS + r"""mount -t tmpfs -o mode=1777 tmpfs /tmp
exec 3>/dev/@RESULTS_TTY@
mkdir -p /sw /kernel
n=0
while [ ! -b /dev/nvme0n2 ] && [ $n -lt 600 ]; do usleep 100000; n=$((n+1)); done
mount -t ext4 -o ro /dev/nvme0n1 /sw || { echo '@@fail mount software image' >&3; exec poweroff -f; }
mount -t ext4 -o ro /dev/nvme0n2 /kernel || { echo '@@fail mount kernel image' >&3; exec poweroff -f; }
ln -s /sw/usr /usr
ln -s /sw/usr/lib /lib
ln -s /sw/usr/lib64 /lib64
# The checkout and its venv where they are on the host (/work/..., /home/..., /tmp/...): the image's
# other top directories, and under /tmp (the guest's own tmpfs) each of the image's entries there.
for d in /sw/*; do [ -e "/${d##*/}" ] || [ -L "/${d##*/}" ] || ln -s "$d" "/${d##*/}"; done
if [ -d /sw/tmp ]; then for d in /sw/tmp/*; do ln -s "$d" "/tmp/${d##*/}"; done; fi
ip link set lo up
mkdir -p /root /tmp/cache
cp -a /sw/probectl-cache /tmp/cache/probectl
export HOME=/root XDG_CACHE_HOME=/tmp/cache PYTHONDONTWRITEBYTECODE=1 PATH=/guest/bin:/bin
echo "@@begin $(cut -d' ' -f1 /proc/uptime)" >&3
cd /tmp
for step in /steps/*; do
    n=${step##*/}
    t0=$(cut -d' ' -f1 /proc/uptime)
    # A step that hangs is killed after STEP_SECONDS (the guest's steps take seconds even under TCG):
    # the run goes on with the next step and the hung one says what was running, instead of the
    # whole boot waiting for the host's timeout with nothing to show.
    timeout -s KILL @STEP_SECONDS@ sh "$step" > /tmp/.out 2> /tmp/.err < /dev/null
    status=$?
    if [ $status -eq 137 ]; then
        { echo "@@ step killed after @STEP_SECONDS@ s; the processes then:"; ps; } >> /tmp/.err
    fi
    t1=$(cut -d' ' -f1 /proc/uptime)
    echo "@@step $n $status $t0 $t1" >&3
    base64 /tmp/.out >&3
    echo '@@stderr' >&3
    base64 /tmp/.err >&3
    echo '@@end' >&3
done
while IFS= read -r f; do
    echo "@@file $f" >&3
    [ -f "$f" ] && base64 "$f" >&3
    echo '@@end' >&3
done < /guest/fetch
echo '@@done' >&3
exec poweroff -f
"""


def guest_wrapper() -> str:
    """/guest/bin/probectl: this checkout's package on the venv's interpreter."""
    return ("#!/bin/sh\n"
            f"PYTHONPATH={ROOT} exec {Path(sys.prefix) / 'bin' / 'python'} -m probectl \"$@\"\n")


def build_guest_initramfs(path: Path, steps: Sequence[str], fetch: Sequence[str], busybox: Path,
                          files: dict[str, bytes], results_tty: str = X86_64_GUEST.results_tty) -> None:
    archive = Cpio()
    for d in ("bin", "dev", "proc", "sys", "tmp", "steps", "guest", "guest/bin", "guest/files"):
        archive.directory(d)
    archive.char_device("dev/console", 5, 1)
    archive.file("bin/busybox", busybox.read_bytes(), 0o755)
    archive.symlink("bin/sh", "busybox")
    init = GUEST_INIT.replace("@STEP_SECONDS@", str(STEP_SECONDS)).replace("@RESULTS_TTY@", results_tty)
    archive.file("init", init.encode(), 0o755)
    archive.file("guest/bin/probectl", guest_wrapper().encode(), 0o755)
    archive.file("guest/fetch", "".join(f + "\n" for f in fetch).encode())
    for name, data in files.items():
        archive.file(f"guest/files/{name}", data, 0o755)
    for i, text in enumerate(steps):
        archive.file(f"steps/{i + 1:03d}", text.encode(), 0o755)
    path.write_bytes(archive.finish())


# What the guest kernel prints when a CPU has spun in the kernel for over 20 s. Under TCG on a loaded
# host this happened twice in ~20 boots, each time as a kprobe was being armed (add, record -g): one
# vCPU waits for the other, which TCG does not run, and the guest never recovers (the step's own kill
# cannot run either). The boot is then stopped at once and made again, once, with a warning: a real
# kernel under KVM does not starve a CPU like that, and a second stall fails the test.
STALL = "watchdog: BUG: soft lockup"


class GuestStall(GuestError):
    """The guest kernel reported a soft lockup (STALL)."""


def run_probectl_in_guest(kernel_dir: Union[str, Path], steps: Sequence[str], **kw) -> GuestRun:
    """:func:`boot_probectl_guest`, made again once if the guest stalls (see STALL)."""
    try:
        return boot_probectl_guest(kernel_dir, steps, **kw)
    except GuestStall as stall:
        import warnings

        warnings.warn(f"the guest stalled under TCG and was booted again: {stall}")
        return boot_probectl_guest(kernel_dir, steps, **kw)


def boot_probectl_guest(kernel_dir: Union[str, Path], steps: Sequence[str], *, timeout: float = 1800.0,
                        memory: str = "1536M", cpus: int = 2, fetch: Sequence[str] = (),
                        files: Optional[dict[str, bytes]] = None, kernel_args: str = "",
                        machine: GuestMachine = X86_64_GUEST) -> GuestRun:
    """Boot ``kernel_dir/vmlinuz`` with probectl on board and run ``steps`` (shell text) one by one.

    Steps run as root in /tmp (a tmpfs kept between steps) with ``probectl`` on the PATH and busybox for
    everything else (``nc``, ``insmod``, ``cat`` ...); ``/kernel`` is the kernel directory (``vmlinux``,
    ``modules/loadable/*.ko``).  ``files`` (name -> bytes) are put in ``/guest/files``; ``fetch`` names
    guest files sent back in ``GuestRun.files`` after the last step.  A step's output and exit status
    are in ``GuestRun.steps``, in order.  ``machine``: X86_64_GUEST, or AARCH64_GUEST (Debian's arm64
    kernel in qemu-system-aarch64, probectl on Debian's arm64 Python).  Raises GuestError when the guest does not report back within
    ``timeout`` seconds or stops before the last step.
    """
    kernel_dir = Path(kernel_dir)
    busybox = guest_busybox(machine, kernel_dir)
    lacking = missing_guest_requirements(kernel_dir, machine)
    if busybox is None or lacking:
        raise GuestError("; ".join(lacking))
    start = time.monotonic()
    software, kernel = software_image(kernel_dir, machine), kernel_image(kernel_dir)
    images_seconds = time.monotonic() - start
    with tempfile.TemporaryDirectory(prefix="probectl-qemu-") as tmp:
        tmpdir = Path(tmp)
        initrd, console_file, results_file = tmpdir / "initrd.cpio", tmpdir / "console", tmpdir / "results"
        build_guest_initramfs(initrd, steps, fetch, busybox, files or {}, machine.results_tty)
        cmd = [machine.qemu, *machine.machine_args, "-kernel", str(kernel_dir / "vmlinuz"), "-initrd", str(initrd),
               "-append", f"{machine.kernel_args} {kernel_args}".strip(),
               "-m", memory, "-smp", str(cpus), "-no-reboot", "-nodefaults", "-no-user-config",
               "-display", "none", "-monitor", "none",
               "-drive", f"file={software},if=none,id=sw,format=raw,readonly=on",
               "-drive", f"file={kernel},if=none,id=kernel,format=raw,readonly=on",
               "-device", "nvme,id=nvme0,serial=probectl",
               "-device", "nvme-ns,drive=sw,bus=nvme0,nsid=1",
               "-device", "nvme-ns,drive=kernel,bus=nvme0,nsid=2",
               *machine.serial_args(console_file, results_file)]
        qemu_start = time.monotonic()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        try:
            while proc.poll() is None:
                if time.monotonic() - qemu_start > timeout:
                    raise GuestError(f"the guest did not power off within {timeout:g} s; steps reported:\n"
                                     + _read(results_file)[-3000:], _read(console_file))
                if STALL in _read(console_file):
                    raise GuestStall(f"soft lockup after {time.monotonic() - qemu_start:.0f} s; steps reported:\n"
                                     + _read(results_file)[-1500:], _read(console_file))
                time.sleep(1)
        finally:
            if proc.poll() is None:
                proc.kill()
            _out, qemu_err = proc.communicate()
        seconds = time.monotonic() - qemu_start
        console, results = _read(console_file), _read(results_file)
    if "@@done" not in results:
        raise GuestError(f"the guest stopped before reporting back (qemu exit {proc.returncode}"
                         f"{': ' + qemu_err.strip() if qemu_err.strip() else ''})\n"
                         + results[-3000:], console)
    run = parse_guest_results(results, steps)
    run.console, run.seconds, run.images_seconds = console, seconds, images_seconds
    return run


def run_named_steps(kernel_dir: Path, steps: dict[str, str], **kw) -> GuestRun:
    """run_probectl_in_guest over ``steps`` (name -> shell text), its times printed (pytest -s shows
    them) and, with PROBECTL_GUEST_TRANSCRIPT=FILE, every step's output written there to read or quote."""
    run = run_probectl_in_guest(kernel_dir, list(steps.values()), **kw)
    print(f"\nguest: images {run.images_seconds:.1f} s, boot {run.boot_seconds:.1f} s, qemu {run.seconds:.1f} s")
    for name, step in zip(steps, run.steps):
        print(f"  {name}: {step.seconds:.1f} s, exit {step.status}")
    if os.environ.get("PROBECTL_GUEST_TRANSCRIPT"):
        with open(os.environ["PROBECTL_GUEST_TRANSCRIPT"], "w") as f:
            f.write(run.transcript())
    assert len(run.steps) == len(steps)
    return run


def ok(step: Step) -> Step:
    """``step``, asserted to have exited 0 (the message has its command and output)."""
    assert step.status == 0, f"{step.command!r} exited {step.status}:\n{step.output}"
    return step

def parse_guest_results(text: str, steps: Sequence[str]) -> GuestRun:
    """Read the framed report of GUEST_INIT back into a GuestRun."""
    run = GuestRun(steps=[], console="")
    report = FramedReport(text)

    def until(marker: str) -> bytes:
        return base64.b64decode("".join(line.strip() for line in report.body(marker)))

    for words in report.headers():
        if words[0] == "@@begin":
            run.boot_seconds = float(words[1])
        elif words[0] == "@@fail":
            raise GuestError("the guest could not " + " ".join(words[1:]))
        elif words[0] == "@@step":
            index, status, t0, t1 = int(words[1]), int(words[2]), float(words[3]), float(words[4])
            out = until("@@stderr").decode(errors="replace")
            err = until("@@end").decode(errors="replace")
            run.steps.append(Step(steps[index - 1], status, out, err, t1 - t0))
        elif words[0] == "@@file":
            run.files[" ".join(words[1:])] = until("@@end")
    return run
