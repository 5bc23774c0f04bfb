"""Dynamic event definitions: the exact text written to uprobe_events/kprobe_events, and back.

``EventDefinition.render()`` gives the line probectl writes; ``EventDefinition.parse()`` reads lines
that the kernel shows (from probectl or any other tool), so ``list`` stays right whatever added them.
"""
from __future__ import annotations

import re

from .dataclass import dataclass, field
from .errors import ProbectlError

# The longest definition line the kernel takes: trace_parse_run_command() reads a write in chunks of
# WRITE_BUFSIZE (4096) bytes, and a line must fit one chunk with its '\n' and a NUL (4094 characters
# were accepted and 4095 refused on 6.1 and 6.18).
MAX_DEFINITION_LINE = 4094


def definition_bytes(text: str) -> bytes:
    """A definition line as the kernel gets it (and counts it). A path or a symbol name that is not
    UTF-8 reached probectl decoded with surrogateescape (as Python decodes argv and file names, and
    the ELF reader symbol names): its own bytes go back, which are what the kernel matches."""
    return text.encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class FetchArg:
    """One argument of a definition: ``name=fetch:type``; ``name`` is empty when the kernel names it."""

    fetch: str
    name: str = ""
    type: str = ""

    def render(self) -> str:
        text = f"{self.name}={self.fetch}" if self.name else self.fetch
        return f"{text}:{self.type}" if self.type else text

    @classmethod
    def parse(cls, text: str) -> "FetchArg":
        name = ""
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)=", text)
        if m:
            name, text = m.group(1), text[m.end():]
        fetch, typ = _split_type(text)
        return cls(fetch=fetch, name=name, type=typ)


def _split_type(text: str) -> tuple[str, str]:
    """Split ``fetch:type`` at the last ':' outside parentheses and quotes."""
    depth = 0
    quoted = False
    cut = -1
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == ":" and depth == 0:
            cut = i
    if cut < 0:
        return text, ""
    return text[:cut], text[cut + 1:]


@dataclass(frozen=True)
class EventDefinition:
    """A kprobe/uprobe event as the kernel sees it.

    ``place`` is ``SYM+OFF`` / ``MOD:SYM+OFF`` for kprobes and ``PATH:0xOFF`` for uprobes (without any
    ``%return``); ``kind`` is ``p`` or ``r``; ``maxactive`` only applies to kretprobes.
    """

    kind: str
    group: str
    event: str
    place: str
    args: tuple[FetchArg, ...] = field(default_factory=tuple)
    is_uprobe: bool = False
    maxactive: int = 0

    @property
    def full_name(self) -> str:
        return f"{self.group}:{self.event}"

    def render(self) -> str:
        head = self.kind + (str(self.maxactive) if self.maxactive else "")
        parts = [f"{head}:{self.group}/{self.event}", self.place]
        parts.extend(arg.render() for arg in self.args)
        return " ".join(parts)

    def render_removal(self) -> str:
        return f"-:{self.group}/{self.event}"

    @property
    def uprobe_path(self) -> str:
        """The file of a uprobe place (``/path:0x1139`` → ``/path``)."""
        return self.place.rsplit(":", 1)[0] if self.is_uprobe else ""

    @property
    def uprobe_offset(self) -> int:
        """The file offset of a uprobe place (``/path:0x1139`` → 0x1139), without any ref_ctr part."""
        if not self.is_uprobe:
            return 0
        off = self.place.rsplit(":", 1)[1]
        off = off.split("(", 1)[0]
        return int(off, 0)

    @classmethod
    def parse(cls, line: str, is_uprobe: bool | None = None) -> "EventDefinition":
        """Parse one line of kprobe_events/uprobe_events/dynamic_events (``p:``/``r:`` kinds only)."""
        tokens = tokenize_definition(line)
        if len(tokens) < 2:
            raise ProbectlError(f"cannot parse event definition {line.strip()!r}")
        m = re.fullmatch(r"([pr])(\d*)(?::(?:([^/\s]+)/)?([^/\s]*))?", tokens[0])
        if not m:
            raise ProbectlError(f"cannot parse event definition {line.strip()!r}")
        kind, maxactive, group, event = m.groups()
        place = tokens[1]
        if place.endswith("%return"):
            kind, place = "r", place[: -len("%return")]
        if is_uprobe is None:
            is_uprobe = "/" in place.split(":", 1)[0] or place.startswith("/")
        args = tuple(FetchArg.parse(tok) for tok in tokens[2:])
        default_group = "uprobes" if is_uprobe else "kprobes"
        return cls(
            kind=kind,
            group=group or default_group,
            event=event or "",
            place=place,
            args=args,
            is_uprobe=is_uprobe,
            maxactive=int(maxactive) if maxactive else 0,
        )


def tokenize_definition(line: str) -> list[str]:
    """Split a definition on whitespace, keeping ``\\"imm string"`` arguments whole."""
    tokens: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in line.strip():
        if ch == '"':
            quoted = not quoted
        if ch.isspace() and not quoted:
            if cur:
                tokens.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        tokens.append("".join(cur))
    return tokens
