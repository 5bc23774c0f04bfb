"""The lark grammars (``grammar/*.lark``), the characters no grammar takes, and the text their
syntax errors show above a caret.

Shared by the two parsers: probe definitions (:mod:`probectl.spec`) and event filters
(:mod:`probectl.filters`).
"""
from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

import probectl

from .cachedir import cache_dir
from .errors import ProbectlError, ProbeSyntaxError

if TYPE_CHECKING:
    from lark import Lark


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


def load_parser(name: str, **options) -> "Lark":
    """An LALR parser for the grammar file ``name``.

    Analysing a grammar takes ~50 ms, a tenth of a small ``add``; lark keeps the analysed parser
    in a file of the cache directory and checks it against a hash of the grammar text and the
    options, so an edited grammar or another lark is analysed again. Without a writable cache
    directory the grammar is analysed every time.
    """
    from lark import Lark

    text = grammar_path(name).read_text()
    directory = cache_dir()
    if directory is not None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            directory = None
    cache = str(directory / f"grammar-{Path(name).stem}.lark-cache") if directory is not None else False
    return Lark(text, parser="lalr", cache=cache, **options)


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
