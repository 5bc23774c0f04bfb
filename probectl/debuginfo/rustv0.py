"""Rust's v0 symbol names (``_R...``, RFC 2603; rustc ``-C symbol-mangling-version=v0``, nightly's
default since November 2025) demangled, written from the RFC's grammar.

libstdc++'s ``__cxa_demangle`` (:mod:`.demangle`) knows only Itanium's scheme, and Rust's legacy
names are Itanium's; v0 is a grammar of its own::

    symbol   = "_R" [decimal] path [path (the instantiating crate)] [vendor suffix]
    path     = "C" ident                       crate root
             | "M" impl-path type              <T>            (an inherent impl)
             | "X" impl-path type path         <T as Trait>   (a trait impl)
             | "Y" type path                   <T as Trait>   (a trait's own item)
             | "N" namespace path ident        path::ident, path::{closure#N}
             | "I" path {generic-arg} "E"      path::<A, B>
             | backref
    type     = basic type letter | path | "A" type const | "S" type | "T" {type} "E"
             | "R" [lifetime] type | "Q" [lifetime] type | "P" type | "O" type
             | "F" fn-sig | "D" dyn-bounds lifetime | backref
    backref  = "B" base-62      (the same production at that offset after "_R")

Two spellings come out: :func:`demangle_v0` with ``verbose`` is binutils' (``c++filt``, libiberty's
rust-demangle.c, and rustc-demangle's plain form): crates with their disambiguator in brackets
(``core[4e4b6e9a9c4c4a32]::option::Option<usize>``), an inherent impl in angle brackets
(``<rust_shop::shop::Cart>::add``). Without ``verbose`` it is the name a probe point is written with,
the one a legacy name gives once its hash is dropped: no disambiguators, an inherent impl's type as a
path (``rust_shop::shop::Cart::add``), so a name works on both manglings of one program.
"""
from __future__ import annotations

from typing import Optional

_BASIC = {"a": "i8", "b": "bool", "c": "char", "d": "f64", "e": "str", "f": "f32", "h": "u8", "i": "isize",
          "j": "usize", "l": "i32", "m": "u32", "n": "i128", "o": "u128", "s": "i16", "t": "u16", "u": "()",
          "v": "...", "x": "i64", "y": "u64", "z": "!", "p": "_"}
_SIGNED = {"a", "s", "l", "x", "n", "i"}
_UNSIGNED = {"h", "t", "m", "y", "o", "j"}
# How deep paths and types may nest, backreferences included (a name is input from a file: a loop of
# backreferences or a deep nest must end in an error, not exhaust the stack).
_MAX_DEPTH = 300


class _Invalid(Exception):
    pass


def demangle_v0(name: str, verbose: bool = False) -> Optional[str]:
    """The demangled v0 name ``name`` (see the module docstring for the two spellings), or None when
    it is not a valid one. LLVM's suffixes (``.llvm.123``) and a symbol version are left out."""
    name = name.split("@", 1)[0]
    if not name.startswith("_R"):
        return None
    body = name[2:]
    for cut in (body.find("."), body.find("$")):
        if cut >= 0:
            body = body[:cut]
    if not body or not body[0].isascii() or not body.isascii():
        return None
    try:
        parser = _Parser(body, verbose)
        if parser.peek().isdigit():  # (an encoding version: 0, the only one, is not written)
            return None
        text = parser.path(in_value=True)
        if parser.pos < len(body):
            parser.path(in_value=False)  # the instantiating crate: read, not shown
        if parser.pos != len(body):
            return None
        return text
    except (_Invalid, IndexError, ValueError, RecursionError):
        return None


class _Parser:
    def __init__(self, text: str, verbose: bool):
        self.text = text
        self.pos = 0
        self.verbose = verbose
        self.depth = 0
        self.binders = 0  # lifetimes bound so far (for 'a, 'b ... names)

    # -- tokens ------------------------------------------------------------------------------------

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def take(self, c: str) -> bool:
        if self.peek() == c:
            self.pos += 1
            return True
        return False

    def next(self) -> str:
        if self.pos >= len(self.text):
            raise _Invalid("unexpected end")
        c = self.text[self.pos]
        self.pos += 1
        return c

    def decimal(self) -> int:
        """decimal = "0" | nonzero digit {digit}: a "0" is a whole number (a closure's empty name, "0",
        may be followed by another's, "00")."""
        if self.take("0"):
            return 0
        start = self.pos
        while self.peek().isdigit():
            self.pos += 1
        if start == self.pos:
            raise _Invalid("bad decimal number")
        return int(self.text[start:self.pos])

    def base62(self) -> int:
        """A base-62 number ending in '_': '_' is 0, 'N_' is N + 1."""
        if self.take("_"):
            return 0
        value = 0
        while not self.take("_"):
            c = self.next()
            if c.isdigit():
                d = ord(c) - ord("0")
            elif "a" <= c <= "z":
                d = ord(c) - ord("a") + 10
            elif "A" <= c <= "Z":
                d = ord(c) - ord("A") + 36
            else:
                raise _Invalid("bad base-62 number")
            value = value * 62 + d
        return value + 1

    def optional_number(self, tag: str) -> int:
        """``tag`` base-62 (a disambiguator 's', a binder 'G'): its value + 1, 0 when absent."""
        return self.base62() + 1 if self.take(tag) else 0

    def ident(self) -> str:
        """An undisambiguated identifier: ["u"] decimal ["_"] bytes, punycode after "u"."""
        punycode = self.take("u")
        length = self.decimal()
        self.take("_")
        end = self.pos + length
        if end > len(self.text):
            raise _Invalid("identifier runs past the end")
        raw = self.text[self.pos:end]
        self.pos = end
        if not punycode:
            return raw
        basic, _, encoded = raw.rpartition("_")
        return (basic + "-" + encoded).encode("ascii").decode("punycode") if basic else \
            encoded.encode("ascii").decode("punycode")

    def backref(self, parse) -> str:
        """The production ``parse`` at the offset a backreference gives (which must lie before it)."""
        at = self.pos - 1
        target = self.base62()
        if target >= at:
            raise _Invalid("a backreference forward")
        saved = self.pos
        self.pos = target
        try:
            return parse()
        finally:
            self.pos = saved

    def nested(self, parse):
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Invalid("nested too deep")
        try:
            return parse()
        finally:
            self.depth -= 1

    # -- paths -------------------------------------------------------------------------------------

    def path(self, in_value: bool) -> str:
        return self.nested(lambda: self._path(in_value))

    def _path(self, in_value: bool) -> str:
        tag = self.next()
        if tag == "C":
            disambiguator = self.optional_number("s")
            name = self.ident()
            if self.verbose:  # (c++filt writes [0] for a crate without a disambiguator)
                return f"{name}[{disambiguator:x}]"
            return name
        if tag == "M":
            self.impl_path()
            self_type = self.type()
            if self.verbose or not self._is_plain_path(self_type):
                return f"<{self_type}>"
            return self_type
        if tag == "X":
            self.impl_path()
            self_type = self.type()
            trait = self.path(in_value=False)
            return f"<{self_type} as {trait}>"
        if tag == "Y":
            self_type = self.type()
            trait = self.path(in_value=False)
            return f"<{self_type} as {trait}>"
        if tag == "N":
            namespace = self.next()
            if not namespace.isalpha():
                raise _Invalid("bad namespace")
            prefix = self.path(in_value)
            disambiguator = self.optional_number("s")
            name = self.ident()
            if namespace.isupper():
                kind = {"C": "closure", "S": "shim"}.get(namespace, namespace)
                label = f"{kind}:{name}" if name else kind
                return f"{prefix}::{{{label}#{disambiguator}}}"
            return f"{prefix}::{name}" if name else prefix
        if tag == "I":
            prefix = self.path(in_value)
            args = []
            while not self.take("E"):
                args.append(self.generic_arg())
            return f"{prefix}{'::' if in_value else ''}<{', '.join(args)}>"
        if tag == "B":
            return self.backref(lambda: self.path(in_value))
        raise _Invalid(f"bad path tag {tag!r}")

    def impl_path(self) -> None:
        """An impl's own path (the module that holds the impl, disambiguated): not shown."""
        self.optional_number("s")
        self.path(in_value=False)

    @staticmethod
    def _is_plain_path(text: str) -> bool:
        return bool(text) and (text[0].isalpha() or text[0] == "_") and not text.startswith(("dyn ", "fn(", "unsafe ",
                                                                                              "extern "))

    def generic_arg(self) -> str:
        if self.peek() == "L":
            self.pos += 1
            return self.lifetime(self.base62())
        if self.take("K"):
            return self.const()
        return self.type()

    def lifetime(self, index: int) -> str:
        if index == 0:
            return "'_"
        depth = self.binders - index
        if depth < 0:
            raise _Invalid("a lifetime outside its binders")
        return "'" + (chr(ord("a") + depth) if depth < 26 else f"_{depth}")

    # -- types -------------------------------------------------------------------------------------

    def type(self) -> str:
        return self.nested(self._type)

    def _type(self) -> str:
        tag = self.next()
        if tag in _BASIC:
            return _BASIC[tag]
        if tag == "A":
            element = self.type()
            return f"[{element}; {self.const()}]"
        if tag == "S":
            return f"[{self.type()}]"
        if tag == "T":
            items = []
            while not self.take("E"):
                items.append(self.type())
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        if tag in "RQ":
            lifetime = ""
            if self.take("L"):
                index = self.base62()
                if index:
                    lifetime = self.lifetime(index) + " "
            return f"&{lifetime}{'mut ' if tag == 'Q' else ''}{self.type()}"
        if tag == "P":
            return f"*const {self.type()}"
        if tag == "O":
            return f"*mut {self.type()}"
        if tag == "F":
            return self.with_binder(self.fn_sig)
        if tag == "D":
            bounds = self.with_binder(self.dyn_bounds)
            if not self.take("L"):
                raise _Invalid("a dyn type without its lifetime")
            index = self.base62()
            return f"dyn {bounds}" + (f" + {self.lifetime(index)}" if index else "")
        if tag == "B":
            return self.backref(self.type)
        self.pos -= 1
        return self.path(in_value=False)

    def with_binder(self, parse) -> str:
        bound = self.optional_number("G")
        saved = self.binders
        self.binders += bound
        try:
            text = parse()
        finally:
            self.binders = saved
        if bound and self.binders + bound > 0:
            names = ", ".join(self.lifetime_name(saved + i) for i in range(bound))
            return f"for<{names}> {text}"
        return text

    @staticmethod
    def lifetime_name(depth: int) -> str:
        return "'" + (chr(ord("a") + depth) if depth < 26 else f"_{depth}")

    def fn_sig(self) -> str:
        text = ""
        if self.take("U"):
            text += "unsafe "
        if self.take("K"):
            abi = "C" if self.take("C") else self.ident().replace("_", "-")
            text += f'extern "{abi}" '
        params = []
        while not self.take("E"):
            params.append(self.type())
        ret = self.type()
        text += f"fn({', '.join(params)})"
        return text if ret == "()" else f"{text} -> {ret}"

    def dyn_bounds(self) -> str:
        traits = []
        while not self.take("E"):
            trait = self.path(in_value=False)
            bindings = []
            while self.take("p"):
                name = self.ident()
                bindings.append(f"{name} = {self.type()}")
            if bindings:
                trait = trait[:-1] + ", " + ", ".join(bindings) + ">" if trait.endswith(">") else \
                    f"{trait}<{', '.join(bindings)}>"
            traits.append(trait)
        return " + ".join(traits)

    # -- constants ---------------------------------------------------------------------------------

    def const(self) -> str:
        return self.nested(self._const)

    def _const(self) -> str:
        if self.take("B"):
            return self.backref(self.const)
        if self.take("p"):
            return "_"
        tag = self.next()
        if tag in _UNSIGNED or tag in _SIGNED:
            negative = tag in _SIGNED and self.take("n")
            text = f"{'-' if negative else ''}{self.hex_digits()}"
        elif tag == "b":
            value = self.hex_digits()
            if value not in (0, 1):
                raise _Invalid("a bool that is neither")
            text = "true" if value else "false"
        elif tag == "c":
            text = repr(chr(self.hex_digits()))
        else:
            raise _Invalid(f"a constant of type {tag!r}")
        return f"{text}: {_BASIC[tag]}" if self.verbose else text

    def hex_digits(self) -> int:
        start = self.pos
        while self.peek() and self.peek() in "0123456789abcdef":
            self.pos += 1
        digits = self.text[start:self.pos]
        if not self.take("_"):
            raise _Invalid("a constant without its end")
        return int(digits, 16) if digits else 0
