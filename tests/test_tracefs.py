"""The tracefs layer: README features, error_log parsing, mount discovery, definitions other tools
wrote, on a fake tracefs directory. Live uprobes (add/remove, atomic rollback with the kernel's
error_log, name collisions, busy events, the lock, no permission, mounting): tests/live/test_tracefs.py."""
from __future__ import annotations

import errno
import fcntl
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from probectl import tracefs as tracefs_mod
from probectl.errors import EventExistsError, TracefsError
from probectl.events import EventDefinition, FetchArg
from probectl.tracefs import (Features, Tracefs, UnknownEventError, find_mount, new_error_log_entries,
                              new_error_log_entry, os_error, parse_error_log)

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# ---------------------------------------------------------------------------------------------
# README features

README_FULL = textwrap.dedent(r"""
      kprobe_events		- Create/append/remove/show the kernel dynamic events
      uprobe_events		- Create/append/remove/show the userspace dynamic events
    	  accepts: event-definitions (one definition per line)
    	   Format: p[:[<group>/][<event>]] <place> [<args>]
    	           r[maxactive][:[<group>/][<event>]] <place> [<args>]
    	           -:[<group>/][<event>]
    	    place: [<module>:]<symbol>[+<offset>]|<memaddr>
    place (kretprobe): [<module>:]<symbol>[+<offset>]%return|<memaddr>
       place (uprobe): <path>:<offset>[%return][(ref_ctr_offset)]
    	     args: <name>=fetcharg[:type]
    	 fetcharg: (%<register>|$<efield>), @<address>, @<symbol>[+|-<offset>],
    	           $stack<index>, $stack, $retval, $comm, $arg<N>,
    	           <argname>[->field[->field|.field...]],
    	           +|-[u]<offset>(<fetcharg>), \imm-value, \"imm-string"
    	     type: s8/16/32/64, u8/16/32/64, x8/16/32/64, char, string, symbol,
    	           b<bit-width>@<bit-offset>/<container-size>, ustring,
    	           symstr, %pd/%pD, <type>\[<array-size>\]
""")

# Debian's 6.1 cloud kernel (6.1.0-56), as its qemu guest printed it.
README_61 = textwrap.dedent(r"""
    	     args: <name>=fetcharg[:type]
    	 fetcharg: (%<register>|$<efield>), @<address>, @<symbol>[+|-<offset>],
    	           $stack<index>, $stack, $retval, $comm, $arg<N>,
    	           +|-[u]<offset>(<fetcharg>), \imm-value, \"imm-string"
    	     type: s8/16/32/64, u8/16/32/64, x8/16/32/64, string, symbol,
    	           b<bit-width>@<bit-offset>/<container-size>, ustring,
    	           symstr, <type>\[<array-size>\]
""")

# A 4.x-era README: no append, no immediates, no arrays, no user deref, no semaphores.
README_OLD = textwrap.dedent(r"""
      kprobe_events		- Add/remove/show the kernel dynamic events
    	   Format: p[:[<group>/]<event>] <place> [<args>]
    	    place: [<module>:]<symbol>[+<offset>]|<memaddr>
    	     args: <name>=fetcharg[:type]
    	 fetcharg: %<register>, @<address>, @<symbol>[+|-<offset>],
    	           $stack<index>, $stack, $retval, $comm
    	     type: s8/16/32/64, u8/16/32/64, string, b<bit-width>@<bit-offset>/<container-size>
""")


def test_features_full_readme():
    f = Features.detect(README_FULL, ["README", "kprobe_events", "uprobe_events", "dynamic_events", "error_log"])
    assert f == Features(uprobe_events=True, kprobe_events=True, dynamic_events=True, x_types=True,
                         multiprobe=True, immediates=True, user_deref=True, ref_ctr=True, btf_args=True,
                         symstr=True, kretprobe_offset=True, array_types=True, error_log=True, entry_args=True,
                         char_type=True, dentry_types=True)


def test_features_of_the_61_readme():
    """Debian's 6.1 kernel: symstr but no char and no %pd types, $arg<N> at entries but not at returns."""
    f = Features.detect(README_61, ["README", "kprobe_events", "uprobe_events"])
    assert (f.symstr, f.entry_args, f.char_type, f.dentry_types, f.retprobe_args) == (True, True, False, False,
                                                                                       False)


def test_features_old_readme():
    f = Features.detect(README_OLD, ["README", "kprobe_events"])
    assert f == Features(kprobe_events=True)


def test_features_without_readme():
    assert Features.detect("", []) == Features()


@pytest.mark.parametrize("pattern", sorted(set(Features._PATTERNS.values()) | {"abc", "a*", "*c", "a*c", "a*b*a", "**"}))
def test_readme_patterns_match_as_their_regex(pattern):
    """A README line matches a pattern as the regex ``^piece.*piece$`` (``*`` the only wildcard) matches it;
    the lines are the test READMEs', plus near misses."""
    import re

    regex = re.compile("^" + ".*".join(map(re.escape, pattern.split("*"))) + "$")
    lines = set((README_FULL + README_61 + README_OLD).splitlines()) | {"", "a", "abc", "ac", "aba", "abca", "c", "ab"}
    for line in lines:
        assert tracefs_mod._line_matches(line, pattern) == bool(regex.match(line)), (pattern, line)


# ---------------------------------------------------------------------------------------------
# error_log, mounts, error translation

ERROR_LOG = (
    "[  354.040223] trace_uprobe: error: Unknown type is specified\n"
    "  Command: p:g/a /tmp/t:0x1149 x=%ax:u7\n"
    "                                     ^\n"
    "[  390.072913] trace_uprobe: error: Invalid register name\n"
    "  Command: p:g/b /tmp/t:0x1141 %zz\n"
    "                               ^"  # the last caret line without its newline
)


def test_parse_error_log():
    entries = parse_error_log(ERROR_LOG)
    assert len(entries) == 2
    assert entries[1].splitlines() == [
        "[  390.072913] trace_uprobe: error: Invalid register name",
        "  Command: p:g/b /tmp/t:0x1141 %zz",
        "                               ^"]
    assert parse_error_log(ERROR_LOG + "\n") == entries
    assert parse_error_log("") == []


def test_new_error_log_entries():
    first, second = parse_error_log(ERROR_LOG)
    assert new_error_log_entries(first, ERROR_LOG) == [second]
    assert new_error_log_entry(first, ERROR_LOG) == second
    assert new_error_log_entry(ERROR_LOG, ERROR_LOG) == "" and new_error_log_entries(ERROR_LOG, ERROR_LOG) == []
    # the kernel keeps only the last few entries: the oldest may be gone from the second read
    third = "[ 1402.000001] hist:sched:sched_switch: error: Couldn't find field\n  Command: hist:keys=nosuch\n" \
            "                          ^"
    assert new_error_log_entries(ERROR_LOG, second + "\n" + third) == [third]
    # two writes in between: both, in order; the last one is what a single write added
    assert new_error_log_entries("", ERROR_LOG) == [first, second]
    assert new_error_log_entry("", ERROR_LOG + "\n" + third) == third


def test_find_mount():
    assert find_mount("proc /proc proc rw 0 0\nnodev /sys/kernel/tracing tracefs rw 0 0\n") == Path("/sys/kernel/tracing")
    assert find_mount("nodev /mnt/my\\040trace tracefs rw 0 0\n") == Path("/mnt/my trace")
    assert find_mount("debugfs /sys/kernel/debug debugfs rw 0 0\n") == Path("/sys/kernel/debug/tracing")
    both = ("nodev /sys/kernel/debug/tracing tracefs rw 0 0\ndebugfs /sys/kernel/debug debugfs rw 0 0\n"
            "nodev /sys/kernel/tracing tracefs rw 0 0\n")
    assert find_mount(both) == Path("/sys/kernel/tracing")
    assert find_mount("proc /proc proc rw 0 0\n") is None


def test_os_error_translation():
    err = os_error(PermissionError(errno.EACCES, "Permission denied"), "use tracefs", "/sys/kernel/tracing")
    assert isinstance(err, TracefsError)
    assert err.message == "no permission to use tracefs (/sys/kernel/tracing): Permission denied"
    assert "root" in err.hint and "sudo" in err.hint
    missing = os_error(FileNotFoundError(errno.ENOENT, "x"), "read uprobe_events")
    assert "mount -t tracefs nodev /sys/kernel/tracing" in missing.hint


# ---------------------------------------------------------------------------------------------
# a fake tracefs directory: what the kernel and other tools print back


def fake_tracefs(tmp_path: Path, files: dict[str, str], events=()) -> Tracefs:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "events").mkdir()
    for name in ("enable", "header_page"):
        (tmp_path / "events" / name).write_text("")
    for group, event in events:
        (tmp_path / "events" / group / event).mkdir(parents=True, exist_ok=True)
        (tmp_path / "events" / group / event / "format").write_text(
            f"name: {event}\nID: 7\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n")
    return Tracefs(tmp_path)


KPROBE_LINES = """\
p:kprobes/x _text+123 arg1=%di:x64
r16:probe/vfs_read__return vfs_read+0 ret=$retval:s64
p:probe/foo mymod:foo+16 a=+8(%si):u32
p:kprobes/abs 0xffffffffc0000000
"""
UPROBE_LINES = """\
p:probe_t/greet /tmp/t:0x0000000000001149 name=+0(-8(%bp)):string n=-16(%bp):s64 c=$comm arr=+0(%sp):x8[4] ims=\\"hi" arg10=+8(%sp)
r:probe_t/greet__return /tmp/t:0x0000000000001139 arg1=$retval
p:sdt_app/mark /usr/bin/app:0x0000000000002000(0x3018)
p:tfsx/m /tmp/t:0x0000000000001139 x=%di
p:tfsx/m /tmp/t:0x000000000000113d x=%si
this is not a definition
"""


def test_definitions_as_the_kernel_prints_them(tmp_path):
    t = fake_tracefs(tmp_path, {"README": README_FULL, "kprobe_events": KPROBE_LINES, "uprobe_events": UPROBE_LINES,
                                "dynamic_events": KPROBE_LINES + UPROBE_LINES + "s:synthetic/lat u64 delta\n"})
    defs = {(d.group, d.event, d.place): d for d in t.definitions()}
    assert len(defs) == 9  # the multi-probe event gives two; dynamic_events adds nothing new
    x = defs[("kprobes", "x", "_text+123")]
    assert (x.kind, x.is_uprobe, x.args) == ("p", False, (FetchArg("%di", "arg1", "x64"),))
    ret = defs[("probe", "vfs_read__return", "vfs_read+0")]
    assert (ret.kind, ret.maxactive, ret.args[0]) == ("r", 16, FetchArg("$retval", "ret", "s64"))
    assert defs[("probe", "foo", "mymod:foo+16")].args[0] == FetchArg("+8(%si)", "a", "u32")
    assert not defs[("kprobes", "abs", "0xffffffffc0000000")].is_uprobe
    greet = defs[("probe_t", "greet", "/tmp/t:0x0000000000001149")]
    assert greet.is_uprobe and greet.uprobe_offset == 0x1149 and greet.uprobe_path == "/tmp/t"
    assert [a.render() for a in greet.args] == [
        "name=+0(-8(%bp)):string", "n=-16(%bp):s64", "c=$comm", "arr=+0(%sp):x8[4]", 'ims=\\"hi"', "arg10=+8(%sp)"]
    sdt = defs[("sdt_app", "mark", "/usr/bin/app:0x0000000000002000(0x3018)")]
    assert sdt.uprobe_offset == 0x2000 and sdt.uprobe_path == "/usr/bin/app"
    assert defs[("probe_t", "greet__return", "/tmp/t:0x0000000000001139")].kind == "r"


def test_definitions_from_dynamic_events_only(tmp_path):
    """Without kprobe_events, dynamic_events fills in, telling uprobes from kprobes by their place."""
    dyn = (UPROBE_LINES + KPROBE_LINES + "f:fprobes/vfs_read__entry vfs_read\n"
           "e:eprobes/openat raw_syscalls.sys_enter nr=$id\n")
    t = fake_tracefs(tmp_path, {"uprobe_events": UPROBE_LINES, "dynamic_events": dyn})
    defs = t.definitions()
    assert len(defs) == 9 and len({d.render() for d in defs}) == 9
    kinds = {(d.group, d.event): d.is_uprobe for d in defs}
    assert kinds[("kprobes", "x")] is False and kinds[("probe", "foo")] is False
    assert kinds[("sdt_app", "mark")] is True and kinds[("probe_t", "greet")] is True


def test_event_names_tracepoints_and_formats(tmp_path):
    t = fake_tracefs(tmp_path, {}, events=[("sched", "sched_switch"), ("sched", "sched_waking"),
                                           ("syscalls", "sys_enter_read"), ("probe_t", "greet")])
    assert t.event_names() == {("sched", "sched_switch"), ("sched", "sched_waking"),
                               ("syscalls", "sys_enter_read"), ("probe_t", "greet")}
    assert t.tracepoints("sched:*") == [("sched", "sched_switch"), ("sched", "sched_waking")]
    assert t.tracepoints("*read") == [("syscalls", "sys_enter_read")]
    assert t.tracepoints("nothing*") == []
    assert t.event_format("sched", "sched_switch").field("common_type").size == 2
    with pytest.raises(UnknownEventError) as info:
        t.event_format("sched", "sched_swich")
    assert info.value.message == "no event sched:sched_swich"
    assert "did you mean sched:sched_switch" in info.value.hint
    with pytest.raises(UnknownEventError):
        t.event_format("../..", "x")


def test_a_word_is_an_existing_event_or_a_definition(tmp_path):
    """hist, latency and trace take either; a word shaped like GROUP:EVENT that names no event is an
    error naming the close events, not a probe definition with a syntax error."""
    t = fake_tracefs(tmp_path, {}, events=[("sched", "sched_switch"), ("sdt_app", "mark"), ("probe_t", "greet")])
    assert t.named_event("sched:sched_switch") == ("sched", "sched_switch")
    assert t.named_event("probe_t/greet") == ("probe_t", "greet")
    assert t.named_event("sdt_app:mark") == ("sdt_app", "mark")  # the event perf's SDT definition added
    for definition in ("malloc", "main:12", "hist.c:40", "fs/read_write.c:12", "sdt_app:other", "%app:mark",
                       "probe:x=malloc", "take size", "func%return", "kernel/fork.c", "func@a.c"):
        assert t.named_event(definition) is None, definition
    with pytest.raises(UnknownEventError) as info:
        t.named_event("sched:sched_swich")
    assert info.value.message == "no event sched:sched_swich" and "did you mean sched:sched_switch" in info.value.hint
    with pytest.raises(UnknownEventError) as info:
        t.named_event("nope/nope")
    assert info.value.message == "no event nope:nope" and "probectl tracepoints" in info.value.hint


def test_add_checks_before_writing(tmp_path):
    """Too-long definitions, taken names and missing files are refused without touching anything."""
    t = fake_tracefs(tmp_path, {"uprobe_events": ""}, events=[("sched", "sched_switch")])
    long_def = EventDefinition("p", "g", "e", "/bin/true:0x1000",
                               tuple(FetchArg("%di", f"a{i}", "u64") for i in range(400)), is_uprobe=True)
    with pytest.raises(TracefsError, match="at most 4094"):
        t.add([long_def])
    with pytest.raises(EventExistsError, match="sched:sched_switch already exists"):
        t.add([EventDefinition("p", "sched", "sched_switch", "/bin/true:0x1000", is_uprobe=True)])
    with pytest.raises(TracefsError, match="does not support kprobes") as info:
        t.add([EventDefinition("p", "probe", "vfs_read", "vfs_read")])
    assert "CONFIG_KPROBE_EVENTS" in info.value.hint
    with pytest.raises(TracefsError, match="has no group/event name"):
        t.add([EventDefinition("p", "g", "", "/bin/true:0x1000", is_uprobe=True)])
    assert (tmp_path / "uprobe_events").read_text() == ""


def test_open_with_path_that_is_not_tracefs(tmp_path):
    with pytest.raises(TracefsError, match="is not a tracefs directory"):
        Tracefs.open(path=tmp_path)


# ---------------------------------------------------------------------------------------------
# the lock (on a private lock file, so parallel runs of other suites are not disturbed)

HOLD_LOCK = """
import sys
from pathlib import Path
from probectl import tracefs
tracefs.LOCK_PATHS = (Path(sys.argv[1]),)
with tracefs.Tracefs.__new__(tracefs.Tracefs).lock():
    print("locked", flush=True)
    sys.stdin.read()
"""


def test_lock_between_processes(tmp_path, monkeypatch):
    lock_file = tmp_path / "probectl.lock"
    monkeypatch.setattr(tracefs_mod, "LOCK_PATHS", (lock_file,))
    child = subprocess.Popen([PYTHON, "-c", HOLD_LOCK, str(lock_file)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout.readline() == "locked\n"
        fd = os.open(lock_file, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        notices = []
        releaser = threading.Timer(0.2, child.stdin.close)
        releaser.start()
        t = Tracefs.__new__(Tracefs)
        with t.lock(notice=notices.append) as path:
            assert path == lock_file
            with t.lock() as again:  # re-entrant in one thread
                assert again == lock_file
            assert child.wait(timeout=10) == 0
        assert notices == [f"waiting for another probectl run to finish (lock {lock_file})"]
    finally:
        child.kill()
        child.wait()
