"""The lark grammars (``grammar/*.lark``), the characters no grammar takes, and the text their
syntax errors show above a caret.

Shared by the two parsers: probe definitions (:mod:`probectl.spec`) and event filters
(:mod:`probectl.filters`).
"""
from __future__ import annotations

import unicodedata
from pathlib import Path

import probectl

from .errors import ProbectlError, ProbeSyntaxError


def grammar_path(name: str) -> Path:
    """Find a grammar file: inside the installed package first, then in the source checkout."""
    package = Path(probectl.__file__).resolve().parent
    candidates = (package / "grammar" / name, package.parent / "grammar" / name)
    for path in candidates:
        if path.is_file():
            return path
    raise ProbectlError(
        f"grammar file {name} not found (looked in {', '.join(str(p.parent) for p in candidates)})",
        hint="reinstall probectl; the build copies grammar/*.lark into the package",
    )


def caret_line(text: str) -> str:
    """``text`` safe to print above a caret: one printable character per character of ``text``."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else " " if ch.isspace() else "?" for ch in text)


def check_characters(text: str, whitespace: frozenset[str]) -> None:
    """Refuse what no grammar takes: a ``text`` that is not a str, and control characters other
    than the ``whitespace`` the grammar skips (a ProbeSyntaxError at the first one)."""
    if not isinstance(text, str):
        raise TypeError(f"expected a str, got {type(text).__name__}")
    for column, ch in enumerate(text):
        if unicodedata.category(ch)[0] == "C" and ch not in whitespace:
            raise ProbeSyntaxError(f"invalid character U+{ord(ch):04X}", caret_line(text), column)
