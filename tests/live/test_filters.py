"""Event filters written to a private tracefs instance: the kernel accepts what probectl renders, keeps
exactly the events probectl says match, and its rejections are shown (offline: tests/test_filters.py)."""
from __future__ import annotations

import contextlib
import glob
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probectl.errors import TracefsError
from probectl.filters import Filter, FilterError, compile_filter
from probectl.formats import EventFormat
from probectl.record.filter_file import FilterRejectedError, apply_filter, clear_filter

from tests.test_filters import SCHED_FILTERS, SCHED_SWITCH, SYS_ENTER_READ, _combine, _field_strategy


READ_FILTERS = st.recursive(_field_strategy(SYS_ENTER_READ), _combine, max_leaves=8)


@contextlib.contextmanager
def instance(root: Path):
    """instances/probectl-filtertest-<pid>, removed (events disabled first) whatever happens."""
    path = root / "instances" / f"probectl-filtertest-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            (path / "events" / "enable").write_text("0")
        path.rmdir()


def live_format(root: Path, group: str, event: str) -> EventFormat:
    path = root / "events" / group / event / "format"
    if not path.exists():
        pytest.skip(f"this kernel has no {group}:{event}")
    return EventFormat.parse(path.read_text(), group)


def record(inst: Path, group: str, event: str, flt: Filter, action) -> list[str]:
    """Apply ``flt``, enable the event while ``action()`` runs, return the trace lines it kept."""
    events = inst / "events"
    (inst / "trace").write_text("")
    apply_filter(events, group, event, flt)
    enable = events / group / event / "enable"
    enable.write_text("1")
    try:
        action()
    finally:
        enable.write_text("0")
        clear_filter(events, group, event)
    return [line for line in (inst / "trace").read_text().splitlines() if line and not line.startswith("#")]


COUNTS = [1, 7, 100, 4096, 5000, 777777]


def reads(counts=COUNTS):
    """One read() syscall per count, each from a pipe holding one byte."""
    r, w = os.pipe()
    try:
        for count in counts:
            os.write(w, b"x")
            os.read(r, count)
    finally:
        os.close(r)
        os.close(w)


def read_counts(lines: list[str]) -> list[int]:
    # (the syscall tracer prints small values in decimal, others in hex)
    return [int(m.group(1), 0) for m in (re.search(r"count: (0x[0-9a-f]+|[0-9]+)", line) for line in lines) if m]


@pytest.mark.parametrize("text, kept", [
    ("count == 7 || count > 4k", [7, 5000, 777777]),
    ("(count == 7 || count > 4k) && !(count == 777777)", [7, 5000]),
    ("count >= 4KiB && count < 0.5M", [4096, 5000]),
    ("!(count < 100 || count > 4096)", [100, 4096]),
    ("count & 0x1000", [4096, 5000, 777777]),
    ("count & 0x8", [5000]),
    ("count == BIG || count == SMALL", [1, 5000]),
    # && binds tighter than || (a left-to-right reading would keep nothing)
    ("count == 5000 || count == 7 && CPU == 9999", [5000]),
    ("count == 0644 || count == 0x64", [100]),
])
def test_live_filters_keep_exactly_the_matching_events(live_tracefs, text, kept):
    fmt = live_format(live_tracefs, "syscalls", "sys_enter_read")
    names = {"BIG": 5000, "SMALL": 1}
    flt = compile_filter(f"common_pid == {os.getpid()} && ({text})", fmt,
                         enums=lambda field: names if field == "count" else None)
    with instance(live_tracefs) as inst:
        lines = record(inst, "syscalls", "sys_enter_read", flt, reads)
    assert read_counts(lines) == kept


def test_live_unfiltered_control(live_tracefs):
    fmt = live_format(live_tracefs, "syscalls", "sys_enter_read")
    flt = compile_filter(f"common_pid == {os.getpid()}", fmt)
    with instance(live_tracefs) as inst:
        lines = record(inst, "syscalls", "sys_enter_read", flt, reads)
    assert read_counts(lines) == COUNTS


def test_live_cpu_list(live_tracefs):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    cpu_a, cpu_b = sorted(os.sched_getaffinity(0))[:2]
    fmt = live_format(live_tracefs, "syscalls", "sys_enter_read")
    flt = compile_filter(f"common_pid == {os.getpid()} && CPU & CPUS{{{cpu_b}}}", fmt)
    saved = os.sched_getaffinity(0)

    def pinned_reads():
        try:
            os.sched_setaffinity(0, {cpu_a})
            reads([11])
            os.sched_setaffinity(0, {cpu_b})
            reads([12])
        finally:
            os.sched_setaffinity(0, saved)

    with instance(live_tracefs) as inst:
        lines = record(inst, "syscalls", "sys_enter_read", flt, pinned_reads)
    assert read_counts(lines) == [12]


def test_live_strings_globs_and_comm(live_tracefs, tmp_path):
    fmt = live_format(live_tracefs, "sched", "sched_process_exec")
    true = Path("/bin/true").resolve()
    tag = f"{os.getpid() % 100000}"
    programs = {}
    for letter in "abc":
        link = tmp_path / f"pft-{letter}-{tag}"
        link.symlink_to(true)
        programs[letter] = link
    # bare glob on the __data_loc filename, COMM (the new program's name) as a string, and '!'
    flt = compile_filter(f"(filename ~ */pft-a-{tag} || COMM == pft-b-{tag}) && !(filename ~ \"*-c-*\")", fmt)
    assert flt.text == f'(filename ~ "*/pft-a-{tag}" || COMM == "pft-b-{tag}") && !(filename ~ "*-c-*")'

    def run_all():
        for link in programs.values():
            subprocess.run([str(link)], check=True)

    with instance(live_tracefs) as inst:
        lines = record(inst, "sched", "sched_process_exec", flt, run_all)
    names = sorted(re.search(r"filename=(\S+)", line).group(1) for line in lines)
    assert names == [str(programs["a"]), str(programs["b"])]


def test_live_syscall_string_argument(live_tracefs, tmp_path):
    fmt = live_format(live_tracefs, "syscalls", "sys_enter_openat")
    target = tmp_path / f"pft-open-{os.getpid()}"

    def open_missing():
        with contextlib.suppress(FileNotFoundError):
            open(target)

    pattern = f"common_pid == {os.getpid()} && filename ~ \"*pft-open-{os.getpid()}\""
    flt = compile_filter(pattern, fmt)
    assert "filename.ustring ~" in flt.text
    with instance(live_tracefs) as inst:
        kept = record(inst, "syscalls", "sys_enter_openat", flt, open_missing)
        # what the kernel does with the filter as written: a user pointer read as kernel memory never matches
        plain = Filter(flt.text.replace(".ustring", ""), pattern, flt.fields)
        dropped = record(inst, "syscalls", "sys_enter_openat", plain, open_missing)
    assert len(kept) == 1 and dropped == []


def test_live_enum_names_and_ipv4(live_tracefs):
    fmt = live_format(live_tracefs, "sock", "inet_sock_set_state")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    flt = compile_filter(f"newstate == TCP_ESTABLISHED && oldstate == TCP_SYN_SENT && "
                         f"daddr == 127.0.0.1 && dport == {port} && protocol == IPPROTO_TCP", fmt)

    def connect():
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = server.accept()
        conn.close()
        client.close()

    try:
        with instance(live_tracefs) as inst:
            lines = record(inst, "sock", "inet_sock_set_state", flt, connect)
    finally:
        server.close()
    assert len(lines) == 1
    assert "oldstate=TCP_SYN_SENT newstate=TCP_ESTABLISHED" in lines[0]
    assert f"dport={port}" in lines[0] and "daddr=127.0.0.1" in lines[0]


def test_live_kernel_accepts_what_probectl_renders_for_every_field(live_tracefs):
    """For every field of every tracepoint of some systems, the kernel takes a filter compiled for it."""
    systems = ["sched", "syscalls", "sock", "kmem", "ipi", "irq", "timer", "signal", "task", "tcp"]
    checked = 0
    with instance(live_tracefs) as inst:
        for system in systems:
            for path in sorted(glob.glob(str(live_tracefs / "events" / system / "*" / "format"))):
                event = Path(path).parent.name
                fmt = EventFormat.parse(Path(path).read_text(), system)
                for field in fmt.fields:
                    for text in _sample_filters(field.name, fmt):
                        try:
                            flt = compile_filter(text, fmt)
                        except FilterError as err:
                            assert "cannot filter on" in err.message, (system, event, text, str(err))
                            continue
                        apply_filter(inst / "events", system, event, flt)
                        assert (inst / "events" / system / event / "filter").read_text().strip() == flt.text
                        checked += 1
                clear_filter(inst / "events", system, event)
    assert checked > 1000


def _sample_filters(name: str, fmt: EventFormat) -> list[str]:
    field = fmt.field(name)
    if field.is_string or field.type in ("char *", "const char *"):
        return [f'{name} ~ "a*"', f"{name} != x"]
    if "cpumask" in field.type:
        return [f"{name} & CPUS{{0}}"]
    bits = 8 * field.size
    high = (1 << (bits - 1)) - 1 if field.signed else (1 << bits) - 1
    texts = [f"{name} == {high}", f"{name} & 0x1", f"!({name} < 1)"]
    if field.signed:
        texts.append(f"{name} >= {-(1 << (bits - 1))}")
    if field.size == 8 and not field.is_array:
        texts.append(f"{name}.function != ksys_read")
    return texts


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(SCHED_FILTERS.map(lambda t: ("sched", "sched_switch", t)),
                 READ_FILTERS.map(lambda t: ("syscalls", "sys_enter_read", t))))
def test_live_kernel_accepts_random_valid_filters(live_tracefs, case):
    group, event, text = case
    flt = compile_filter(text, SCHED_SWITCH if group == "sched" else SYS_ENTER_READ)
    with instance(live_tracefs) as inst:
        apply_filter(inst / "events", group, event, flt)
        assert (inst / "events" / group / event / "filter").read_text().strip() == flt.text


def test_live_kernel_rejection_shows_the_kernels_message(live_tracefs):
    fmt = live_format(live_tracefs, "kmem", "kmalloc")
    flt = compile_filter("call_site.function == probectl_no_such_function", fmt)
    with instance(live_tracefs) as inst:
        filter_file = inst / "events" / "kmem" / "kmalloc" / "filter"
        with pytest.raises(FilterRejectedError) as info:
            apply_filter(inst / "events", "kmem", "kmalloc", flt)
        assert filter_file.read_text().strip() == "none"  # cleared, not left holding the error
    err = info.value
    assert isinstance(err, TracefsError)
    assert err.message == "the kernel rejected the filter for kmem:kmalloc"
    log = err.kernel_log.splitlines()
    assert log[0].strip() == flt.text
    assert log[1].strip() == "^"
    assert "Function not found" in err.kernel_log
    assert "/proc/kallsyms" in err.hint
    assert str(err).startswith("the kernel rejected the filter for kmem:kmalloc\n")


def test_live_kernel_rejection_of_unchecked_text(live_tracefs):
    live_format(live_tracefs, "sched", "sched_switch")
    bogus = Filter("bogus_field == 1", "bogus_field == 1", ("bogus_field",))
    with instance(live_tracefs) as inst:
        with pytest.raises(FilterRejectedError) as info:
            apply_filter(inst / "events", "sched", "sched_switch", bogus)
    assert "Field not found" in info.value.kernel_log


def test_live_apply_and_clear(live_tracefs):
    fmt = live_format(live_tracefs, "sched", "sched_switch")
    flt = compile_filter("prev_comm == bash && prev_state & D", fmt)
    with instance(live_tracefs) as inst:
        filter_file = inst / "events" / "sched" / "sched_switch" / "filter"
        apply_filter(inst / "events", "sched", "sched_switch", flt)
        assert filter_file.read_text().strip() == 'prev_comm == "bash" && prev_state & 2'
        clear_filter(inst / "events", "sched", "sched_switch")
        assert filter_file.read_text().strip() == "none"
        with pytest.raises(TracefsError) as info:
            apply_filter(inst / "events", "sched", "no_such_event", flt)
        assert "does not exist" in info.value.message
