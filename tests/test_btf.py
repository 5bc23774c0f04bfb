"""BTF: the reader (debuginfo/btf/) and fetch arguments from BTF (resolve/btf_fetch.py).

Oracles:

- ``perf probe -k VMLINUX -D`` on Debian's cloud vmlinux (perf reads its DWARF): the fetch arguments
  resolved from the ``.BTF`` section of the same vmlinux must be the same, argument for argument.
- The vmlinux's DWARF read with pyelftools through probectl's DWARF type model (``types.py``): struct
  layouts (every member's offset and bitfield placement), return types and parameter types must agree
  with BTF; this covers bitfields, where perf fails.
- This machine's ``/sys/kernel/btf/vmlinux`` (another kernel version, so other layouts): results must be
  well-formed.
- Synthetic BTF built here: calling-convention corner cases, split BTF, ``__user`` tags, and damaged data
  (which must give DebugInfoError and nothing else).
"""
from __future__ import annotations

import functools
import hashlib
import os
import random
import re
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import pytest

from probectl.debuginfo.btf import format as B
from probectl.debuginfo.btf import Btf, load_kernel_btf
from probectl.debuginfo.btf.types import BtfFunctionNotFound
from probectl.resolve.fetch_options import FetchOptions
from probectl.resolve.btf_fetch import (btf_fetch, btf_param_locations, btf_params, btf_retval, btf_retval_type,
                                        btf_vars_listing)
from probectl.errors import TypeMismatchError, ValueTooWideError
from probectl.errors import VariableNotFound, VariableUnavailable
from probectl.errors import DebugInfoError, ProbectlError
from probectl.spec import SpecialVar, TypeSpec, Variable, parse_probe

from tests.helpers import kernel_testdata, missing

RETURN_ARGS = FetchOptions(args_at_return=True)  # a kernel whose return probes read $argN


# --- a BTF writer for synthetic data ----------------------------------------------------------------------


class BtfWriter:
    """Builds BTF blobs type by type (``base``: the writer of the BTF this one is split from)."""

    def __init__(self, base: Optional["BtfWriter"] = None):
        self.base = base
        self.records: list[bytes] = []
        self.strings = bytearray() if base is not None else bytearray(b"\0")
        self.str_base = base.str_end if base is not None else 0
        self.first_id = base.nr_types if base is not None else 1
        self._offsets: dict[str, int] = {}

    @property
    def nr_types(self) -> int:
        return self.first_id + len(self.records)

    @property
    def str_end(self) -> int:
        return self.str_base + len(self.strings)

    def name(self, text: str) -> int:
        if not text:
            return 0
        if self.base is not None and text in self.base._offsets:
            return self.base._offsets[text]
        if text not in self._offsets:
            self._offsets[text] = self.str_base + len(self.strings)
            self.strings += text.encode() + b"\0"
        return self._offsets[text]

    def add(self, name: str, kind: int, size_type: int = 0, vlen: int = 0, kind_flag: bool = False,
            extra: tuple[int, ...] = ()) -> int:
        info = (int(kind_flag) << 31) | (kind << 24) | vlen
        self.records.append(struct.pack(f"<3I{len(extra)}I", self.name(name), info, size_type, *extra))
        return self.nr_types - 1

    def int(self, name, size, signed=False, bits=None, char=False, boolean=False, offset=0):
        enc = (B.BTF_INT_SIGNED if signed else 0) | (B.BTF_INT_CHAR if char else 0) | \
            (B.BTF_INT_BOOL if boolean else 0)
        return self.add(name, B.INT, size, extra=((enc << 24) | (offset << 16) | (bits or size * 8),))

    def ref(self, kind, target, name=""):
        return self.add(name, kind, target)

    def array(self, elem, count, index):
        return self.add("", B.ARRAY, 0, extra=(elem, index, count))

    def struct(self, name, size, members, union=False, kind_flag=None):
        """``members``: (name, type, bit_offset[, bitfield_size])."""
        kf = any(len(m) > 3 and m[3] for m in members) if kind_flag is None else kind_flag
        extra = []
        for m in members:
            mname, mtype, off = m[:3]
            bits = m[3] if len(m) > 3 else 0
            extra += [self.name(mname), mtype, (bits << 24 | off) if kf else off]
        return self.add(name, B.UNION if union else B.STRUCT, size, len(members), kf, tuple(extra))

    def enum(self, name, values, size=4, signed=False):
        extra = []
        for n, v in values:
            extra += [self.name(n), v & 0xFFFFFFFF]
        return self.add(name, B.ENUM, size, len(values), signed, tuple(extra))

    def proto(self, ret, params, variadic=False):
        extra = []
        for n, t in params:
            extra += [self.name(n), t]
        if variadic:
            extra += [0, 0]
        return self.add("", B.FUNC_PROTO, ret, len(extra) // 2, extra=tuple(extra))

    def func(self, name, ret, params, variadic=False):
        return self.add(name, B.FUNC, self.proto(ret, params, variadic))

    def build(self, endian="<", version=1) -> bytes:
        types = b"".join(self.records)
        if endian == ">":
            types = b"".join(struct.pack(">I", w) for (w,) in struct.iter_unpack("<I", types))
        header = struct.pack(endian + "HBBIIIII", 0xEB9F, version, 0, 24, 0, len(types), len(types),
                             len(self.strings))
        return header + types + bytes(self.strings)


def _c_types(w: BtfWriter) -> dict[str, int]:
    t = {"int": w.int("int", 4, signed=True), "long": w.int("long int", 8, signed=True),
         "ulong": w.int("long unsigned int", 8), "char": w.int("char", 1, signed=True),
         "u8": w.int("unsigned char", 1), "i128": w.int("__int128", 16, signed=True),
         "double": w.add("double", B.FLOAT, 8), "bool": w.int("_Bool", 1, boolean=True)}
    t["long_p"] = w.ref(B.PTR, t["long"])
    t["const_char"] = w.ref(B.CONST, t["char"])
    t["char_p"] = w.ref(B.PTR, t["const_char"])
    t["size_t"] = w.ref(B.TYPEDEF, t["ulong"], "size_t")
    return t


def _abi_btf() -> tuple[Btf, dict[str, int]]:
    """Functions whose parameters exercise the x86-64 calling convention."""
    w = BtfWriter()
    t = _c_types(w)
    pair = w.struct("pair", 16, [("x", t["long"], 0), ("y", t["int"], 64), ("z", t["int"], 96)])
    small = w.struct("small", 8, [("a", t["int"], 0), ("b", t["u8"], 32), ("flags", t["int"], 40, 3)])
    big = w.struct("big", 24, [("p", t["long"], 0), ("q", t["long"], 64), ("r", t["long"], 128)])
    mixed = w.struct("mixed", 16, [("d", t["double"], 0), ("n", t["long"], 64)])
    w.func("abi", t["int"], [("a", t["int"]), ("d", t["double"]), ("s", pair), ("q", t["i128"]), ("e", t["long"]),
                             ("f", t["long_p"]), ("g", t["long"]), ("b", big), ("c", t["char"])])
    w.func("regs", t["long"], [("p1", t["long"]), ("p2", small), ("p3", mixed), ("p4", t["long"]),
                               ("p5", t["long"]), ("p6", t["long"]), ("p7", pair)])
    w.func("sret", big, [("x", t["long"]), ("y", t["long"])])
    w.func("ret_pair", pair, [])
    w.func("ret_double", t["double"], [])
    w.func("ret_small", small, [("n", t["size_t"])])
    w.func("nothing", 0, [("fmt", t["char_p"])], variadic=True)
    return Btf(w.build(), source="abi"), t


def _v(text: str) -> Variable:
    """A C expression as the probe grammar parses it."""
    return parse_probe(f"f {text}").args[0].expr


def _fetch(btf, function, expr, **kw) -> str:
    arg = parse_probe(f"f {expr}").args[0]
    r = btf_fetch(btf, function, arg.expr, arg.type, **kw)
    return f"{r.fetch}:{r.type}" if r.type else r.fetch


# --- the calling convention on synthetic prototypes -------------------------------------------------------


def test_parameters_follow_the_x86_64_calling_convention():
    btf, _ = _abi_btf()
    assert _fetch(btf, "abi", "a") == "%di:s32"
    # A 16-byte struct of integers takes two registers; a member is read from the one holding it.
    assert _fetch(btf, "abi", "s.x") == "%si:s64"  # (the whole register, with its type's sign)
    assert _fetch(btf, "abi", "s.y") == "%dx:s32"  # (its low 4 bytes; the next member is a bitfield of it)
    assert _fetch(btf, "abi", "s.z") == "%dx:b32@32/64"
    # The double took %xmm0, not a general register; the 128-bit integer needs two: %cx and %r8.
    assert _fetch(btf, "abi", "e") == "%r9:s64"
    # Registers are used up: the rest is on the stack, 8 bytes above %sp at the entry.
    assert _fetch(btf, "abi", "f") == "+8(%sp):x64"
    assert _fetch(btf, "abi", "f[2]") == "+16(+8(%sp)):s64"
    assert _fetch(btf, "abi", "g") == "+16(%sp):s64"
    assert _fetch(btf, "abi", "b.q") == "+32(%sp):s64"      # a 24-byte struct, in memory at +24
    assert _fetch(btf, "abi", "c") == "+48(%sp):s8"
    locs = {p.name: p for p in btf_param_locations(btf, "abi")}
    assert locs["q"].registers == (3, 4) and locs["b"].stack == 24 and tuple(locs["b"].slots) == (9, 10, 11)
    with pytest.raises(VariableUnavailable, match="SSE register"):
        btf_fetch(btf, "abi", _v("d"))
    with pytest.raises(VariableUnavailable, match="2 registers"):
        btf_fetch(btf, "abi", _v("q"))
    with pytest.raises(VariableUnavailable, match="2 registers"):
        btf_fetch(btf, "abi", _v("s"))
    # A struct wider than 64 bits is an error (perf cuts it to its first 8 bytes); a cast says to.
    with pytest.raises(ValueTooWideError, match="'b' is a struct big of 24 bytes"):
        _fetch(btf, "abi", "b")
    assert _fetch(btf, "abi", "b:x64") == "+24(%sp):x64"
    assert btf_params(btf, "abi") == ["a", "e", "f", "g", "b", "c"]


def test_small_structs_bitfields_and_mixed_classes():
    btf, _ = _abi_btf()
    assert _fetch(btf, "regs", "p2") == "%si:x64"               # a struct in one register, as DWARF reads it
    assert _fetch(btf, "regs", "p2.b") == "%si:b8@32/64"
    assert _fetch(btf, "regs", "p2.flags") == "%si:b3@40/64"
    # 'mixed' is SSE + INTEGER: %xmm0 and %dx; unreadable, but it moves p4 to %cx.
    with pytest.raises(VariableUnavailable, match="SSE"):
        btf_fetch(btf, "regs", _v("p3.n"))
    assert _fetch(btf, "regs", "p4") == "%cx:s64"
    assert _fetch(btf, "regs", "p6") == "%r9:s64"
    # No two registers left for 'pair': all of it goes to the stack.
    assert _fetch(btf, "regs", "p7.y") == "+16(%sp):s32"


def test_hidden_return_pointer_and_return_values():
    btf, _ = _abi_btf()
    assert _fetch(btf, "sret", "x") == "%si:s64"                # %di holds the address of the result
    assert btf_retval_type(btf, "regs") == "s64"
    assert btf_retval(btf, "ret_small").type == "x64"           # an 8-byte struct comes back in %ax
    assert btf_retval(btf, "ret_small").c_type == "struct small"
    for fn, why in (("sret", "in memory"), ("ret_pair", "two registers"), ("ret_double", "SSE"),
                    ("nothing", "returns void")):
        with pytest.raises(VariableUnavailable, match=why):
            btf_retval_type(btf, fn)
    assert _fetch(btf, "nothing", "fmt:string") == "+0(%di):string"
    assert btf_params(btf, "nothing") == ["fmt"]


def test_return_probes_read_parameters_only_through_saved_arguments():
    btf, _ = _abi_btf()
    with pytest.raises(VariableUnavailable, match=r"not available at the return.*") as exc:
        btf_fetch(btf, "abi", _v("a"), at_return=True)
    assert "$arg<N>" in exc.value.hint
    assert _fetch(btf, "abi", "a", at_return=True, options=RETURN_ARGS) == "$arg1:s32"
    assert _fetch(btf, "abi", "e", at_return=True, options=RETURN_ARGS) == "$arg6:s64"
    assert _fetch(btf, "abi", "g", at_return=True, options=RETURN_ARGS) == "$arg8:s64"
    assert _fetch(btf, "abi", "f[1]", at_return=True, options=RETURN_ARGS) == "+8($arg7):s64"
    assert _fetch(btf, "abi", "s.z", at_return=True, options=RETURN_ARGS) == "$arg3:b32@32/64"
    assert btf_params(btf, "abi", at_return=True) == []
    assert btf_params(btf, "abi", at_return=True, options=RETURN_ARGS) == ["a", "e", "f", "g", "c"]
    with pytest.raises(VariableUnavailable, match="3 registers"):
        btf_fetch(btf, "abi", _v("b"), at_return=True, options=RETURN_ARGS)


def test_user_tags_strings_and_casts():
    w = BtfWriter()
    t = _c_types(w)
    user_char = w.ref(B.TYPE_TAG, t["const_char"], "user")
    ustr = w.ref(B.PTR, user_char)
    name = w.array(t["char"], 16, t["int"])
    hdr = w.struct("hdr", 24, [("len", t["int"], 0), ("name", name, 32)])
    user_hdr = w.ref(B.TYPE_TAG, hdr, "user")
    w.func("f", t["long"], [("path", ustr), ("h", w.ref(B.PTR, user_hdr)), ("k", w.ref(B.PTR, hdr)),
                            ("n", t["long"])])
    btf = Btf(w.build(), source="tags")
    assert _fetch(btf, "f", "path:string") == "+0(%di):ustring"
    assert _fetch(btf, "f", "path:ustring") == "+0(%di):ustring"
    assert _fetch(btf, "f", "h->len") == "+u0(%si):s32"
    assert _fetch(btf, "f", "h->name:string") == "+u4(%si):string"
    assert _fetch(btf, "f", "k->name:string") == "+4(%dx):string"
    assert _fetch(btf, "f", "k->name") == "+4(%dx)"             # an array has no kernel type, as in perf
    assert _fetch(btf, "f", "k->name[3]") == "+7(%dx):s8"
    assert _fetch(btf, "f", "n:u16") == "%cx:u16"
    assert _fetch(btf, "f", "n:x") == "%cx:x64"
    assert _fetch(btf, "f", "n:u") == "%cx:u64"
    r = btf_fetch(btf, "f", _v("n"), options=FetchOptions(x_types=False))
    assert (r.type, r.default_name, r.c_type, r.signed, r.size) == ("s64", "n", "long int", True, 8)
    assert btf_fetch(btf, "f", _v("path"), options=FetchOptions(x_types=False)).type == "u64"
    assert btf_fetch(btf, "f", _v("path"), TypeSpec("string")).default_name == "path_string"
    with pytest.raises(TypeMismatchError, match="not a pointer nor an array"):
        btf_fetch(btf, "f", _v("n"), TypeSpec("string"))
    with pytest.raises(TypeMismatchError, match=r"must be referred by '->'"):
        btf_fetch(btf, "f", _v("k.len"))
    with pytest.raises(TypeMismatchError, match="has no member 'lne'") as exc:
        btf_fetch(btf, "f", _v("k->lne"))
    assert "did you mean 'len'" in exc.value.hint
    with pytest.raises(VariableNotFound, match="no parameter 'x'") as exc:
        btf_fetch(btf, "f", _v("x"))
    assert "path, h, k, n" in exc.value.hint
    with pytest.raises(BtfFunctionNotFound, match="no function 'g'"):
        btf_fetch(btf, "g", _v("x"))
    listing = btf_vars_listing(btf, "f")
    assert [(v.c_type, v.name) for v in listing] == [("char*", "path"), ("long int", "n"), ("struct hdr*", "h"),
                                                     ("struct hdr*", "k")]


def test_bitfields_without_kind_flag_and_anonymous_members():
    """Old BTF marks a bitfield by an INT narrower than its size; both encodings place it alike."""
    for kind_flag in (True, False):
        w = BtfWriter()
        t = _c_types(w)
        u32 = w.int("unsigned int", 4)
        inner = w.struct("", 8, [("lo", u32, 0, 3), ("hi", u32, 3, 20), ("tail", t["u8"], 32)])
        mode = ("mode", u32, 64 + 7, 5) if kind_flag else ("mode", w.int("unsigned int", 4, bits=5), 64 + 7)
        s = w.struct("s", 16, [("", inner, 0), mode, ("last", t["int"], 96)], kind_flag=kind_flag)
        w.func("g", t["int"], [("p", w.ref(B.PTR, s))])
        btf = Btf(w.build(), source="bits")
        assert _fetch(btf, "g", "p->mode") == "+8(%di):b5@7/32"
        assert _fetch(btf, "g", "p->hi") == "+0(%di):b20@3/32"
        assert _fetch(btf, "g", "p->tail") == "+4(%di):x8"
        assert btf.member_names(s) == ["lo", "hi", "tail", "mode", "last"]


def test_split_btf_continues_its_base(tmp_path):
    base = BtfWriter()
    t = _c_types(base)
    sock = base.struct("sock", 16, [("state", t["int"], 0), ("len", t["long"], 64)])
    base_btf = Btf(base.build(), source="base")
    mod = BtfWriter(base=base)
    mod_struct = mod.struct("mod_ctx", 16, [("sk", mod.ref(B.PTR, sock), 0), ("flags", t["int"], 64)])
    mod.func("mod_xmit", t["int"], [("ctx", mod.ref(B.PTR, mod_struct)), ("size", t["size_t"])])
    path = tmp_path / "mod"
    path.write_bytes(mod.build())
    btf = load_kernel_btf(path, base=base_btf)
    assert btf.first_id == base_btf.nr_types and len(btf) == len(base_btf) + len(mod.records)
    assert _fetch(btf, "mod_xmit", "ctx->sk->len") == "+8(+0(%di)):s64"
    assert _fetch(btf, "mod_xmit", "size") == "%si:x64"
    assert btf.type_name(mod_struct) == "struct mod_ctx" and btf.type(sock).name == "sock"
    assert [x.id for x in btf.find("sock")] == [sock]
    with pytest.raises(DebugInfoError, match="split BTF"):
        Btf(mod.build(), source="no base")


def test_big_endian_btf_reads_the_same():
    w = BtfWriter()
    t = _c_types(w)
    s = w.struct("s", 8, [("a", t["int"], 0), ("b", t["int"], 32, 4)])
    w.func("h", t["int"], [("p", w.ref(B.PTR, s)), ("n", t["size_t"])])
    assert _fetch(Btf(w.build(">"), source="be"), "h", "p->b") == _fetch(Btf(w.build(), source="le"), "h", "p->b")


def test_duplicate_functions_need_the_same_types():
    w = BtfWriter()
    t = _c_types(w)
    w.func("m_stop", 0, [("seq", t["long_p"]), ("v", t["char_p"])])
    w.func("m_stop", 0, [("m", t["long_p"]), ("p", t["char_p"])])
    w.func("m_stop", 0, [("m", t["long_p"]), ("v", t["char_p"])])
    w.func("clash", t["int"], [("a", t["int"])])
    w.func("clash", t["int"], [("a", t["long"])])
    w.func("swap", 0, [("a", t["long"]), ("b", t["long"])])
    w.func("swap", 0, [("b", t["long"]), ("a", t["long"])])
    btf = Btf(w.build(), source="dups")
    assert _fetch(btf, "m_stop", "m") == "%di:x64" and _fetch(btf, "m_stop", "p") == "%si:x64"
    assert _fetch(btf, "m_stop", "seq[1]") == "+8(%di):s64"
    with pytest.raises(BtfFunctionNotFound, match="different prototypes"):
        btf_fetch(btf, "clash", _v("a"))
    with pytest.raises(VariableNotFound, match="different parameters"):
        btf_fetch(btf, "swap", _v("a"))


# --- damaged data --------------------------------------------------------------------------------------------


def _rich_writer() -> BtfWriter:
    w = BtfWriter()
    t = _c_types(w)
    e = w.enum("state", [("A", 0), ("B", -1)], signed=True)
    arr = w.array(t["long"], 4, t["int"])
    fwd = w.add("opaque", B.FWD)
    inner = w.struct("", 8, [("lo", t["int"], 0, 3), ("hi", t["int"], 3, 9), ("st", e, 32)])
    s = w.struct("s", 64, [("", inner, 0), ("v", arr, 64), ("o", w.ref(B.PTR, fwd), 320), ("n", t["long"], 384)])
    sp = w.ref(B.PTR, w.ref(B.VOLATILE, w.ref(B.TYPEDEF, s, "s_t")))
    w.func("f", t["int"], [("p", sp), ("q", t["char_p"]), ("x", t["double"]), ("r", s)])
    w.add("g_var", B.VAR, t["int"], extra=(1,))
    w.add("tag", B.DECL_TAG, t["int"], extra=(0xFFFFFFFF,))
    w.add("big", B.ENUM64, 8, 1, False, (w.name("X"), 1, 2))
    return w


@functools.lru_cache(maxsize=None)
def _exercised_expressions():
    return parse_probe("f p->n p->hi p->v[2] q:string r.n p->o->x x p").args


def _exercise(btf: Btf) -> None:
    """Everything a caller may do with a BTF blob (the fuzz test allows ProbectlError only)."""
    for i in range(1, btf.nr_types):
        for call in (btf.type, btf.type_name, btf.byte_size, btf.kernel_type, btf.is_signed, btf.enumerators,
                     btf.member_names):
            try:
                call(i)
            except ProbectlError:
                pass
        try:
            t = btf.type(i)
            if t.kind in (B.STRUCT, B.UNION):
                for m in btf.members(t):
                    btf.find_member(i, m.name or "n")
            elif t.kind == B.FUNC:
                for fn in (btf_params, btf_vars_listing, btf_retval_type):
                    try:
                        fn(btf, t.name)
                    except ProbectlError:
                        pass
                for expr in _exercised_expressions():
                    try:
                        btf_fetch(btf, t.name, expr.expr, expr.type)
                    except ProbectlError:
                        pass
            elif t.kind in (B.ENUM, B.ENUM64):
                btf.enum_values(t)
        except ProbectlError:
            pass


def test_damaged_headers_are_errors():
    good = _rich_writer().build()
    cases = {
        "empty": b"",
        "short": good[:20],
        "magic": b"\x00\x00" + good[2:],
        "version": good[:2] + b"\x02" + good[3:],
        "hdr_len": good[:4] + struct.pack("<I", 1 << 30) + good[8:],
        "type section past the end": good[:12] + struct.pack("<I", len(good)) + good[16:],
        "strings not NUL-terminated": good[:-1] + b"x",
        "truncated": good[:-40],
        "unaligned types": good[:12] + struct.pack("<I", 6) + good[16:],
    }
    for what, data in cases.items():
        with pytest.raises(DebugInfoError):
            Btf(data, source=what)
            pytest.fail(f"{what}: no error")
    # A record with an unknown kind, and one cut short.
    w = BtfWriter()
    w.int("int", 4)
    w.add("bad", 25)
    with pytest.raises(DebugInfoError, match="unknown kind 25"):
        Btf(w.build())
    w = BtfWriter()
    w.add("s", B.STRUCT, 8, vlen=3)
    with pytest.raises(DebugInfoError, match="truncated"):
        Btf(w.build())


def test_out_of_range_ids_and_loops_are_errors():
    w = BtfWriter()
    t = _c_types(w)
    bad_ptr = w.ref(B.PTR, 9999)
    loop_a = w.nr_types
    w.ref(B.TYPEDEF, loop_a + 1, "a")
    w.ref(B.CONST, loop_a, "")
    self_ptr = w.nr_types
    w.ref(B.PTR, self_ptr)
    self_arr = w.nr_types
    w.array(self_arr, 2, t["int"])
    anon_loop = w.nr_types
    w.struct("loop", 8, [("", anon_loop, 0), ("x", t["int"], 0)])
    bad_member = w.struct("bm", 8, [("m", 12345, 0)])
    w.func("f", t["int"], [("p", w.ref(B.PTR, bad_member)), ("l", w.ref(B.PTR, anon_loop))])
    w.func("g", t["int"], [("a", loop_a)])
    w.add("notproto", B.FUNC, t["int"])
    w.records.append(struct.pack("<3I", 1 << 20, B.TYPEDEF << 24, t["int"]))    # its name is past the strings
    btf = Btf(w.build(), source="loops")
    bad_name = btf.nr_types - 1
    with pytest.raises(DebugInfoError, match="out of range"):
        btf.type(bad_ptr)
    with pytest.raises(DebugInfoError, match="loops"):
        btf.strip_typedefs(loop_a)
    with pytest.raises(DebugInfoError, match="loops"):
        btf.type_name(self_ptr)
    with pytest.raises(DebugInfoError, match="loops"):
        btf.byte_size(self_arr)
    with pytest.raises(DebugInfoError, match="nest"):
        btf.find_member(anon_loop, "nope")
    with pytest.raises(DebugInfoError, match="out of range"):
        btf_fetch(btf, "f", _v("p->m"))
    with pytest.raises(DebugInfoError, match="nest"):
        btf_fetch(btf, "f", _v("l->nope"))
    with pytest.raises(DebugInfoError, match="loops"):
        btf_params(btf, "g")
    with pytest.raises(DebugInfoError, match="does not refer to a prototype"):
        btf_params(btf, "notproto")
    with pytest.raises(DebugInfoError, match="past the string section"):
        btf.type(bad_name)
    with pytest.raises(DebugInfoError):
        btf.type(-1)
    with pytest.raises(DebugInfoError):
        btf.type(btf.nr_types)
    _exercise(btf)


def test_fuzzed_btf_gives_debuginfo_errors_only():
    good = _rich_writer().build()
    _exercise(Btf(good, source="good"))
    rng = random.Random(4)
    nr_types = Btf(good).nr_types
    for n in range(1500):
        data = bytearray(good)
        if n % 4 == 0:
            data = data[:rng.randrange(len(data))]
        elif n % 4 == 1:
            # A word of the type section: an id, a size, an offset, a count or an info word.
            for _ in range(rng.randrange(1, 3)):
                pos = 24 + 4 * rng.randrange((len(data) - 24) // 4)
                value = rng.choice((0, 1, nr_types - 1, nr_types, rng.randrange(1 << 32), rng.randrange(64),
                                    rng.randrange(20) << 24 | rng.randrange(4)))
                data[pos:pos + 4] = struct.pack("<I", value)
        else:
            for _ in range(rng.randrange(1, 6)):
                pos = rng.randrange(24 if n % 3 else 0, len(data))
                data[pos] = rng.choice((0, 0xFF, rng.randrange(256), data[pos] ^ (1 << rng.randrange(8))))
        try:
            btf = Btf(bytes(data), source=f"fuzz {n}")
        except DebugInfoError:
            continue
        _exercise(btf)


# --- the real kernels ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cloud_vmlinux() -> Path:
    return kernel_testdata("vmlinux")


@pytest.fixture(scope="session")
def cloud_btf(cloud_vmlinux) -> Btf:
    start = time.perf_counter()
    btf = load_kernel_btf(cloud_vmlinux)
    btf.load_seconds = time.perf_counter() - start
    return btf


@pytest.fixture(scope="session")
def host_btf() -> Btf:
    if not B.KERNEL_BTF.exists():
        missing(f"this kernel has no {B.KERNEL_BTF}")
    start = time.perf_counter()
    btf = load_kernel_btf()
    btf.load_seconds = time.perf_counter() - start
    return btf


def _walk(btf: Btf) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in range(1, btf.nr_types):
        t = btf.type(i)
        counts[t.kind_name] = counts.get(t.kind_name, 0) + 1
        if t.kind in (B.STRUCT, B.UNION):
            btf.members(t)
        elif t.kind == B.FUNC_PROTO:
            btf.params(t)
        elif t.kind in (B.ENUM, B.ENUM64):
            btf.enum_values(t)
    return counts


@pytest.mark.parametrize("which", ["host", "cloud"])
def test_kernel_btf_parses(which, request):
    btf = request.getfixturevalue(f"{which}_btf")
    start = time.perf_counter()
    counts = _walk(btf)
    walk = time.perf_counter() - start
    start = time.perf_counter()
    fn = btf.function("tcp_sendmsg")
    lookup = time.perf_counter() - start
    print(f"\n{btf}: read in {btf.load_seconds * 1e3:.0f} ms (parse {btf.parse_seconds * 1e3:.0f} ms), "
          f"first lookup {lookup * 1e3:.1f} ms, every record decoded in {walk:.2f} s")
    assert len(btf) > 50_000 and counts["FUNC"] > 20_000 and counts["STRUCT"] > 5_000
    assert btf.signature(fn.proto) == "int (struct sock* sk, struct msghdr* msg, size_t size)"
    assert btf.type_name(btf.find("task_struct", B.STRUCT)[0].id) == "struct task_struct"


# Entry probes compared with perf, which reads the same vmlinux's DWARF. Networking, filesystems,
# scheduler, memory; strings, arrays, member chains, stack parameters, enums, bools.
PERF_DEFINITIONS = [
    "tcp_sendmsg $params sk->__sk_common.skc_state sk->__sk_common.skc_v6_daddr.in6_u.u6_addr8[3] "
    "msg->msg_iter.count",
    "tcp_recvmsg $params sk->sk_rcvbuf",
    "tcp_v4_connect $params sk->__sk_common.skc_dport",
    "ip_rcv skb->len dev->name:string",
    "__dev_queue_xmit $params skb->len",
    "tcp_set_state $params",
    "inet_csk_accept $params",
    "sock_sendmsg sock->type msg->msg_flags",
    "vfs_read $params file->f_flags",
    "vfs_write $params file->f_pos",
    "do_sys_openat2 $params filename:string filename[1] how->flags how->mode",
    "vfs_open path->dentry->d_name.name:string file->f_mode",
    "do_unlinkat dfd name->name:string",
    "ext4_file_write_iter iocb->ki_pos from->count",
    "vfs_fsync_range $params",
    "schedule_timeout timeout",
    "wake_up_process p->pid p->comm:string p->comm[1]",
    "try_to_wake_up $params p->pid",
    "set_user_nice p->prio nice",
    "__set_task_comm tsk->pid buf:string exec",
    "kernel_clone args->flags args->exit_signal",
    "__alloc_pages $params",
    "kmalloc_trace s->name:string gfpflags size",
    "do_mmap $params",
    "handle_mm_fault $params vma->vm_start",
    "kmem_cache_alloc s->size gfpflags",
    "kobject_uevent $params",
    "from_kuid $params",
]


def _perf_version(perf: str) -> str:
    return subprocess.run([perf, "--version"], capture_output=True, text=True).stdout.strip()


def _perf_definition(perf: str, vmlinux: Path, definition: str) -> tuple[int, str]:
    out = subprocess.run([perf, "probe", "-k", str(vmlinux), "-D", definition], capture_output=True, text=True)
    return out.returncode, out.stdout + out.stderr


@pytest.fixture(scope="session")
def perf_oracle(perf_bin, cloud_vmlinux):
    """perf's -D output for each definition (perf reads the DWARF for each one, about a second; the runs
    go in parallel, and the outputs are kept under $XDG_CACHE_HOME/probectl keyed by perf's version and
    the vmlinux, so a second test run does not repeat them)."""
    st = cloud_vmlinux.stat()
    identity = f"{_perf_version(perf_bin)}\0{cloud_vmlinux}\0{st.st_size}\0{st.st_mtime_ns}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "probectl" / "perf-oracle"
    results: dict[str, tuple[int, str]] = {}
    todo = []
    for d in PERF_DEFINITIONS + PERF_FAILURES:
        f = cache / hashlib.sha256(f"{identity}\0{d}".encode()).hexdigest()[:32]
        if f.is_file():
            rc, _, text = f.read_text().partition("\n")
            results[d] = (int(rc), text)
        else:
            todo.append((d, f))
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        for (d, f), res in zip(todo, pool.map(lambda item: _perf_definition(perf_bin, cloud_vmlinux, item[0]), todo)):
            results[d] = res
            try:
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(f"{res[0]}\n{res[1]}")
            except OSError:
                pass
    return results


def _perf_args(output: str, function: str) -> list[str]:
    """The arguments of perf's definition at ``function+0`` (perf also lists inline copies)."""
    for line in output.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].startswith("p:") and words[1] == f"{function}+0":
            return words[2:]
    raise AssertionError(f"perf gave no definition at {function}+0:\n{output}")


def _btf_args(btf: Btf, definition: str) -> list[str]:
    spec = parse_probe(definition)
    fn = spec.point.function
    out = []
    for arg in spec.args:
        if isinstance(arg.expr, SpecialVar) and arg.expr.name == "params":
            results = [btf_fetch(btf, fn, Variable(n)) for n in btf_params(btf, fn)]
        else:
            results = [btf_fetch(btf, fn, arg.expr, arg.type)]
        for r in results:
            out.append(f"{arg.name or r.default_name}={r.fetch}" + (f":{r.type}" if r.type else ""))
    return out


@pytest.mark.perf
@pytest.mark.vmlinux
@pytest.mark.parametrize("definition", PERF_DEFINITIONS)
def test_entry_arguments_equal_perf(definition, cloud_btf, perf_oracle):
    rc, output = perf_oracle[definition]
    assert rc == 0, f"perf failed on {definition!r}:\n{output}"
    function = parse_probe(definition).point.function
    assert _btf_args(cloud_btf, definition) == _perf_args(output, function)


# perf cannot do these; the BTF results are checked against the DWARF below.
PERF_FAILURES = ["tcp_sendmsg sk->sk_userlocks", "from_kuid kuid.val"]


@pytest.mark.perf
@pytest.mark.vmlinux
def test_where_perf_fails(cloud_btf, perf_oracle):
    for definition in PERF_FAILURES:
        assert perf_oracle[definition][0] != 0, f"perf now handles {definition!r}: compare it above"
    # sk_userlocks is 'u8 sk_userlocks:4' after four 1-bit fields in one byte (DWARF: data_bit_offset
    # 4100 = byte 512, bit 4; test_struct_layouts_equal_dwarf checks every member of struct sock).
    assert _btf_args(cloud_btf, "tcp_sendmsg sk->sk_userlocks") == ["sk_userlocks=+512(%di):b4@4/8"]
    # kuid_t is a 4-byte struct passed by value in the second register; perf refuses structs in registers.
    assert _btf_args(cloud_btf, "from_kuid kuid.val") == ["val=%si:x32"]  # (typed as make_kuid's uid_t uid)


# --- against the vmlinux's DWARF --------------------------------------------------------------------------


class KernelDwarf:
    """Type DIEs of the vmlinux's DWARF, read only where needed: the CU of a function (by .debug_aranges)."""

    def __init__(self, path: Path):
        from elftools.elf.elffile import ELFFile

        from probectl.debuginfo.elf import ElfFile

        self._file = open(path, "rb")
        self.dwarf = ELFFile(self._file).get_dwarf_info(relocate_dwarf_sections=False)
        self.aranges = self.dwarf.get_aranges()
        with ElfFile(path) as elf:
            self.addresses = {s.name: s.value for s in elf.functions()}

    def cu_of(self, function: str):
        return self.dwarf.get_CU_at(self.aranges.cu_offset_at_addr(self.addresses[function]))

    def function(self, name: str):
        for die in self.cu_of(name).get_top_DIE().iter_children():
            a = die.attributes
            if die.tag == "DW_TAG_subprogram" and "DW_AT_name" in a and a["DW_AT_name"].value == name.encode() \
                    and "DW_AT_declaration" not in a:
                return die
        raise AssertionError(f"no DWARF for {name}")

    def aggregates(self, function: str, names: set[str]) -> dict:
        found = {}
        for die in self.cu_of(function).get_top_DIE().iter_children():
            a = die.attributes
            if die.tag in ("DW_TAG_structure_type", "DW_TAG_union_type") and "DW_AT_declaration" not in a \
                    and "DW_AT_name" in a and a["DW_AT_name"].value.decode() in names:
                found[a["DW_AT_name"].value.decode()] = die
                if len(found) == len(names):
                    break
        return found


@pytest.fixture(scope="session")
def kernel_dwarf(cloud_vmlinux):
    pytest.importorskip("elftools")
    return KernelDwarf(cloud_vmlinux)


@pytest.mark.vmlinux
def test_struct_layouts_equal_dwarf(cloud_btf, kernel_dwarf):
    """Every member (anonymous members flattened) of structs used above: offset, bitfield placement and
    type name as the DWARF path computes them. These structs hold over a hundred bitfields."""
    from probectl.debuginfo.dwarf import types as T

    names = {"sock", "sock_common", "sk_buff", "task_struct", "file", "inode", "page", "msghdr", "net_device",
             "tcp_sock", "inet_sock", "request_sock"}
    dies = kernel_dwarf.aggregates("tcp_sendmsg", names)
    assert set(dies) == names
    members = bitfields = 0
    for name, die in dies.items():
        sid = [t for t in cloud_btf.find(name) if t.kind in (B.STRUCT, B.UNION)][0].id
        assert cloud_btf.byte_size(sid) == T.byte_size(die)
        assert cloud_btf.member_names(sid) == T.members(die)
        for m in T.members(die):
            want, got = T.find_member(die, m), cloud_btf.find_member(sid, m)
            assert (got.offset, got.bitfield) == (want.offset, want.bitfield), f"{name}.{m}"
            assert cloud_btf.type_name(got.type) == T.type_name(T.type_of(want.die)), f"{name}.{m}"
            assert cloud_btf.kernel_type(got.type) == T.kernel_type(T.type_of(want.die)), f"{name}.{m}"
            members += 1
            bitfields += want.bitfield is not None
    assert members > 900 and bitfields > 100


RETURN_FUNCTIONS = ["tcp_sendmsg", "tcp_recvmsg", "inet_csk_accept", "__dev_queue_xmit", "tcp_set_state",
                    "vfs_read", "vfs_write", "do_sys_openat2", "ext4_file_write_iter", "vfs_fsync_range",
                    "schedule_timeout", "wake_up_process", "try_to_wake_up", "set_user_nice", "kernel_clone",
                    "__alloc_pages", "kmalloc_trace", "do_mmap", "handle_mm_fault", "kobject_uevent", "from_kuid",
                    "make_kuid", "__kmalloc", "filp_close", "kfree"]


@pytest.mark.vmlinux
def test_return_and_parameter_types_equal_dwarf(cloud_btf, kernel_dwarf):
    from probectl.debuginfo.dwarf import types as T

    for fn in RETURN_FUNCTIONS:
        die = kernel_dwarf.function(fn)
        rtype = T.type_of(die)
        if rtype is None:
            with pytest.raises(VariableUnavailable, match="returns void"):
                btf_retval_type(cloud_btf, fn)
        else:
            r = btf_retval(cloud_btf, fn)
            assert (r.type, r.c_type, r.signed) == (T.kernel_type(rtype), T.type_name(rtype), T.is_signed(rtype)), fn
            assert r.enumerators == tuple(T.enumerators(rtype))
        params = [c for c in die.iter_children() if c.tag == "DW_TAG_formal_parameter"]
        locs = btf_param_locations(cloud_btf, fn)
        assert [p.name for p in locs] == [c.attributes["DW_AT_name"].value.decode() for c in params], fn
        assert [cloud_btf.type_name(p.type) for p in locs] == [T.variable_type_name(c) for c in params], fn


@pytest.mark.vmlinux
def test_return_probes_on_the_cloud_kernel(cloud_btf):
    assert btf_retval_type(cloud_btf, "tcp_sendmsg") == "s32"
    assert btf_retval(cloud_btf, "__alloc_pages").c_type == "struct page*"
    with pytest.raises(VariableUnavailable, match="return of 'tcp_sendmsg'"):
        btf_fetch(cloud_btf, "tcp_sendmsg", _v("size"), at_return=True)
    assert _fetch(cloud_btf, "tcp_sendmsg", "size", at_return=True, options=RETURN_ARGS) == "$arg3:x64"
    assert _fetch(cloud_btf, "tcp_sendmsg", "sk->__sk_common.skc_state", at_return=True,
                  options=RETURN_ARGS) == "+18($arg1):x8"
    assert _fetch(cloud_btf, "do_mmap", "uf", at_return=True, options=RETURN_ARGS) == "$arg8:x64"
    listing = btf_vars_listing(cloud_btf, "tcp_sendmsg")
    assert [(v.c_type, v.name) for v in listing] == [("size_t", "size"), ("struct msghdr*", "msg"),
                                                     ("struct sock*", "sk")]


# --- this machine's kernel ------------------------------------------------------------------------------------

_FETCH = re.compile(r"%(di|si|dx|cx|r8|r9)|\$arg\d+|[+-]u?\d+\((?P<inner>.*)\)")
_TYPE = re.compile(r"|[usx](8|16|32|64)|string|ustring|b\d+@\d+/(8|16|32|64)")


def _well_formed(fetch: str) -> bool:
    m = _FETCH.fullmatch(fetch)
    while m is not None and m.group("inner") is not None:
        inner = m.group("inner")
        if inner == "%sp":
            return True
        m = _FETCH.fullmatch(inner)
    return m is not None


@pytest.mark.parametrize("definition", PERF_DEFINITIONS + PERF_FAILURES)
def test_host_btf_gives_well_formed_arguments(definition, host_btf):
    """Layouts differ from the cloud kernel's, and functions come and go (__alloc_pages is
    __alloc_pages_noprof in 6.10+): whatever resolves must be a well-formed fetch of a plausible type."""
    spec = parse_probe(definition)
    fn = spec.point.function
    for fn in (fn, fn + "_noprof"):     # 6.10 renamed the allocators for allocation profiling
        try:
            host_btf.function(fn)
            break
        except BtfFunctionNotFound:
            pass
    else:
        pytest.skip(f"{spec.point.function} is not in this kernel's BTF")
    resolved = 0
    for arg in spec.args:
        try:
            text = _btf_args(host_btf, f"{fn} {arg.text}")
        except (TypeMismatchError, VariableNotFound) as exc:   # a member or parameter renamed since 6.1
            assert exc.message
            continue
        for item in text:
            _name, _, value = item.partition("=")
            fetch, _, ktype = value.rpartition(":") if ":" in value else (value, "", "")
            assert _well_formed(fetch), item
            assert _TYPE.fullmatch(ktype), item
            resolved += 1
    assert resolved > 0


def test_host_btf_sanity(host_btf):
    assert _fetch(host_btf, "tcp_sendmsg", "size") == "%dx:x64"
    assert re.fullmatch(r"\+\d+\(%di\):x8", _fetch(host_btf, "tcp_sendmsg", "sk->__sk_common.skc_state"))
    assert _fetch(host_btf, "do_sys_openat2", "filename:string") in ("+0(%si):string", "+0(%si):ustring")
    assert btf_retval_type(host_btf, "vfs_read") == "s64"
    sock = host_btf.find("sock", B.STRUCT)[0].id
    size = host_btf.byte_size(sock)
    for name in host_btf.member_names(sock):
        m = host_btf.find_member(sock, name)
        assert 0 <= m.offset < size
        if m.bitfield is not None:
            bf = m.bitfield
            assert bf.shift + bf.bits <= bf.container and m.offset + bf.container // 8 <= size


def test_load_kernel_btf_errors(tmp_path):
    with pytest.raises(ProbectlError, match="does not exist"):
        load_kernel_btf(tmp_path / "nothing")
    with pytest.raises(ProbectlError, match="directory"):
        load_kernel_btf(tmp_path)
    (tmp_path / "junk").write_bytes(b"junk" * 10)
    with pytest.raises(DebugInfoError, match="not BTF data"):
        load_kernel_btf(tmp_path / "junk")
    elf = Path(sys.executable).resolve()
    with pytest.raises(DebugInfoError, match="no .BTF section"):
        load_kernel_btf(elf)


def test_record_offsets_are_cached_by_content(tmp_path, monkeypatch):
    """A kernel's record offsets and name offsets come back from the cache equal to a walk of the
    records; a damaged cache file or other BTF bytes are never read as this BTF's."""
    if not B.KERNEL_BTF.exists():
        missing(f"this kernel has no {B.KERNEL_BTF}")
    data = B.KERNEL_BTF.read_bytes()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    walked = Btf(data)
    walked_names = walked._record_names(walked._words, walked._offsets)
    (stored,) = list((tmp_path / "probectl").glob("btf-records-sha1-*.bin"))
    cached = Btf(data)
    assert cached._name_offs is not None, "the second read takes the name offsets from the cache"
    assert cached._offsets == walked._offsets and cached._name_offs == walked_names
    assert cached.function("vfs_read").name == "vfs_read"
    # Damage the file: it is rebuilt, not read.
    raw = bytearray(stored.read_bytes())
    raw[-5] ^= 0xFF
    stored.write_bytes(bytes(raw))
    again = Btf(data)
    assert again._offsets == walked._offsets and again._name_offs == walked_names
    assert stored.read_bytes() != bytes(raw), "the walk's offsets replaced the damaged file"
    # Other bytes, another key: a BTF differing in one type record does not take these offsets.
    other = bytearray(data)
    hdr_len, type_off = struct.unpack_from("<I", data, 4)[0], struct.unpack_from("<I", data, 8)[0]
    struct.pack_into("<I", other, hdr_len + type_off, 0)  # type 1 loses its name
    assert Btf(bytes(other))._offsets == walked._offsets
    assert len(list((tmp_path / "probectl").glob("btf-records-*.bin"))) == 2
