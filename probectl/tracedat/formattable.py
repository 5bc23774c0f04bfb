"""The event formats of a trace.dat file, parsed when first needed.

A file recorded from tracefs holds the format of every event the kernel has (some 1,500 of them,
a few thousand lines of text), while a recording uses a handful. :class:`FormatTable` keeps the
texts and parses one when its id is asked for; the id of each text is found beforehand by a
cheap look at its ``ID:`` line. Asking for every format (:meth:`FormatTable.parse_all`) gives what
parsing them all in file order gives: the first text that parses with an id is that id's format,
later ones with the same id are listed as unparsed ("used twice"), as are texts that do not parse.
A lookup by id gives the same format as that full parse, whatever the texts hold: a text whose
``ID:`` line cannot be read unambiguously is a candidate for every id.
"""
from __future__ import annotations

import re
from typing import Optional

from ..errors import FormatError
from ..formats import EventFormat

# The "ID:" and "print fmt:" lines of a format text (EventFormat.parse reads lines up to the
# first "print fmt:"; the last "ID:" line before it gives the id).
_KEY_LINES = re.compile(r"^[ \t]*(ID:|print fmt:)(.*)$", re.M)
# Characters that split lines or count as white space for str.splitlines/str.strip besides
# "\n", " " and "\t": a text holding one is not looked at by the regular expression above.
_ODD = re.compile(r"[\r\x0b\x0c\x1c-\x1f]")


def id_hint(text: str) -> Optional[int]:
    """The id :meth:`EventFormat.parse` would give ``text`` if it parses, or None when that is not
    certain from a look at its lines (non-ASCII text, odd line breaks, no or several ID lines)."""
    if not text.isascii() or _ODD.search(text):
        return None
    found: Optional[str] = None
    for m in _KEY_LINES.finditer(text):
        if m.group(1) == "print fmt:":
            break
        if found is not None:
            return None
        found = m.group(2)
    if found is None:
        return None
    try:
        return int(found.strip(), 0)
    except ValueError:
        return None


class FormatTable:
    """The formats of ``(system, text)`` pairs (in file order), parsed on demand."""

    def __init__(self, texts: list[tuple[str, str]]):
        self.texts = texts
        self._by_id: dict[int, list[int]] = {}
        self._unhinted: list[int] = []
        for i, (_system, text) in enumerate(texts):
            hint = id_hint(text)
            if hint is None:
                self._unhinted.append(i)
            else:
                self._by_id.setdefault(hint, []).append(i)
        self._parsed: dict[int, EventFormat | str] = {}  # text index -> format or error message
        self._found: dict[int, Optional[EventFormat]] = {}
        self._all: Optional[tuple[list[EventFormat], list[EventFormat], list[tuple[str, str]]]] = None

    def _parse(self, i: int) -> EventFormat | str:
        got = self._parsed.get(i)
        if got is None:
            system, text = self.texts[i]
            try:
                got = EventFormat.parse(text, system)
            except FormatError as err:
                got = err.message
            self._parsed[i] = got
        return got

    def get(self, event_id: int) -> Optional[EventFormat]:
        """The format of ``event_id``: the first text in file order that parses with that id."""
        if event_id in self._found:
            return self._found[event_id]
        candidates = self._by_id.get(event_id, [])
        if self._unhinted:
            candidates = sorted([*candidates, *self._unhinted])
        fmt = None
        for i in candidates:
            got = self._parse(i)
            if isinstance(got, EventFormat) and got.id == event_id:
                fmt = got
                break
        self._found[event_id] = fmt
        return fmt

    def failures(self) -> list[tuple[str, str]]:
        """(system, message) of the texts parsed so far that did not parse."""
        return [(self.texts[i][0], got) for i, got in sorted(self._parsed.items()) if isinstance(got, str)]

    def find(self, system: str, name: str) -> list[EventFormat]:
        """The formats (one per id, as :meth:`get` gives them) named ``system:name``."""
        out = []
        for i, (sys_, text) in enumerate(self.texts):
            if sys_ != system or name not in text:
                continue
            got = self._parse(i)
            if isinstance(got, EventFormat) and got.name == name and self.get(got.id) is got:
                out.append(got)
        return out

    def parse_all(self) -> tuple[list[EventFormat], list[EventFormat], list[tuple[str, str]]]:
        """Every text parsed, in file order: (ftrace formats, event formats, unparsed as
        (system, message))."""
        if self._all is None:
            ftrace: list[EventFormat] = []
            events: list[EventFormat] = []
            unparsed: list[tuple[str, str]] = []
            seen: set[int] = set()
            for i, (system, _text) in enumerate(self.texts):
                got = self._parse(i)
                if isinstance(got, str):
                    unparsed.append((system, got))
                    continue
                if got.id in seen:
                    unparsed.append((system, f"{got.name}: id {got.id} used twice"))
                    continue
                seen.add(got.id)
                (ftrace if system == "ftrace" else events).append(got)
            self._all = (ftrace, events, unparsed)
        return self._all
