"""Filter text into its syntax tree with ``grammar/filter.lark``; a failure is a
:class:`~probectl.errors.ProbeSyntaxError` at the exact column, saying what was expected there."""
from __future__ import annotations

from functools import lru_cache
from typing import Optional, Union

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..errors import ProbeSyntaxError
from ..grammars import caret_line, check_characters, load_parser
from .tree import And, CpuList, Node, Not, Or, Predicate, StringValue, Term, Terms, Value

MAX_NESTING = 100         # parentheses and '!' (the kernel takes more, nobody writes more)
_WHITESPACE_CONTROLS = frozenset("\t\n\r")


@lru_cache(maxsize=None)
def _parser() -> Lark:
    return load_parser("filter.lark", lexer="contextual")


def parse_filter(text: str) -> Node:
    """Parse a filter into its syntax tree; no field is checked (see :func:`compile_filter`)."""
    check_characters(text, _WHITESPACE_CONTROLS)
    if not text.strip():
        raise ProbeSyntaxError("empty filter", caret_line(text), 0,
                               hint="write FIELD OP VALUE, e.g. 'common_pid == 42'; "
                                    "to remove a filter, give none")
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as err:
        raise _syntax_error(err, text) from None
    except LarkError as err:  # pragma: no cover - lark raises UnexpectedInput for bad input
        raise ProbeSyntaxError(f"cannot parse the filter: {err}", caret_line(text), 0) from None
    _check_nesting(tree, text)
    return _build(tree.children[0], text)


_TERMINAL_NAMES = {
    "FIELD": "a field name", "NOT": "'!'", "_LPAR": "'('", "_RPAR": "')'", "OP": "an operator",
    "_AND": "'&&'", "_OR": "'||'", "_BAR": "'|'", "STRING": "a string", "NUMBER": "a number",
    "WORD": "a name", "CPUS": "CPUS{...}", "$END": "the end of the filter",
}
_VALUE_TERMINALS = {"STRING", "NUMBER", "WORD", "CPUS"}
_OPERATORS_TEXT = "==, !=, <, <=, >, >=, & or ~"


def _end_column(text: str) -> int:
    return min(len(text), len(text.rstrip()) + 1)


def _syntax_error(err: UnexpectedInput, text: str) -> ProbeSyntaxError:
    shown = caret_line(text)
    if isinstance(err, UnexpectedCharacters):
        # (lark declares pos_in_stream None on UnexpectedInput; UnexpectedCharacters sets the index)
        column: int = err.pos_in_stream  # type: ignore[assignment]
        ch = text[column]
        expected = set(err.allowed or ())
        if ch in "\"'":
            other = "'" if ch == '"' else '"'
            return ProbeSyntaxError(f"missing closing {ch} for this string", shown, column,
                                    hint=f"the kernel's strings have no escapes; to put a {ch} in a "
                                         f"string, quote it with {other} instead")
        if ch == "{" and text[:column].endswith("CPUS"):
            return ProbeSyntaxError("missing '}' to close CPUS{", shown, len(text))
        return ProbeSyntaxError(f"unexpected {ch!r}: expected {_describe(expected)}", shown, column,
                                hint=_hint_for(expected, ch))
    assert isinstance(err, UnexpectedToken)
    token = err.token
    expected = set(err.expected or ())
    if token.type == "$END":
        if expected == {"_RPAR"} or "_RPAR" in expected and not expected & _VALUE_TERMINALS:
            opened = _unclosed_paren(text)
            if opened is not None:
                return ProbeSyntaxError("this '(' is never closed", shown, opened,
                                        hint="add a ')' where the group ends")
        return ProbeSyntaxError(f"unexpected end of the filter: expected {_describe(expected)}",
                                shown, _end_column(text), hint=_hint_for(expected, ""))
    column = token.start_pos
    if token.type == "_RPAR" and "_RPAR" not in expected and _paren_depth(text, column) == 0:
        return ProbeSyntaxError("unbalanced ')': there is no '(' to close", shown, column)
    if token.type == "OP" and str(token) == "=":
        return ProbeSyntaxError("unexpected '=': expected a value", shown, column)
    wanted = _describe(expected)
    if wanted == "'&&' or '||'" and _paren_depth(text, column):
        wanted = "'&&', '||' or ')'"
    return ProbeSyntaxError(f"unexpected {_token_text(token)}: expected {wanted}", shown, column,
                            hint=_hint_for(expected, str(token)))


def _token_text(token: Token) -> str:
    value = str(token)
    return repr(value) if len(value) <= 30 else repr(value[:27] + "...")


def _describe(expected: set[str]) -> str:
    if "OP" in expected:
        return f"an operator ({_OPERATORS_TEXT})"
    if expected and expected <= {"NUMBER", "WORD"}:
        return "a number or a name after '|'"
    if expected & _VALUE_TERMINALS and not expected - _VALUE_TERMINALS:
        return "a value (a number, a \"string\", a name or CPUS{...})"
    if "FIELD" in expected:
        return "a field name, '!' or '('"
    if "_AND" in expected or "_OR" in expected:
        return "'&&' or '||'"
    names = [_TERMINAL_NAMES.get(name, name) for name in sorted(expected, key=_order)]
    if not names:
        return "something else"
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def _order(name: str) -> int:
    return list(_TERMINAL_NAMES).index(name) if name in _TERMINAL_NAMES else len(_TERMINAL_NAMES)


def _hint_for(expected: set[str], found: str) -> str:
    if "FIELD" in expected:
        if found and (found[0].isdigit() or found[0] in "\"'-"):
            return "the field comes first: FIELD OP VALUE, e.g. 'common_pid == 42'"
        return "a filter is FIELD OP VALUE, joined by && and ||"
    if "_AND" in expected or "_OR" in expected:
        if found == "&":
            return "'&' tests bits (flags & 0x4); join predicates with '&&'"
        return "join predicates with '&&' or '||'"
    if "OP" in expected and found in ("&&", "||"):
        return "each predicate compares a field with a value, e.g. 'flags & 0x4', not just a field"
    return ""


def _paren_depth(text: str, end: int) -> int:
    """How many '(' are open just before ``end``."""
    return len(_open_parens(text[:end]))


def _unclosed_paren(text: str) -> Optional[int]:
    """The column of the first '(' that no ')' closes."""
    stack = _open_parens(text)
    return stack[0] if stack else None


def _open_parens(text: str) -> list[int]:
    """The columns of the '(' that are still open at the end of ``text`` (strings and CPUS{} skipped)."""
    stack: list[int] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "\"'":
            end = text.find(ch, i + 1)
            if end < 0:
                break
            i = end
        elif ch == "{":
            end = text.find("}", i + 1)
            if end < 0:
                break
            i = end
        elif ch == "(":
            stack.append(i)
        elif ch == ")" and stack:
            stack.pop()
        i += 1
    return stack


def _check_nesting(tree: Tree, text: str) -> None:
    # Iterative: the tree is turned into dataclasses recursively, so its depth is bounded first.
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data in ("not_", "or_", "and_"):
            depth += 1
            if depth > MAX_NESTING:
                column = _position(node.children[0]) if node.data == "not_" else _first_column(node)
                raise ProbeSyntaxError(f"the filter nests too deeply (more than {MAX_NESTING} levels)",
                                       caret_line(text), column)
        stack.extend((child, depth) for child in node.children if isinstance(child, Tree))


def _first_column(tree: Tree) -> int:
    node: Union[Tree, Token] = tree
    while isinstance(node, Tree):
        node = node.children[0]
    return _position(node)


# The grammar says which children are tokens and which trees: these two say it to a type checker.
def _position(node: Union[Tree, Token]) -> int:
    """Where the token ``node`` starts (lark's lexer sets the position of every token it makes)."""
    assert isinstance(node, Token) and node.start_pos is not None, node
    return node.start_pos


def _tree(node: Union[Tree, Token]) -> Tree:
    assert isinstance(node, Tree), node
    return node


def _build(tree: Union[Tree, Token], text: str) -> Node:
    tree = _tree(tree)
    kind = tree.data
    if kind == "or_":
        return Or(tuple(_build(child, text) for child in tree.children))
    if kind == "and_":
        return And(tuple(_build(child, text) for child in tree.children))
    if kind == "not_":
        token, operand = tree.children
        return Not(_build(operand, text), _position(token))
    assert kind == "predicate", kind
    field_token, op_token, value_tree = tree.children
    name, _, suffix = str(field_token).partition(".")
    if "." in str(field_token) and not suffix:
        raise ProbeSyntaxError("expected a suffix after '.' (.function or .ustring)", caret_line(text),
                               _position(field_token) + len(name) + 1)
    op = str(op_token)
    if op == "=":
        raise ProbeSyntaxError("'=' is not an operator: use '==' to compare", caret_line(text),
                               _position(op_token))
    return Predicate(name, suffix, op, _build_value(_tree(value_tree)), _position(field_token), _position(op_token))


def _build_value(tree: Tree) -> Value:
    if tree.data == "string":
        (token,) = tree.children
        raw = str(token)
        return StringValue(raw[1:-1], raw[0], _position(token))
    if tree.data == "cpus":
        (token,) = tree.children
        return CpuList(str(token)[len("CPUS{"):-1], _position(token))
    return Terms(tuple(Term(str(token), _position(token)) for token in tree.children))
