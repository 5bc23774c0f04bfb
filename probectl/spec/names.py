"""Names in a definition: perf's escapes and quotes, C identifiers, and ``[GROUP:]EVENT``."""
from __future__ import annotations

import re
from typing import Optional

from ..errors import ProbeSemanticError

C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def unescape(raw: str) -> str:
    """perf's strdup_esq(): drop a backslash before any character and the quotes around a part."""
    out = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
        elif ch in "\"'":
            end = raw.find(ch, i + 1)
            end = len(raw) if end < 0 else end
            out.append(raw[i + 1:end])
            i = end + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def find_unescaped(raw: str, chars: str) -> int:
    """Index of the first of ``chars`` in ``raw`` that is neither escaped nor quoted, or -1."""
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "\"'":
            end = raw.find(ch, i + 1)
            if end < 0:
                return -1
            i = end + 1
            continue
        if ch in chars:
            return i
        i += 1
    return -1


def check_group_name(group: str) -> None:
    """Raise perf's error unless ``group`` follows the C symbol-naming rule."""
    if not C_NAME.match(group):
        raise ProbeSemanticError(
            f"{group or '(empty)'} is bad for group name -it must follow C symbol-naming rule.",
            hint="use letters, digits and '_', not starting with a digit",
        )


def event_name(raw: str) -> tuple[Optional[str], str]:
    """Split ``[GROUP:]EVENT`` and check both follow C symbol-naming rule (perf's message)."""
    cut = find_unescaped(raw, ":")
    group = None
    if cut >= 0:
        group = unescape(raw[:cut])
        check_group_name(group)
        raw = raw[cut + 1:]
    event = unescape(raw)
    if not C_NAME.match(event):
        raise ProbeSemanticError(
            f"{event or '(empty)'} is bad for event name -it must follow C symbol-naming rule.",
            hint="use letters, digits and '_', not starting with a digit",
        )
    return group, event
