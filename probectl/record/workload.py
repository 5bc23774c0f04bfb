"""The command a recording runs (``-- COMMAND ARGS``): forked at once, held at a gate (a pipe it
reads before ``exec``) so that its pid is known and traced before it runs."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from typing import Optional, Sequence

from ..errors import ProbectlError


class Workload:
    """``-- COMMAND ARGS``: forked now, held at a gate until :meth:`release`, then exec'd."""

    def __init__(self, argv: Sequence[str]):
        if not argv:
            raise ProbectlError("no command given after --")
        if "/" not in argv[0] and shutil.which(argv[0]) is None:
            raise ProbectlError(f"command not found: {argv[0]}", "give a program on $PATH or a path to it")
        if "/" in argv[0] and not os.access(argv[0], os.X_OK):
            raise ProbectlError(f"cannot run {argv[0]}: not an executable file")
        self.argv = list(argv)
        self.status: Optional[int] = None
        gate_r, self._gate = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: wait at the gate, then exec
            try:
                os.close(self._gate)
                os.close(err_r)
                if os.read(gate_r, 1) != b"g":
                    os._exit(127)  # probectl went away before the start: do not run untraced
                os.close(gate_r)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.execvp(self.argv[0], self.argv)
            except OSError as err:
                with contextlib.suppress(OSError):
                    os.write(err_w, str(err.errno).encode())
            finally:
                os._exit(127)
        os.close(gate_r)
        os.close(err_w)
        self.pid = pid
        self._err = err_r

    @property
    def program(self) -> str:
        """The file the command runs (found on $PATH as exec finds it)."""
        return self.argv[0] if "/" in self.argv[0] else (shutil.which(self.argv[0]) or self.argv[0])

    def release(self) -> None:
        """Let the command run; raise if it could not be executed."""
        try:
            os.write(self._gate, b"g")
        finally:
            os.close(self._gate)
            self._gate = -1
        data = b""
        while True:
            chunk = os.read(self._err, 64)
            if not chunk:
                break
            data += chunk
        os.close(self._err)
        self._err = -1
        if data:
            code = int(data.decode() or 0)
            self.wait()
            raise ProbectlError(f"cannot run {self.argv[0]}: {os.strerror(code)}")

    def poll(self) -> Optional[int]:
        if self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.status = -1
                return self.status
            if pid:
                self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(0.01)
        return self.status

    def stop(self) -> None:
        """Make sure the command is gone: never started, or SIGTERM then SIGKILL."""
        for fd_name in ("_gate", "_err"):
            fd = getattr(self, fd_name, -1)
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
                setattr(self, fd_name, -1)
        if self.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGTERM)
        if self.wait(2.0) is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            self.wait()
