"""Every event format file of this machine, and probe events created for the test, parsed (offline:
tests/test_formats.py)."""
from __future__ import annotations

import os
from pathlib import Path

from probectl.formats import EventFormat


def test_every_format_of_this_machine(live_tracefs):
    """All of this kernel's formats parse, and every field lies inside the record."""
    count = 0
    events = live_tracefs / "events"
    for system in os.scandir(events):
        if not system.is_dir():
            continue
        for event in os.scandir(system.path):
            path = Path(event.path) / "format"
            if not event.is_dir() or not path.exists():
                continue
            fmt = EventFormat.parse(path.read_text(), system.name)
            assert fmt.name == event.name
            assert [f.name for f in fmt.fields[:4]] == ["common_type", "common_flags", "common_preempt_count", "common_pid"]
            for f in fmt.event_fields:
                if f.is_data_loc:
                    assert f.size in (4, 4 * (f.array_len or 1)), (fmt.full_name, f)
            count += 1
    assert count > 100
