"""Notices: what probectl tells its user on the side (warnings, progress, clean-up done), on stderr,
never mixed into a command's output. Library code takes a ``notice`` callable; this is its default
and the command line's. Kept in a module of its own, so that a command as light as ``script`` does
not import tracefs to print one line."""
from __future__ import annotations

import sys

from .termtext import bounded


def notice_stderr(message: str) -> None:
    """The message on stderr, printable and with huge inputs cut to excerpts (``termtext.bounded``)."""
    print(bounded(message), file=sys.stderr)
