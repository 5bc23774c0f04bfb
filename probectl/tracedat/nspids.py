"""probectl's trace.dat option for the pids of processes in PID namespaces (a container's): the pid
each recorded thread has in its own namespace (the last ``NSpid:`` of ``/proc/TID/status``), read
while it ran. Events carry the host's pids; ``script -F nspid`` and ``--format json`` with ``nspid``
show the container's own, as its logs and ``ps`` inside it name the process."""
from __future__ import annotations

# probectl's option in trace.dat: "TID NSPID" lines, for threads whose namespace pid is not their
# host pid (trace-cmd skips options it does not know).
OPTION_NS_PIDS = 0x7E04


def encode_ns_pids(nspids: dict[int, int]) -> bytes:
    return "".join(f"{tid} {nspid}\n" for tid, nspid in sorted(nspids.items())).encode()


def decode_ns_pids(data: bytes) -> dict[int, int]:
    """The :data:`OPTION_NS_PIDS` option → {host tid: tid in its namespace} (bad lines skipped)."""
    out: dict[int, int] = {}
    for line in data.decode(errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            out[int(parts[0])] = int(parts[1])
    return out
