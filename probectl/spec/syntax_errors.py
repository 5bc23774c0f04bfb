"""lark's parse failures as :class:`~probectl.errors.ProbeSyntaxError`: the column of the offending
character, what was expected there in the user's words, and a hint for the usual mistakes."""
from __future__ import annotations

import re
from typing import Optional


from ..errors import ProbeSyntaxError
from ..grammars import caret_line
from .names import find_unescaped
from .lalr import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from .tree import TYPE_HINT

_FETCH_STARTS = frozenset({"IDENT", "REGISTER", "SPECIAL", "SYMBOL", "ADDRESS", "DEREF", "IMMEDIATE", "IMMSTR"})


def syntax_error(err: UnexpectedInput, text: str, start: str) -> ProbeSyntaxError:
    """A lark failure as a ProbeSyntaxError: the column of the offending character and what was expected."""
    found: Optional[str]
    if isinstance(err, UnexpectedCharacters):
        column = err.pos_in_stream
        found = text[column]
        expected = set(err.allowed or ())
    elif isinstance(err, UnexpectedToken) and err.token.type != "$END":
        column = err.token.start_pos
        found = str(err.token)
        expected = set(err.expected)
    else:
        column = len(text)
        found = None
        expected = set(getattr(err, "expected", ()) or ())
    if column is None:  # pragma: no cover - lark always sets positions for LALR tokens
        column = len(text)
    column = min(column, len(text))
    expected.discard("$END")
    expected.discard("_WS")
    prev = text[column - 1] if column > 0 else ""
    hint = ""

    if found and found[0] in "\"'" and ("NAME" in expected or "EVENT_NAME" in expected) \
            and text.find(found[0], column + 1) < 0:
        return ProbeSyntaxError("unterminated quote", caret_line(text), column,
                                "close it with a matching quote")
    if found and found[0] == "\\" and column < _point_end(text) and (
            column + 1 >= len(text) or text[column + 1].isspace()):
        return ProbeSyntaxError("a backslash must be followed by the character it escapes",
                                caret_line(text), column)

    if found and text.startswith('\\"', column) and "IMMSTR" in expected:
        end = column + len(text[column:].split(None, 1)[0])
        return ProbeSyntaxError(
            "missing closing '\"' of the immediate string", caret_line(text), end,
            "an immediate string can't contain spaces" if '"' in text[end:] else "",
        )

    if expected and expected <= {"TYPE"}:
        phrase = "expected a type after ':'"
        hint = TYPE_HINT
    elif expected and expected <= {"NUMBER"}:
        if prev == ":":
            phrase = "expected a line number after ':'"
        elif prev == "+":
            phrase = "expected a number of lines after '+'" if start == "line_range" else "expected an offset after '+'"
        elif prev == "-":
            phrase = "expected an end line after '-'"
        else:
            phrase = "expected a number"
    elif expected and expected <= {"NAME"}:
        phrase = "expected a source file after '@'" if prev == "@" else "expected a name"
    elif "NAME" in expected and ("LAZY" in expected or start == "line_range") and column == _point_start(text):
        phrase = "expected a function name or source file"
    elif expected and expected <= {"IDENT"}:
        phrase = f"expected a member name after '{'->' if prev == '>' else prev}'"
    elif expected & _FETCH_STARTS:
        phrase = "expected an argument (a variable, %REG, $retval, @SYMBOL, +OFFS(...) or \\IMM)"
        if prev == "(":
            phrase = "expected an argument inside '(...)'"
        elif prev == "=":
            phrase = "expected an argument after '='"
        if found and found[0] in "0123456789":
            hint = ("write \\N for the number itself, @ADDR for the memory at an address, "
                    "or +OFFS(ARG) for a dereference (the sign is required)")
        elif found and found[0] in "+-":
            hint = "a dereference is written +OFFS(ARG), e.g. +8(%di)"
    elif expected == {"RPAR"} or ("RPAR" in expected and found is None):
        phrase = "expected ')'"
    else:
        phrase = ""

    if found is None:
        what = "end of the definition" if start == "probe" else "end of the line range"
        message = phrase or f"unexpected {what}"
    else:
        shown = "a space" if found.isspace() else repr(found if len(found) <= 24 else found[:20] + "...")
        message = f"{phrase}, found {shown}" if phrase else f"unexpected {shown}"
    before = text[:column]
    if found and found.startswith(":") and before.endswith("@user"):
        hint = "write the type before @user: ARG:TYPE@user"
    elif found and found.startswith(("->", ".", "[")) and re.search(r"[$%][A-Za-z0-9_]*\Z", before):
        hint = "only C variables have members and indexes; dereference registers with +OFFS(...)"
    elif found == "%return" and start == "probe" and column > _point_end(text):
        hint = "%return belongs to the probe point: FUNC%return ARG ..."
    if not hint and start == "probe":
        first_word_end = _point_end(text)
        if column > first_word_end and find_unescaped(text[:first_word_end], ";") >= 0:
            hint = ("a lazy pattern ends at the first space; lazy matching ignores spaces, "
                    "so write the pattern without them")
        elif _unclosed_template(text[:first_word_end]):
            # (a template's arguments the grammar did not take whole: five levels deep, or an '=' in them)
            hint = ('a template\'s arguments are taken with their spaces four levels of <...> deep: '
                    'quote a deeper name ("NAME" ARG ...)')
    return ProbeSyntaxError(message, caret_line(text), column, hint)


def _point_start(text: str) -> int:
    """Where the point begins: after leading blanks and an ``EVENT=`` prefix."""
    begin = len(text) - len(text.lstrip())
    m = re.match(r"""(?:[^\s\\;=@+%"']|\\\S|"[^"]*"|'[^']*')*=""", text[begin:])
    return begin + m.end() if m else begin


def _point_end(text: str) -> int:
    begin = len(text) - len(text.lstrip())
    m = re.match(r"\S*", text[begin:])
    return begin + (m.end() if m else 0)


def _unclosed_template(point: str) -> bool:
    """A point that opens more '<' than it closes, other than operator<'s and operator<<'s."""
    point = re.sub(r"operator<<?", "", point)
    return point.count("<") > point.count(">")
