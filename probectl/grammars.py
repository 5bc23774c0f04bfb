"""The lark grammars (``grammar/*.lark``) and the text their syntax errors show above a caret.

Shared by the two parsers: probe definitions (:mod:`probectl.spec`) and event filters
(:mod:`probectl.filters`).
"""
from __future__ import annotations

from pathlib import Path

import probectl

from .errors import ProbectlError


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
