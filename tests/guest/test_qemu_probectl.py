"""probectl itself on a kernel with kprobes: the seeds' kernel scenarios inside Debian's cloud kernel.

One boot (vmtest/probectl_guest.py) runs every step below in order with the real probectl (this
checkout's package, the venv's interpreter, the vmlinux with DWARF where perf looks for it), and each
test checks the values its steps printed: sizes sent over loopback TCP, return values, file names,
stacks named from the syscall down to the probed function, CPUs, lost counts, kprobe_events after.
"""
from __future__ import annotations

import json
import re

import pytest

from tests.helpers import probectl
from vmtest.probectl_guest import GuestRun, Step, ok, run_named_steps

pytestmark = pytest.mark.qemu

KPROBE_EVENTS = "/sys/kernel/tracing/kprobe_events"
TCP_ESTABLISHED = 1
SMALL, BIG = 100, 777  # bytes sent by the clients of send.sh; each fits one read of busybox nc

# send.sh SIZE...: for each size a client (busybox nc) sends a file of that size over loopback TCP, in
# one write(2) and one tcp_sendmsg; the server's stdin is a sleep, so it closes only after reading all.
SEND = r"""
port=5000
for size in "$@"; do
    port=$((port+1))
    printf "%0${size}d" 0 > /tmp/payload$size
    sleep 60 | nc -l -p $port > /dev/null &
    while ! netstat -ltn | grep -q ":$port "; do usleep 10000; done
    nc 127.0.0.1 $port < /tmp/payload$size || exit 1
done
"""
SEND_SH = "sh /guest/files/send.sh"
MODULE_PROBE = "ovl_open inode file->f_flags"
STACKS_FILE = "/tmp/g.dat"  # (also read here: the kernel's symbols travel in the file)

# name -> shell text; run in this order in one boot.
STEPS = {
    # entry probe life cycle, with kernel stacks
    "add": "probectl add tcp_sendmsg",
    "list": "probectl list",
    "record_g": f"probectl record -e probe:tcp_sendmsg -g -o {STACKS_FILE} -- {SEND_SH} {SMALL} {BIG} {SMALL}",
    "script_g": f"probectl script -i {STACKS_FILE}",
    "script_g_json": f"probectl script -i {STACKS_FILE} --format json",
    "script_g_folded": f"probectl script -i {STACKS_FILE} --format folded",
    "del": "probectl del probe:tcp_sendmsg && cat " + KPROBE_EVENTS,
    # arguments, a member of a member, and a filter on both (with a control run)
    "add_size": "probectl add 'tcp_sendmsg size sk->__sk_common.skc_state'",
    "record_filter": ("probectl record -e probe:tcp_sendmsg --filter 'size > 400 && skc_state == 1' "
                      f"-o /tmp/f.dat -- {SEND_SH} {SMALL} {BIG} && probectl script -i /tmp/f.dat --format json"),
    "record_control": (f"probectl record -e probe:tcp_sendmsg -o /tmp/c.dat -- {SEND_SH} {SMALL} {BIG} "
                       "&& probectl script -i /tmp/c.dat --format json"),
    # -n writes nothing
    "dry_run": f"probectl add -n 'tcp_sendmsg_locked size'; echo @@; cat {KPROBE_EVENTS}",
    # a line probe with a local
    "add_line": "probectl add 'tcp_sendmsg_locked:96 copied'",
    "list_line": "probectl list 'probe:tcp_sendmsg_locked*'",
    # the return value equals the bytes sent
    "add_return": "probectl add 'tcp_sendmsg%return $retval'",
    "record_return": (f"probectl record -e 'probe:tcp_sendmsg*' -o /tmp/r.dat -- {SEND_SH} {SMALL} {BIG} "
                      "&& probectl script -i /tmp/r.dat --format json"),
    # del with a glob leaves nothing
    "del_glob": f"probectl del 'probe:*' && cat {KPROBE_EVENTS}",
    # a string argument: the file opened
    "add_open": "probectl add 'do_sys_openat2 filename:string'",
    "record_open": ("echo hi > /tmp/opened-by-cat && probectl record -e probe:do_sys_openat2 -o /tmp/o.dat "
                    "-- cat /tmp/opened-by-cat && probectl script -i /tmp/o.dat --format json"),
    "del_open": "probectl del probe:do_sys_openat2",
    # a tracepoint with a filter
    "record_tracepoint": ("probectl record -e syscalls:sys_enter_read --filter 'count == 4321' -o /tmp/t.dat "
                          "-- dd if=/dev/zero of=/dev/null bs=4321 count=3 "
                          "&& probectl script -i /tmp/t.dat --format json"),
    # registers, named and unnamed; a global variable
    "add_registers": "probectl add 'tcp_sendmsg sk=%di:x64 %dx sysctl_max_skb_frags'",
    "record_registers": (f"probectl record -e probe:tcp_sendmsg -o /tmp/x.dat -- {SEND_SH} {BIG} "
                         "&& probectl script -i /tmp/x.dat --format json"),
    "del_registers": "probectl del probe:tcp_sendmsg",
    # offsets: at an instruction, and inside one (refused, nothing written)
    "offset": "probectl add -D 'tcp_sendmsg+5'",
    "offset_inside": f"probectl add 'tcp_sendmsg+1'; echo @@; cat {KPROBE_EVENTS}",
    # duplicates: refused, then -f adds EVENT_1; several recorded with a glob
    "add_twice": "probectl add tcp_sendmsg && probectl add tcp_sendmsg; echo \"exit $?\"",
    "add_forced": "probectl add -f tcp_sendmsg && probectl add tcp_recvmsg && probectl list",
    "record_glob": (f"probectl record -e 'probe:tcp_*' -o /tmp/glob.dat -- {SEND_SH} {SMALL} "
                    "&& probectl script -i /tmp/glob.dat --format json"),
    # -C 0 on two CPUs: the client pinned to CPU 1 is not recorded
    "record_cpu0": (f"probectl record -a -C 0 -e probe:tcp_sendmsg -o /tmp/cpu.dat -- "
                    f"sh -c 'taskset -c 0 {SEND_SH} {SMALL}; taskset -c 1 {SEND_SH} {BIG}' "
                    "&& probectl script -i /tmp/cpu.dat --format json"),
    "del_all": f"probectl del 'probe:*' && cat {KPROBE_EVENTS}",
    # a tiny buffer under a flood: the kernel's lost count is reported
    "record_lost": ("probectl record -m 4 -e syscalls:sys_enter_read -o /tmp/lost.dat -- "
                    "dd if=/dev/zero of=/dev/null bs=1 count=100000"),
    # trace streams the events of its probes and removes them after
    "trace": f"probectl trace 'tcp_sendmsg size' -- {SEND_SH} {SMALL} {BIG}; echo @@; cat {KPROBE_EVENTS}",
    "trace_line": (f"probectl trace -k /kernel/vmlinux 'tcp_sendmsg_locked:96 copied size_goal' -- {SEND_SH} {SMALL}; "
                   f"echo @@; cat {KPROBE_EVENTS}"),
    # a module's probe after insmod, its arguments from the module's BTF (/sys/kernel/btf/overlay)
    # (from its DWARF it takes minutes under TCG; module DWARF is tested against perf on the host)
    "module": ("insmod /kernel/modules/loadable/overlay.ko && mkdir -p /tmp/ov/l /tmp/ov/u /tmp/ov/w /tmp/ov/m "
               "&& mount -t overlay overlay -o lowerdir=/tmp/ov/l,upperdir=/tmp/ov/u,workdir=/tmp/ov/w /tmp/ov/m "
               "&& echo hi > /tmp/ov/m/f "
               f"&& probectl add --btf -m /kernel/modules/loadable/overlay.ko '{MODULE_PROBE}' "
               "&& probectl record -e probe:ovl_open -o /tmp/ovl.dat -- cat /tmp/ov/m/f "
               "&& probectl script -i /tmp/ovl.dat --format json && probectl del probe:ovl_open"),
    "module_btf_definition": f"probectl add -D --btf -m /kernel/modules/loadable/overlay.ko '{MODULE_PROBE}'",
    # --btf with no vmlinux where perf looks: the running kernel's /sys/kernel/btf/vmlinux
    "dwarf_definition": "probectl add -D 'tcp_sendmsg size sk->__sk_common.skc_state'",
    "btf_definition": ("mount -t tmpfs none /usr/lib/debug && "
                       "probectl add -D --btf 'tcp_sendmsg size sk->__sk_common.skc_state'; "
                       "s=$?; umount /usr/lib/debug; exit $s"),
    "kallsyms": "head -3 /proc/kallsyms",
    "after": f"cat {KPROBE_EVENTS}; ls /sys/kernel/tracing/instances",
}


@pytest.fixture(scope="module")
def guest_run(probectl_kernel_dir) -> GuestRun:
    return run_named_steps(probectl_kernel_dir, STEPS, files={"send.sh": SEND.encode()}, fetch=[STACKS_FILE])


@pytest.fixture(scope="module")
def guest(guest_run) -> dict[str, Step]:
    """The steps' results by name."""
    return dict(zip(STEPS, guest_run.steps))


def probectl_here(*args: str) -> str:
    """probectl on this machine (offline, on the same kernel files the guest has)."""
    return probectl(*args, timeout=600).stdout


def removed_then_left(step: Step) -> tuple[list[str], list[str]]:
    """A `del ... && cat kprobe_events` step: the events del removed, and the kprobe_events lines left."""
    lines = ok(step).stdout.splitlines()
    removed = [line.removeprefix("Removed event: ") for line in lines if line.startswith("Removed event: ")]
    return removed, [line for line in lines if line and not line.startswith("Removed event: ")]


def json_events(step: Step) -> list[dict]:
    return [json.loads(line) for line in ok(step).stdout.splitlines() if line.startswith("{")]


def test_entry_probe_life_cycle(guest):
    assert "probe:tcp_sendmsg" in ok(guest["add"]).output
    assert re.search(r"probe:tcp_sendmsg\s+\(on tcp_sendmsg", ok(guest["list"]).stdout)
    # three clients, three sends: three events (stack records are not events)
    assert re.search(r"\b3 events\b", ok(guest["record_g"]).output), guest["record_g"].output
    assert removed_then_left(guest["del"]) == (["probe:tcp_sendmsg"], [])


def test_kernel_stacks_are_named(guest, guest_run, tmp_path):
    # the case this guards: kallsyms starting with per-CPU symbols at 0 (the host's starts with _stext)
    assert ok(guest["kallsyms"]).stdout.startswith("0000000000000000 A fixed_percpu_data\n")
    text = ok(guest["script_g"]).stdout
    assert text.count("probe:tcp_sendmsg:") == 3
    assert "[unknown] ([kernel.kallsyms])" not in text
    for frame in ("tcp_sendmsg", "sock_write_iter", "ksys_write", "entry_SYSCALL_64"):
        assert frame in text, text[:3000]
    events = json_events(guest["script_g_json"])
    assert len(events) == 3
    for ev in events:
        stack = ev["kernel_stack"]
        assert any(f.startswith("ksys_write") for f in stack), stack
        assert not any(re.fullmatch(r"(0x)?[0-9a-f]+", f) for f in stack), stack
    # the file brought back and read here names the same frames (kallsyms is in the file)
    here = tmp_path / "g.dat"
    here.write_bytes(guest_run.files[STACKS_FILE])
    def kernel_lines(script_text: str) -> list[str]:  # (user frames name the host's files here)
        return [line for line in script_text.splitlines() if "probe:" in line or "[kernel.kallsyms]" in line]

    assert kernel_lines(probectl_here("script", "-i", str(here))) == kernel_lines(text)
    folded = ok(guest["script_g_folded"]).stdout.splitlines()
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded) == 3
    assert all("ksys_write" in line and "tcp_sendmsg" in line for line in folded), folded


def test_filter_on_argument_and_member(guest):
    kept = json_events(guest["record_filter"])
    control = json_events(guest["record_control"])
    assert sorted(ev["fields"]["size"] for ev in control) == [SMALL, BIG]
    assert all(ev["fields"]["skc_state"] == TCP_ESTABLISHED for ev in control)
    assert [ev["fields"]["size"] for ev in kept] == [BIG]


def test_dry_run_writes_nothing(guest):
    step = ok(guest["dry_run"])
    said, listing = step.stdout.split("@@\n")
    assert "tcp_sendmsg_locked" not in listing
    assert "not" in said.lower() and "written" in said.lower(), said
    assert "You can now use it" not in said


def test_line_probe_with_local(guest, probectl_kernel_dir):
    # (vars reads the whole CU of tcp.c: 4 minutes under TCG, so it runs here, on the same vmlinux)
    listed = probectl_here("vars", "-k", str(probectl_kernel_dir / "vmlinux"), "tcp_sendmsg_locked:96")
    assert re.search(r"^\t\tint\tcopied$", listed, re.M), listed
    ok(guest["add_line"])
    assert "(on tcp_sendmsg_locked:96@net/ipv4/tcp.c with copied)" in ok(guest["list_line"]).stdout


def test_return_value_is_bytes_sent(guest):
    ok(guest["add_return"])
    events = json_events(guest["record_return"])
    returns = [ev["fields"]["arg1"] for ev in events if ev["event"] == "probe:tcp_sendmsg__return"]
    assert sorted(returns) == [SMALL, BIG]
    lines = [ev for ev in events if ev["event"] == "probe:tcp_sendmsg_locked_L96"]
    assert lines and all(0 <= ev["fields"]["copied"] <= BIG for ev in lines)
    assert removed_then_left(guest["del_glob"]) == (
        ["probe:tcp_sendmsg", "probe:tcp_sendmsg_locked_L96", "probe:tcp_sendmsg__return"], [])


def test_string_argument_names_the_file(guest):
    ok(guest["add_open"])
    names = [ev["fields"]["filename_string"] for ev in json_events(guest["record_open"])]
    assert "/tmp/opened-by-cat" in names, names
    ok(guest["del_open"])


def test_tracepoint_filter(guest):
    events = json_events(guest["record_tracepoint"])
    assert len(events) == 3 and all(ev["fields"]["count"] == 4321 for ev in events)


def test_registers_and_a_global(guest, probectl_kernel_dir):
    # --externs lists the global (here: the whole CU is read, minutes under TCG)
    listed = probectl_here("vars", "--externs", "-k", str(probectl_kernel_dir / "vmlinux"), "tcp_sendmsg")
    assert re.search(r"^\t\tint\tsysctl_max_skb_frags$", listed, re.M), listed
    ok(guest["add_registers"])
    (ev,) = json_events(guest["record_registers"])
    fields = ev["fields"]
    assert fields["arg2"] == BIG  # %dx, unnamed: the size
    assert fields["sk"] > 0xffff000000000000  # a kernel pointer
    assert fields["sysctl_max_skb_frags"] == 17  # MAX_SKB_FRAGS, the default
    ok(guest["del_registers"])


def test_offsets(guest):
    # (tcp_sendmsg+0 is the 5-byte call to __fentry__, patched to a nop: no endbr64 in this kernel)
    assert ok(guest["offset"]).stdout.strip() == "p:probe/tcp_sendmsg tcp_sendmsg+5"
    said, listing = ok(guest["offset_inside"]).stdout.split("@@\n")
    assert "inside the instruction at tcp_sendmsg+0" in guest["offset_inside"].stderr
    assert listing.strip() == ""


def test_duplicates_and_force(guest):
    step = guest["add_twice"]
    assert step.stdout.rstrip().endswith("exit 1") and "already exists" in step.stderr, step.output
    listing = ok(guest["add_forced"]).stdout
    for name in ("probe:tcp_sendmsg ", "probe:tcp_sendmsg_1 ", "probe:tcp_recvmsg "):
        assert name in listing, listing
    names = {ev["event"] for ev in json_events(guest["record_glob"])}
    assert names == {"probe:tcp_sendmsg", "probe:tcp_sendmsg_1", "probe:tcp_recvmsg"}
    assert removed_then_left(guest["del_all"]) == (
        ["probe:tcp_sendmsg", "probe:tcp_sendmsg_1", "probe:tcp_recvmsg"], [])


def test_cpu_selection(guest):
    events = json_events(guest["record_cpu0"])
    assert [(ev["cpu"], ev["comm"]) for ev in events] == [(0, "nc")]  # one client of two


def test_lost_events_are_reported(guest):
    step = ok(guest["record_lost"])
    m = re.search(r"Warning: the kernel lost ([\d,]+) events? \(cpu\d: ", step.stderr)
    assert m and int(m[1].replace(",", "")) > 0, step.stderr


def test_trace_streams_and_cleans_up(guest):
    out, listing = ok(guest["trace"]).stdout.split("@@\n")
    sizes = sorted(int(m, 16) for m in re.findall(r"probe:tcp_sendmsg: \(\w+\) size=0x([0-9a-f]+)", out))
    assert sizes == [SMALL, BIG], out
    assert listing.strip() == ""


def test_trace_with_a_vmlinux(guest):
    out, listing = ok(guest["trace_line"]).stdout.split("@@\n")
    (line,) = [x for x in out.splitlines() if "probe:tcp_sendmsg_locked_L96:" in x]
    assert re.search(r" copied=0 size_goal=\d+$", line), line
    assert listing.strip() == ""


def test_module_probe_after_insmod(guest, probectl_kernel_dir):
    events = json_events(guest["module"])
    assert events and all(ev["event"] == "probe:ovl_open" for ev in events)
    assert any(ev["fields"]["f_flags"] & 0o100000 for ev in events)  # O_LARGEFILE, as every open here
    dwarf = probectl_here("add", "-D", "-m", str(probectl_kernel_dir / "modules" / "overlay.ko"), MODULE_PROBE)
    assert ok(guest["module_btf_definition"]).stdout == dwarf
    assert "(/sys/kernel/btf/overlay on /sys/kernel/btf/vmlinux)" in guest["module_btf_definition"].stderr


def test_btf_without_vmlinux(guest):
    btf = ok(guest["btf_definition"])
    assert btf.stdout == ok(guest["dwarf_definition"]).stdout
    assert "C arguments from BTF (/sys/kernel/btf/vmlinux)" in btf.stderr


def test_nothing_left_behind(guest):
    after = ok(guest["after"]).stdout
    assert "probe" not in after, after
