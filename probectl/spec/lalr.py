"""The run-time half of the probe-definition parser: a contextual lexer and an LALR(1) driver over the
tables that lark computes from ``grammar/probe.lark`` (``probe_tables``, written by
tools/regenerate_probe_parser.py), building the parse tree lark builds with
``propagate_positions=True`` and ``maybe_placeholders=False``.

Why not lark's own run-time (its stand-alone module): it is ~3,500 lines, with logging and pickle,
and loading it and deserialising its tables is a large part of an ``add``, where these tables are
plain literals (docs/ledger.md has the measure and the bench that repeats it). lark stays the
grammar's source of truth: it analyses the grammar and its conflicts, and
tests/test_probe_parser.py parses a corpus with both and compares the trees and the failures.

The names of the tree, the token and the failures are lark's, as are their attributes that
probectl reads (``Tree.data/children/meta``, ``Token.type/start_pos/end_pos``, ``UnexpectedToken.
token/expected``, ``UnexpectedCharacters.pos_in_stream/allowed``, ``VisitError.orig_exc``).
"""
from __future__ import annotations

import re
from types import ModuleType
from typing import Any, Callable, Iterator, Optional


class LarkError(Exception):
    """Every failure of the parser."""


class UnexpectedInput(LarkError):
    """The text is not in the grammar's language; ``pos_in_stream`` is where it stops being."""

    pos_in_stream: Optional[int] = None


class UnexpectedCharacters(UnexpectedInput):
    """No terminal the parser can take here matches the text at ``pos_in_stream``."""

    pos_in_stream: int

    def __init__(self, text: str, pos: int, allowed: set[str]) -> None:
        super().__init__(f"No terminal matches {text[pos]!r} at position {pos}; expected one of {sorted(allowed)}")
        self.pos_in_stream = pos
        self.char = text[pos]
        self.allowed = allowed


class UnexpectedToken(UnexpectedInput):
    """A token (``$END`` at the end of the text) the grammar does not allow after what precedes it."""

    def __init__(self, token: "Token", expected: set[str]) -> None:
        super().__init__(f"Unexpected token {token!r} at position {token.start_pos}; expected one of {sorted(expected)}")
        self.token = token
        self.pos_in_stream = token.start_pos
        self.expected = expected


class VisitError(LarkError):
    """An exception raised by a :class:`Transformer` method, with the node it was given."""

    def __init__(self, rule: str, obj: Any, orig_exc: Exception) -> None:
        super().__init__(f'Error trying to process rule "{rule}":\n\n{orig_exc}')
        self.rule = rule
        self.obj = obj
        self.orig_exc = orig_exc


class Token(str):
    """A terminal's text, with its ``type`` (the terminal's name) and its span in the text."""

    __slots__ = ("type", "start_pos", "end_pos")

    type: str
    start_pos: int
    end_pos: int

    def __new__(cls, type: str, value: str, start_pos: int = 0, end_pos: Optional[int] = None) -> "Token":
        token = super().__new__(cls, value)
        token.type = type
        token.start_pos = start_pos
        token.end_pos = start_pos + len(value) if end_pos is None else end_pos
        return token

    @property
    def value(self) -> str:
        return str(self)

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Token) and self.type != other.type:
            return False
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class Meta:
    """A tree's span: from its first to its last token (``empty`` when it has none). The
    ``container_`` span also covers the filtered tokens around a child it was made from."""

    __slots__ = ("empty", "start_pos", "end_pos", "container_start_pos", "container_end_pos")
    start_pos: int  # (set when the node spans a token: not empty)
    end_pos: int
    container_start_pos: int
    container_end_pos: int

    def __init__(self) -> None:
        self.empty = True


class Tree:
    """A rule's node: ``data`` (the rule's name), ``children`` (trees and tokens) and ``meta``."""

    __slots__ = ("data", "children", "meta")

    def __init__(self, data: str, children: list, meta: Optional[Meta] = None) -> None:
        self.data = data
        self.children = children
        self.meta = Meta() if meta is None else meta

    def __repr__(self) -> str:
        return f"Tree({self.data!r}, {self.children!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tree) and self.data == other.data and self.children == other.children

    def __hash__(self) -> int:
        return hash((self.data, tuple(self.children)))


def v_args(*, meta: bool = False) -> Callable[[Callable], Callable]:
    """``@v_args(meta=True)``: the :class:`Transformer` method takes ``(meta, children)``."""

    def mark(function: Callable) -> Callable:
        function.with_meta = meta  # type: ignore[attr-defined]
        return function

    return mark


class Transformer:
    """Rebuilds a tree bottom-up: a method named after a rule (or a terminal) gets the node's
    transformed children (or the token); a node without one stays a :class:`Tree`."""

    def transform(self, tree: Tree) -> Any:
        children = [self.transform(c) if isinstance(c, Tree) else self._token(c) if isinstance(c, Token) else c
                    for c in tree.children]
        method = getattr(self, tree.data, None)
        if method is None:
            return Tree(tree.data, children, tree.meta)
        try:
            return method(tree.meta, children) if getattr(method, "with_meta", False) else method(children)
        except Exception as err:
            raise VisitError(tree.data, tree, err) from err

    def _token(self, token: Token) -> Any:
        method = getattr(self, token.type, None)
        if method is None:
            return token
        try:
            return method(token)
        except Exception as err:
            raise VisitError(token.type, token, err) from err


class _Lexer:
    """The terminals one parser state can take, tried in lark's order (the first that matches wins,
    as in lark's alternation of them), and the keywords each may turn out to be."""

    def __init__(self, names: tuple[str, ...], unless: dict[str, dict[str, str]], ignore: frozenset,
                 patterns: dict[str, "re.Pattern[str]"]) -> None:
        self.names = names
        self.patterns = patterns
        self.unless = unless
        self.ignore = ignore
        allowed = set(names) - ignore
        self.allowed = allowed or {"<END-OF-FILE>"}

    def next_token(self, text: str, pos: int) -> Optional[Token]:
        """The token at ``pos`` (None at the end of the text), after any ignored ones."""
        while pos < len(text):
            for name in self.names:
                found = self.patterns[name].match(text, pos)
                if found:
                    break
            else:
                raise UnexpectedCharacters(text, pos, set(self.allowed))
            value = found.group(0)
            if name in self.ignore:
                pos += len(value)
                continue
            return Token(self.unless.get(name, {}).get(value, name), value, pos)
        return None


class Parser:
    """The parser of one grammar's tables (a ``probe_tables`` module)."""

    def __init__(self, tables: ModuleType) -> None:
        self._tables = tables
        self._patterns = _LazyPatterns(tables.TERMINALS)
        ignore = frozenset(tables.IGNORE)
        lexers = [_Lexer(names, unless, ignore, self._patterns) for names, unless in tables.LEXERS]
        self._state_lexers = [lexers[i] for i in tables.STATE_LEXERS]
        self._root_lexer = lexers[tables.ROOT_LEXER]
        self._rules = [_rule_builder(*rule) for rule in tables.RULES]

    def parse(self, text: str, start: str) -> Tree:
        """The tree of ``text`` from the start symbol ``start``, or UnexpectedInput."""
        states = self._tables.STATES
        rules = self._rules
        state_stack = [self._tables.START_STATES[start]]
        end_state = self._tables.END_STATES[start]
        value_stack: list = []
        token = None
        for token in self._tokens(text, state_stack):
            _feed(token, states, rules, state_stack, value_stack, end_state)
        end = Token("$END", "", token.start_pos, token.end_pos) if token is not None else Token("$END", "", 0, 0)
        return _feed(end, states, rules, state_stack, value_stack, end_state)

    def _tokens(self, text: str, state_stack: list) -> Iterator[Token]:
        pos = 0
        while True:
            try:
                token = self._state_lexers[state_stack[-1]].next_token(text, pos)
            except UnexpectedCharacters as err:
                # As lark's contextual lexer: what any state would have lexed there is an unexpected token.
                try:
                    other = self._root_lexer.next_token(text, err.pos_in_stream)
                except UnexpectedCharacters:
                    raise err from None
                raise UnexpectedToken(other, err.allowed) from None
            if token is None:
                return
            pos = token.end_pos
            yield token


def _feed(token: Token, states: tuple, rules: list, state_stack: list, value_stack: list, end_state: int) -> Any:
    """One token through the LALR automaton: reductions, then its shift (or, for ``$END``, the result)."""
    is_end = token.type == "$END"
    while True:
        actions = states[state_stack[-1]]
        action = actions.get(token.type)
        if action is None:
            raise UnexpectedToken(token, {name for name in actions if name.isupper()})
        if action >= 0:  # shift to that state
            state_stack.append(action)
            value_stack.append(token)
            return None
        origin, size, build = rules[~action]
        if size:
            children = value_stack[-size:]
            del state_stack[-size:]
            del value_stack[-size:]
        else:
            children = []
        state_stack.append(states[state_stack[-1]][origin])
        value_stack.append(build(children))
        if is_end and state_stack[-1] == end_state:
            return value_stack[-1]


def _rule_builder(origin: str, size: int, name: str, include: Optional[tuple], expand1: bool) -> tuple:
    """(origin, size, the function from the rule's children to its node) for one rule of ``RULES``:
    ``include`` lists (index, inline) of the children kept (None: all, as they are), ``inline`` for
    a ``_rule`` child whose children take its place; ``expand1`` (``?rule``) returns a lone child
    itself."""

    def build(children: list) -> Any:
        kept = children
        if include is not None:
            kept = []
            for i, inline in include:
                if inline:
                    if kept:
                        kept.extend(children[i].children)
                    else:  # the inlined node's own list, grown in place: a long list (``(_WS arg)*``) stays linear
                        kept = children[i].children
                else:
                    kept.append(children[i])
        node = kept[0] if expand1 and len(kept) == 1 else Tree(name, kept)
        if isinstance(node, Tree):
            _propagate_positions(node.meta, children)
        return node

    return origin, size, build


def _span(child: Any) -> Optional[tuple[int, int]]:
    if isinstance(child, Token):
        return child.start_pos, child.end_pos
    if isinstance(child, Tree) and not child.meta.empty:
        return child.meta.container_start_pos, child.meta.container_end_pos
    return None


def _propagate_positions(meta: Meta, children: list) -> None:
    """lark's propagate_positions: a node spans its first to its last positioned child, filtered
    tokens included (a node it already spans, the lone child of a ``?rule``, keeps its own span
    and takes the wider one as its container)."""
    first = next((span for span in map(_span, children) if span is not None), None)
    if first is None:
        return
    last = next(span for span in map(_span, reversed(children)) if span is not None)
    if meta.empty:
        meta.start_pos, meta.end_pos = first[0], last[1]
        meta.empty = False
    meta.container_start_pos, meta.container_end_pos = first[0], last[1]


class _LazyPatterns(dict):
    """Each terminal's regular expression, compiled when a lexer first tries it."""

    def __init__(self, sources: dict[str, str]) -> None:
        super().__init__()
        self._sources = sources

    def __missing__(self, name: str) -> "re.Pattern[str]":
        pattern = self[name] = re.compile(self._sources[name])
        return pattern
