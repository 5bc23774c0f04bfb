"""The tracefs layer on live uprobes: add/remove, atomic rollback with the kernel's error_log, name
collisions, busy events, the lock, no permission, mounting (offline: tests/test_tracefs.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import textwrap

import pytest
from elftools.elf.elffile import ELFFile

from probectl.errors import EventExistsError, TracefsError
from probectl.events import EventDefinition, FetchArg
from probectl.tracefs import Tracefs

from tests.test_tracefs import PYTHON, ROOT


def test_features_of_this_machine(live_tracefs):
    t = Tracefs(live_tracefs)
    readme = (live_tracefs / "README").read_text()
    f = t.features
    assert f.uprobe_events and f.dynamic_events and f.error_log
    assert f.kprobe_events == (live_tracefs / "kprobe_events").exists()
    assert f.multiprobe == ("Create/append/" in readme)
    assert f.ref_ctr == ("ref_ctr_offset" in readme)
    assert f.immediates == ("\\imm-value," in readme)
    assert f.array_types == ("<type>\\[<array-size>\\]" in readme)
    assert f.btf_args == ("<argname>" in readme)
    assert f.kretprobe_offset == ("place (kretprobe): " in readme)


TARGET_C = r"""
#include <stdio.h>
int counter = 3;
__attribute__((noinline)) int greet(const char *name, long n) { return printf("%s %ld\n", name, n) + counter; }
__attribute__((noinline)) int other(int x) { return x * 2 + counter; }
int main(int argc, char **argv) { return greet(argc > 1 ? argv[1] : "world", argc) + other(argc) > 100; }
"""


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    """(binary path, {function: file offset}) of a small program built with gcc."""
    if not shutil.which("gcc"):
        pytest.skip("gcc is not installed")
    d = tmp_path_factory.mktemp("target")
    (d / "target.c").write_text(TARGET_C)
    binary = d / "target"
    subprocess.run(["gcc", "-O0", "-g", "-o", str(binary), str(d / "target.c")], check=True)
    offsets = {}
    with open(binary, "rb") as f:
        elf = ELFFile(f)
        text = elf.get_section_by_name(".text")
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            if sym.name in ("greet", "other", "main"):
                offsets[sym.name] = sym["st_value"] - text["sh_addr"] + text["sh_offset"]
    os.chmod(d, 0o755)
    return binary, offsets


@pytest.fixture
def live(live_tracefs):
    """A Tracefs and a group name of this test process; removes the group's events however the test ends."""
    t = Tracefs.open(mount=False)
    group = f"probectl_test_{os.getpid()}"
    yield t, group
    leftovers = [(g, e) for g, e in t.event_names() if g == group]
    for g, e in leftovers:
        with open(live_tracefs / "events" / g / e / "enable", "w") as f:
            f.write("0")
    t.remove(leftovers)


def uprobe(group, event, binary, offset, *args, kind="p"):
    return EventDefinition(kind, group, event, f"{binary}:{offset:#x}", tuple(FetchArg.parse(a) for a in args),
                           is_uprobe=True)


def mine(t, group):
    return [d for d in t.definitions() if d.group == group]


def test_add_list_format_remove(live, target):
    t, group = live
    binary, off = target
    defs = [
        uprobe(group, "greet", binary, off["greet"], "name=+0(%di):string", "n=%si:s64", "c=$comm", "arr=+0(%sp):x8[4]"),
        uprobe(group, "greet__return", binary, off["greet"], "ret=$retval:s32", kind="r"),
    ]
    t.add(defs)
    try:
        back = {d.event: d for d in mine(t, group)}
        assert set(back) == {"greet", "greet__return"}
        entry = back["greet"]
        assert entry.is_uprobe and entry.kind == "p"
        assert entry.uprobe_path == str(binary) and entry.uprobe_offset == off["greet"]
        assert entry.place == f"{binary}:0x{off['greet']:016x}"  # the kernel pads the offset
        assert entry.args == defs[0].args
        assert back["greet__return"].kind == "r" and back["greet__return"].args == defs[1].args
        assert {(group, "greet"), (group, "greet__return")} <= t.event_names()
        assert t.tracepoints(f"{group}:*") == [(group, "greet"), (group, "greet__return")]

        fmt = t.event_format(group, "greet")
        assert (fmt.system, fmt.name) == (group, "greet")
        assert [f.name for f in fmt.event_fields] == ["__probe_ip", "name", "n", "c", "arr"]
        assert fmt.field("name").is_data_loc and fmt.field("name").is_string and fmt.field("c").is_string
        assert (fmt.field("n").size, fmt.field("n").signed) == (8, True)
        assert (fmt.field("arr").array_len, fmt.field("arr").size) == (4, 4)
        rfmt = t.event_format(group, "greet__return")
        assert [f.name for f in rfmt.event_fields] == ["__probe_func", "__probe_ret_ip", "ret"]
        assert (rfmt.field("ret").size, rfmt.field("ret").signed) == (4, True)
    finally:
        removed = t.remove([(group, "greet"), (group, "greet__return"), (group, "never_added")])
    assert removed == [(group, "greet"), (group, "greet__return")]
    assert mine(t, group) == [] and not any(g == group for g, _ in t.event_names())


@pytest.mark.parametrize("bad, message, token", [
    ("x=%zz", "Invalid register name", "%zz"),
    ("x=%ax:u7", "Unknown type is specified", "u7"),
])
def test_atomic_add_rolls_back(live, target, bad, message, token):
    t, group = live
    binary, off = target
    defs = [uprobe(group, "one", binary, off["greet"], "a=%di"),
            uprobe(group, "two", binary, off["other"], "b=%di:s32"),
            uprobe(group, "three", binary, off["main"], bad)]
    with pytest.raises(TracefsError) as info:
        t.add(defs)
    err = info.value
    assert not isinstance(err, EventExistsError)
    assert err.message == f"the kernel rejected the definition of {group}:three: {message}"
    lines = err.kernel_log.splitlines()
    assert len(lines) == 3, err.kernel_log
    assert lines[0].endswith(f"trace_uprobe: error: {message}")
    command = defs[2].render()
    assert lines[1] == f"  Command: {command}"
    # the caret points at the bad token of the command
    assert lines[2].index("^") == len("  Command: ") + command.index(token)
    assert err.hint
    assert mine(t, group) == []
    assert not any(g == group for g, _ in t.event_names())


def test_rejection_without_error_log_entry(live, target):
    """A semaphore offset that disagrees with an existing probe at the same place: EINVAL, no log."""
    t, group = live
    binary, off = target
    first = uprobe(group, "plain", binary, off["other"])
    t.add([first])
    try:
        with pytest.raises(TracefsError) as info:
            t.add([EventDefinition("p", group, "sem", f"{binary}:{off['other']:#x}(0x10)", is_uprobe=True)])
        assert info.value.message.startswith(f"the kernel rejected the definition of {group}:sem: Invalid argument")
        assert f"{binary}:{off['other']:#x}(0x10)" in info.value.message
        assert "dmesg" in info.value.hint and info.value.kernel_log == ""
        assert [d.event for d in mine(t, group)] == ["plain"]
    finally:
        t.remove([(group, "plain")])


def test_existing_name(live, target):
    t, group = live
    binary, off = target
    t.add([uprobe(group, "dup", binary, off["greet"])])
    try:
        before = (live[0].root / "uprobe_events").read_text()
        with pytest.raises(EventExistsError) as info:
            t.add([uprobe(group, "fresh", binary, off["other"]), uprobe(group, "dup", binary, off["other"])])
        assert info.value.message == f"event {group}:dup already exists"
        assert f"probectl del {group}:dup" in info.value.hint
        assert (live[0].root / "uprobe_events").read_text() == before
        with pytest.raises(EventExistsError, match="sched:sched_switch already exists"):
            t.add([uprobe("sched", "sched_switch", binary, off["greet"])])
    finally:
        t.remove([(group, "dup")])


def test_multiprobe_event_in_one_add(live, target):
    """Two definitions with one name append a second probe to the event (README Create/append)."""
    t, group = live
    if not t.features.multiprobe:
        pytest.skip("this kernel cannot append probes to an event")
    binary, off = target
    t.add([uprobe(group, "both", binary, off["greet"], "x=%di"), uprobe(group, "both", binary, off["other"], "x=%di")])
    try:
        assert sorted(d.uprobe_offset for d in mine(t, group)) == sorted([off["greet"], off["other"]])
    finally:
        assert t.remove([(group, "both")]) == [(group, "both")]
    assert mine(t, group) == []


def test_remove_busy_event(live, target):
    t, group = live
    binary, off = target
    t.add([uprobe(group, "busy", binary, off["greet"]), uprobe(group, "idle", binary, off["other"])])
    enable = t.root / "events" / group / "busy" / "enable"
    try:
        enable.write_text("1")
        with pytest.raises(TracefsError) as info:
            t.remove([(group, "busy"), (group, "idle")])
        assert info.value.message == f"cannot remove {group}:busy: in use (enabled, or open in a recording)"
        assert f"echo 0 > {enable}" in info.value.hint
        assert f"removed meanwhile: {group}:idle" in info.value.hint
        assert [d.event for d in mine(t, group)] == ["busy"]
    finally:
        enable.write_text("0")
        t.remove([(group, "busy"), (group, "idle")])
    assert mine(t, group) == []


def test_unprivileged_user(live_tracefs):
    """As nobody, opening tracefs fails with a message that says to run as root."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    code = ("from probectl.tracefs import Tracefs\n"
            "from probectl.errors import TracefsError\n"
            "try:\n    Tracefs.open()\n    print('opened')\n"
            "except TracefsError as e:\n    print(e.message)\n    print(e.hint)\n")
    run = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", PYTHON, "-c", code],
                         capture_output=True, text=True, cwd="/", env={**os.environ, "PYTHONPATH": str(ROOT)},
                         timeout=30)
    assert run.returncode == 0, run.stderr
    if run.stdout.startswith("opened"):
        pytest.skip("tracefs is readable by everyone on this machine")
    message, hint = run.stdout.splitlines()[:2]
    assert message.startswith("no permission to use tracefs")
    assert "run probectl as root" in hint


def test_mounts_tracefs_when_absent(live_tracefs):
    """In a private mount namespace without tracefs, open() mounts it (and says so); mount=False refuses."""
    if not shutil.which("unshare"):
        pytest.skip("unshare (util-linux) is not installed")
    code = textwrap.dedent("""
        import subprocess
        from probectl.tracefs import Tracefs
        from probectl.errors import TracefsError
        subprocess.run(["umount", "/sys/kernel/tracing"], check=True)
        subprocess.run(["umount", "/sys/kernel/debug"], capture_output=True)  # (its tracing/ would automount)
        try:
            Tracefs.open(mount=False)
        except TracefsError as e:
            print("refused:", e.message, "|", e.hint)
        notes = []
        t = Tracefs.open(notice=notes.append)
        print("notes:", notes)
        print("root:", t.root, t.features.uprobe_events)
    """)
    run = subprocess.run(["unshare", "--mount", "--propagation", "private", PYTHON, "-c", code],
                         capture_output=True, text=True, cwd=ROOT, timeout=30)
    if run.returncode != 0 and "umount" in run.stderr:
        pytest.skip(f"cannot unmount tracefs in a private namespace: {run.stderr.strip()}")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "refused: tracefs is not mounted | mount it: 'mount -t tracefs nodev /sys/kernel/tracing'",
        "notes: ['mounted tracefs at /sys/kernel/tracing']",
        "root: /sys/kernel/tracing True",
    ]
