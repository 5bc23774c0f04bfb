"""The lark grammars (``grammar/*.lark``), the characters no grammar takes, and the text their
syntax errors show above a caret.

Shared by the two parsers: probe definitions (:mod:`probectl.spec`, whose parser is generated from
its grammar's tables ahead of time: ``probectl/spec/probe_tables.py``) and event filters (:mod:`probectl.filters`,
whose parser lark builds at run time and :func:`load_parser` keeps in the cache).
"""
from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import TYPE_CHECKING

import probectl

from .cachedir import cache_dir, read_file, write_file
from .errors import ProbectlError, ProbeSyntaxError

if TYPE_CHECKING:
    from lark import Lark

# A cached parser: this line, the SHA-256 of what it was made from, the SHA-256 of the rest, and the
# rest (what Lark.save writes). Larger files are not read (the probe grammar's is ~30 KB).
_CACHE_MAGIC = b"probectl lark parser\n"
_CACHE_LIMIT = 16 << 20


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


def cache_name(name: str) -> str:
    """The name of the cache file that keeps the parser of grammar ``name`` (not lark's own
    ``grammar-*.lark-cache`` files, which earlier versions let lark read)."""
    return f"grammar-{Path(name).stem}.parser"


def load_parser(name: str, **options) -> "Lark":
    """An LALR parser for the grammar file ``name``.

    Analysing a grammar costs more than the command that needs it; the analysed parser is kept in a
    file of the cache directory, under a hash of the grammar text, the options, lark's and Python's
    versions, so an edited grammar or another lark is analysed again. lark keeps parsers with
    ``pickle``, which runs whatever code a file names: lark is never given the file's name (it would
    unpickle before any check). The file is read through :func:`probectl.cachedir.read_file` (a
    regular file of the effective user's, in a directory of theirs, of bounded size), its hash and
    checksum verified, and only then is its pickle decoded. Without a usable cache directory the
    grammar is analysed every time.
    """
    from lark import Lark

    text = grammar_path(name).read_text()
    directory = cache_dir()
    if directory is None:
        return Lark(text, parser="lalr", **options)

    import hashlib
    import io
    import sys

    import lark

    path = directory / cache_name(name)
    key = hashlib.sha256(repr((text, sorted(options.items()), lark.__version__, sys.version_info[:2]))
                         .encode("utf-8", "surrogateescape")).digest()
    head = len(_CACHE_MAGIC) + 64
    data = read_file(path, _CACHE_LIMIT)
    if (data is not None and data.startswith(_CACHE_MAGIC) and data[len(_CACHE_MAGIC):len(_CACHE_MAGIC) + 32] == key
            and hashlib.sha256(data[head:]).digest() == data[len(_CACHE_MAGIC) + 32:head]):
        try:
            return Lark.load(io.BytesIO(data[head:]))
        except Exception:  # another lark's classes, a damaged pickle: analysed again
            pass
    parser = Lark(text, parser="lalr", **options)
    saved = io.BytesIO()
    parser.save(saved)
    payload = saved.getvalue()
    write_file(path, _CACHE_MAGIC + key + hashlib.sha256(payload).digest() + payload)
    return parser


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
