"""Text for a terminal: what probectl prints that it did not write itself (the user's input echoed in
an error, names and paths from ELF/DWARF, lines of a source file) made safe and short.

- :func:`printable`: control characters shown as ``cat -v`` shows them (``^[`` for ESC, ``^?`` for
  DEL, ``M-^[`` for the C1 controls a terminal also obeys, ``M-?`` for a byte that is not UTF-8,
  which Python keeps as a lone surrogate and cannot print) and the bidirectional overrides of
  "Trojan Source" as ``<U+202E>``, so that a file or an argument cannot move the cursor, retitle the
  terminal or reorder what is shown. Tabs stay (source lines are indented with them).
- :func:`bounded`: every line printable and no run of a huge input longer than ``EXCERPT`` characters:
  a 5,000-character word becomes its first 200 characters, an ellipsis and its length.
- :func:`caret_excerpt`: a window of a long line around a column, with the column it has in the
  window (the caret under an error stays where the error is).

A leaf module (imported by errors, notice and the command line), with no imports of probectl.
"""
from __future__ import annotations

import re

EXCERPT = 200  # characters of a huge word kept in a message
LINE = 1000  # characters of a line kept in a message (a long input of many short words)

# Patterns, not compiled regular expressions: ``re`` compiles them on first use (and keeps them). Every
# command imports this module, and most print nothing unsafe: a text that ``str.isprintable`` passes
# has none of these characters (they are all controls, format characters or surrogates), and
# compiling the character class of _UNSAFE at every start would cost more than the check it serves.
_UNSAFE = r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
_LONG_RUN = r"\S{%d,}" % (EXCERPT + 1)
_CONTROL = r"[\x00-\x1f\x7f-\x9f]"


def _show(m: re.Match) -> str:
    c = ord(m.group())
    if c < 0x20:
        return "^" + chr(c + 64)
    if c == 0x7F:
        return "^?"
    if c <= 0x9F:
        return "M-^" + chr(c - 0x80 + 64)
    if 0xDC80 <= c <= 0xDCFF:  # a byte that is not UTF-8 (surrogateescape): as cat -v shows it
        low = c - 0xDC80
        return "M-" + ("^" + chr(low + 64) if low < 0x20 else "^?" if low == 0x7F else chr(low))
    return f"<U+{c:04X}>"


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with its control characters made visible (see the module); newlines are kept when
    ``newlines`` (text of several lines), else shown as ``^J``."""
    if text.isprintable():
        return text
    if newlines:
        return "\n".join(re.sub(_UNSAFE, _show, line) for line in text.split("\n"))
    return re.sub(_UNSAFE, _show, text)


def backslashed(text: str) -> str:
    """``text`` with each byte that is not UTF-8 (kept as a lone surrogate) and each control character
    as ``\\xNN``: how a name made of bytes (a process's comm, a path, a frame of folded stacks) goes
    into text that must be UTF-8 and one line (a table, an SVG, folded stacks), and onto a terminal
    (a process named ``\\x1b]...`` must not send escape sequences to whoever reads the trace), as
    ``script`` and ``trace`` print it."""
    if text.isprintable():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return re.sub(_CONTROL, lambda m: f"\\x{ord(m.group()):02x}", text)


def excerpt(text: str, limit: int = EXCERPT) -> str:
    """``text`` if it has at most ``limit`` characters, else its first ``limit``, an ellipsis and
    its length."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def bounded(message: str) -> str:
    """A message to print: each line printable, each run of more than ``EXCERPT`` non-blank
    characters cut to an excerpt, each line cut at ``LINE`` characters."""
    lines = []
    for line in message.split("\n"):
        line = re.sub(_LONG_RUN, lambda m: excerpt(m.group()), printable(line))
        lines.append(excerpt(line, LINE))
    return "\n".join(lines)


def caret_excerpt(text: str, column: int, width: int = EXCERPT - 40) -> tuple[str, int]:
    """(the part of the one-line ``text`` to show, made printable, and ``column`` in it): the whole
    line when it is short, else a window of about ``width`` characters around ``column``, marked
    with ``…`` where it was cut."""
    column = max(0, min(column, len(text)))
    start, end = 0, len(text)
    if len(text) > width:
        start = max(0, min(column - width // 2, len(text) - width))
        end = start + width
    head = "…" if start > 0 else ""
    tail = "…" if end < len(text) else ""
    shown = head + printable(text[start:end]) + tail
    return shown, len(head) + len(printable(text[start:column]))
