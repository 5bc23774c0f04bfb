"""probectl itself on an arm64 kernel: the seeds' kernel scenarios and uprobes on AArch64 programs, run
by probectl inside Debian's arm64 cloud kernel in ``qemu-system-aarch64 -M virt`` (TCG).

One boot (vmtest/probectl_guest.py with ``machine=AARCH64_GUEST``: Debian's arm64 Python 3.11 from
tools/python-arm64.sh, the venv's pure-Python packages, this checkout with its native extension
cross-compiled for AArch64) runs every step below in order. probectl resolves each probe there, on
the arm64 vmlinux (found where perf looks for it) and on the AArch64 builds of the fixtures, writes
it, records the arm64 kernel's trace pages and reads them back with ``script``; the tests check the
values against what the workload did: sizes sent over loopback TCP, ESTABLISHED, return values, a
local at a line, kernel stacks named from the syscall down (and the same names from the recording
read on this x86-64 host), the fixture programs' own ``EXPECT`` lines (tests/live/test_live_source's
checks of the same definitions on x86-64), and their user stacks: unwound from copies and call-frame
information, and walked by the kernel through the frame records, with the same frames. One boot:
qemu 78 s on this machine when quiet, 100-115 s with its 2 cores shared; the first command on the
vmlinux takes 15-20 s of it (the vmlinux read from the emulated NVMe disk for the first time).
"""
from __future__ import annotations

import gzip
import json
import re

import pytest

from probectl.events import EventDefinition

from tests.guest.test_qemu_probectl import (BIG, SEND, SEND_SH, SMALL, TCP_ESTABLISHED, json_events,
                                            removed_then_left)
from tests.helpers import build_arm64_fixture, build_go_fixture, probectl
from tests.live.test_live_source import (RETVAL_PROBES, STRUCTS_PROBES, Recording, check_retval_and_members,
                                         check_structs)
from tests.live.test_live_uprobes import expect_lines
from vmtest.busybox_guest import AARCH64_GUEST
from vmtest.probectl_guest import GuestRun, Step, ok, run_named_steps

pytestmark = pytest.mark.qemu

UPROBE_EVENTS = "/sys/kernel/tracing/uprobe_events"
KPROBE_EVENTS = "/sys/kernel/tracing/kprobe_events"
STACKS_FILE = "/tmp/g.dat"
# The AArch64 fixture programs in the guest (/guest/files/NAME) and their probes, in group a64NAME.
# s0 also has a probe at a function's first instruction, where its caller's return address is in x30.
PROGRAMS = {"u2": ("uprobe_target", "-O2", RETVAL_PROBES, "3"),
            "s0": ("dwarf_structs", "-O0", [*STRUCTS_PROBES, ("centry", "check_bits+0")], "")}


def _add(tag: str) -> str:
    _name, _opt, probes, _argv = PROGRAMS[tag]
    texts = " ".join(f"'a64{tag}:{event}={definition}'" for event, definition in probes)
    return f"probectl add -x /guest/files/{tag} {texts}"


GO_DEPTH = 2000
GO_PROBES = "'a64go:w=main.work%return $retval' 'a64go:e=main.work depth' 'a64go:dm=main.divmod%return q r'"

KERNEL_PROBES = ("'tcp_sendmsg size sk->__sk_common.skc_state' 'tcp_sendmsg_locked:96 copied' "
                 "'tcp_sendmsg%return $retval'")
# The uprobes' run: each program's stdout (its EXPECT lines) to /tmp/TAG.out.
RUN_PROGRAMS = "; ".join(f"/guest/files/{tag} {argv} > /tmp/{tag}.out" for tag, (_n, _o, _p, argv) in PROGRAMS.items())
SECTION = "@@\n"
UPROBE_GROUPS = " ".join(f"-e 'a64{tag}:*'" for tag in PROGRAMS)

# name -> shell text; run in this order in one boot (each probectl command is 2-3 s of Python's start-up
# under TCG, so the steps are few: one add for the kernel's three probes, one record per workload).
STEPS = {
    # an argument and a member of a member, a line probe with a local, the return value
    "add_kernel": f"probectl add {KERNEL_PROBES} && echo @@ && cat {KPROBE_EVENTS}",
    # a filter on the argument and the member, with kernel stacks; the file is read back on the host too
    "record_g": (f"probectl record -e probe:tcp_sendmsg -g --filter 'size > 400 && skc_state == 1' -o {STACKS_FILE} "
                 f"-- {SEND_SH} {SMALL} {BIG} {SMALL} && probectl script -i {STACKS_FILE} --format json "
                 f"&& gzip -c {STACKS_FILE} > {STACKS_FILE}.gz"),
    # every probe, no filter: both sizes, the local, the return values
    "record_kernel": (f"probectl record -e 'probe:tcp_sendmsg*' -o /tmp/r.dat -- {SEND_SH} {SMALL} {BIG} "
                      "&& probectl script -i /tmp/r.dat --format json"),
    "del_kernel": f"probectl del 'probe:*' && cat {KPROBE_EVENTS}",
    # uprobes on the AArch64 fixtures, resolved here from their DWARF, recorded with their user stacks
    **{f"add_{tag}": _add(tag) for tag in PROGRAMS},
    "record_uprobes": (f"probectl record -g {UPROBE_GROUPS} -o /tmp/u.dat "
                       f"-- sh -c '{RUN_PROGRAMS}' && probectl script -i /tmp/u.dat --format json && "
                       + " && ".join(f"echo @@ && cat /tmp/{tag}.out" for tag in PROGRAMS)
                       + f" && echo @@ && cat {UPROBE_EVENTS}"),
    # the user stacks of a program that keeps frame records, unwound from copies of the stack and the
    # call-frame information, and walked by the kernel (inside paint: its frame record is made)
    "record_dwarf": ("probectl record --call-graph dwarf -e a64s0:members -e a64s0:area -o /tmp/d.dat "
                     "-- /guest/files/s0 > /dev/null && probectl script -i /tmp/d.dat --format json"),
    "record_fp": ("probectl record --call-graph fp -e a64s0:members -e a64s0:area -o /tmp/fp.dat "
                  "-- /guest/files/s0 > /dev/null && probectl script -i /tmp/fp.dat --format json"),
    # a Go program whose stack grows under its probes (work recurses 2,000 deep): return probes as uprobes
    # on its RETs, the entry past the stack-bound check; it runs to its end, each call seen once
    "go": (f"probectl add -x /guest/files/go {GO_PROBES} && probectl record -e 'a64go:*' -o /tmp/go.dat -- "
           f"/guest/files/go {GO_DEPTH} > /tmp/go.out && probectl script -i /tmp/go.dat --format json && echo @@ "
           "&& cat /tmp/go.out"),
    "del_uprobes": f"probectl del 'a64*:*' && cat {UPROBE_EVENTS}",
    "after": f"cat {KPROBE_EVENTS} {UPROBE_EVENTS}; ls /sys/kernel/tracing/instances",
}


@pytest.fixture(scope="module")
def guest_run(arm64_probectl_kernel_dir) -> GuestRun:
    files = {"send.sh": SEND.encode()}
    for tag, (name, opt, _probes, _argv) in PROGRAMS.items():
        files[tag] = build_arm64_fixture(name, opt).read_bytes()
    files["go"] = build_go_fixture("go_target", "", "arm64").read_bytes()
    # (fetched compressed: the file holds the kernel's symbols, 1.7 MB, slow through an emulated UART)
    return run_named_steps(arm64_probectl_kernel_dir, STEPS, files=files, fetch=[f"{STACKS_FILE}.gz"],
                           machine=AARCH64_GUEST, timeout=900)


@pytest.fixture(scope="module")
def guest(guest_run) -> dict[str, Step]:
    """The steps' results by name."""
    return dict(zip(STEPS, guest_run.steps))


def _kernel_events(guest) -> list[dict]:
    return json_events(guest["record_kernel"])


def test_kernel_definitions_are_the_hosts(guest, arm64_probectl_kernel_dir):
    """What probectl wrote in the guest (resolved there, on the vmlinux where perf looks for it) is
    what it resolves here, offline, for the same vmlinux (which tests/guest/test_qemu_arm64_kprobes.py
    checks against perf's definitions)."""
    said, listing = ok(guest["add_kernel"]).stdout.split(SECTION)
    assert "probe:tcp_sendmsg_locked_L96 (on tcp_sendmsg_locked:96 with copied)" in said, said
    here = probectl("add", "-D", "-k", str(arm64_probectl_kernel_dir / "vmlinux"),
                    *re.findall(r"'([^']+)'", KERNEL_PROBES), timeout=600).stdout

    def places(lines: str) -> list[tuple[str, str]]:  # (the kernel lists FUNC+0 as FUNC)
        return [(d.event, d.place.removesuffix("+0")) for d in map(EventDefinition.parse, lines.splitlines())]

    assert places(listing) == places(here)
    assert "tcp_sendmsg+8" in listing  # after ftrace's two NOPs


def test_filter_on_argument_and_member(guest):
    kept = json_events(guest["record_g"])
    assert [ev["fields"]["size"] for ev in kept] == [BIG]
    control = [ev for ev in _kernel_events(guest) if ev["event"] == "probe:tcp_sendmsg"]
    assert sorted(ev["fields"]["size"] for ev in control) == [SMALL, BIG]
    assert all(ev["fields"]["skc_state"] == TCP_ESTABLISHED for ev in control)


def test_kernel_stacks_are_named(guest, guest_run, tmp_path):
    (ev,) = json_events(guest["record_g"])
    stack = ev["kernel_stack"]
    assert stack[0].startswith("tcp_sendmsg+"), stack
    for frame in ("sock_write_iter", "ksys_write", "__arm64_sys_write", "el0_svc"):
        assert any(f.startswith(frame + "+") for f in stack), stack
    # the recording read here, on x86-64, names the same frames (the page and event layouts of an
    # arm64 kernel's trace, and kallsyms travels in the file)
    here = tmp_path / "g.dat"
    here.write_bytes(gzip.decompress(guest_run.files[f"{STACKS_FILE}.gz"]))
    (read_here,) = [json.loads(line) for line in probectl("script", "-i", str(here), "--format", "json").stdout
                    .splitlines()]
    assert read_here["kernel_stack"] == stack
    assert read_here["fields"] == ev["fields"]


def test_line_probe_with_local_and_return_value(guest):
    events = _kernel_events(guest)
    returns = [ev["fields"]["arg1"] for ev in events if ev["event"] == "probe:tcp_sendmsg__return"]
    assert sorted(returns) == [SMALL, BIG]
    lines = [ev for ev in events if ev["event"] == "probe:tcp_sendmsg_locked_L96"]
    assert len(lines) == 2 and all(0 <= ev["fields"]["copied"] <= BIG for ev in lines)
    assert removed_then_left(guest["del_kernel"]) == (
        ["probe:tcp_sendmsg", "probe:tcp_sendmsg_locked_L96", "probe:tcp_sendmsg__return"], [])


def _recording(guest, tag: str) -> Recording:
    """The program's events as tests/live/test_live_source checks them: (event, address, fields as the
    trace file writes them: numbers as text, strings quoted)."""
    out, *outputs, listing = ok(guest["record_uprobes"]).stdout.split(SECTION)
    stdout = dict(zip(PROGRAMS, outputs))[tag]
    events = []
    for ev in (json.loads(line) for line in out.splitlines() if line.startswith("{")):
        group, name = ev["event"].split(":")
        if group == f"a64{tag}":
            fields = {k: f'"{v}"' if isinstance(v, str) else str(v) for k, v in ev["fields"].items()}
            events.append((name, ev["fields"].get("__probe_ip", ev["fields"].get("__probe_func")), fields))
    definitions = [EventDefinition.parse(line) for line in listing.splitlines() if f":a64{tag}/" in line]
    return Recording(definitions, stdout, events)


def test_uprobe_return_values_and_members(guest):
    ok(guest["add_u2"])
    check_retval_and_members(_recording(guest, "u2"))


def test_uprobe_structs_bitfields_globals_and_lines(guest):
    ok(guest["add_s0"])
    check_structs(_recording(guest, "s0"))


def _user_stacks(step: Step, event: str) -> list[list[str]]:
    out = ok(step).stdout.split(SECTION)[0]
    return [ev["user_stack"] for ev in map(json.loads, (x for x in out.splitlines() if x.startswith("{")))
            if ev["event"] == event]


def _from_main(stack: list[str], function: str) -> None:
    """``function`` called by main, called by libc's start-up (its __libc_start_call_main is a local
    symbol of Debian's stripped libc, shown [unknown]), from _start."""
    assert stack[0].split("+")[0] == function and stack[1].startswith("main+"), stack
    assert stack[-2].startswith("__libc_start_main+") and stack[-1].startswith("_start+"), stack


def test_user_stacks_unwound_from_copies(guest):
    """``-g``: u2 (-O2) keeps no frame records in its leaves, so its stacks are copied and unwound from
    call-frame information: at the entry of sum_record, a leaf, the caller's return address is in x30;
    libc's saved return addresses are signed (pointer authentication), and stripped. check_bits+0 in
    s0, which keeps frame records: at a function's entry the kernel's walk would skip the caller (its
    return address is in x30, not yet in a frame record), so entry probes are copied too."""
    step = guest["record_uprobes"]
    assert "user stacks end in [unknown]" not in step.stderr, step.stderr
    assert "/guest/files/u2 keeps no frame pointers" in step.stderr
    recs = _user_stacks(step, "a64u2:rec")
    assert len(recs) == 3
    for stack in recs:
        _from_main(stack, "sum_record")
    (entry,) = _user_stacks(step, "a64s0:centry")
    _from_main(entry, "check_bits")


def test_the_kernels_frame_walk_equals_the_unwinder(guest):
    """The same probes inside paint (after its prologue), by --call-graph dwarf (copies unwound by
    probectl) and by --call-graph fp (the kernel's walk of the frame records): the same frames."""
    unwound = {e: _user_stacks(guest["record_dwarf"], f"a64s0:{e}") for e in ("members", "area")}
    walked = {e: _user_stacks(guest["record_fp"], f"a64s0:{e}") for e in ("members", "area")}
    assert unwound == walked
    for (stack,) in unwound.values():
        _from_main(stack, "paint")


def test_a_go_program_runs_to_its_end_under_return_probes_with_each_call_seen_once(guest):
    """An arm64 Go program under return probes made of uprobes on its RETs, and an entry probe past
    the stack-bound check: it ends, every call of work (2,001, nested, the stack grown meanwhile) is
    seen once entering and once returning, and the values are the program's (its EXPECT lines, as
    tests/live/test_go_programs.py checks them on x86-64)."""
    out, printed = ok(guest["go"]).stdout.split(SECTION)
    want = expect_lines(printed)
    events: dict[str, list[dict]] = {}
    for ev in (json.loads(line) for line in out.splitlines() if line.startswith("{")):
        group, name = ev["event"].split(":")
        if group == "a64go":
            events.setdefault(name, []).append(ev["fields"])
    assert len(events["e"]) == len(events["w__return"]) == GO_DEPTH + 1
    assert sorted(e["depth"] for e in events["e"]) == list(range(GO_DEPTH + 1))
    assert str(events["w__return"][-1]["arg1"]) == want["work"][0]["ret"]
    assert [(str(e["q"]), str(e["r"])) for e in events["dm__return"]] == [(c["q"], c["r"]) for c in want["divmod"]]


def test_nothing_left_behind(guest):
    ok(guest["del_uprobes"])
    after = ok(guest["after"]).stdout
    assert "probe" not in after and "a64" not in after, after
