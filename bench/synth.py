"""The recording the answer benches read: N uprobe events ``SYSTEM:malloc`` (``__probe_ip`` and
``u64 size``) from a few threads on 2 CPUs, sizes from a fixed table, written as a trace.dat by
probectl's own writer (:func:`probectl.tracedat.write_tracedat`), so that no root and no tracing
are needed. The pages are tiled from a few distinct contents: building every page in Python would
take longer than reading them.

    counts = synthesize(path, 5_000_000, tmp, threads={3000: "make", 3001: "cc1"}, sizes=(16, 24))

``counts`` is what the file holds, ``(tid, size) -> events``, for the benches to check the answers
of probectl and of the reference pipeline against before they print any figure.
"""
from __future__ import annotations

import struct
import sys
from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # probectl and the tests package

from probectl.tracedat import TraceMetadata, write_tracedat  # noqa: E402
from tests.test_native import COMMON_FIELDS  # noqa: E402
from tests.test_tracedat import HEADER_EVENT, HEADER_PAGE  # noqa: E402

PAGE = 4096
RECORD = 4 + 24  # header + payload
PER_PAGE = (PAGE - 16) // RECORD
VARIANTS = 97  # distinct page contents
DELTA = 100  # ns between two events of a CPU


def malloc_format(event_id: int) -> str:
    return f"""name: malloc
ID: {event_id}
format:
{COMMON_FIELDS}
\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u64 size;\toffset:16;\tsize:8;\tsigned:0;

print fmt: "(%lx) size=%llu", REC->__probe_ip, REC->size
"""


def _page_records(v: int, take: int, event_id: int, tids: Sequence[int], sizes: Sequence[int]) -> tuple[bytes, Counter]:
    """The first ``take`` records of page variant ``v`` and their (tid, size) counts."""
    out, counts = [], Counter()
    header = (RECORD // 4 - 1) | (DELTA << 5)  # type_len = payload words, the time delta
    for i in range(take):
        k = v * PER_PAGE + i
        tid, size = tids[(k * 7 + v) % len(tids)], sizes[k % len(sizes)]
        counts[tid, size] += 1
        out.append(struct.pack("<IHBBiQQ", header, event_id, 0, 0, tid, 0x401136, size))
    return b"".join(out), counts


def synthesize(path: Path, events: int, tmp: Path, *, threads: Mapping[int, str], sizes: Sequence[int],
               system: str = "probe_bench", event_id: int = 1900) -> Counter:
    """A trace.dat of ``events`` malloc events over 2 CPUs at ``path`` (page files in ``tmp``);
    returns its (tid, size) counts."""
    tids = list(threads)
    variants = [_page_records(v, PER_PAGE, event_id, tids, sizes) for v in range(VARIANTS)]
    counts: Counter = Counter()
    files = {}
    for cpu, n in enumerate((events // 2, events - events // 2)):
        files[cpu] = tmp / f"cpu{cpu}.raw"
        with open(files[cpu], "wb") as f:
            ts, p = 10**9 + cpu, 0
            while n > 0:
                take = min(n, PER_PAGE)
                data, c = variants[p % VARIANTS] if take == PER_PAGE else _page_records(
                    p % VARIANTS, take, event_id, tids, sizes)
                f.write((struct.pack("<QQ", ts, len(data)) + data).ljust(PAGE, b"\0"))
                counts.update(c)
                ts += PER_PAGE * DELTA + 1000
                n -= take
                p += 1
    meta = TraceMetadata(header_page=HEADER_PAGE, header_event=HEADER_EVENT, page_size=PAGE, cpus=2,
                         event_formats=[(system, [malloc_format(event_id)])],
                         cmdlines="".join(f"{t} {c}\n" for t, c in threads.items()),
                         tgids="".join(f"{t} {t}\n" for t in threads), trace_clock="[local] global",
                         uname="Linux benchhost 6.1 #1 x86_64", trace_id=1,
                         cpustats={0: "entries: 0\noverrun: 0\n", 1: "entries: 0\noverrun: 0\n"})
    write_tracedat(path, meta, files, version=7)
    return counts
