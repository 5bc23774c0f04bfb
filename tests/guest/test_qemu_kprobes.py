"""Kprobe definitions live on a real kernel: Debian's cloud kernel booted in qemu (software emulation).

The same probes are resolved by the oracle (``perf probe -k VMLINUX -D``) and by ``probectl add -D -k
VMLINUX`` for that kernel; the guest writes both sets to kprobe_events, makes TCP traffic of known sizes
on loopback and returns the trace, and each set's events are checked against what was sent.
One boot serves the whole module (see vmtest/README.md).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.helpers import missing
from vmtest.busybox_guest import GuestResult, run_in_guest

pytestmark = pytest.mark.qemu

SIZES = (100, 777)  # bytes sent by the two clients; each fits one read of busybox nc (1 KiB buffer)
PORT = 5000
TCP_ESTABLISHED, TCP_SYN_SENT = 1, 2
AF_INET = 2

# The same probes from both sources; probectl's are named pc_* in group probectl, since the trace names
# events without their group.
PROBES = [
    ("tcp_sendmsg", "tcp_sendmsg size sk->__sk_common.skc_state"),
    ("tcp_sendmsg", "tcp_sendmsg%return $retval"),
    ("tcp_v4_connect", "tcp_v4_connect sk addr_len uaddr->sa_family"),
    ("tcp_set_state", "tcp_set_state sk state"),
    ("vfs_write", "vfs_write count"),
    # A __user string: gcc-built kernels do not say so in DWARF or BTF, so it is asked for with :ustring.
    ("do_sys_openat2", "do_sys_openat2 filename:ustring"),
]
PREFIX = {"perf": "", "probectl": "pc_"}
BAD = "p:probe/bad tcp_sendmsg+0 x=%zz"

# Each client is busybox nc reading a file of known size: one read, one write(2), one tcp_sendmsg.  The
# server's stdin never ends (sleep), so it closes only when the client has shut down its side; the
# client exits on that close, after the server has read everything.
WORKLOAD = "".join(
    f"""
printf '%0{size}d' 0 > payload{size}
sleep 60 | nc -l -p {PORT} > /dev/null &
while ! netstat -ltn | grep -q ':{PORT} '; do usleep 10000; done
nc 127.0.0.1 {PORT} < payload{size} || exit 1
"""
    for size in SIZES
)


def _run_oracle(args: list[str], env_names: tuple[str, ...]) -> list[str]:
    """Run a definition printer with its caches in a temp dir; its definition lines."""
    with tempfile.TemporaryDirectory(prefix="probectl-defs-") as cache:
        env = dict(os.environ, **{name: cache for name in env_names})
        out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed: {out.stderr.strip()}")
    return out.stdout.splitlines()


def perf_definitions(vmlinux) -> list[str]:
    """The oracle: ``perf probe -k VMLINUX -D`` (its build-id cache kept in a temp dir)."""
    args = ["perf", "probe", "-k", str(vmlinux)]
    for _func, probe in PROBES:
        args += ["-D", probe]
    return _run_oracle(args, ("HOME", "PERF_BUILDID_DIR"))


def probectl_definitions(vmlinux) -> list[str]:
    """``probectl add -D -k VMLINUX``, the same probes as probectl:pc_FUNC=... (cache in a temp dir)."""
    probes = [f"probectl:pc_{func}={probe}" for func, probe in PROBES]
    return _run_oracle([sys.executable, "-m", "probectl", "add", "-D", "-k", str(vmlinux), *probes],
                       ("XDG_CACHE_HOME",))


@pytest.fixture(scope="module")
def definitions(kernel_dir) -> dict[str, object]:
    """source -> its definition lines; None when perf is not installed, the error when a source failed."""
    found: dict[str, object] = {"perf": None}
    if shutil.which("perf"):
        found["perf"] = perf_definitions(kernel_dir / "vmlinux")
    try:
        found["probectl"] = probectl_definitions(kernel_dir / "vmlinux")
    except RuntimeError as exc:
        found["probectl"] = exc
    for source, defs in found.items():
        assert not isinstance(defs, list) or len(defs) == len(PROBES), (source, defs)
    return found


@pytest.fixture(scope="module")
def guest(kernel_dir, definitions) -> GuestResult:
    defs = [d for found in definitions.values() if isinstance(found, list) for d in found]
    return run_in_guest(kernel_dir, [*defs, BAD], WORKLOAD, timeout=300)


@pytest.fixture(params=list(PREFIX))
def source(request, definitions):
    """Each test runs for perf's definitions and for probectl's, from the same guest."""
    found = definitions[request.param]
    if found is None:
        missing("perf (apt linux-perf) is not installed")
    if isinstance(found, Exception):
        pytest.fail(str(found))
    return request.param


def test_definitions_are_accepted(guest, definitions, source):
    defs = definitions[source]
    assert [d for d in guest.accepted if d in defs] == defs
    assert guest.rejected == [BAD]
    assert guest.enable_errors == []
    listed = {line.split()[0].split(":", 1)[1] for line in guest.kprobe_events}
    assert {d.split()[0].split(":", 1)[1] for d in defs} <= listed
    assert guest.workload_status == 0, guest.workload_output


def test_tcp_sendmsg_sizes_and_state(guest, source):
    sends = [e for e in guest.events(PREFIX[source] + "tcp_sendmsg") if e.comm == "nc"]
    assert [e.int_arg("size") for e in sends] == list(SIZES)
    assert {e.int_arg("skc_state") for e in sends} == {TCP_ESTABLISHED}


def test_tcp_sendmsg_return_value_is_the_size(guest, source):
    returns = [e for e in guest.events(PREFIX[source] + "tcp_sendmsg__return") if e.comm == "nc"]
    assert [e.int_arg("arg1") for e in returns] == list(SIZES)
    assert all(e.place.endswith("<- tcp_sendmsg") for e in returns)
    entries = {e.pid: e.int_arg("size") for e in guest.events(PREFIX[source] + "tcp_sendmsg")}
    assert {e.pid: e.int_arg("arg1") for e in returns} == entries


def test_connect_arguments_and_state_changes(guest, source):
    connects = guest.events(PREFIX[source] + "tcp_v4_connect")
    assert len(connects) == len(SIZES)
    for connect in connects:
        assert connect.int_arg("addr_len") == 16  # sizeof(struct sockaddr_in)
        assert connect.int_arg("sa_family") == AF_INET
        # The connecting socket goes SYN_SENT then ESTABLISHED, through tcp_set_state with the same sk
        # (ESTABLISHED comes from the softirq, in whichever task it runs; a later connection may reuse sk).
        states = [e.int_arg("state") for e in guest.events(PREFIX[source] + "tcp_set_state")
                  if e.args["sk"] == connect.args["sk"] and e.timestamp >= connect.timestamp]
        assert states[:2] == [TCP_SYN_SENT, TCP_ESTABLISHED]


def test_vfs_write_counts(guest, source):
    counts = {e.int_arg("count") for e in guest.events(PREFIX[source] + "vfs_write") if e.comm == "nc"}
    assert set(SIZES) <= counts


def test_user_strings_are_the_paths_opened(guest, source):
    opened = {e.args["filename_ustring"].strip('"') for e in guest.events(PREFIX[source] + "do_sys_openat2")
              if e.comm in ("nc", "sh")}
    assert {f"payload{size}" for size in SIZES} <= opened


def test_rejected_definition_shows_the_kernel_error_log(guest):
    [error] = guest.errors
    lines = error.splitlines()
    assert "trace_kprobe: error:" in lines[0]
    command = next(line for line in lines if line.strip().startswith("Command:"))
    assert command.strip() == f"Command: {BAD}"
    caret = lines[lines.index(command) + 1]
    assert caret.strip() == "^" and command[caret.index("^"):].startswith("%zz")
