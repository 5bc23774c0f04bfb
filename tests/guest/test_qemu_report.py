"""The framed report a guest writes on its second serial port, read back without booting one: the
one reader (vmtest.busybox_guest.FramedReport) under both guests' parsers, on reports as their init scripts
write them, including one cut short by a guest that died mid-section."""
from __future__ import annotations

import base64
from pathlib import Path

import pytest

from vmtest.busybox_guest import FramedReport, GuestError, parse_results
from vmtest.probectl_guest import parse_guest_results


def b64(text: str) -> str:
    encoded = base64.b64encode(text.encode()).decode()
    return "\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76))  # (as base64(1) wraps it)


def test_headers_and_bodies_in_order_with_console_noise_skipped():
    report = FramedReport("[    0.1] booting\r\n@@begin\n@@a 1 2\nx\n@@b\n@@end\nnoise\n@@c\n@@done\n@@late\n")
    seen = []
    for words in report.headers():
        seen.append(words)
        if words[0] == "@@a":
            assert report.body("@@b") == ["x"]
            assert report.body() == []
    assert seen == [["@@begin"], ["@@a", "1", "2"], ["@@c"]]


def test_the_kernel_guests_report():
    text = ("console line\n@@begin\n@@insmod 1 ok\n@@def 1 ok\n@@def 2 fail\nerror: bad arg\n@@end\n"
            "@@enable probe:x\nfilter rejected\n@@end\n@@kprobe_events\np:probe/a tcp_sendmsg\n\n@@end\n"
            "@@trace\n  sh-1 [000] probe:a: (tcp_sendmsg)\n@@end\n@@workload 0\nhello\n@@end\n"
            "@@hist events/probe/a/hist\n{ comm: sh } hitcount: 3\n@@end\n@@done\n")
    result = parse_results(text, ["p:a tcp_sendmsg", "p:b nope"], [Path("/m/dummy.ko")])
    assert result.loaded == ["dummy.ko"] and result.accepted == ["p:a tcp_sendmsg"]
    assert result.rejected == ["p:b nope"] and result.errors == ["error: bad arg"]
    assert result.enable_errors == ["probe:x: filter rejected"]
    assert result.kprobe_events == ["p:probe/a tcp_sendmsg"]
    assert result.trace_lines == ["  sh-1 [000] probe:a: (tcp_sendmsg)"]
    assert (result.workload_status, result.workload_output) == (0, "hello")
    assert result.hists == {"events/probe/a/hist": "{ comm: sh } hitcount: 3"}


def test_the_probectl_guests_report():
    text = (f"@@begin 2.50\n@@step 1 0 3.00 3.25\n{b64('out ' * 40)}\n@@stderr\n{b64('')}\n@@end\n"
            f"@@step 2 1 3.25 4.00\n{b64('')}\n@@stderr\n{b64('Error: no')}\n@@end\n"
            f"@@file /tmp/x.dat\n{b64('DATA')}\n@@end\n@@done\n")
    run = parse_guest_results(text, ["probectl list", "probectl nope"])
    assert run.boot_seconds == 2.5
    assert [(s.command, s.status, s.stdout, s.stderr, s.seconds) for s in run.steps] == [
        ("probectl list", 0, "out " * 40, "", 0.25), ("probectl nope", 1, "", "Error: no", 0.75)]
    assert run.files == {"/tmp/x.dat": b"DATA"}


@pytest.mark.parametrize("parse", [lambda t: parse_results(t, ["p:a x"]), lambda t: parse_guest_results(t, ["s"])])
def test_a_report_cut_inside_a_section_is_an_error(parse):
    with pytest.raises(GuestError, match="ended inside a section"):
        parse("@@begin 1\n@@def 1 fail\n@@step 1 0 1 2\nAAAA\n")


def test_a_guest_that_could_not_mount_says_so():
    with pytest.raises(GuestError, match="could not mount software image"):
        parse_guest_results("@@begin 1\n@@fail mount software image\n", [])
