"""Boot a real kernel in qemu and try kprobe definitions on it.

The machine's own kernel has no kprobes, so kprobe definitions are tried live on Debian's cloud kernel
(``tools/kernel-testdata.sh``) booted in ``qemu-system-x86_64`` with software emulation.  The same init
boots Debian's arm64 cloud kernel (``tools/kernel-testdata-arm64.sh``) in ``qemu-system-aarch64 -M virt``
(``machine=AARCH64_GUEST``), where it writes uprobe definitions of AArch64 programs given as ``files``.
One boot runs a whole batch::

    result = run_in_guest(kernel_dir, ["p:probe/tcp_sendmsg tcp_sendmsg+0 size=%dx:x64"],
                          "printf '%0100d' 0 > /tmp/x; ...")
    result.accepted, result.errors, result.trace_lines, result.console

The guest is an initramfs written here (cpio ``newc``, no ``cpio`` tool needed) holding busybox-static
and an ``/init`` script.  The init mounts proc, sysfs, devtmpfs and tracefs, brings up ``lo``, writes each
definition to ``kprobe_events`` with a write of its own (a rejected one is followed by the kernel's
``error_log``), enables the events, runs the workload, stops tracing and prints the results, then powers
off.  Kernel messages go to the console on the first serial port; the results go to the second one, so
a kernel message can never land in the middle of a trace line.  Each section of the results is framed
by ``@@`` marker lines, which the parser here reads back.
"""
from __future__ import annotations

import os
import re
import shutil
import stat
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Optional, Sequence, Union

ROOT = Path(__file__).resolve().parent.parent
KERNEL_CACHE = Path(os.environ.get("PROBECTL_KERNEL_CACHE", "/var/cache/probectl/kernel"))
QEMU = "qemu-system-x86_64"

ARM64_KERNEL_CACHE = Path(os.environ.get("PROBECTL_ARM64_KERNEL_CACHE", "/var/cache/probectl/kernel-arm64"))

# Kernel command line: console on the first port, reboot (= qemu exits, -no-reboot) at once on a panic,
# and skip the calibrations that are slow under software emulation.
KERNEL_ARGS = (
    "console=ttyS0 panic=-1 oops=panic quiet loglevel=4 "
    "tsc=reliable no_timer_check mitigations=off random.trust_cpu=on "
    "8250.nr_uarts=2 rdinit=/init"
)


@dataclass(frozen=True)
class GuestMachine:
    """How qemu boots a guest of one machine: the emulator (and its Debian package), its machine
    options, the kernel command line, and where the report goes: the guest's tty ``results_tty``,
    wired by ``serial_args(console_file, results_file)`` to a file on the host."""

    name: str
    qemu: str
    package: str
    machine_args: tuple[str, ...]
    kernel_args: str
    results_tty: str

    def serial_args(self, console_file: Path, results_file: Path) -> list[str]:
        if self.results_tty == "ttyS1":  # two 16550s on the PC: the console, then the report
            return ["-serial", f"file:{console_file}", "-serial", f"file:{results_file}"]
        # virt has one PL011 (ttyAMA0, the console); the report goes to a PCI 16550 (ttyS0)
        return ["-serial", f"file:{console_file}", "-chardev", f"file,id=results,path={results_file}",
                "-device", "pci-serial,chardev=results"]


X86_64_GUEST = GuestMachine("x86-64", QEMU, "qemu-system-x86", (), KERNEL_ARGS, "ttyS1")
# -cpu max: every feature TCG emulates (the cloud kernel needs none beyond ARMv8.0; max boots as fast).
AARCH64_GUEST = GuestMachine(
    "AArch64", "qemu-system-aarch64", "qemu-system-arm", ("-M", "virt", "-cpu", "max"),
    "console=ttyAMA0 panic=-1 oops=panic quiet loglevel=4 mitigations=off random.trust_cpu=on rdinit=/init",
    "ttyS0")

EnableSpec = Union[None, Sequence[str], Mapping[str, Optional[str]]]


class GuestError(Exception):
    """The guest did not boot, did not finish in time, or its output could not be read."""

    def __init__(self, message: str, console: str = ""):
        tail = "\n".join(console.splitlines()[-40:])
        super().__init__(f"{message}\n--- guest console (last lines) ---\n{tail}" if tail else message)
        self.console = console


@dataclass
class TraceEvent:
    """One line of the guest's ``trace`` file, split into its columns."""

    comm: str
    pid: int
    cpu: int
    timestamp: float
    event: str
    place: str  # "tcp_sendmsg+0x0/0x50", or "inet_sendmsg+0x45/0x70 <- tcp_sendmsg" for a return probe
    args: dict[str, str]

    def int_arg(self, name: str) -> int:
        return int(self.args[name], 0)


@dataclass
class GuestResult:
    accepted: list[str]  # definitions the kernel took, as written
    errors: list[str]  # the kernel's error_log text, one entry per rejected definition
    trace_lines: list[str]  # the trace file's event lines (its '#' header dropped)
    console: str  # everything the kernel and init printed on the console
    rejected: list[str] = field(default_factory=list)  # definitions refused, in the order of ``errors``
    kprobe_events: list[str] = field(default_factory=list)  # the kernel's listing after the writes
    enable_errors: list[str] = field(default_factory=list)  # "group/event: why" (+ error_log) per failure
    loaded: list[str] = field(default_factory=list)  # the modules insmod loaded (file names)
    load_errors: list[str] = field(default_factory=list)  # "module.ko: insmod's message" per failure
    workload_status: int = 0
    workload_output: str = ""
    seconds: float = 0.0  # qemu start to exit
    trigger_errors: list[str] = field(default_factory=list)  # "FILE: TEXT" + the error_log, per refusal
    hists: dict[str, str] = field(default_factory=dict)  # events/G/E/hist path -> its text after the workload

    def events(self, name: Optional[str] = None) -> list[TraceEvent]:
        """The trace as TraceEvent objects, optionally only those of event ``name``."""
        parsed = [parse_trace_line(line) for line in self.trace_lines]
        return [e for e in parsed if name is None or e.event == name]


_TRACE_LINE = re.compile(
    r"^\s*(?P<comm>.*?)-(?P<pid>\d+)\s+(?:\(\s*[-\d]+\)\s+)?\[(?P<cpu>\d+)\]\s+(?:\S+\s+)?"
    r"(?P<ts>\d+\.\d+):\s+(?P<event>[^:\s]+):\s+(?P<rest>.*)$"
)
_ARG = re.compile(r'(?P<name>[\w.]+)=(?P<value>"(?:[^"\\]|\\.)*"|\S*)')


def parse_trace_line(line: str) -> TraceEvent:
    m = _TRACE_LINE.match(line)
    if not m:
        raise ValueError(f"not a trace event line: {line!r}")
    rest = m["rest"]
    place = ""
    if rest.startswith("("):
        close = rest.find(")")
        place, rest = rest[1:close], rest[close + 1:]
    args = {a["name"]: a["value"] for a in _ARG.finditer(rest)}
    return TraceEvent(m["comm"], int(m["pid"]), int(m["cpu"]), float(m["ts"]), m["event"], place, args)


# --- finding the tools and the kernel ---------------------------------------------------------------

def _newest_dir(env: str, cache: Path, needed: tuple[str, ...]) -> Optional[Path]:
    """$ENV, else the newest directory of ``cache``, if it holds the ``needed`` files."""
    given = os.environ.get(env)
    if given:
        candidates = [Path(given)]
    else:
        candidates = sorted(cache.glob("*"), reverse=True) if cache.is_dir() else []
    for d in candidates:
        if all((d / name).is_file() for name in needed):
            return d
    return None


def _fetched_dir(script: str) -> Path:
    """Run tools/SCRIPT (it downloads on first use) and return the directory it prints."""
    out = subprocess.run([str(ROOT / "tools" / script)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def find_kernel_dir() -> Optional[Path]:
    """The kernel test data directory: $PROBECTL_KERNEL_DIR, else the newest complete one in the cache."""
    return _newest_dir("PROBECTL_KERNEL_DIR", KERNEL_CACHE, ("vmlinuz", "vmlinux"))


def fetch_kernel_dir() -> Path:
    """Run tools/kernel-testdata.sh (downloads on first use, ~1 GB of packages) and return its directory."""
    return _fetched_dir("kernel-testdata.sh")


def find_arm64_kernel_dir() -> Optional[Path]:
    """The AArch64 guest's kernel and busybox (tools/kernel-testdata-arm64.sh): $PROBECTL_ARM64_KERNEL_DIR,
    else the newest complete one in the cache."""
    return _newest_dir("PROBECTL_ARM64_KERNEL_DIR", ARM64_KERNEL_CACHE, ("vmlinuz", "busybox"))


def fetch_arm64_kernel_dir() -> Path:
    """Run tools/kernel-testdata-arm64.sh (downloads ~22 MB of Debian's arm64 packages on first use)."""
    return _fetched_dir("kernel-testdata-arm64.sh")


def guest_busybox(machine: "GuestMachine", kernel_dir: Optional[Path]) -> Optional[Path]:
    """The statically linked busybox the guest runs: this machine's, or the arm64 one beside the
    arm64 kernel."""
    if machine is X86_64_GUEST:
        return find_busybox()
    found = kernel_dir / "busybox" if kernel_dir is not None else None
    return found if found is not None and found.is_file() else None


def find_busybox() -> Optional[Path]:
    """A statically linked busybox (Debian's busybox-static), or None."""
    for cand in (os.environ.get("PROBECTL_BUSYBOX"), "/bin/busybox", shutil.which("busybox")):
        if cand and Path(cand).is_file() and _is_static_elf(Path(cand)):
            return Path(cand)
    return None


def _is_static_elf(path: Path) -> bool:
    """True for a 64-bit little-endian ELF without a PT_INTERP (no dynamic loader needed)."""
    with open(path, "rb") as f:
        ehdr = f.read(64)
        if len(ehdr) < 64 or ehdr[:4] != b"\x7fELF" or ehdr[4] != 2 or ehdr[5] != 1:
            return False
        phoff, = struct.unpack_from("<Q", ehdr, 32)
        phentsize, phnum = struct.unpack_from("<HH", ehdr, 54)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != 3 for i in range(phnum))  # 3 = PT_INTERP


def missing_requirements(kernel_dir: Optional[Path], machine: "GuestMachine" = X86_64_GUEST) -> list[str]:
    """What this machine lacks for run_in_guest, as readable reasons (empty when all is there)."""
    reasons = []
    script = "tools/kernel-testdata.sh" if machine is X86_64_GUEST else "tools/kernel-testdata-arm64.sh"
    if not shutil.which(machine.qemu):
        reasons.append(f"{machine.qemu} is not installed (apt {machine.package})")
    if guest_busybox(machine, kernel_dir) is None:
        reasons.append("no statically linked busybox (apt busybox-static)" if machine is X86_64_GUEST
                       else f"no arm64 busybox (run {script})")
    if kernel_dir is None:
        reasons.append(f"no kernel test data (run {script})")
    elif not (kernel_dir / "vmlinuz").is_file():
        reasons.append(f"no bootable vmlinuz in {kernel_dir}")
    return reasons


# --- the initramfs ------------------------------------------------------------------------------------

class Cpio:
    """A cpio archive in the kernel's initramfs format ("newc", SVR4 without CRC)."""

    def __init__(self):
        self._out = bytearray()
        self._ino = 1

    def _entry(self, name: str, mode: int, data: bytes = b"", rdev: tuple[int, int] = (0, 0)) -> None:
        encoded = name.encode() + b"\0"
        fields = (self._ino, mode, 0, 0, 2 if stat.S_ISDIR(mode) else 1, 0, len(data),
                  0, 0, rdev[0], rdev[1], len(encoded), 0)
        self._ino += 1
        self._out += b"070701" + b"".join(b"%08X" % v for v in fields) + encoded
        self._pad()
        self._out += data
        self._pad()

    def _pad(self) -> None:
        self._out += b"\0" * (-len(self._out) % 4)

    def directory(self, name: str) -> None:
        self._entry(name, stat.S_IFDIR | 0o755)

    def file(self, name: str, data: bytes, perm: int = 0o644) -> None:
        self._entry(name, stat.S_IFREG | perm, data)

    def symlink(self, name: str, target: str) -> None:
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def char_device(self, name: str, major: int, minor: int, perm: int = 0o600) -> None:
        self._entry(name, stat.S_IFCHR | perm, rdev=(major, minor))

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        self._out += b"\0" * (-len(self._out) % 512)
        return bytes(self._out)


# How every init here starts (this one's and probectl_guest's): busybox's applets, the kernel's file systems.
INIT_MOUNTS = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tracefs tracefs /sys/kernel/tracing
"""

# The init script.  Inputs are files next to it, read with `read -r` so that nothing in a definition,
# filter or workload is ever interpreted by this shell.  Output markers on fd 3 (the results port):
#   @@insmod N ok | @@insmod N fail, then insmod's message up to @@end (modules, in order)
#   @@def N ok | @@def N fail, then the error_log up to @@end
#   @@enable EVENT, then why it could not be enabled (and the error_log) up to @@end
#   @@trigger N fail, then the error_log up to @@end (triggers: "FILE<TAB>TEXT" lines appended in order)
#   @@kprobe_events / @@trace / @@workload STATUS ... @@end, @@hist FILE ... @@end, and finally @@done
INIT = INIT_MOUNTS + r"""exec 3>"/dev/$(cat /probe/results-tty)"
ip link set lo up
T=/sys/kernel/tracing
EVENTS=$(cat /probe/events-file)
cd $T
: > error_log
echo '@@begin' >&3
n=0
for ko in /probe/modules/*.ko; do
    [ -e "$ko" ] || continue
    n=$((n+1))
    if insmod "$ko" 2>/tmp/insmod.err; then
        echo "@@insmod $n ok" >&3
    else
        echo "@@insmod $n fail" >&3; cat /tmp/insmod.err >&3; echo '@@end' >&3
    fi
done
n=0
while IFS= read -r def; do
    n=$((n+1))
    if printf '%s\n' "$def" >> "$EVENTS" 2>/dev/null; then
        echo "@@def $n ok" >&3
    else
        echo "@@def $n fail" >&3
        cat error_log >&3
        echo '@@end' >&3
        : > error_log
    fi
done < /probe/definitions
if [ -e /probe/enable-all ]; then
    sed -n 's/^[a-z][0-9]*:\([^ ]*\) .*/\1/p' "$EVENTS" > /tmp/enable
else
    cp /probe/enable /tmp/enable
fi
while read -r ev filter; do
    if [ ! -d "events/$ev" ]; then
        echo "@@enable $ev" >&3; echo 'no such event' >&3; echo '@@end' >&3
    elif [ -n "$filter" ] && ! printf '%s\n' "$filter" > "events/$ev/filter" 2>/dev/null; then
        echo "@@enable $ev" >&3; echo 'filter rejected' >&3; cat error_log >&3; echo '@@end' >&3
        : > error_log
    elif ! echo 1 > "events/$ev/enable" 2>/dev/null; then
        echo "@@enable $ev" >&3; echo 'cannot enable' >&3; echo '@@end' >&3
    fi
done < /tmp/enable
while read -r name; do
    mkdir "instances/$name"
done < /probe/instances
n=0
while IFS="$(printf '\t')" read -r file text; do
    n=$((n+1))
    if ! printf '%s\n' "$text" >> "$file" 2>/dev/null; then
        echo "@@trigger $n fail" >&3; cat error_log >&3; echo '@@end' >&3
        : > error_log
    fi
done < /probe/triggers
echo '@@kprobe_events' >&3
cat "$EVENTS" >&3
echo '@@end' >&3
: > trace
echo 1 > tracing_on
cd /tmp
sh /probe/workload > /tmp/workload.out 2>&1 < /dev/null
status=$?
echo 0 > $T/tracing_on
echo '@@trace' >&3
grep -v '^#' $T/trace >&3
echo '@@end' >&3
echo "@@workload $status" >&3
cat /tmp/workload.out >&3
echo '@@end' >&3
while read -r file; do
    echo "@@hist $file" >&3; cat "$T/$file" >&3; echo '@@end' >&3
done < /probe/hists
echo '@@done' >&3
exec poweroff -f
"""


def build_initramfs(path: Path, definitions: Sequence[str], workload: str, enable: EnableSpec,
                    busybox: Path, modules: Sequence[Path] = (), triggers: Sequence[tuple[str, str]] = (),
                    hists: Sequence[str] = (), instances: Sequence[str] = (),
                    files: Mapping[str, bytes] = {}, results_tty: str = "ttyS1",
                    events_file: str = "kprobe_events") -> None:
    for d in definitions:
        if "\n" in d:
            raise ValueError(f"a definition is one line: {d!r}")
    if isinstance(enable, Mapping):
        items = list(enable.items())
    else:
        items = [(name, None) for name in (enable or ())]
    for name, flt in items:
        if not name or any(c.isspace() for c in name) or "\n" in (flt or ""):
            raise ValueError(f"cannot enable {name!r} with filter {flt!r}")
    enable_text = "".join(f"{name} {flt or ''}\n" for name, flt in items)
    archive = Cpio()
    for d in ("bin", "dev", "proc", "sys", "tmp", "probe"):
        archive.directory(d)
    archive.char_device("dev/console", 5, 1)
    archive.file("bin/busybox", busybox.read_bytes(), 0o755)
    archive.symlink("bin/sh", "busybox")
    archive.file("init", INIT.encode(), 0o755)
    archive.file("probe/results-tty", results_tty.encode())
    archive.file("probe/events-file", events_file.encode())
    made = {"bin", "dev", "proc", "sys", "tmp", "probe"}
    for name, data in sorted(files.items()):  # programs and their libraries, at their absolute paths
        parts = Path(name).relative_to("/").parts
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent not in made:
                archive.directory(parent)
                made.add(parent)
        archive.file("/".join(parts), data, 0o755)
    archive.file("probe/definitions", "".join(d + "\n" for d in definitions).encode())
    archive.file("probe/enable", enable_text.encode())
    if enable is None:
        archive.file("probe/enable-all", b"")
    archive.file("probe/workload", workload.encode(), 0o755)
    for file, text in triggers:
        if "\t" in file or "\n" in file + text:
            raise ValueError(f"a trigger is one line: {file!r} {text!r}")
    archive.file("probe/triggers", "".join(f"{f}\t{t}\n" for f, t in triggers).encode())
    archive.file("probe/hists", "".join(f + "\n" for f in hists).encode())
    if any(not n or "/" in n or n.startswith(".") or any(c.isspace() for c in n) for n in instances):
        raise ValueError(f"bad instance names {instances!r}")
    archive.file("probe/instances", "".join(n + "\n" for n in instances).encode())
    archive.directory("probe/modules")
    for i, module in enumerate(modules):  # numbered: insmod takes them in this order (dependencies first)
        archive.file(f"probe/modules/{i:02d}-{module.name}", module.read_bytes())
    path.write_bytes(archive.finish())


# --- running and reading back ------------------------------------------------------------------------

def run_in_guest(kernel_dir: Union[str, Path], definitions: Sequence[str], workload: str, *,
                 enable: EnableSpec = None, timeout: float = 180.0, memory: str = "512M",
                 kernel_args: str = "", modules: Sequence[Path] = (), triggers: Sequence[tuple[str, str]] = (),
                 hists: Sequence[str] = (), instances: Sequence[str] = (), machine: GuestMachine = X86_64_GUEST,
                 files: Mapping[str, bytes] = {}, events_file: str = "kprobe_events") -> GuestResult:
    """Boot ``kernel_dir/vmlinuz``, write ``definitions`` to kprobe_events, trace ``workload``, power off.

    ``enable``: None enables every kprobe event the kernel lists after the writes; a sequence of
    "group/event" names enables just those; a mapping "group/event" -> filter also sets each filter
    (None or "" for none); an empty sequence enables nothing.  ``workload`` is shell text run by busybox
    sh in /tmp with stdin /dev/null.  ``kernel_args`` are appended to KERNEL_ARGS (e.g. "loglevel=7").
    ``modules`` (loadable .ko files, dependencies first) are insmod'ed before the definitions are written.
    ``triggers`` are (file under tracefs, text) lines appended after the enables (synthetic_events, a
    trigger file), and the ``hists`` files (``events/G/E/hist``) are read after the workload;
    ``instances`` are created (``instances/NAME``) before the triggers are written.
    ``machine``: the guest's machine (X86_64_GUEST, AARCH64_GUEST). ``files``: absolute path -> contents
    of more files of the guest (programs to probe, their libraries); ``events_file``: where the
    definitions are written (``dynamic_events`` takes uprobes and kprobes; an event listed there is
    enabled by ``enable=None`` too).
    Raises GuestError when the guest does not report back within ``timeout`` seconds.
    """
    kernel = Path(kernel_dir) / "vmlinuz"
    busybox = guest_busybox(machine, Path(kernel_dir))
    if busybox is None:
        raise GuestError("; ".join(missing_requirements(Path(kernel_dir), machine)))
    with tempfile.TemporaryDirectory(prefix="probectl-qemu-") as tmp:
        tmpdir = Path(tmp)
        initrd, console_file, results_file = tmpdir / "initrd.cpio", tmpdir / "console", tmpdir / "results"
        build_initramfs(initrd, definitions, workload, enable, busybox, modules, triggers, hists, instances,
                        files, machine.results_tty, events_file)
        cmd = [machine.qemu, *machine.machine_args, "-kernel", str(kernel), "-initrd", str(initrd),
               "-append", f"{machine.kernel_args} {kernel_args}".strip(),
               "-m", memory, "-smp", "1", "-no-reboot", "-nodefaults", "-no-user-config",
               "-display", "none", "-monitor", "none", *machine.serial_args(console_file, results_file)]
        start = time.monotonic()
        try:
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise GuestError(f"the guest did not power off within {timeout:g} s", _read(console_file))
        seconds = time.monotonic() - start
        console, results = _read(console_file), _read(results_file)
    if "@@done" not in results:
        raise GuestError(f"the guest stopped before reporting back (qemu exit {proc.returncode}"
                         f"{': ' + proc.stderr.strip() if proc.stderr.strip() else ''})", console)
    result = parse_results(results, definitions, modules, triggers)
    result.console = console
    result.seconds = seconds
    return result


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace").replace("\r\n", "\n")
    except FileNotFoundError:
        return ""


class FramedReport:
    """What a guest's init script wrote on the second serial port, read back in order: header lines
    ``@@WORD ARGS…`` (:meth:`headers`), some followed by a body that ends at a marker line (:meth:`body`).
    The one reader of both guests' reports (INIT here, probectl_guest's GUEST_INIT)."""

    def __init__(self, text: str):
        self._lines = iter(text.replace("\r\n", "\n").split("\n"))

    def headers(self) -> Iterator[list[str]]:
        """The words of each header line, up to ``@@done``; other lines (console noise) are skipped."""
        for line in self._lines:
            words = line.split()
            if not words or not words[0].startswith("@@"):
                continue
            if words[0] == "@@done":
                return
            yield words

    def body(self, end: str = "@@end") -> list[str]:
        """The lines up to the marker ``end``: a report cut short (the guest died) is a GuestError."""
        lines = []
        for line in self._lines:
            if line == end:
                return lines
            lines.append(line)
        raise GuestError("the guest's report ended inside a section")


def parse_results(text: str, definitions: Sequence[str], modules: Sequence[Path] = (),
                  triggers: Sequence[tuple[str, str]] = ()) -> GuestResult:
    """Read the marker-framed report of the init script (see INIT) back into a GuestResult."""
    result = GuestResult(accepted=[], errors=[], trace_lines=[], console="")
    report = FramedReport(text)

    def block() -> list[str]:
        return report.body()

    for words in report.headers():
        if words[0] == "@@insmod":
            module = modules[int(words[1]) - 1].name
            if words[2] == "ok":
                result.loaded.append(module)
            else:
                result.load_errors.append(f"{module}: " + "\n".join(block()).strip("\n"))
        elif words[0] == "@@def":
            definition = definitions[int(words[1]) - 1]
            if words[2] == "ok":
                result.accepted.append(definition)
            else:
                result.rejected.append(definition)
                result.errors.append("\n".join(block()).strip("\n"))
        elif words[0] == "@@enable":
            result.enable_errors.append(f"{words[1]}: " + "\n".join(block()).strip("\n"))
        elif words[0] == "@@trigger":
            file, trigger = triggers[int(words[1]) - 1]
            result.trigger_errors.append(f"{file}: {trigger}\n" + "\n".join(block()).strip("\n"))
        elif words[0] == "@@hist":
            result.hists[words[1]] = "\n".join(block())
        elif words[0] == "@@kprobe_events":
            result.kprobe_events = [x for x in block() if x]
        elif words[0] == "@@trace":
            result.trace_lines = [x for x in block() if x.strip()]
        elif words[0] == "@@workload":
            result.workload_status = int(words[1])
            result.workload_output = "\n".join(block())
    return result
