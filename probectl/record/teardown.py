"""What a recording session and a live stream share: how they stop and how they clean up.

SIGTERM stops them as Ctrl-C does; while they tear down, both signals are held off, and every
clean-up step is attempted whatever the others did, its failure kept for the end.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Callable, Iterator



class Terminated(Exception):
    """SIGTERM arrived (raised from the signal handler, like KeyboardInterrupt for SIGINT)."""


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` in the main thread (SIGINT raises KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        raise Terminated()

    old = signal.signal(signal.SIGTERM, on_term)
    # (SIGINT too, even when the shell started us with it ignored, as it does for '&' jobs:
    # 'kill -INT' is how scripts stop a recorder)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """Hold off SIGINT and SIGTERM while tearing down (a second Ctrl-C must not stop the clean-up);
    the signals that arrived are listed."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    got: list[int] = []

    def note(signum: int, frame: Any) -> None:
        got.append(signum)

    old = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class CleanupSteps:
    """Clean-up steps, each attempted whatever the others did: ``steps(fn)`` runs ``fn`` and returns
    its result, or None when it failed (the failure is kept for :meth:`finish`). Any failure: an
    internal error in one step (a bug, a part's surprise) must not skip the steps after it, the
    removal of the instance among them."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def __call__(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as err:
            self.errors.append(err)
            return None

    def finish(self, quiet: bool, notice: Callable[[str], None]) -> None:
        """With ``quiet`` (an error is already on its way) the failures are only reported;
        otherwise the first one is raised."""
        if self.errors:
            if quiet:
                for err in self.errors:
                    notice(f"probectl: while cleaning up: {err}")
            else:
                raise self.errors[0]
