"""Live uprobes on the fixture program: add with the CLI, run, read the events, compare with EXPECT lines.

Events are read from a private tracefs instance's text `trace` file (the recorder is tested elsewhere),
and every test must leave tracefs exactly as it found it (the `live_tracefs` fixture checks).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import build_fixture, probectl

GROUP = f"ptest{os.getpid()}"


def expect_lines(stdout: str) -> dict[str, list[dict[str, str]]]:
    """EXPECT lines by function: [{param: value}] in call order."""
    calls: dict[str, list[dict[str, str]]] = {}
    for line in stdout.splitlines():
        if not line.startswith("EXPECT "):
            continue
        func = re.search(r"func=(\S+)", line).group(1)
        values = {name: value for name, _typ, value in re.findall(r'(\S+?):(\w+)=("[^"]*"|\S+)', line)}
        calls.setdefault(func, []).append(values)
    return calls


def trace_events(text: str) -> list[tuple[str, dict[str, str]]]:
    events = []
    for line in text.splitlines():
        m = re.search(r":\s+(\w+):\s+\([^)]*\)\s*(.*)$", line)
        if line.startswith("#") or not m:
            continue
        fields = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', m.group(2)))
        events.append((m.group(1), fields))
    return events


def run_traced(tracefs: Path, binary: Path, rounds: int) -> tuple[str, list]:
    """Enable GROUP's events in a private instance, run the fixture, return its stdout and the events."""
    inst = tracefs / "instances" / f"probectl-test-{os.getpid()}"
    inst.mkdir()
    try:
        (inst / "events" / GROUP / "enable").write_text("1")
        out = subprocess.run([str(binary), str(rounds)], capture_output=True, text=True, check=True)
        (inst / "tracing_on").write_text("0")
        text = (inst / "trace").read_text()
        (inst / "events" / GROUP / "enable").write_text("0")
    finally:
        inst.rmdir()
    return out.stdout, trace_events(text)


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


@pytest.mark.root
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_registers_and_retval_are_the_programs_values(cleanup_group, opt):
    tracefs = cleanup_group
    binary = build_fixture("uprobe_target", opt)
    defs = [
        f"{GROUP}:add_ints=add_ints a=%di:s32 b=%si:s32",
        f"{GROUP}:ret=add_ints%return r=$retval:s32",
        f"{GROUP}:rec=sum_record id=+0(%di):s32 value=+8(%di):s64 flags=+16(%di):u16 label=+0(+24(%di)):string",
        f"{GROUP}:label=pick_label%return +0($retval):string",
        f"{GROUP}:hash=hash_u64 seed=%di:x64",
        f"{GROUP}:mix=mix_unsigned bits=%di:u32 $comm",
    ]
    added = probectl("add", "-x", str(binary), *defs)
    assert "Added new events:" in added.stdout
    assert f"{GROUP}:rec" in added.stdout

    listed = json.loads(probectl("list", "--json", f"{GROUP}:*").stdout)
    by_event = {e["event"]: e for e in listed}
    # perf's rule: a return probe's event gets "__return", even when it is named.
    assert set(by_event) == {"add_ints", "ret__return", "rec", "label__return", "hash", "mix"}
    # The fixture has debug info, so places are shown as source (perf -l's FUNC@FILE).
    assert re.fullmatch(rf"sum_record@\S+uprobe_target\.c in {re.escape(str(binary))}", by_event["rec"]["on"])
    assert re.fullmatch(rf"add_ints%return@\S+ in {re.escape(str(binary))}", by_event["ret__return"]["on"])
    assert [a["name"] for a in by_event["label__return"]["args"]] == ["arg1"]
    text_list = probectl("list", f"{GROUP}:*").stdout
    assert re.search(rf"{GROUP}:rec\s+\(on sum_record@\S+ in {re.escape(str(binary))} with id value flags label\)",
                     text_list)

    stdout, events = run_traced(tracefs, binary, rounds=3)
    want = expect_lines(stdout)
    got: dict[str, list[dict[str, str]]] = {}
    for name, fields in events:
        got.setdefault(name, []).append(fields)

    assert [e["a"] for e in got["add_ints"]] == [c["a"] for c in want["add_ints"]]
    assert [e["b"] for e in got["add_ints"]] == [c["b"] for c in want["add_ints"]]
    assert [e["r"] for e in got["ret__return"]] == [c["ret"] for c in want["add_ints"]]
    for ev, call in zip(got["rec"], want["sum_record"], strict=True):
        assert ev["id"] == call["rec->id@0"]
        assert ev["value"] == call["rec->value@8"]
        assert ev["flags"] == call["rec->flags@16"]
        assert ev["label"] == call["rec->label@24"]
    assert [e["arg1"] for e in got["label__return"]] == [c["ret"] for c in want["pick_label"]]
    assert [int(e["seed"], 16) for e in got["hash"]] == [int(c["seed"], 16) for c in want["hash_u64"]]
    assert [e["bits"] for e in got["mix"]] == [c["bits"] for c in want["mix_unsigned"]]
    assert all(e["arg2"] == f'"{binary.name[:15]}"' for e in got["mix"])

    removed = probectl("del", f"{GROUP}:*")
    assert sorted(removed.stdout.splitlines()) == sorted(f"Removed event: {GROUP}:{e}" for e in by_event)


@pytest.mark.root
@pytest.mark.parametrize("bad,message", [
    # What the kernel refuses is refused before anything is written (probes/kernel_rules.py: the
    # kernel's own messages were "Invalid register name", "Unknown type is specified" and "$comm and
    # immediate-string only accepts string type"); test_tracefs.py shows error_log for what gets through.
    ("add_ints %zz", "the kernel knows no register %zz"),
    ("sum_record x=%di:symbol", "the symbol type is for kprobes"),
    ("add_ints +0(%di):x8[4] %flags c=$comm:u32", "$comm and immediate strings are read only as 'string'"),
])
def test_kernel_rejection_shows_error_log_and_adds_nothing(live_tracefs, bad, message):
    binary = build_fixture("uprobe_target", "-O0")
    before = (live_tracefs / "uprobe_events").read_text()
    out = probectl("add", "-x", str(binary), f"{GROUP}:first=add_ints %di", f"{GROUP}:bad={bad}", check=False)
    assert out.returncode == 1
    assert message in out.stderr
    assert "^" in out.stderr.splitlines()[-1] or any(l.strip() == "^" or l.strip().endswith("^")
                                                     for l in out.stderr.splitlines())
    assert "Traceback" not in out.stderr
    assert (live_tracefs / "uprobe_events").read_text() == before


@pytest.mark.root
def test_duplicate_needs_force(cleanup_group):
    binary = build_fixture("uprobe_target", "-O0")
    probectl("add", "-x", str(binary), f"{GROUP}:ev=add_ints")
    again = probectl("add", "-x", str(binary), f"{GROUP}:ev=add_ints", check=False)
    assert again.returncode == 1 and "already exists" in again.stderr
    forced = probectl("add", "-f", "-x", str(binary), f"{GROUP}:ev=add_ints")
    assert f"{GROUP}:ev_1" in forced.stdout
    assert f"perf record -e {GROUP}:ev_1 -aR sleep 1" in forced.stdout


@pytest.mark.root
def test_a_path_that_is_not_utf8_reaches_the_kernel_as_its_bytes(cleanup_group, tmp_path):
    """A file name is bytes: one that is not UTF-8 arrives decoded with surrogateescape (as Python
    decodes argv), and the definition line must go to the kernel, and be counted, as those bytes (it
    was an internal UnicodeEncodeError; the fuzzer met it as a damaged symbol name). -D into a pipe
    prints those bytes too, and list and del read the event back (they failed on the kernel's text)."""
    folder = os.fsencode(tmp_path) + b"/bin\xff\xfe"
    os.mkdir(folder)
    binary = folder + b"/target"
    shutil.copy(build_fixture("uprobe_target", "-O0"), binary)
    argv = [os.fsencode(sys.executable), b"-m", b"probectl"]
    shown = subprocess.run(argv + [b"add", b"-D", b"-x", binary, b"add_ints"], capture_output=True)
    assert shown.returncode == 0 and binary + b":0x" in shown.stdout, shown.stderr
    added = subprocess.run(argv + [b"add", b"-x", binary, f"{GROUP}:odd=add_ints".encode()], capture_output=True)
    assert added.returncode == 0, added.stderr
    assert binary + b":0x" in (cleanup_group / "uprobe_events").read_bytes()
    listed = subprocess.run(argv + [b"list", f"{GROUP}:*".encode()], capture_output=True)
    assert listed.returncode == 0 and f"{GROUP}:odd".encode() in listed.stdout, listed.stderr
    removed = subprocess.run(argv + [b"del", f"{GROUP}:odd".encode()], capture_output=True)
    assert removed.returncode == 0 and binary not in (cleanup_group / "uprobe_events").read_bytes(), removed.stderr


@pytest.mark.root
def test_dry_run_writes_nothing(live_tracefs):
    binary = build_fixture("uprobe_target", "-O0")
    before = (live_tracefs / "uprobe_events").read_text()
    out = probectl("add", "-n", "-x", str(binary), f"{GROUP}:ev=add_ints %di")
    assert out.stdout.startswith("Would add new event (dry run, nothing was written):\n")
    assert f"{GROUP}:ev " in out.stdout and "You can now use it" not in out.stdout
    assert (live_tracefs / "uprobe_events").read_text() == before
    probectl("add", "-x", str(binary), f"{GROUP}:ev=add_ints %di")
    out = probectl("del", "-n", f"{GROUP}:ev")
    assert out.stdout == f"Would remove event: {GROUP}:ev\n"
    assert f"{GROUP}/ev " in (live_tracefs / "uprobe_events").read_text()
    probectl("del", f"{GROUP}:ev")


@pytest.mark.root
def test_perf_style_flags(cleanup_group):
    binary = build_fixture("uprobe_target", "-O0")
    probectl("-x", str(binary), "-a", f"{GROUP}:ev=add_ints %di")
    assert f"{GROUP}:ev " in probectl("-l").stdout
    assert probectl("-d", f"{GROUP}:ev").stdout.strip() == f"Removed event: {GROUP}:ev"


@pytest.mark.root
def test_del_without_match_is_an_error(live_tracefs):
    out = probectl("del", f"{GROUP}:nothing_here", check=False)
    assert out.returncode == 1
    assert "does not hit any event" in out.stderr


def test_without_root_commands_fail_clearly(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to nobody")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    for args in (["list"], ["del", "x"], ["add", "-x", "/bin/true", "main"]):
        out = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                              sys.executable, "-m", "probectl", *args],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
        assert out.returncode == 1, (args, out.stderr)
        assert out.stderr.startswith("Error: "), out.stderr
        assert "Traceback" not in out.stderr


@pytest.mark.root
def test_concurrent_adds_never_collide_on_names(cleanup_group):
    """Four `add -f` runs at once: the lock makes each pick a different free name, none fails."""
    binary = build_fixture("uprobe_target", "-O0")
    cmd = [sys.executable, "-m", "probectl", "add", "-f", "-x", str(binary), f"{GROUP}:ev=add_ints %di"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = [p.communicate() + (p.returncode,) for p in procs]
    assert all(rc == 0 for _, _, rc in results), results
    names = {e["event"] for e in json.loads(probectl("list", "--json", f"{GROUP}:*").stdout)}
    assert names == {"ev", "ev_1", "ev_2", "ev_3"}


@pytest.mark.root
def test_listings_on_a_full_disk_say_so_in_one_line(cleanup_group):
    binary = build_fixture("uprobe_target", "-O0")
    probectl("add", "-x", str(binary), f"{GROUP}:ev=add_ints %di")
    for args in (["list"], ["list", "--json"], ["-l"], ["del", "-n", f"{GROUP}:*"], ["tracepoints", f"{GROUP}:*"],
                 ["fields", f"{GROUP}:ev"]):
        with open("/dev/full", "w") as full:
            out = subprocess.run([sys.executable, "-m", "probectl", *args], stdout=full, stderr=subprocess.PIPE,
                                 text=True)
        assert (out.returncode, out.stderr) == (1, "Error: cannot write to standard output: "
                                                   "No space left on device\n"), args
