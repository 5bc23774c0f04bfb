"""The kernel's rules for a definition line, checked in one place before anything is written.

Every path that makes definitions (``add``, ``add -D``, ``add -n``, ``trace``) names them with
:mod:`.naming` and then checks them here, so whatever ``-D`` prints is a line the kernel takes. The
rules are those of ``traceprobe_parse_probe_arg`` and its helpers (kernel/trace/trace_probe.c), each
checked against Debian's 6.1 kernel in qemu and this machine's kernel (tests/test_kernel_rules.py,
tests/guest/test_qemu_kprobe_rules.py):

- the line is at most :data:`~probectl.events.MAX_DEFINITION_LINE` characters, with at most 128
  arguments;
- argument names are C identifiers of at most 32 characters (``MAX_ARG_NAME_LEN``), none reserved
  (``common_pid``, ``__probe_ip``...) and none used by an earlier argument, the kernel's own
  ``argN`` names of unnamed arguments included;
- an argument body (fetch and type) has 1 to 63 characters (``MAX_ARGSTR_LEN``);
- registers are the names of the probed machine's ``regoffset_table`` (x86-64: ``%ax``, not ``%rax``
  or ``%eax``; AArch64: ``%x0``..``%x30``, ``%lr``, ``%sp``, ``%pc``, ``%pstate``): an x86 register
  on an AArch64 program is refused, as the AArch64 kernel would refuse it;
- ``$stackN`` (kprobes) and ``$argN`` have N up to 2048 (THREAD_SIZE / sizeof(long)); ``$argN`` only
  on a kprobe at a function entry (and at a kretprobe where the README says so); ``$retval`` only on
  return probes;
- ``@+OFFSET`` only on uprobes, ``@SYMBOL`` only on kprobes; ``@ADDR`` and immediates are numbers the
  kernel's ``kstrtoul``/``kstrtol`` read;
- dereference offsets fit the kernel's ``int`` (``struct fetch_insn``): a larger one would wrap and
  read some other object; ``$comm`` and ``\\"strings"`` cannot be dereferenced;
- at most 15 fetch operations (``FETCH_INSN_MAX``: "Dereference is too much nested");
- ``string``, ``ustring`` and arrays only from memory (``$stack0:string`` is refused), arrays of
  numbers not from a ``+u<offset>`` dereference; ``symstr`` from a register, $-variable or kernel
  memory, never as an array;
  ``$comm`` and ``\\"strings"`` only as ``string`` (or untyped); ``symbol``, ``symstr`` and ``%pd``
  only on kprobes (they name kernel addresses and dentries);
- bitfields ``b<width>@<offset>/<container>`` with 1 <= width and width + offset <= container;
  arrays of 1 to 64 elements;
- return probes only at a function entry (``r`` at ``SYM+OFF`` with OFF > 0 is refused).

Where the running kernel's tracefs ``README`` is known, the forms it does not list are refused with
an error naming the missing feature (``+u<offset>``, ``\\imm``, ``x`` types, arrays, ``symstr``,
``char``, ``%pd``, ``$arg<N>``).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable, Optional

from ..arch import Arch
from ..arch.x86_64 import ARCH as X86_64
from ..dataclass import dataclass
from ..errors import KernelRuleError
from ..events import MAX_DEFINITION_LINE, EventDefinition, FetchArg, definition_bytes
from ..spec.tree import MAX_ARRAY_LEN, MAX_PROBE_ARGS, RESERVED_ARG_NAMES

if TYPE_CHECKING:
    from ..tracefs import Features

MAX_TRACE_ARGS = MAX_PROBE_ARGS
MAX_ARG_NAME_LEN = 32
MAX_ARGSTR_LEN = 63
MAX_PARAM_INDEX = 2048  # PARAM_MAX_STACK on x86-64: THREAD_SIZE (16 KiB) / sizeof(long)
MAX_FETCH_OPS = 15  # FETCH_INSN_MAX - 1: the fetch operations before the store
DEREF_OFFSET_MIN, DEREF_OFFSET_MAX = -(2**31), 2**31 - 1

_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXCERPT = 100  # characters of a long line shown around the offending argument

# Where the fetch reads from, as the kernel's last fetch operation says; strings and arrays need memory.
_MEMORY = "memory"
_USER_MEMORY = "user memory"  # a +u<offset> dereference: strings, but no arrays of numbers
_STRINGY = "string-like"  # $comm and \"imm-string": only as strings, never dereferenced


class _Refused(Exception):
    """One rule broken at ``offset`` characters into the argument text."""

    def __init__(self, message: str, offset: int = 0, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.hint = hint


@dataclass(frozen=True)
class _Context:
    is_uprobe: bool
    is_return: bool
    at_entry: Optional[bool]  # a kprobe at a function's first byte (None: an address, not known here)
    features: Optional["Features"]
    arch: Arch  # the machine of the kernel that will read the line (the probed file's)

    def needs(self, flag: str, what: str, offset: int = 0) -> None:
        """Refuse ``what`` when the kernel's README is known and does not list it."""
        if self.features is not None and not getattr(self.features, flag):
            raise _Refused(f"this kernel's tracefs README does not list {what}", offset,
                           hint="the running kernel is too old for it; see /sys/kernel/tracing/README")


def check_definitions(defs: Iterable[EventDefinition], features: Optional["Features"], arch: Arch = X86_64) -> None:
    """Raise KernelRuleError for the first definition the kernel would refuse (``features``: what
    the running kernel's README lists, None when it is not known; ``arch``: the kernel's machine)."""
    for d in defs:
        check_definition(d, features, arch)


def check_definition(d: EventDefinition, features: Optional["Features"], arch: Arch = X86_64) -> None:
    """Raise KernelRuleError, pointing at the offending argument, if ``arch``'s kernel would refuse ``d``."""
    line = d.render()
    head = len(line) - sum(len(a.render()) + 1 for a in d.args)
    ctx = _Context(is_uprobe=d.is_uprobe, is_return=d.kind == "r", at_entry=_at_entry(d), features=features,
                   arch=arch)
    if d.kind == "r" and not d.is_uprobe and ctx.at_entry is False:
        raise _error(line, line.index(d.place), f"a return probe must be at a function entry, not at {d.place}",
                     "probe FUNC%return, without an offset")
    if len(d.args) > MAX_TRACE_ARGS:
        raise _error(line, head, f"{len(d.args)} arguments; the kernel takes at most {MAX_TRACE_ARGS}",
                     _fewer_arguments(d.args, "split them over several events"))
    names: list[str] = []
    column = head + 1
    for i, arg in enumerate(d.args):
        try:
            _check_arg(arg, i, names, ctx)
        except _Refused as why:
            raise _error(line, column + why.offset, f"argument {i + 1} ({_short(arg.render())}): {why.message}",
                         why.hint) from None
        column += len(arg.render()) + 1
    size = len(definition_bytes(line))  # (the kernel counts bytes: a path may hold UTF-8, or any byte)
    if size > MAX_DEFINITION_LINE:
        raise _error(line, min(MAX_DEFINITION_LINE, len(line) - 1),
                     f"the definition of {d.full_name} is {size} characters long; the kernel takes lines "
                     f"of at most {MAX_DEFINITION_LINE}",
                     _fewer_arguments(d.args, "fetch fewer arguments, or split them over several events"))


def _fewer_arguments(args: tuple[FetchArg, ...], hint: str) -> str:
    """``hint``, and when ``args`` show enums by variant (an argument a variant), the cast that reads
    the one with the most as a number."""
    from ..formats import is_variant_part

    enums: dict[str, int] = {}
    for a, b in zip(args, args[1:]):
        base = next((e for e in enums if b.name.startswith(e + "__")), a.name)
        if base and b.name.startswith(base) and is_variant_part(b.name[len(base):]):
            enums[base] = enums.get(base, 1) + 1
    if not enums:
        return hint
    name = max(enums, key=lambda e: enums[e])
    kind = next(a.type for a in args if a.name == name)
    return (f"{hint}; the enum {name} takes {enums[name]} arguments, one a variant: cast it (:{kind}) to read it "
            f"as a number")


def kernel_arg_name(index: int) -> str:
    """The name the kernel gives the unnamed argument at ``index`` (0-based): ``arg1``, ``arg2``..."""
    return f"arg{index + 1}"


def _at_entry(d: EventDefinition) -> Optional[bool]:
    if d.is_uprobe:
        return None
    m = re.fullmatch(r"(?:[^:+]+:)?[^:+]+(?:\+(\w+))?", d.place)
    if m is None or re.fullmatch(r"0x[0-9a-fA-F]+|[0-9]+", d.place):
        return None  # an address: whether it is an entry is the kernel's to say
    return m.group(1) is None or _kernel_int(m.group(1), signed=False) == 0


def _check_arg(arg: FetchArg, index: int, names: list[str], ctx: _Context) -> None:
    name = arg.name or kernel_arg_name(index)
    if arg.name:
        if not _C_NAME.fullmatch(name):
            raise _Refused(f"the name '{name}' is not a C identifier", 0,
                           "names are letters, digits and '_', not starting with a digit")
        if len(name) > MAX_ARG_NAME_LEN:
            raise _Refused(f"the name '{name}' is {len(name)} characters long; the kernel takes at most "
                           f"{MAX_ARG_NAME_LEN}", 0, "give it a shorter name: NAME=...")
    if name in RESERVED_ARG_NAMES:
        raise _Refused(f"'{name}' is a field every event has; choose another name", 0)
    if name in names:
        why = "" if arg.name else " (the kernel's name for an unnamed argument)"
        raise _Refused(f"the name '{name}'{why} is used by an earlier argument", 0,
                       "give the arguments different names: NAME=...")
    names.append(name)
    at = len(arg.name) + 1 if arg.name else 0
    body = arg.render()[at:]
    if not body:
        raise _Refused("an empty argument", at)
    if any(c.isspace() for c in body):
        raise _Refused("white space inside an argument splits it", at + next(i for i, c in enumerate(body)
                                                                             if c.isspace()))
    if len(body) > MAX_ARGSTR_LEN:
        raise _Refused(f"the argument is {len(body)} characters long; the kernel takes at most {MAX_ARGSTR_LEN} "
                       f"after the name", at + MAX_ARGSTR_LEN,
                       "fetch a shorter expression (fewer nested dereferences)")
    source, ops = _check_fetch(arg.fetch, at, ctx)
    if ops > MAX_FETCH_OPS:
        raise _Refused(f"{ops} fetch operations; the kernel takes at most {MAX_FETCH_OPS}", at,
                       "use fewer nested dereferences")
    if arg.type:
        _check_type(arg.type, source, at + len(arg.fetch) + 1, ctx)


def _check_fetch(text: str, at: int, ctx: _Context) -> tuple[str, int]:
    """What ``text`` reads (a register-like value, memory, or a string-like) and how many fetch
    operations the kernel makes of it; ``at`` is its column within the argument."""
    if text.startswith("%"):
        if text[1:] not in ctx.arch.kernel_registers:
            raise _Refused(f"the kernel knows no register {text} on {ctx.arch.name}", at,
                           f"{ctx.arch.name} registers are {ctx.arch.register_hint}")
        return "register", 1
    if text.startswith("$"):
        return _check_variable(text, at, ctx), 1
    if text.startswith("@"):
        return _MEMORY, _check_address(text, at, ctx)
    if text[:1] in "+-":
        m = re.match(r"([+-])(u?)([^(]*)\(", text)
        if m is None or not text.endswith(")"):
            raise _Refused(f"'{text}' is not a dereference +OFFS(...)", at)
        if m.group(2):
            ctx.needs("user_deref", "user-memory dereferences (+u<offset>)", at)
        digits = m.group(3)
        offset = _kernel_int(digits, signed=True) if m.group(1) == "+" else _kernel_int("-" + digits, signed=True)
        if offset is None:
            raise _Refused(f"'{digits}' is not a dereference offset", at + len(m.group(1) + m.group(2)))
        if not DEREF_OFFSET_MIN <= offset <= DEREF_OFFSET_MAX:
            raise _Refused(f"the offset {offset} does not fit the kernel's 32-bit dereference offsets; it would "
                           f"wrap and read some other object", at + len(m.group(1) + m.group(2)),
                           "an index or offset this large reads some other object; check the expression")
        inner_at = at + m.end()
        source, ops = _check_fetch(text[m.end():-1], inner_at, ctx)
        if source == _STRINGY:
            raise _Refused("$comm and immediate strings cannot be dereferenced", inner_at)
        return _USER_MEMORY if m.group(2) else _MEMORY, ops + 1
    if text.startswith("\\"):
        ctx.needs("immediates", "immediate values (\\imm-value)", at)
        if text[1:2] == '"':
            if len(text) < 3 or not text.endswith('"') or '"' in text[2:-1]:
                raise _Refused("an immediate string must be closed with '\"'", at)
            return _STRINGY, 1
        if _kernel_int(text[1:], signed=text[1:2] == "-") is None:
            raise _Refused(f"'{text[1:]}' is not an immediate value (a 64-bit number)", at + 1)
        return "immediate", 1
    raise _Refused(f"'{text}' is not a fetch argument", at,
                   "fetch %REG, $stackN, $retval, $comm, $argN, @ADDR, @SYM, +OFFS(...) or \\IMM")


def _check_variable(text: str, at: int, ctx: _Context) -> str:
    var = text[1:]
    if var == "retval":
        if not ctx.is_return:
            raise _Refused("$retval is only known in a return probe", at)
        return "register"
    if var in ("comm", "COMM"):
        return _STRINGY
    if var == "stack":
        return "register"
    m = re.fullmatch(r"(stack|arg)([0-9]+)", var)
    if m is None:
        raise _Refused(f"the kernel knows no variable {text}", at, "use $stackN, $stack, $retval, $comm or $argN")
    number = int(m.group(2))
    if m.group(1) == "stack":
        if number > MAX_PARAM_INDEX and not ctx.is_uprobe:  # (a uprobe reads the user stack: no limit)
            raise _Refused(f"$stack{number} is beyond the kernel stack ($stack0..$stack{MAX_PARAM_INDEX})", at)
        return "register"
    if ctx.is_uprobe:
        raise _Refused("$argN is for kprobes; a uprobe reads arguments from their registers", at,
                       "fetch %di, %si, %dx, %cx, %r8, %r9 at the entry")
    ctx.needs("entry_args", "function arguments ($arg<N>)", at)
    if not 1 <= number <= MAX_PARAM_INDEX:
        raise _Refused(f"${var}: argument numbers are 1 to {MAX_PARAM_INDEX}", at)
    if ctx.is_return:
        if ctx.features is None or not ctx.features.retprobe_args:
            raise _Refused("$argN in a return probe needs a kernel whose README lists it for return probes", at,
                           "fetch the argument at the entry, or by its C name")
    elif ctx.at_entry is False:
        raise _Refused("$argN is only known at a function entry", at, "probe the function itself, without an offset")
    return "register"


def _check_address(text: str, at: int, ctx: _Context) -> int:
    """``@ADDR``, ``@+FILEOFFSET`` (uprobes) or ``@SYM[+|-OFF]`` (kprobes); the fetch operations."""
    rest = text[1:]
    if rest[:1].isdigit():
        if _kernel_int(rest, signed=False) is None:
            raise _Refused(f"'{rest}' is not a memory address", at + 1)
        return 2
    if rest.startswith("+"):
        if not ctx.is_uprobe:
            raise _Refused("a file offset (@+OFFSET) is for uprobes, not kprobes", at,
                           "read a kernel global by its symbol: @SYMBOL")
        if _kernel_int(rest[1:], signed=True) is None:
            raise _Refused(f"'{rest[1:]}' is not a file offset", at + 2)
        return 2
    if ctx.is_uprobe:
        raise _Refused("a symbol (@SYMBOL) is for kprobes; a uprobe reads globals by file offset (@+OFFSET)", at)
    m = re.fullmatch(r"([^+-]+)(?:([+-])(.*))?", rest)
    if m is None:
        raise _Refused(f"'{rest}' is not a symbol", at + 1)
    if m.group(2):
        offset = _kernel_int(m.group(3), signed=False)
        if offset is None or offset > DEREF_OFFSET_MAX:
            raise _Refused(f"'{m.group(3)}' is not an offset the kernel takes (0..{DEREF_OFFSET_MAX})",
                           at + 2 + len(m.group(1)))
    return 3


_INT_TYPE = re.compile(r"([usx])(8|16|32|64)")
_BITFIELD = re.compile(r"b([0-9]+)@([0-9]+)/(8|16|32|64)")
_STRING_TYPES = ("string", "ustring")


def _check_type(text: str, source: str, at: int, ctx: _Context) -> None:
    base, count = text, None
    m = re.fullmatch(r"(.*)\[([^\]]*)\]", text)
    if m:
        base = m.group(1)
        ctx.needs("array_types", "array types (<type>[<array-size>])", at)
        count = _kernel_int(m.group(2), signed=False)
        if count is None or not 1 <= count <= MAX_ARRAY_LEN:
            raise _Refused(f"array length '{m.group(2)}': the kernel takes 1 to {MAX_ARRAY_LEN}", at + len(base) + 1)
    if source == _STRINGY:
        if base != "string" or count is not None:
            raise _Refused(f"$comm and immediate strings are read only as 'string', not as '{text}'", at)
        return
    mi = _INT_TYPE.fullmatch(base)
    mb = _BITFIELD.fullmatch(base)
    if mi:
        if mi.group(1) == "x":
            ctx.needs("x_types", "hexadecimal types (x8/16/32/64)", at)
    elif mb:
        width, offset, container = (int(g) for g in mb.groups())
        if width < 1 or width + offset > container:
            raise _Refused(f"the bitfield {base} does not fit its {container}-bit container", at,
                           "b<width>@<offset>/<container> needs 1 <= width and width + offset <= container")
    elif base in ("symbol", "symstr", "%pd", "%pD") and ctx.is_uprobe:
        raise _Refused(f"the {base} type is for kprobes (it reads kernel symbols or dentries)", at)
    elif base == "symstr":  # the name of the symbol at an address: a value, or kernel memory
        ctx.needs("symstr", "the symstr type", at)
        if source not in ("register", _MEMORY) or count is not None:
            raise _Refused("symstr names the symbol at a kernel address: it reads a register, a $-variable or "
                           "kernel memory, and makes no arrays", at)
    elif base in _STRING_TYPES:
        if source not in (_MEMORY, _USER_MEMORY, "immediate"):
            raise _Refused(f"a {base} is read from memory, not from a register or $-variable", at,
                           "dereference it: +0(...):" + base)
    elif base == "symbol":
        pass
    elif base == "char":
        ctx.needs("char_type", "the char type", at)
        if ctx.features is None:
            raise _Refused("the char type needs a kernel whose README lists it", at)
    elif base in ("%pd", "%pD"):
        ctx.needs("dentry_types", "the %pd/%pD types", at)
        if ctx.features is None:
            raise _Refused(f"the {base} type needs a kernel whose README lists it", at)
    else:
        raise _Refused(f"the kernel knows no type '{base}'", at,
                       "types are u8/16/32/64, s8/16/32/64, x8/16/32/64, string, ustring, symbol, symstr, "
                       "b<width>@<offset>/<container> and <type>[N]")
    if count is not None and source == _USER_MEMORY and base not in _STRING_TYPES:
        raise _Refused("the kernel reads arrays of numbers only from +<offset>(...), not from +u<offset>(...)",
                       at, "read it with a plain dereference (a uprobe's is user memory anyway)")
    if count is not None and source not in (_MEMORY, _USER_MEMORY):
        raise _Refused("an array is read from memory, not from a register, $-variable or immediate", at,
                       "dereference it: +0(...):" + text)


def _kernel_int(text: str, signed: bool) -> Optional[int]:
    """The number ``kstrtoul(text, 0)`` (``kstrtol`` if ``signed``) reads, or None where it fails."""
    m = re.fullmatch(r"(-?)\+?(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)", text)
    if m is None or (m.group(1) and not signed):
        return None
    digits = m.group(2)
    value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits, 8) if digits.startswith("0") else int(digits)
    if m.group(1):
        value = -value
    if signed:
        return value if -(2**63) <= value < 2**63 else None
    return value if value < 2**64 else None


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _error(line: str, column: int, message: str, hint: str = "") -> KernelRuleError:
    """The error with the line (or, for a long one, the part around ``column``) and a caret."""
    if len(line) <= _EXCERPT:
        return KernelRuleError(message, line, column, hint)
    start = max(0, column - _EXCERPT // 2)
    end = min(len(line), start + _EXCERPT)
    excerpt = ("..." if start else "") + line[start:end] + ("..." if end < len(line) else "")
    return KernelRuleError(message, excerpt, column - start + (3 if start else 0), hint)
