"""Hypothesis strategies for random probe definitions: functions, C expressions, registers (the kernel's
and others), $-variables, immediates, addresses, nested dereferences, types and argument names, valid
and not. The property tests (tests/test_kernel_rules.py for uprobes on this machine's kernel,
tests/guest/test_qemu_kprobe_rules.py for kprobes in a qemu guest) resolve each with probectl and ask the
real kernel whether the line ``-D`` prints, or the line probectl refuses, is accepted."""
from __future__ import annotations

from hypothesis import strategies as st

from probectl.arch.x86_64 import KERNEL_REGISTERS

REGISTERS = sorted(KERNEL_REGISTERS) + ["rax", "eax", "ds", "es", "gs", "rip", "r16", "AX", "nosuchreg"]
SPECIALS = ["$stack", "$stack0", "$stack3", "$stack2048", "$stack2049", "$comm", "$retval", "$arg1",
            "$arg2", "$arg6"]
IMMEDIATES = ["\\5", "\\-3", "\\0x10", "\\077", '\\"hi"', '\\"x_y"']
TYPES = ["u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64", "x8", "x16", "x32", "x64", "string", "ustring",
         "symbol", "symstr", "char", "b4@60/64", "b4@61/64", "b3@0/8", "b1@7/8", "b12@4/16", "u8[4]", "x32[64]",
         "s16[3]", "string[2]", "%pd"]
OFFSETS = [0, 8, -8, 16, 0x7FFFFFF8, 2**31 - 1]
NAMES = ["x", "y", "id", "val", "arg1", "arg2", "arg3", "_a", "a" * 32, "b" * 33, "a" * 31 + "_"]

# C expressions of the fixtures/dwarf_structs.c functions, by function (%return probes take raw
# fetches and $retval only).
GLOBALS = ["counter", "big_counter", "hidden", "greeting:string", "gbuf", "gbuf:string", "gbuf:u8[16]",
           "global_widget.id", "global_widget.name", "gptr->x", "@counter", "@gbuf+4", "@+0x10"]
UPROBE_EXPRS = {
    "paint": ["w", "w->id", "w->next->id", "w->next->next->id", "w->name", "w->label", "w->label:string",
              "w->name:string", "w->origin", "w->origin.x", "w->pts", "w->pts[1].y", "w->values[3]",
              "w->values[268435455]", "w->values[268435456]", "w->u", "w->u.bytes[2]", "w->fl.mode",
              "w->fl.delta", "w->raw", "w->raw:u8[8]", "w->corner->y", "scale", "$params", "$vars", *GLOBALS],
    "check_bits": ["pb", "pb->straddle", "pb->high", "pb->head", "fl->ready", "fl->wide", "fl", "$params"],
    "by_value": ["p", "p.x", "wv", "wv.id", "wv.name:string", "wv.values[2]", "m", "$vars"],
    "vla_sum": ["n", "$vars", *GLOBALS],
    "use_globals": ["add", "$params", *GLOBALS],
    "paint%return": ["$retval", "$retval:s32", "$retval:string"],
    "use_globals%return": ["$retval", "$retval:x16", "@counter"],
}

# Kernel functions of the 6.1 cloud kernel and C expressions over their parameters.
KPROBE_EXPRS = {
    "vfs_read": ["file", "buf", "count", "pos", "file->f_pos", "file->f_flags", "file->f_path.dentry->d_iname",
                 "file->f_path.dentry->d_name.name:string", "file->f_path", "file->f_inode->i_ino",
                 "file->f_cred->uid.val", "buf:string", "buf:ustring", "$params", "@jiffies", "@jiffies+8",
                 "@+16", "@0x1000"],
    "tcp_sendmsg": ["sk", "msg", "size", "sk->__sk_common.skc_state", "sk->__sk_common", "msg->msg_flags",
                    "$params"],
    "do_sys_openat2": ["dfd", "filename:string", "filename:ustring", "how->flags", "how", "$params"],
    "vfs_read%return": ["$retval", "$retval:s64", "@jiffies"],
    "tcp_sendmsg%return": ["$retval", "$retval:x32"],
    "vfs_read+4": ["$stack1", "@jiffies"],
}


def _deref(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def render(off: int, user: bool, text: str) -> str:
        sign = "-" if off < 0 else "+"
        return f"{sign}{'u' if user else ''}{abs(off)}({text})"
    return st.builds(render, st.sampled_from(OFFSETS), st.booleans(), inner)


def raw_fetches() -> st.SearchStrategy[str]:
    """Register, $-variable, immediate and address fetches, possibly dereferenced a few times."""
    base = st.one_of(st.sampled_from(["%" + r for r in REGISTERS]), st.sampled_from(SPECIALS),
                     st.sampled_from(IMMEDIATES))
    return st.recursive(base, _deref, max_leaves=4)


def _argument(name, fetch, typ, user) -> str:
    text = f"{name}={fetch}" if name else fetch
    if typ and ":" not in fetch.rsplit(")", 1)[-1]:
        text += ":" + typ
    return text + ("@user" if user else "")


def definitions(exprs: dict[str, list[str]]) -> st.SearchStrategy[str]:
    """``FUNC ARG...`` with one to four arguments (raw fetches or C expressions of FUNC), each name
    given at most once (the grammar refuses a name given twice before any kernel rule)."""
    @st.composite
    def build(draw):
        function = draw(st.sampled_from(sorted(exprs)))
        fetch = st.one_of(raw_fetches(), st.sampled_from(exprs[function]))
        parts = st.tuples(st.one_of(st.none(), st.none(), st.sampled_from(NAMES)), fetch,
                          st.one_of(st.none(), st.none(), st.sampled_from(TYPES)),
                          st.sampled_from([False, False, False, True]))
        args = draw(st.lists(parts, min_size=1, max_size=4, unique_by=lambda p: p[0] or object()))
        return " ".join([function, *(_argument(*a) for a in args)])
    return build()
