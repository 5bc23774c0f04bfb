"""record.trace.LiveNames: the names of live processes that ``trace`` prints beside their events."""
from __future__ import annotations

from probectl.record.trace import LiveNames


def test_live_names_read_a_comm_that_is_not_utf8(tmp_path):
    """trace names a process by the kernel's saved_cmdlines, where any process's comm may be bytes that
    are not UTF-8 (met tracing the Go fixture on a machine where one was): kept escaped, not a crash."""
    (tmp_path / "saved_cmdlines").write_bytes(b"12 bash\n34 caf\xff\n")
    names = LiveNames(tmp_path, {})
    assert names.comm(12) == "bash"
    assert names.comm(34) == "caf\\xff"
