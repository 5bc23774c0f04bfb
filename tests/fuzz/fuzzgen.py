"""The generators of the fuzz pass (tests/fuzz/fuzzing.py): from a seeded ``random.Random``, one input
(a :class:`Case`) of each kind. The corpus is made once per pass: the fixture programs, copies of
them the pass may probe, damaged files, a baseline cache directory and its answers."""
from __future__ import annotations

import glob
import os
import random
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from tests.fuzz.fuzzing import ODD_TEXT, ROOT, TESTS, TIMEOUT, Outcome, Tracefs, Unavailable

LIBC = Path(os.path.realpath("/lib/x86_64-linux-gnu/libc.so.6"))


@dataclass
class Case:
    description: str
    argv: Optional[list[str]] = None
    body: Optional[Callable[[], int]] = None  # instead of argv: a function run in the forked child
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = TIMEOUT
    interrupt_after: Optional[float] = None
    fresh: bool = False  # always in a fresh interpreter
    expect_stdout: Optional[bytes] = None  # (caches: the answer with the intact cache)
    leaves_nothing: bool = True  # a run that must leave no event of the pass behind
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def check(self, outcome: Outcome) -> list[str]:
        if self.expect_stdout is not None and outcome.status is not None \
                and outcome.stdout != self.expect_stdout:
            return [f"output differs from the intact cache's (status {outcome.status}): "
                    f"{outcome.stdout[:200]!r} vs {self.expect_stdout[:200]!r}"]
        return []

    def must_leave_nothing(self, outcome: Outcome) -> bool:
        return self.leaves_nothing or outcome.status != 0

    def cleanup(self) -> None:
        for fn in self.cleanups:
            try:
                fn()
            except OSError:
                pass


def _q(argv: list[str]) -> str:
    shown = [a if len(a) <= 120 else f"{a[:60]}...<{len(a)} chars>" for a in argv]
    return "probectl " + " ".join(repr(a) if (not a or any(c in a for c in " '\"\\$*?") or not a.isprintable())
                                  else a for a in shown)


# ---- names the definitions are made of --------------------------------------------------------

USER_FUNCS = {
    "uprobe_target": ["add_ints", "scale_long", "mix_unsigned", "hash_u64", "count_char", "sum_record",
                      "pick_label", "bump", "main"],
    "dwarf_structs": ["paint", "main", "print_layout"],
}
USER_VARS = {
    "uprobe_target": ["a", "b", "value", "factor", "bits", "shift", "seed", "text", "ch", "rec", "rec->id",
                      "rec->value", "rec->flags", "rec->label", "index", "counter", "step", "labels", "calls",
                      "counters[2]", "argc", "argv"],
    "dwarf_structs": ["w", "scale", "w->id", "w->depth", "w->name", "w->label", "w->origin.x", "w->corner->y",
                      "w->pts[2].x", "w->values[3]", "w->u.ival", "w->u.bytes", "w->tag", "w->hi", "w->fl.ready",
                      "w->fl.mode", "w->fl.delta", "w->fl.big", "w->fl.wide", "w->mode", "w->level", "counter",
                      "big_counter", "hidden", "global_widget", "global_widget.name", "gptr", "gptr->x", "argc"],
    "libc": ["bytes", "size", "ptr", "nmemb", "alignment", "mem", "av", "p"],
    "vmlinux": ["sk", "msg", "size", "sk->__sk_common.skc_state", "sk->sk_state", "msg->msg_iter.count",
                "prev", "next", "p->pid", "p->comm", "rq", "current"],
}
LIB_FUNCS = ["malloc", "free", "calloc", "realloc", "__libc_malloc", "memcpy", "strlen", "puts", "printf",
             "mall*", "*alloc", "_IO_*", "open", "read", "write"]
KERNEL_FUNCS = ["tcp_sendmsg", "schedule", "do_sys_open", "vfs_read", "tcp_v4_connect", "__x64_sys_getpid",
                "tcp_sendm*", "vfs_*", "kfree", "ksys_read", "do_exit", "finish_task_switch"]
TYPES = ["u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "x8", "x16", "x32", "x64", "string", "ustring",
         "symbol", "symstr", "b3@2/32", "b1@0/8", "b64@0/64", "b0@0/8", "string[3]", "u8[4]", "x32[0]",
         "char", "int", "s128", "u7", "bogus", ""]
REGS = ["%di", "%si", "%dx", "%cx", "%r8", "%r9", "%ax", "%sp", "%bp", "%ip", "%rax", "%eax", "%ds", "%r15",
        "%nosuchreg", "%"]
SPECIALS = ["$vars", "$params", "$retval", "$comm", "$stack", "$stack0", "$stack9999", "$arg1", "$arg6",
            "$arg0", "$arg99", "$argN", "$", "$$", "@user", '"text"', "\\\"x\""]
SEEDS = {
    "uprobe_target": ["add_ints a b", "scale_long%return $retval", "sum_record rec->id rec->value",
                      "count_char text:string ch", "pick_label%return +0($retval):string", "bump counter step",
                      "sum_record+4", "main argc", "hash_u64 seed:x64", "add_ints:2", "uprobe_target.c:50",
                      "sum_record rec->label:string", "add_ints a=%di:s32 b=%si:s32", "count_char;*return*",
                      "p=pick_label index", "mygrp:ev=add_ints a"],
    "dwarf_structs": ["paint w->id w->depth", "paint w->name:string", "paint w->fl.mode w->fl.delta",
                      "paint w->pts[2].x w->corner->y", "paint $vars", "paint $params", "main counter big_counter",
                      "paint w->u.bytes w->values[3]", "paint global_widget.name", "paint%return $retval"],
    "libc": ["malloc bytes", "free mem", "malloc%return $retval", "calloc nmemb size", "malloc+16",
             "mall*", "realloc", "__libc_malloc bytes"],
    "vmlinux": ["tcp_sendmsg size", "tcp_sendmsg sk->__sk_common.skc_state", "schedule", "vfs_read count",
                "tcp_sendmsg%return $retval", "do_sys_open filename:string", "tcp_sendmsg $params", "kfree+4",
                "tcp_v4_connect sk", "tcp_sendm*"],
}


def random_point(rng: random.Random, target: str) -> str:
    funcs = USER_FUNCS.get(target) or (LIB_FUNCS if target == "libc" else KERNEL_FUNCS)
    fn = rng.choice(funcs + ["*", "nosuch", rng.choice(ODD_TEXT)])
    form = rng.randrange(12)
    if form == 0:
        return f"{fn}%return"
    if form == 1:
        return f"{fn}+{rng.choice(['0', '1', '4', '0x10', '99999', '-1', '18446744073709551615'])}"
    if form == 2:
        return f"{fn}:{rng.choice(['0', '1', '3', '10000', '-2', 'x'])}"
    if form == 3:
        src = rng.choice([f"{target}.c", "nosuch.c", "*.c", "", "/abs/path.c"])
        return f"{fn}@{src}"
    if form == 4:
        return f"{target}.c:{rng.choice(['1', '40', '99999', '0'])}"
    if form == 5:
        return f"0x{rng.choice([0x1149, 0x1570, 0, 0xffffffff81000000, 0x7fffffffffff]):x}"
    if form == 6:
        return f"{fn};{rng.choice(['*return*', '*', '', 'x=*'])}"
    if form == 7:
        return f"{rng.choice(['g', 'grp', '1bad', 'a' * 40, ''])}:{rng.choice(['e', 'ev', '', 'a b'])}={fn}"
    if form == 8:
        return f"{fn}:{rng.randrange(20)}+{rng.randrange(5)}"
    return fn


def random_arg(rng: random.Random, target: str) -> str:
    variables = USER_VARS.get(target, USER_VARS["libc"])
    form = rng.randrange(10)
    if form <= 2:
        body = rng.choice(variables)
        if rng.random() < 0.3:
            body += rng.choice(["->x", ".y", "[0]", "[536870912]", "[-1]", "->next->id", "->", "."])
    elif form == 3:
        body = rng.choice(REGS)
    elif form == 4:
        body = f"{rng.choice(['+0', '-8', '+16', '+4096', '+0x7fffffff', '+4294967296'])}({rng.choice(REGS)})"
        if rng.random() < 0.3:
            body = f"+{rng.randrange(64)}({body})"
    elif form == 5:
        body = rng.choice(SPECIALS)
    elif form == 6:
        body = f"@{rng.choice(['counter', 'calls', 'jiffies', '0x1000', 'nosuch'])}"
        if rng.random() < 0.3:
            body += rng.choice(["+8", "-4", "+x"])
    else:
        body = rng.choice(variables)
    if rng.random() < 0.4:
        body += ":" + rng.choice(TYPES)
    if rng.random() < 0.1:
        body += "@user"
    if rng.random() < 0.25:
        name = rng.choice(["x", "id", "a" * 33, "1x", "my-name", "", "arg1", "common_pid", "x y"])
        body = f"{name}={body}"
    return body


def random_definition(rng: random.Random, target: str) -> str:
    parts = [random_point(rng, target)] + [random_arg(rng, target) for _ in range(rng.choice([0, 1, 1, 2, 3, 6]))]
    return " ".join(parts)


def mutate_text(rng: random.Random, text: str, rounds: int = 0) -> str:
    """Character-level mutations of ``text``: deletions, insertions of odd characters, repeats."""
    chars = list(text)
    for _ in range(rounds or rng.randint(1, 4)):
        op = rng.randrange(7)
        pos = rng.randint(0, len(chars))
        if op == 0 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op == 1:
            chars[pos:pos] = list(rng.choice(ODD_TEXT[:33] + list("()[]{}<>:;=@%$+-.,*&|!~^#")))
        elif op == 2 and chars:
            a = rng.randint(0, len(chars) - 1)
            b = rng.randint(a, min(len(chars), a + 8))
            chars[pos:pos] = chars[a:b] * rng.choice([1, 2, 50])
        elif op == 3 and chars:
            chars[min(pos, len(chars) - 1)] = chr(rng.choice([0, 9, 10, 27, 0x7f, 0x85, 0x202e, 0xfeff,
                                                              rng.randrange(32, 127)]))
        elif op == 4:
            chars[pos:pos] = list(rng.choice(["99999999999999999999", "-0", "0x", "[", "]", "->", "\\", '"']))
        elif op == 5 and chars:
            chars = chars[:pos]
        else:
            chars[pos:pos] = [" "]
    return "".join(chars)


# ---- damaged files -------------------------------------------------------------------------------

def elf_sections(data: bytes) -> list[tuple[str, int, int, int]]:
    """(name, header offset, file offset, size) of the sections of a 64-bit little-endian ELF."""
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        sections = []
        for i in range(shnum):
            h = shoff + i * shentsize
            name, _typ, _fl, _addr, off, size = struct.unpack_from("<IIQQQQ", data, h)
            sections.append((name, h, off, size))
        _n, _h, stroff, strsize = sections[shstrndx]
        out = []
        for name, h, off, size in sections:
            end = data.index(b"\0", stroff + name)
            out.append((data[stroff + name:end].decode(errors="replace"), h, off, size))
        return out
    except (struct.error, IndexError, ValueError):
        return []


def damage_elf(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """A damaged copy of an ELF file and what was done to it."""
    buf = bytearray(data)
    sections = [s for s in elf_sections(data) if s[3] > 0]
    op = rng.randrange(11)
    if op == 0:
        n = rng.randint(0, len(buf))
        return bytes(buf[:n]), f"truncated to {n} bytes"
    if op == 1:
        for _ in range(rng.randint(1, 30)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return bytes(buf), "bits flipped anywhere"
    if op == 2:
        i = rng.randrange(64)
        buf[i] = rng.randrange(256)
        return bytes(buf), f"ELF header byte {i} set"
    if op == 3:
        machine = rng.choice([3, 40, 183, 243, 0, 0xFFFF])
        struct.pack_into("<H", buf, 0x12, machine)
        return bytes(buf), f"e_machine {machine}"
    if op == 4:
        buf[4] = 1  # ELFCLASS32 on 64-bit headers
        return bytes(buf), "EI_CLASS 32"
    if op == 5:
        field_ = rng.choice([(0x28, "<Q", "e_shoff"), (0x3C, "<H", "e_shnum"), (0x3E, "<H", "e_shstrndx"),
                             (0x3A, "<H", "e_shentsize"), (0x20, "<Q", "e_phoff"), (0x38, "<H", "e_phnum")])
        value = rng.choice([0, 1, 0xFFFF, len(buf) - 1, len(buf) + 100, (1 << 63)])
        value &= (1 << (8 * struct.calcsize(field_[1]))) - 1
        struct.pack_into(field_[1], buf, field_[0], value)
        return bytes(buf), f"{field_[2]} = {value:#x}"
    if op in (6, 7, 8) and sections:
        wanted = [s for s in sections if s[0].startswith((".debug_", ".symtab", ".strtab", ".dynsym", ".dynstr",
                                                          ".eh_frame", ".note", ".gnu_debuglink", ".text"))]
        name, header, off, size = rng.choice(wanted or sections)
        if op == 6:
            for _ in range(rng.randint(1, 20)):
                if off + size <= len(buf):
                    i = off + rng.randrange(size)
                    buf[i] = rng.randrange(256)
            return bytes(buf), f"bytes of {name} changed"
        if op == 7:
            if off + size <= len(buf):
                buf[off:off + size] = bytes(size)
            return bytes(buf), f"{name} zeroed"
        value = rng.choice([0, len(buf) * 2, (1 << 63), size + 1])
        struct.pack_into("<Q", buf, header + (0x20 if rng.random() < 0.5 else 0x18), value)
        return bytes(buf), f"{name}'s header: size/offset {value:#x}"
    if op == 9:
        return b"\x7fELF" + bytes(rng.randrange(256) for _ in range(rng.randint(0, 200))), "ELF magic, then noise"
    if op == 10 and sections:
        name, header, off, size = rng.choice(sections)
        struct.pack_into("<I", buf, header + 4, rng.choice([0, 1, 3, 8, 0x6ffffff6, 0xFFFFFFFF]))
        return bytes(buf), f"{name}'s type changed"
    return data[:rng.randint(0, 64)], "a few header bytes"


def damage_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """Generic damage for trace.dat and cache files."""
    buf = bytearray(data)
    op = rng.randrange(7)
    if op == 0 or not buf:
        n = rng.randint(0, len(buf))
        return bytes(buf[:n]), f"truncated to {n}"
    if op == 1:
        for _ in range(rng.randint(1, 40)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        return bytes(buf), "bits flipped"
    if op == 2:
        i = rng.randrange(len(buf))
        size = rng.choice([1, 2, 4, 8])
        value = rng.choice([0, 0xFF, 0x7F, 0x80, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFFFFFFFFFF, 4096, 65535])
        chunk = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
        buf[i:i + size] = chunk
        return bytes(buf), f"{size}-byte value {value:#x} at {i}"
    if op == 3:
        a = rng.randrange(len(buf))
        b = min(len(buf), a + rng.randint(1, 4096))
        c = rng.randrange(len(buf))
        buf[c:c] = buf[a:b]
        return bytes(buf), f"bytes {a}..{b} repeated at {c}"
    if op == 4:
        a = rng.randrange(len(buf))
        b = min(len(buf), a + rng.randint(1, 4096))
        buf[a:b] = bytes(b - a)
        return bytes(buf), f"bytes {a}..{b} zeroed"
    if op == 5:
        a = rng.randrange(len(buf))
        b = min(len(buf), a + rng.randint(1, 256))
        del buf[a:b]
        return bytes(buf), f"bytes {a}..{b} removed"
    return bytes(buf) + bytes(rng.randrange(256) for _ in range(rng.randint(1, 5000))), "junk appended"


def special_file(rng: random.Random, path: Path, data: Optional[bytes] = None) -> str:
    """Make ``path`` something that is no ordinary file; what it is."""
    op = rng.randrange(7)
    if op == 0:
        os.mkfifo(path, 0o600)
        return "a FIFO"
    if op == 1:
        os.symlink("/dev/zero", path)
        return "a link to /dev/zero"
    if op == 2:
        path.mkdir()
        return "a directory"
    if op == 3:
        with open(path, "wb") as f:
            f.truncate(1 << 40)
        return "a 1 TiB sparse file"
    if op == 4:
        path.write_bytes(b"")
        return "empty"
    if op == 5:
        os.symlink(path.name + ".nowhere", path)
        return "a dangling link"
    path.write_bytes(data or b"")
    path.chmod(0o666)
    return "writable by others"


# ---- the corpus ----------------------------------------------------------------------------------

class Corpus:
    def __init__(self, work: Path, tracefs: Tracefs, log: Callable[[str], None]):
        self.work = work
        self.tracefs = tracefs
        self.log = log
        self.prepared: set[str] = set()
        self.targets: dict[str, list[str]] = {}
        self.vmlinux: Optional[Path] = None
        self.counter = 0
        self._added: list[str] = []

    def path(self, name: str) -> Path:
        self.counter += 1
        return self.work / f"{self.counter}-{name}"

    # -- preparation

    def prepare(self, kind: str) -> None:
        if kind in self.prepared:
            return
        if not self.prepared:
            self._common()
        getattr(self, f"_prepare_{kind}")()
        self.prepared.add(kind)

    def _common(self) -> None:
        from tests.helpers import build_fixture, kernel_testdata_dir

        if shutil.which("gcc") is None:
            raise Unavailable("gcc is needed to build the fixtures")
        self.fixtures = {
            "uprobe_target": [build_fixture("uprobe_target", "-O0"), build_fixture("uprobe_target", "-O2")],
            "dwarf_structs": [build_fixture("dwarf_structs", "-O0"), build_fixture("dwarf_structs", "-O2")],
        }
        directory = kernel_testdata_dir()
        if directory is not None and (directory / "vmlinux").exists():
            self.vmlinux = directory / "vmlinux"
            modules = sorted(glob.glob(str(directory / "modules" / "**" / "*.ko*"), recursive=True))
            self.module = Path(modules[0]) if modules else None
        else:
            self.module = None
        # copies the pass may probe (their path marks the pass's events in tracefs)
        self.copies = {}
        for name in ("uprobe_target", "dwarf_structs"):
            copy = self.work / f"fzt_{name}"
            shutil.copy2(self.fixtures[name][0], copy)
            self.copies[name] = copy
        # the same program run under a process name that is not UTF-8 (a comm is bytes: issue 26)
        self.odd_name = self.work / os.fsdecode(b"fzt_\xff\xfe\x1b[1m")
        os.link(self.copies["uprobe_target"], self.odd_name)
        self.fifo = self.work / "fifo"
        os.mkfifo(self.fifo, 0o600)
        (self.work / "dir").mkdir()
        self.text_file = self.work / "text.txt"
        self.text_file.write_text("not an ELF file\n" * 10)

    def _prepare_definitions(self) -> None:
        pass

    def _prepare_targets(self) -> None:
        self.elf_bases = [p for paths in self.fixtures.values() for p in paths]

    def _prepare_tracedat(self) -> None:
        data = TESTS / "data" / "tracedat"
        self.traces = sorted(data.glob("*.dat"))
        recorded = self._record_sample()
        if recorded is not None:
            self.traces.append(recorded)
        self.trace_bytes = {p: p.read_bytes() for p in self.traces}

    def _record_sample(self) -> Optional[Path]:
        """One real recording of the pass's own probes (strings, a string array, stacks), or None."""
        if not self.tracefs.live:
            return None
        out = self.work / "recorded.dat"
        group = self.tracefs.group
        env = {**os.environ, "DEBUGINFOD_URLS": ""}
        binary = str(self.copies["uprobe_target"])
        add = subprocess.run([sys.executable, "-m", "probectl", "add", "-x", binary,
                              f"{group}:count=count_char text:string ch",
                              f"{group}:pick=pick_label%return +0($retval):string",
                              f"{group}:sum=sum_record rec->id rec->value rec->label:string"],
                             capture_output=True, text=True, env=env)
        try:
            if add.returncode != 0:
                self.log(f"fuzz: could not add the recording's probes: {add.stderr.strip()}")
                return None
            # (also run under a name that is not UTF-8: the recording's mutations carry that comm)
            rec = subprocess.run([sys.executable, "-m", "probectl", "record", "-e", f"{group}:*", "-g", "-o",
                                  str(out), "--", "/bin/sh", "-c", '"$0" 5; "$1" 2', binary, str(self.odd_name)],
                                 capture_output=True, text=True, env=env, timeout=120)
            if rec.returncode != 0 or not out.exists():
                # (a recording of the pass's own probes fails only by a bug: the pass must not hide it)
                raise RuntimeError(f"fuzz: the recording to mutate failed: {rec.stderr.strip()[-2000:]}")
            return out
        finally:
            subprocess.run([sys.executable, "-m", "probectl", "del", f"{group}:*"], capture_output=True, env=env)

    def _prepare_caches(self) -> None:
        """A cache directory filled by real runs, and each run's answer with it intact."""
        base = self.work / "cache-base"
        (base / "probectl").mkdir(parents=True, mode=0o700)
        base.chmod(0o700)
        us = str(self.fixtures["uprobe_target"][0])
        ds = str(self.fixtures["dwarf_structs"][1])
        commands = [["add", "-D", "-x", us, "sum_record rec->id rec->label:string"],
                    ["vars", "-x", ds, "paint"],
                    ["add", "-D", "-x", ds, "pai* w->id"],
                    ["lines", "-x", us, "add_ints"],
                    ["script", "-i", str(TESTS / "data" / "tracedat" / "sample-v7.dat"), "-e", "*exec*"]]
        if LIBC.exists():
            commands.append(["add", "-D", "-x", str(LIBC), "malloc bytes"])
        if self.vmlinux is not None:
            commands += [["add", "-D", "-k", str(self.vmlinux), "tcp_sendmsg size"],
                         ["vars", "--btf", "-k", str(self.vmlinux), "tcp_sendmsg"]]
        self.cache_commands = []
        env = {**os.environ, "XDG_CACHE_HOME": str(base), "DEBUGINFOD_URLS": ""}
        env.pop("PROBECTL_NO_CACHE", None)
        for argv in commands:  # (a run with the cache must answer as this first one, which fills it)
            out = subprocess.run([sys.executable, "-m", "probectl", *argv], capture_output=True, env=env,
                                 timeout=300)
            if out.returncode == 0:
                self.cache_commands.append((argv, out.stdout))
        self.cache_base = base
        self.cache_files = sorted(p.name for p in (base / "probectl").iterdir())
        if not self.cache_commands or not self.cache_files:
            raise Unavailable("no cache files were made")
        self.log(f"fuzz: cache kinds: {sorted({n.rsplit('-', 1)[0].split('-sha1')[0] for n in self.cache_files})}")

    def _prepare_cmdlines(self) -> None:
        self.event = None
        if self.tracefs.live:
            group = self.tracefs.group
            out = subprocess.run([sys.executable, "-m", "probectl", "add", "-x", str(self.copies["uprobe_target"]),
                                  f"{group}:add=add_ints a b"], capture_output=True, text=True,
                                 env={**os.environ, "DEBUGINFOD_URLS": ""})
            if out.returncode == 0:
                self.event = f"{group}:add"
                self.tracefs.keep.add(f"{group}/add")

    def close(self) -> None:
        if getattr(self, "event", None):
            subprocess.run([sys.executable, "-m", "probectl", "del", self.event], capture_output=True)
            self.tracefs.keep.clear()
        self.tracefs.remove_ours(patience=5.0)

    # -- inputs

    def make(self, kind: str, rng: random.Random) -> Case:
        return getattr(self, f"_make_{kind}")(rng)

    def _target_choice(self, rng: random.Random) -> tuple[str, list[str], float]:
        """(target name, its -x/-k option, timeout)."""
        names = ["uprobe_target", "dwarf_structs", "uprobe_target", "dwarf_structs"]
        if LIBC.exists():
            names.append("libc")
        if self.vmlinux is not None:
            names.append("vmlinux")
        name = rng.choice(names)
        if name == "libc":
            return name, ["-x", str(LIBC)], TIMEOUT
        if name == "vmlinux":
            return name, ["-k", str(self.vmlinux)], TIMEOUT * 2
        return name, ["-x", str(rng.choice(self.fixtures[name]))], TIMEOUT

    def _make_definitions(self, rng: random.Random) -> Case:
        name, option, timeout = self._target_choice(rng)
        if rng.random() < 0.5:
            definition = random_definition(rng, name)
        else:
            definition = mutate_text(rng, rng.choice(SEEDS[name]))
        command = rng.choices(["add", "vars", "lines"], weights=[8, 1, 1])[0]
        if command == "add":
            argv = ["add", "-D", *option, definition]
            if rng.random() < 0.1:
                argv.insert(2, "--btf")
        elif command == "vars":
            argv = ["vars", *option, definition.split(" ")[0]]
        else:
            argv = ["lines", *option, definition.split(" ")[0]]
        return Case(_q(argv), argv, timeout=timeout)

    def _make_targets(self, rng: random.Random) -> Case:
        base = rng.choice(self.elf_bases)
        path = self.path("target")
        if rng.random() < 0.15:
            what = special_file(rng, path, base.read_bytes()[:4096])
        else:
            data, what = damage_elf(rng, base.read_bytes())
            path.write_bytes(data)
            path.chmod(0o755)
        option = rng.choices(["-x", "-k", "-m"], weights=[6, 2, 1])[0]
        name = "uprobe_target" if "uprobe" in base.name else "dwarf_structs"
        point = rng.choice(USER_FUNCS[name])
        command = rng.choice([["add", "-D", option, str(path), f"{point} {rng.choice(USER_VARS[name])}"],
                              ["add", "-D", option, str(path), point],
                              ["funcs", option, str(path)],
                              ["vars", option, str(path), point],
                              ["lines", option, str(path), point],
                              ["add", "-D", option, str(path), f"0x{rng.randrange(0x1000, 0x2000):x} $vars"]])
        case = Case(f"{_q(command)}  # {path.name}: {base.name}, {what}", command)
        case.cleanups.append(lambda: _remove(path))
        return case

    def _make_caches(self, rng: random.Random) -> Case:
        cache = self.path("cache")
        shutil.copytree(self.cache_base, cache, symlinks=True)
        directory = cache / "probectl"
        names = list(self.cache_files)
        done = []
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            name = rng.choice(names + [".lock-x"])
            target = directory / name
            small = target.is_file() and not target.is_symlink() and target.stat().st_size < 1 << 30
            data = target.read_bytes() if small else b""
            op = rng.randrange(4)
            if op == 0 and data:
                damaged, what = damage_bytes(rng, data)
                _remove(target)
                target.write_bytes(damaged)
                target.chmod(0o600)
            elif op == 1 and len(names) > 1:
                other = directory / rng.choice([n for n in names if n != name])
                # (never a copy of a file an earlier step made huge and sparse: it would fill the disk)
                if other.is_file() and not other.is_symlink() and other.stat().st_size < 1 << 30:
                    _remove(target)
                    shutil.copyfile(other, target)
                    target.chmod(0o600)
                what = f"contents of {other.name}"
            elif op == 2 and name.endswith(".bin"):
                lock = directory / f".lock-{name[:-4]}"
                _remove(lock)
                what = "its lock file " + special_file(rng, lock)
            else:
                _remove(target)
                what = special_file(rng, target, data)
            done.append(f"{name}: {what}")
        if rng.random() < 0.05:
            mode = rng.choice([0o777, 0o755, 0o000])
            directory.chmod(mode)
            done.append(f"the directory mode {mode:o}")
        argv, expected = rng.choice(self.cache_commands)
        env = {"XDG_CACHE_HOME": str(cache)}
        case = Case(f"{_q(argv)}  # XDG_CACHE_HOME with {'; '.join(done)}", list(argv), env=env, fresh=True,
                    expect_stdout=expected, timeout=TIMEOUT * 3)

        def remove() -> None:
            for root, dirs, _files in os.walk(cache):
                for d in dirs:
                    try:
                        os.chmod(os.path.join(root, d), 0o700)
                    except OSError:
                        pass
            os.chmod(cache / "probectl", 0o700)
            shutil.rmtree(cache, ignore_errors=True)
        case.cleanups.append(remove)
        return case

    def _make_tracedat(self, rng: random.Random) -> Case:
        base = rng.choice(self.traces)
        data, what = damage_bytes(rng, self.trace_bytes[base])
        if rng.random() < 0.3:
            data, more = damage_bytes(rng, data)
            what += ", " + more
        path = self.path("trace.dat")
        path.write_bytes(data)
        if rng.random() < 0.25:
            def read_all(p: str = str(path)) -> int:
                import probectl
                from probectl.errors import ProbectlError

                try:
                    with probectl.read_trace(p) as trace:
                        for event in trace:
                            repr(event)
                            trace.comm(event.pid)
                        for batch in trace.batches(max_events=64):
                            repr(batch)
                except ProbectlError as err:
                    print(f"Error: {err}", file=sys.stderr)
                    return 1
                return 0
            case = Case(f"probectl.read_trace({path.name})  # {base.name}, {what}", body=read_all)
        elif rng.random() < 0.45:
            return self._make_analysis(rng, path, f"{base.name}, {what}")
        else:
            argv = ["script", "-i", str(path)]
            fmt = rng.choice(["text", "text", "csv", "json", "folded"])
            if fmt != "text":
                argv += ["--format", fmt]
            if rng.random() < 0.2 and fmt in ("text", "csv"):
                argv += ["-F", rng.choice(["comm,pid,time,event,trace", "ip,sym", "trace", "cpu,tid"])]
            if rng.random() < 0.1:
                argv += ["-e", rng.choice(["*", "syscalls:*", "nope:*", "*exec*"])]
            case = Case(f"{_q(argv)}  # {base.name}, {what}", argv)
        case.cleanups.append(lambda: _remove(path))
        return case

    # -- the analysis commands' inputs: a damaged recording, mutated pairs, folded stacks and SQL

    _SQL = ["SELECT comm, count(*) FROM events GROUP BY ALL", "SELECT * FROM syscalls.sys_enter_getpid",
            "SELECT * FROM read_csv('/etc/shadow')", "SELECT * FROM read_text('/etc/hostname')",
            "SELECT * FROM glob('/root/**')", "COPY (SELECT 1) TO 'x.csv'", "ATTACH 'x.db'", "EXPORT DATABASE 'x'",
            "SET memory_limit='1GB'", "INSTALL httpfs", "LOAD httpfs", "PRAGMA version", "SELECT 1; SELECT 2",
            "PIVOT events ON comm", "SELECT * FROM query('SELECT 1')", "DESCRIBE events", "SUMMARIZE events",
            "SELECT (SELECT 1) FROM events", "SELECT events FROM events"]
    _PAIRS = "1.000 5\n1.5 7.25\n2 0\n"
    _NUMBERS = ["0", "1", "-1", "1e-7", "1e308", "1e309", "nan", "inf", "5000", "5001", "99999999999999999999", ""]
    _FOLDED = "main;foo;bar 3\nmain;foo 1\n[k];sched 2\n"

    def _make_analysis(self, rng: random.Random, trace: Path, what: str) -> Case:
        """report, query, hist, latency, flamegraph, heatmap and script's Parquet and Chrome JSON on
        the damaged ``trace``, or on mutated text: pairs, folded stacks, SQL over the sample."""
        sample = str(TESTS / "data" / "tracedat" / "sample-v7.dat")
        out = self.work / "analysis-out"
        text_in = self.path("analysis.txt")
        event = rng.choice(["syscalls:sys_enter_getpid", "sched:sched_process_exec", "nope:x", "*"])
        choice = rng.choice(["report", "query", "hist", "latency", "flamegraph", "heatmap", "parquet", "chrome",
                             "pairs", "folded", "sql", "sql"])
        if choice == "report":
            argv = ["report", "-i", str(trace)] + rng.choice([[], ["--sort", "comm,pid"], ["--hist", "ret"],
                                                              ["--json"]])
        elif choice == "query":
            argv = ["query", "-i", str(trace), rng.choice(self._SQL[:2] + ["SELECT count(*) FROM events"])]
        elif choice == "hist":
            argv = ["hist", "-i", str(trace), event, "--key", rng.choice(["comm", "pid", "cpu", "nosuch", "comm,pid"])]
        elif choice == "latency":
            argv = ["latency", "-i", str(trace), "--start", event,
                    "--end", rng.choice(["sched:sched_process_exec", event])]
        elif choice == "flamegraph":
            argv = ["flamegraph", "-i", str(trace), "-o", str(out)]
        elif choice == "heatmap":
            argv = ["heatmap", "-i", str(trace), "--start", event, "--end", "sched:sched_process_exec", "-o", str(out)]
        elif choice == "parquet":
            argv = ["script", "-i", str(trace), "--format", "parquet", "-o", str(out)]
        elif choice == "chrome":
            argv = ["script", "-i", str(trace), "--format", "chrome-json", "-o", str(out)]
        elif choice == "pairs":
            data = mutate_text(rng, self._PAIRS, rounds=rng.randint(1, 4)).encode("utf-8", "surrogateescape")
            text_in.write_bytes(data)
            argv = ["heatmap", "-i", str(text_in), "-o", str(out)] + rng.choice(
                [[], ["--step", rng.choice(self._NUMBERS)], ["--columns", rng.choice(self._NUMBERS)],
                 ["--rows", rng.choice(self._NUMBERS)], ["--max-latency", rng.choice(self._NUMBERS)], ["--ns"]])
            what = f"pairs {data[:60]!r}"
        elif choice == "folded":
            data = mutate_text(rng, self._FOLDED, rounds=rng.randint(1, 4)).encode("utf-8", "surrogateescape")
            if rng.random() < 0.3:
                data = data.replace(b"foo", bytes([rng.randrange(0x80, 0x100), rng.randrange(256)]))
            text_in.write_bytes(data)
            argv = ["flamegraph", "--folded", "-i", str(text_in), "-o", str(out)] + rng.choice(
                [[], ["--format", "folded"], ["--inverted"], ["--width", rng.choice(self._NUMBERS)]])
            what = f"folded {data[:60]!r}"
        else:
            sql = rng.choice(self._SQL)
            if rng.random() < 0.5:
                sql = mutate_text(rng, sql, rounds=rng.randint(1, 3))
            argv = ["query", "-i", sample, sql] + rng.choice([[], ["--json"], ["--csv"]])
            what = "SQL"
        case = Case(f"{_q(argv)}  # {what}", argv)
        case.cleanups.append(lambda: (_remove(out), _remove(text_in), _remove(trace)))
        return case

    # -- command lines

    def _value(self, rng: random.Random, kind: str) -> str:
        pools = {
            "binary": [str(self.copies["uprobe_target"]), str(self.copies["dwarf_structs"]), str(LIBC), "libc",
                       "true", str(self.fifo), str(self.work / "dir"), str(self.text_file), "/dev/zero",
                       "/nonexistent", ""],
            "vmlinux": [str(self.vmlinux) if self.vmlinux else "/nonexistent", str(self.fifo), "/dev/null",
                        str(self.copies["uprobe_target"]), ""],
            "module": [str(self.module) if self.module else "nosuchmod", "overlay", "ext4", str(self.fifo), "",
                       "/nonexistent.ko"],
            "event": [self.event or "sched:sched_process_exec", "sched:sched_process_exec", "syscalls:sys_enter_getpid",
                      "nope:*", "*:*nosuch*", "sched", f"{self.tracefs.group}:*", "a,b", ":", "ftrace:print"],
            "filter": ["a > 1", "common_pid != 0", "a > 4k", "comm ~ \"tr*\"", "(", "a &&", "x == 'y'",
                       "a > 99999999999999999999", "nosuch == 1", "CPUS{0}"],
            "trace_in": [str(TESTS / "data" / "tracedat" / "sample-v7.dat"), str(self.fifo), "/dev/zero",
                         str(self.text_file), str(self.work / "dir"), "/nonexistent.dat", ""],
            "trace_out": [str(self.work / "out.dat"), "/dev/full", "/dev/null", str(self.work / "dir"),
                          "/nonexistent/out.dat", str(self.fifo), "-", ""],
            "fields": ["comm,pid,tid,cpu,time,event,ip,sym,trace", "comm", "trace,trace", ",", "nosuch", ""],
            "format": ["text", "csv", "json", "folded", "xml", ""],
            "number": ["0", "1", "-1", "4096", "1e309", "nan", "0x10", "99999999999999999999", "", "1.5"],
            "cpus": ["0", "0-1", "1-0", "999", "a", "", "0,0", "-"],
            "pids": ["1", str(os.getpid()), "0", "-1", "999999999", "a", "1,2", ""],
            "source": [str(ROOT / "fixtures"), "/nonexistent", str(self.fifo), ""],
        }
        if kind in pools and rng.random() < 0.85:
            return rng.choice(pools[kind])
        return rng.choice(ODD_TEXT)

    def _definition(self, rng: random.Random) -> str:
        name = rng.choice(["uprobe_target", "dwarf_structs"])
        return random_definition(rng, name) if rng.random() < 0.6 else mutate_text(rng, rng.choice(SEEDS[name]), 1)

    def _make_cmdlines(self, rng: random.Random) -> Case:
        group = self.tracefs.group
        command = rng.choice(["add", "add", "del", "list", "funcs", "lines", "vars", "record", "record", "script",
                              "script", "trace", "trace", "tracepoints", "fields", "help", "perf", "none"])
        opts: list[list[str]] = []
        args: list[str] = []
        interrupt = None
        leaves_nothing = True
        pick = rng.random
        if command == "add":
            mode = rng.choice(["-D", "-n", "--definition", "--dry-run", "real"])
            if mode != "real":
                opts.append([mode])
            else:
                leaves_nothing = False  # (an add that succeeds leaves its events: removed after the run)
            opts.append(["-x", str(self.copies[rng.choice(["uprobe_target", "dwarf_structs"])])]
                        if pick() < 0.8 or mode == "real" else ["-x", self._value(rng, "binary")])
            if pick() < 0.2 and mode != "real":
                opts.append(["-k", self._value(rng, "vmlinux")])
            if pick() < 0.1 and mode != "real":
                opts.append(["-m", self._value(rng, "module")])
            for flag in ("-f", "--btf"):
                if pick() < 0.1:
                    opts.append([flag])
            if pick() < 0.15:
                opts.append(["--max-probes", rng.choice(self._NUMBERS)])
            if pick() < 0.1:
                opts.append(["-s", self._value(rng, "source")])
            args = [self._definition(rng) for _ in range(rng.choice([0, 1, 1, 1, 2, 3]))]
            if mode == "real":
                args = [f"{group}a:e{n}={a}" if "=" not in a.split(" ")[0] else a for n, a in enumerate(args)]
        elif command == "del":
            if pick() < 0.5:
                opts.append(["-n"])
                args = [rng.choice([f"{group}:*", "*", "nosuch", "probe_*:*", self._value(rng, "event")])]
            else:  # only the pass's own group of real adds is ever really deleted from
                args = [f"{group}a:{rng.choice(['*', 'e0', 'nosuch', '', 'e*'])}"]
            if pick() < 0.2:
                opts.append(["-x", self._value(rng, "binary")])
        elif command == "list":
            if pick() < 0.3:
                opts.append(["--json"])
            if pick() < 0.3:
                opts.append(["--tracepoints"])
            args = [rng.choice(["*", f"{group}:*", "nope", self._value(rng, "event")]) for _ in range(rng.randrange(3))]
        elif command in ("funcs", "lines", "vars"):
            which = rng.choice(["-x", "-x", "-k", "-m"])
            opts.append([which, self._value(rng, {"-x": "binary", "-k": "vmlinux", "-m": "module"}[which])])
            if pick() < 0.2:
                opts.append(["--json"])
            if command == "vars" and pick() < 0.2:
                opts.append([rng.choice(["--externs", "--btf"])])
            if command == "lines" and pick() < 0.2:
                opts.append(["-s", self._value(rng, "source")])
            if pick() < 0.9:
                args = [rng.choice(USER_FUNCS["uprobe_target"] + ["*", "add_*", "uprobe_target.c:40",
                                                                  "main:1-3", self._value(rng, "x")])]
        elif command == "record":
            opts.append(["-o", self._value(rng, "trace_out") if pick() < 0.5 else str(self.path("rec.dat"))])
            for _ in range(rng.choice([0, 1, 1, 2])):
                opts.append(["-e", self._value(rng, "event")])
                if pick() < 0.3:
                    opts.append(["--filter", self._value(rng, "filter")])
            for flag, kind in (("-C", "cpus"), ("-p", "pids"), ("-m", "number"), ("--duration", "number"),
                               ("--file-version", "x")):
                if pick() < 0.15:
                    opts.append([flag, self._value(rng, kind) if kind != "x" else rng.choice(["6", "7", "8", ""])])
            for flag in ("-a", "-g"):
                if pick() < 0.2:
                    opts.append([flag])
            if pick() < 0.15:
                opts.append(["--call-graph", rng.choice(["fp", "dwarf", "dwarf,64", "dwarf,0", "dwarf,65536", "lbr",
                                                         "dwarf,", "", self._value(rng, "number")])])
            if pick() < 0.7:
                args = ["--", *rng.choice([["true"], [str(self.copies["uprobe_target"]), "2"], ["/nonexistent"],
                                          ["sh", "-c", "exit 3"], ["sleep", "0.2"], [str(self.odd_name), "2"]])]
            else:
                interrupt = 1.0
        elif command == "script":
            opts.append(["-i", self._value(rng, "trace_in")])
            if pick() < 0.4:
                opts.append(["-F", self._value(rng, "fields")])
            if pick() < 0.4:
                opts.append(["--format", self._value(rng, "format")])
            if pick() < 0.3:
                opts.append(["-e", self._value(rng, "event")])
        elif command == "trace":
            opts.append(["-x", str(self.copies["uprobe_target"]) if pick() < 0.8 else self._value(rng, "binary")])
            args = [self._definition(rng) for _ in range(rng.choice([0, 1, 1, 2]))]
            if pick() < 0.3:
                opts.append(["-e", self._value(rng, "event")])
            for flag, kind in (("--filter", "filter"), ("-p", "pids"), ("-F", "fields"), ("--format", "format"),
                               ("-m", "number")):
                if pick() < 0.15:
                    opts.append([flag, self._value(rng, kind)])
            if pick() < 0.1:
                opts.append(["-a"])
            if pick() < 0.7:
                args += ["--", *rng.choice([[str(self.copies["uprobe_target"]), "2"], ["true"], ["/nonexistent"],
                                            [str(self.odd_name), "2"]])]
            else:
                interrupt = 1.0
        elif command == "tracepoints":
            args = [rng.choice(["sched:*", "*", "nope", self._value(rng, "x")])] if pick() < 0.7 else []
            if pick() < 0.3:
                opts.append(["--json"])
        elif command == "fields":
            args = [self._value(rng, "event")]
            for flag in ("--json", "--all"):
                if pick() < 0.3:
                    opts.append([flag])
        elif command == "help":
            args = [rng.choice(["add", "record", "nosuch", "", "help", self._value(rng, "x")])][:rng.randrange(2)]
        elif command == "perf":  # perf's own flags: -x BIN -a DEF, -D, -L, -V, -F, -l, -d (with -n)
            flag = rng.choice(["-a", "-D", "-L", "-V", "-F", "-l", "-d"])
            opts.append(["-x", str(self.copies["uprobe_target"])])
            if flag == "-d":
                opts.append(["-n"])
            if flag == "-a":
                opts.append(["-n"])
            args = [flag, self._definition(rng) if flag in ("-a", "-D") else rng.choice(USER_FUNCS["uprobe_target"])]
            command = ""
        else:  # no command: odd words and flags alone
            command = ""
            args = [self._value(rng, "x") for _ in range(rng.randrange(3))]
            if pick() < 0.3:
                args.insert(0, rng.choice(["--help", "--version", "-h", "--debug", "-q"]))
        rng.shuffle(opts)
        if pick() < 0.05:  # an option given twice, or one without its value
            opts.append(opts[0][:1] if opts else ["--nosuch"])
        flat = [x for o in opts for x in o]
        if "--" in args:
            cut = args.index("--")
            argv = ([command] if command else []) + flat + args[:cut] + args[cut:]
        else:
            argv = ([command] if command else []) + flat + args
        if pick() < 0.05:
            argv.insert(rng.randrange(len(argv) + 1), mutate_text(rng, rng.choice(argv) if argv else "-x", 1))
        case = Case(_q(argv) + ("  # then Ctrl-C after 1 s" if interrupt else ""), argv,
                    interrupt_after=interrupt, leaves_nothing=leaves_nothing,
                    env={"FUZZ_CWD": str(self.work)})
        return case


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            os.chmod(path, 0o700)
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        pass


