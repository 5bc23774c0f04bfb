"""Event formats: the ``events/<system>/<event>/format`` files of tracefs, parsed.

A format file names an event, gives its numeric id, lists the fields of its records and ends with
the ``print fmt`` the kernel uses for ``trace``::

    name: sched_switch
    ID: 372
    format:
    	field:unsigned short common_type;	offset:0;	size:2;	signed:0;
    	...
    	field:char prev_comm[16];	offset:8;	size:16;	signed:0;

    print fmt: "prev_comm=%s ...", REC->prev_comm, ...

The C type text is kept as written, but records are decoded from ``offset``/``size``/``signed``
only: the kernel's type text does not always agree with them (``u8 arr[]`` of size 4 for a
``:x8[4]`` probe argument, ``unsigned int fd`` of size 8 in syscall events), and older kernels
differ in their common fields (``common_lock_depth``, ``common_padding``). The ``header_page``
file uses the same ``field:`` syntax and can be read with :func:`parse_fields`.

A counted string: the kernel's ``string`` fetch reads to a NUL, but a Go or Rust string (and a
``std::string`` holding a NUL) ends at its length, with other bytes after it, and with no NUL for
kilobytes after a literal of a Go program, where the fetch gives nothing. probectl fetches its text
as a ``string`` (``key``, a ``__data_loc char[]``), its length as an integer field named ``key__len``
and, where no NUL may follow it, its first 64 bytes as an array ``key__head``
(:data:`STRING_PART_SUFFIXES`); the decoders give the text read to the NUL when it reaches the
length, else the head, cut at the length. The parts are hidden from :attr:`EventFormat.event_fields`
(the string field's ``bound`` and ``head`` locate them). Other readers see plain fields: trace-cmd
prints all three, the text uncut. A slice (Go's ``[]T``, Rust's ``&[T]``) is the same with a fixed
integer array of its first elements for the text, cut at ``NAME__len`` elements.

A C++ ``std::vector`` is two pointers, to its first element and past its last, and the kernel's
fetch arguments cannot subtract: both are read, and the decoders divide their difference by the
element's size, which the format alone must give.

- Integers: the array ``v`` of its first elements (``s32 v[16]``), with ``v__begin`` and ``v__end``
  (its two pointers, integers of 8 bytes, or 4): its length is ``(v__end - v__begin)`` divided by the
  array's own element size (its size over its length), and it is cut there like a slice
  (``Field.bound`` is then the end pointer, ``Field.begin`` the begin pointer).
- ``v.size()``: the integer ``v_size``, its begin pointer, then ``v_size__end<S>``, its end pointer,
  ``S`` the element's size in bytes, written in the name because nothing else in the format gives it:
  ``v_size`` reads as ``(v_size__end<S> - v_size) / S`` (``Field.bound`` the end pointer,
  ``Field.element_size`` S).
- Structs: the same, ``items`` and ``items__end<S>``, then the members of its first elements as for
  a slice of structs (``items__e0_id``): ``items`` reads as its length, and is shown as
  ``[{id:101 price:5}]`` within it. std::strings: the texts of its first elements, each a
  ``__data_loc char[]`` ``names__e<i>``, shown as ``{"apple","pear"}``.

The native decoder does the arithmetic, so every reader of events (``script``, ``trace``, ``report``,
``query``, ``hist``'s user-space path, the Python API) gets the same numbers and elements; trace-cmd,
which knows none of this, prints the pointers.
"""
from __future__ import annotations

import fnmatch
import re
from typing import Any, Mapping, Optional, Union

from .dataclass import dataclass, replace
from .errors import FormatError

# Element sizes of the types whose arrays the kernel writes with empty brackets (``u8 arr[]``).
_ELEMENT_SIZES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "_Bool": 1,
    "u8": 1, "s8": 1, "x8": 1, "__u8": 1, "__s8": 1,
    "short": 2, "unsigned short": 2, "u16": 2, "s16": 2, "x16": 2, "__u16": 2, "__s16": 2,
    "int": 4, "unsigned int": 4, "unsigned": 4, "u32": 4, "s32": 4, "x32": 4, "__u32": 4, "__s32": 4,
    "long long": 8, "unsigned long long": 8, "u64": 8, "s64": 8, "x64": 8, "__u64": 8, "__s64": 8,
}
_CHAR_TYPES = {"char", "signed char", "unsigned char"}
_DATA_LOC_SIZE = 4  # a __data_loc/__rel_loc word: 16-bit length << 16 | 16-bit offset

_FIELD_RE = re.compile(r"\s*field\s*:\s*(?P<decl>[^;:]*);(?P<rest>.*)$")
_ATTR_RE = re.compile(r"\s*(?P<key>[A-Za-z_]+)\s*:\s*(?P<value>[^;]*);")
_DECL_RE = re.compile(r"(?P<base>.*?)\s*(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]*\]\s*)*)")
_DIMS_RE = re.compile(r"\[([^\]]*)\]")


@dataclass(frozen=True)
class Field:
    """One field of an event record.

    ``type`` is the C type as the kernel wrote it, with any array part: ``char[16]`` for
    ``char comm[16]``, ``__data_loc char[]`` for a dynamic string. ``array_len`` counts the
    elements of a fixed array (the data_loc words of ``__data_loc char[][2]``), or is None.
    """

    name: str
    type: str
    offset: int
    size: int
    signed: bool
    is_data_loc: bool = False
    array_len: Optional[int] = None
    is_common: bool = False
    is_rel_loc: bool = False
    # A counted string's parts: (offset, size) of the integer that ends its text, and of the array of
    # its first bytes; ``is_string_part``: this field is such a part (hidden from event_fields).
    bound: Optional[tuple[int, int]] = None
    head: Optional[tuple[int, int]] = None
    is_string_part: bool = False
    # An enum's variants (its parts ``NAME__v…``/``NAME__p…``), when this field is its discriminant;
    # a slice of structs' elements' members (``NAME__e<i>_<member>``), when this field is its length.
    variants: tuple["VariantPart", ...] = ()
    elements: tuple["ElementPart", ...] = ()
    # A C++ vector's integer array: (offset, size) of its begin pointer (``bound`` is its end pointer).
    begin: Optional[tuple[int, int]] = None
    # A C++ vector's begin pointer, read as its length (``bound`` is its end pointer): its element's size.
    element_size: int = 0

    @property
    def is_composed(self) -> bool:
        """Shown as text made from hidden parts (an enum's variant, a slice of structs' elements)."""
        return bool(self.variants or self.elements)

    @property
    def is_string(self) -> bool:
        """A dynamic string (``__data_loc char[]``) or a fixed ``char`` array (``char comm[16]``)."""
        return self.element_type in _CHAR_TYPES and (self.is_data_loc or self.is_array)

    @property
    def is_array(self) -> bool:
        return "[" in self.type and not self.is_data_loc or self.array_len is not None

    @property
    def element_type(self) -> str:
        """The type without ``__data_loc``/``__rel_loc`` and array brackets: ``char`` for ``char[16]``."""
        text = self.type
        for prefix in ("__data_loc ", "__rel_loc "):
            if text.startswith(prefix):
                text = text[len(prefix):]
        text = text.split("[", 1)[0].strip()
        return text[len("const "):] if text.startswith("const ") else text


def _parse_decl(decl: str, size: int) -> tuple[str, str, bool, bool, Optional[int]]:
    """``unsigned long caller[8]`` → (name, type text, is_data_loc, is_rel_loc, array_len)."""
    decl = " ".join(decl.split())
    m = _DECL_RE.fullmatch(decl)
    if not m:
        raise FormatError(f"cannot read the field declaration {decl!r}")
    base, name, dims = m.group("base").strip(), m.group("name"), m.group("dims").replace(" ", "")
    is_data_loc = base.startswith("__data_loc")
    is_rel_loc = base.startswith("__rel_loc")
    array_len: Optional[int] = None
    if is_data_loc or is_rel_loc:
        # ``__data_loc char[]`` is one string; ``__data_loc char[][2]`` is an array of two of them.
        extra = _DIMS_RE.findall(base)[1:] + _DIMS_RE.findall(dims)
        if extra:
            array_len = _count(extra, size, _DATA_LOC_SIZE)
        typ = base + dims
    else:
        if not base:
            raise FormatError(f"the field declaration {decl!r} has no type")
        if dims:
            array_len = _count(_DIMS_RE.findall(dims), size, _ELEMENT_SIZES.get(base.replace("const ", "")))
        typ = base + dims
    return name, typ, is_data_loc or is_rel_loc, is_rel_loc, array_len


def _count(dims: list[str], size: int, element_size: Optional[int]) -> Optional[int]:
    """Number of elements of an array with dimensions ``dims``; empty brackets are sized from ``size``."""
    count = 1
    for dim in dims:
        try:
            count *= int(dim.strip(), 0)
        except ValueError:
            # ``[]`` (probe-event arrays, flexible arrays) or a symbolic length such as
            # ``[TASK_COMM_LEN]`` (old kernels): the size says how many there are
            return size // element_size if element_size and size > 0 else None
    return count


def _parse_field_line(line: str, lineno: int) -> Field:
    m = _FIELD_RE.match(line)
    if not m:
        raise FormatError(f"line {lineno}: expected 'field:<type> <name>; offset:N; size:N; ...', got {line.strip()!r}")
    attrs = {a.group("key"): a.group("value").strip() for a in _ATTR_RE.finditer(m.group("rest"))}
    try:
        offset = int(attrs["offset"], 0)
        size = int(attrs["size"], 0)
        signed = bool(int(attrs.get("signed", "0"), 0))
    except KeyError as err:
        raise FormatError(f"line {lineno}: field without {err.args[0]}: {line.strip()!r}") from None
    except ValueError:
        raise FormatError(f"line {lineno}: offset, size and signed must be numbers: {line.strip()!r}") from None
    if offset < 0 or size < 0:
        raise FormatError(f"line {lineno}: negative offset or size: {line.strip()!r}")
    try:
        name, typ, is_data_loc, is_rel_loc, array_len = _parse_decl(m.group("decl"), size)
    except FormatError as err:
        raise FormatError(f"line {lineno}: {err.message}") from None
    return Field(
        name=name, type=typ, offset=offset, size=size, signed=signed, is_data_loc=is_data_loc,
        array_len=array_len, is_common=name.startswith("common_"), is_rel_loc=is_rel_loc,
    )


def for_libtraceevent(text: str) -> str:
    """A format text as trace-cmd's parser, libtraceevent (1.7 to 1.8.4), needs it to print the values
    the kernel prints: the kernel's text, with two changes that make no difference to probectl's own
    parser (both forms read alike) and none to a format that needs neither.

    - A fixed array of integers written with empty brackets gets its number of elements:
      ``field:s64 xs[];`` of ``size:128`` becomes ``field:s64 xs[16];``, as kernels before 6.2 wrote
      it. Since Linux 6.2 (b6c7abd1c28a, "tracing: Fix TASK_COMM_LEN in trace event format file") a
      field defined without a length, which every array argument of a kprobe or uprobe event is
      (``xs=+0(%cx):s64[16]``), is written with ``[]``; libtraceevent then gives its elements a size
      of 0 unless the type has ``char``, ``u8`` or ``s8`` in it (1) or is a ``long``, and reads
      ``REC->xs[i]`` as 0. Variable-length arrays (``size:0``) and types of no known size are left.
    - A probe event's ``%d`` of a signed 1- or 2-byte value (``s8``, ``s16``, an element of an array of
      them) becomes ``%hhd`` or ``%hd``: libtraceevent reads such a value without extending its sign
      and prints ``%d`` of it as an ``int`` (255 for -1), where the kernel prints it as its type.
    """
    return _with_narrow_signed_conversions(_with_array_lengths(text))


# A field line of a fixed array written with empty brackets: ``field:s64 xs[];  offset:92;  size:128;``.
_UNSIZED_ARRAY_LINE = re.compile(r"^(?P<head>[ \t]*field[ \t]*:[ \t]*(?P<base>[^;:\[\n]*?)[ \t]+[A-Za-z_]\w*[ \t]*\[)"
                                 r"\](?P<tail>;[ \t]*offset[ \t]*:[ \t]*\d+[ \t]*;[ \t]*size[ \t]*:[ \t]*(?P<size>\d+)[ \t]*;)",
                                 re.M)


def _with_array_lengths(text: str) -> str:
    def sized(m: re.Match) -> str:
        element = _ELEMENT_SIZES.get(" ".join(m.group("base").split()).removeprefix("const "))
        size = int(m.group("size"))
        if not element or size <= 0 or size % element:
            return m.group(0)
        return f"{m.group('head')}{size // element}]{m.group('tail')}"

    return _UNSIZED_ARRAY_LINE.sub(sized, text)


# The print format of a probe event as the kernel makes it (trace_probe.c): one string literal, then
# arguments that are fields, their elements or their strings, no commas in them.
_PROBE_PRINT_FMT = re.compile(r'^print fmt: "(?P<literal>(?:[^"\\\n]|\\.)*)(?P<args>".*)$', re.M)
_PROBE_ARG = re.compile(r"REC->(?P<name>\w+)(?:\[\d+\])?|__get_(?:rel_)?str\(\w+(?:\[\d+\])?\)")
_PRINTF_CONV = re.compile(r"%%|%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|L|z|j|t)?[a-zA-Z]")
_NARROW_SIGNED = {1: "%hhd", 2: "%hd"}


def _with_narrow_signed_conversions(text: str) -> str:
    if "__probe_" not in text:  # (cheap: most formats are tracepoints')
        return text
    m = _PROBE_PRINT_FMT.search(text)
    if m is None or "%d" not in m.group("literal"):
        return text
    try:
        fmt = EventFormat.parse(text)
    except FormatError:
        return text
    if not fmt.event_fields or fmt.event_fields[0].name not in ("__probe_ip", "__probe_func"):
        return text  # (a tracepoint's print format can be any C; a probe event's is the kernel's own)
    args = [a.strip() for a in m.group("args")[1:].split(",")][1:]
    matched = [a for a in map(_PROBE_ARG.fullmatch, args) if a is not None]
    convs = [c for c in _PRINTF_CONV.finditer(m.group("literal")) if c.group() != "%%"]
    if not len(matched) == len(args) == len(convs):
        return text
    literal, end = [], 0
    for conv, arg in zip(convs, matched):
        field = fmt.field(arg.group("name")) if arg.group("name") else None
        if conv.group() != "%d" or field is None or not field.signed or field.is_data_loc:
            continue
        element = field.size // field.array_len if field.array_len else field.size
        if element in _NARROW_SIGNED:
            literal += [m.group("literal")[end:conv.start()], _NARROW_SIGNED[element]]
            end = conv.end()
    literal.append(m.group("literal")[end:])
    return text[:m.start("literal")] + "".join(literal) + text[m.end("literal"):]


STRING_PART_SUFFIXES = {"length": "__len", "head": "__head", "begin": "__begin", "end": "__end"}
VARIANT_PART_PREFIXES = {"variant": "__v", "payload": "__p", "name": "__n", "member": "__m", "element": "__e"}
_VECTOR_END = re.compile(r"__end(?P<size>[1-9][0-9]*)")
_VARIANT_PART = re.compile(r"__(?P<kind>[vpn])(?P<value>[0-9a-f]*)_(?P<variant>[A-Za-z0-9_]+)"
                           r"|__m(?P<mvalue>[0-9a-f]*)_(?P<mvariant>[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*)__"
                           r"(?P<member>[A-Za-z0-9]+(?:_{1,2}[A-Za-z0-9]+)*)")
_ELEMENT_PART = re.compile(r"__e(?P<index>[0-9]+)_(?P<member>[A-Za-z0-9_]+)")
_STRING_ELEMENT = re.compile(r"__e(?P<index>[0-9]+)")


def string_part_name(name: str, role: str, variant: str = "", value: Optional[int] = None, member: str = "") -> str:
    """The name of the field holding part ``role`` ("length", "head") of the counted string ``name``,
    or a variant of the enum ``name`` ("variant": a marker; "payload": the scalar it holds; "member":
    ``member``, one of several scalars it holds, its path's names joined by ``__``), selected by the
    discriminant's ``value`` (unsigned; None: by every value no other variant has), or a name of the
    C-like enum the payload before it is, by its ``value`` ("name": a marker), or member
    ``variant`` of element ``value`` of the slice of structs ``name`` ("element"), or a C++ vector's
    pointer to its first element ("begin") or past its last ("end", with ``value`` its element's size
    when nothing else in the format gives it)."""
    if role == "end" and value is not None:
        return f"{name}__end{value}"
    if role == "element" and not variant:  # (an element that is a string: its text)
        return f"{name}__e{value}"
    if role == "element":
        return f"{name}__e{value}_{variant}"
    if role == "member":
        return f"{name}__m{'' if value is None else format(value, 'x')}_{variant}__{member}"
    if role in VARIANT_PART_PREFIXES:
        return f"{name}{VARIANT_PART_PREFIXES[role]}{'' if value is None else format(value, 'x')}_{variant}"
    return name + STRING_PART_SUFFIXES[role]


def is_variant_part(suffix: str) -> bool:
    """``suffix`` (what follows an argument's name in another's) names a part of an enum shown by variant."""
    return _VARIANT_PART.fullmatch(suffix) is not None


@dataclass(frozen=True)
class VariantPart:
    """One variant of an enum field: its ``name``, the discriminant ``value`` selecting it (None: any
    value no other variant has), the field holding its scalar (``payload``, or None) and whether that
    prints in hex (a pointer, as the print format says)."""

    name: str
    value: Optional[int]
    payload: Optional[str] = None
    hex: bool = False
    # the scalars of a variant that holds several: (path of member names, field, in hex)
    members: tuple[tuple[tuple[str, ...], str, bool], ...] = ()
    # the payload's names when it is a C-like enum (Some(Green)): (value, name)
    names: tuple[tuple[int, str], ...] = ()

    @property
    def payload_fields(self) -> tuple[str, ...]:
        """The fields holding what the variant holds."""
        return (self.payload,) if self.payload is not None else tuple(field for _, field, _ in self.members)


def _variant(field: Field, tag: int) -> Optional[VariantPart]:
    """The variant of the enum ``field`` whose discriminant reads ``tag``: the one of that value, else
    the one of every other value, else None."""
    tag &= (1 << (8 * field.size)) - 1
    return next((v for v in field.variants if v.value == tag), None) \
        or next((v for v in field.variants if v.value is None), None)


def variant_name(field: Field, tag: Any) -> Any:
    """The name of the variant of the enum ``field`` whose discriminant reads ``tag`` (``Some``, as a
    key of a histogram counts it), the number itself when no variant has it."""
    if not isinstance(tag, int):
        return tag
    chosen = _variant(field, tag)
    return chosen.name if chosen is not None else str(tag)


def variant_text(field: Field, tag: Any, payloads: Mapping[str, Any]) -> Any:
    """The value of the enum ``field`` whose discriminant reads ``tag``: ``Name``, ``Name(payload)``
    or ``Name{w:3 h:4}`` (``payloads``: the values of its payload fields by name), the number itself
    when no variant has it, None when the value was not read."""
    if not isinstance(tag, int):
        return tag
    chosen = _variant(field, tag)
    if chosen is None:
        return str(tag)
    return "".join(p if isinstance(p, str) else _number(payloads.get(p[0]), p[1], p[2])
                   for p in variant_pieces(chosen))


# A piece of a composed value's text: text as it is, or (field, in hex, names): the number of that
# field, or its name when it is a C-like enum's value ((value, name) of each).
Piece = Union[str, tuple[str, bool, tuple[tuple[int, str], ...]]]


def variant_pieces(chosen: VariantPart) -> list[Piece]:
    """The text of a value of the variant ``chosen``, in pieces: its name, the punctuation around
    what it holds and the fields holding it (``["Rect{w:", ("f__m0_Rect__w", False), " h:", ...]``);
    the one description of that text, which :func:`variant_text` fills a value at a time and
    :mod:`probectl.analysis.columns` a column at a time."""
    if chosen.members:
        name: list[Piece] = [chosen.name]
        return _joined(name + _held([(path, (field, hex_, ())) for path, field, hex_ in chosen.members]))
    if chosen.payload is None:
        return [chosen.name]
    return [chosen.name + "(", (chosen.payload, chosen.hex, chosen.names), ")"]


def _number(value: Any, in_hex: bool, names: tuple[tuple[int, str], ...] = ()) -> str:
    if not isinstance(value, int):
        return "?"
    return next((n for v, n in names if v == value), None) or (hex(value) if in_hex else str(value))


def _joined(pieces: list[Piece]) -> list[Piece]:
    """``pieces`` with each run of texts joined into one."""
    out: list[Piece] = []
    for p in pieces:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        else:
            out.append(p)
    return out


def _held(values: list[tuple[tuple[str, ...], Piece]], tuples: bool = True) -> list[Piece]:
    """The scalars a variant holds (or an element of a slice), by their paths, as Rust writes a tuple
    (``(1, 2)``, ``((1, 2))``; not with ``tuples`` off) and as script writes a struct (``{w:3 h:4}``)."""
    names: list[str] = []
    inner: dict[str, list[tuple[tuple[str, ...], Piece]]] = {}
    for path, piece in values:
        if path[0] not in inner:
            names.append(path[0])
            inner[path[0]] = []
        inner[path[0]].append((path[1:], piece))
    shown = {n: [inner[n][0][1]] if not inner[n][0][0] else _held(inner[n], tuples) for n in names}
    out: list[Piece] = []
    if tuples and all(n.isdigit() for n in names):
        for i, pieces in enumerate(shown.values()):
            out += [", " if i else "("] + pieces
        return out + [")"]
    for i, (n, pieces) in enumerate(shown.items()):
        out += [f"{' ' if i else '{'}{n}:"] + pieces
    return out + ["}"]


@dataclass(frozen=True)
class ElementPart:
    """One member of one element of a slice of structs: the element's ``index``, the ``member``'s name,
    the field holding it, and whether it prints in hex (a pointer); or one string of a vector of
    strings (``member`` "": the field holds its text)."""

    index: int
    member: str
    field: str
    hex: bool = False


def elements_text(field: Field, length: Any, values: Mapping[str, Any]) -> Any:
    """The slice of structs whose length reads ``length``: its elements within it as Go's ``%+v``
    writes them (``[{id:101 price:5} {id:102 price:5}]``), or a vector of strings' as a ``:string[N]``
    prints (``{"a","b"}``), ``...`` after the last one read when it has more; None when the length was
    not read."""
    if length is None or not isinstance(length, int):
        return length
    if field.elements and all(not p.member for p in field.elements):
        # a vector of strings: {"a","b"} as a :string[N] shows, each quoted as JSON quotes it
        import json

        texts = [json.dumps(text, ensure_ascii=False) if isinstance(text := values.get(p.field), str) else "(fault)"
                 for p in sorted(field.elements, key=lambda p: p.index)[:max(0, length)]]
        return "{" + ",".join(texts + (["..."] if length > len(field.elements) else [])) + "}"
    shown = sorted({p.index for p in field.elements})
    items = []
    for i in shown[:max(0, length)]:
        # (a member of a struct member is named member__inner: {id:1 item:{sku:2}})
        items.append("".join(str(p) for p in _held([
            (tuple(p.member.split("__")) if all(p.member.split("__")) else (p.member,),
             _number(values.get(p.field), p.hex)) for p in field.elements if p.index == i], tuples=False)))
    if length > len(shown):
        items.append("...")
    return "[" + " ".join(items) + "]"


def _with_variants(fields: list[Field], print_fmt: str) -> list[Field]:
    """``fields`` with each enum discriminant ``n`` (an integer with ``n__v…``/``n__p…`` fields
    after it) given its variants, each C++ vector's begin pointer its end (``n__end<S>``), each slice
    of structs' or vector of structs' length its elements (``n__e…``), and those fields marked as
    parts."""
    out = list(fields)
    for j, tag in enumerate(fields):
        if tag.is_data_loc or tag.is_array or tag.size not in (1, 2, 4, 8) or tag.is_common or tag.is_string_part:
            continue
        variants: list[VariantPart] = []
        elements: list[ElementPart] = []
        vector: Optional[Field] = None
        for i in range(j + 1, len(fields)):
            part = fields[i]
            rest = part.name[len(tag.name):] if part.name.startswith(tag.name) else ""
            end = _VECTOR_END.fullmatch(rest) if i == j + 1 and tag.size in (4, 8) else None
            if end is not None and not part.is_data_loc and not part.is_array and part.size == tag.size:
                vector = replace(tag, bound=(part.offset, part.size), element_size=int(end.group("size")))
                out[j] = vector
                out[i] = replace(part, is_string_part=True)
                continue
            s = _STRING_ELEMENT.fullmatch(rest) if vector is not None else None
            if s is not None and part.is_string and part.is_data_loc and all(not p.member for p in elements):
                elements.append(ElementPart(int(s.group("index")), "", part.name))
                out[i] = replace(part, is_string_part=True)
                continue
            e = _ELEMENT_PART.fullmatch(rest)
            if e is not None and not variants and not part.is_data_loc and not part.is_array \
                    and part.size in (1, 2, 4, 8) and all(p.member for p in elements):
                elements.append(ElementPart(int(e.group("index")), e.group("member"), part.name,
                                            f"{part.name}=0x%" in print_fmt))
                out[i] = replace(part, is_string_part=True)
                continue
            m = _VARIANT_PART.fullmatch(rest) if not elements and vector is None else None
            if m is None:
                break
            if m.group("kind") == "n":  # (a name of the C-like enum the payload before it is)
                last = variants[-1] if variants else None
                if last is None or last.payload is None or not m.group("value") or part.size != 1:
                    break
                variants[-1] = replace(last, names=last.names + ((int(m.group("value"), 16), m.group("variant")),))
                out[i] = replace(part, is_string_part=True)
                continue
            held = m.group("kind") != "v"
            if held and (part.is_data_loc or part.is_array or part.size not in (1, 2, 4, 8)):
                break
            in_hex = held and f"{part.name}=0x%" in print_fmt
            out[i] = replace(part, is_string_part=True)
            if m.group("member") is not None:
                value = int(m.group("mvalue"), 16) if m.group("mvalue") else None
                member = (tuple(m.group("member").split("__")), part.name, in_hex)
                last = variants[-1] if variants else None
                if last is not None and last.members and (last.name, last.value) == (m.group("mvariant"), value):
                    variants[-1] = replace(last, members=last.members + (member,))
                else:
                    variants.append(VariantPart(m.group("mvariant"), value, members=(member,)))
                continue
            value = int(m.group("value"), 16) if m.group("value") else None
            variants.append(VariantPart(m.group("variant"), value, part.name if held else None, in_hex))
        if variants:
            out[j] = replace(tag, variants=tuple(variants))
        elif elements:
            out[j] = replace(vector or tag, elements=tuple(elements))
    return out


def _with_string_parts(fields: list[Field]) -> list[Field]:
    """``fields`` with each counted string (a ``__data_loc char[]`` ``key`` with an integer
    ``key__len`` of 1 to 8 bytes, and maybe a byte array ``key__head``) given its parts, which are
    marked as such."""
    by_name = {f.name: i for i, f in enumerate(fields)}
    out = list(fields)
    for j, text in enumerate(fields):
        is_string = text.is_data_loc and text.array_len is None and text.element_type in _CHAR_TYPES
        # (a slice, Go's or Rust's: its first elements as a fixed array, cut at its length too)
        is_slice = not text.is_data_loc and text.is_array and text.element_type not in _CHAR_TYPES
        if not (is_string or is_slice):
            continue
        i = by_name.get(string_part_name(text.name, "length"))
        length = fields[i] if i is not None else None
        if length is None and is_slice:
            out = _with_vector_pointers(out, j, by_name)
            continue
        if length is None or length.is_data_loc or length.is_array or length.size not in (1, 2, 4, 8):
            continue
        out[j] = replace(text, bound=(length.offset, length.size))
        out[i] = replace(length, is_string_part=True)  # type: ignore[index]
        if is_slice:
            continue
        k = by_name.get(string_part_name(text.name, "head"))
        head = fields[k] if k is not None else None
        if head is not None and head.is_array and not head.is_data_loc and head.size > 0 \
                and _ELEMENT_SIZES.get(head.element_type) == 1:
            out[j] = replace(out[j], head=(head.offset, head.size))
            out[k] = replace(head, is_string_part=True)  # type: ignore[index]
    return out


def _with_vector_pointers(fields: list[Field], j: int, by_name: dict[str, int]) -> list[Field]:
    """``fields`` with the integer array ``fields[j]`` given its C++ vector's pointers when it has them
    (``NAME__begin`` and ``NAME__end``, integers of one size, 4 or 8 bytes), which are marked as parts."""
    array = fields[j]
    i, k = by_name.get(string_part_name(array.name, "begin")), by_name.get(string_part_name(array.name, "end"))
    if i is None or k is None:
        return fields
    begin, end = fields[i], fields[k]
    if any(p.is_data_loc or p.is_array or p.size not in (4, 8) or p.size != begin.size for p in (begin, end)):
        return fields
    out = list(fields)
    out[j] = replace(array, bound=(end.offset, end.size), begin=(begin.offset, begin.size))
    out[i] = replace(begin, is_string_part=True)
    out[k] = replace(end, is_string_part=True)
    return out


def parse_fields(text: str) -> tuple[Field, ...]:
    """Every ``field:`` line of ``text`` (a format file's field list, or the ``header_page`` file)."""
    fields = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("field"):
            fields.append(_parse_field_line(line, lineno))
    return tuple(fields)


def name_matches(full_name: str, glob: str) -> bool:
    """The ``-e GLOB`` rule of everything that reads recorded events (``script``, ``report``,
    ``flamegraph``, the Python API): a ``GROUP:EVENT`` glob matches an event's full name, a glob
    without ``:`` its name alone (``-e sched_switch``). ``full_name`` is ``GROUP:EVENT``."""
    return fnmatch.fnmatchcase(full_name if ":" in glob else full_name.partition(":")[2], glob)


def event_matches(fmt: "EventFormat", glob: str) -> bool:
    """:func:`name_matches` for an event known by its format."""
    return name_matches(fmt.full_name, glob)


@dataclass(frozen=True)
class EventFormat:
    """The format of one event: its id, its record fields (common ones first) and its print format."""

    system: str
    name: str
    id: int
    fields: tuple[Field, ...]
    print_fmt: str = ""

    @property
    def common_fields(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.is_common)

    @property
    def event_fields(self) -> tuple[Field, ...]:
        """The fields of the event's own values: not the common ones, nor a counted string's parts."""
        return tuple(f for f in self.fields if not f.is_common and not f.is_string_part)

    @property
    def composed_parts(self) -> tuple[Field, ...]:
        """The hidden fields the composed fields are made from (decoded after the event fields): the
        scalars of enum variants, the members of a slice of structs' elements."""
        names = {n for f in self.fields for v in f.variants for n in v.payload_fields}
        names.update(p.field for f in self.fields for p in f.elements)
        return tuple(f for f in self.fields if f.name in names)

    @property
    def full_name(self) -> str:
        return f"{self.system}:{self.name}"

    @property
    def record_size(self) -> int:
        """Bytes up to the end of the last fixed field (dynamic data follows)."""
        return max((f.offset + f.size for f in self.fields), default=0)

    def field(self, name: str) -> Optional[Field]:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    @classmethod
    def parse(cls, text: str, system: str = "") -> "EventFormat":
        """Read a format file; ``system`` is the directory above the event (the file does not say it)."""
        name: Optional[str] = None
        event_id: Optional[int] = None
        fields: list[Field] = []
        print_fmt = ""
        seen_format = False
        lines = text.splitlines()
        for lineno, line in enumerate(lines, 1):
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("field"):
                fields.append(_parse_field_line(line, lineno))
            elif stripped.startswith("print fmt:"):
                # the print format is the rest of the file (one line today, but keep any more)
                rest = [stripped[len("print fmt:"):].strip()] + [l for l in lines[lineno:] if l.strip()]
                print_fmt = "\n".join(rest)
                break
            elif stripped.startswith("name:"):
                name = stripped[len("name:"):].strip()
            elif stripped.startswith("ID:"):
                value = stripped[len("ID:"):].strip()
                try:
                    event_id = int(value, 0)
                except ValueError:
                    raise FormatError(f"line {lineno}: the event ID {value!r} is not a number") from None
            elif stripped == "format:":
                seen_format = True
            else:
                raise FormatError(f"line {lineno}: unexpected text in an event format: {stripped!r}")
        what = f"{system}:{name}" if system and name else (name or "event")
        if not name:
            raise FormatError("not an event format: no 'name:' line")
        if event_id is None:
            raise FormatError(f"the format of {what} has no 'ID:' line")
        if not seen_format and not fields:
            raise FormatError(f"the format of {what} has no 'format:' section")
        names = [f.name for f in fields]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise FormatError(f"the format of {what} has two fields named {dup!r}")
        fields = _with_variants(_with_string_parts(fields), print_fmt)
        return cls(system=system, name=name, id=event_id, fields=tuple(fields), print_fmt=print_fmt)
