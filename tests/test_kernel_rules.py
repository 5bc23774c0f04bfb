"""The kernel's rules for definition lines (probectl/probes/kernel_rules.py), checked before anything is
written: a table of lines with the kernel's verdict (each verdict seen on Debian's 6.1 kernel in qemu,
or on this machine's kernel for uprobes), the same rules end to end through ``add -D``. The property
test writing generated uprobe definitions to this machine's tracefs is in tests/live/test_kernel_rules.py
(tests/guest/test_qemu_kprobe_rules.py does the same for kprobes in a qemu guest of the 6.1 kernel)."""
from __future__ import annotations

import functools
import re

import pytest

from probectl.errors import KernelRuleError
from probectl.events import EventDefinition
from probectl.probes.kernel_rules import check_definition
from probectl.tracefs import Features

from tests.helpers import build_fixture, kernel_testdata, probectl as run_probectl

# What Debian's 6.1 kernel's README lists (tests/test_tracefs.py README_61).
KERNEL_61 = Features(kprobe_events=True, uprobe_events=True, dynamic_events=True, x_types=True, multiprobe=True,
                     immediates=True, user_deref=True, ref_ctr=True, symstr=True, kretprobe_offset=True,
                     array_types=True, entry_args=True, error_log=True)
KP = "p:t/e vfs_read+0 "
KR = "r:t/e vfs_read+0 "
UP = "p:t/e /bin/true:0x1000 "

# (line, None if the kernel takes it, else a pattern of probectl's message); kprobe verdicts are the
# 6.1 kernel's in qemu, uprobe verdicts this machine's kernel's.
RULES = [
    (KP + "%ax %bx %cx %dx %si %di %bp %sp %r8 %r15 %ip %flags %cs %ss %orig_ax", None),
    (KP + "%rax", "no register %rax"),
    (KP + "%eax", "no register %eax"),
    (KP + "%ds", "no register %ds"),
    (KP + "%AX", "no register %AX"),
    (KP + "%nosuchreg", "no register"),
    (KP + "$stack0:string", "string is read from memory"),
    (KP + "$stack:string", "string is read from memory"),
    (KP + "%ax:string", "string is read from memory"),
    (KP + "$arg1:string", "string is read from memory"),
    (KP + "%si:u8[2]", "array is read from memory"),
    (KP + "\\1:u8[2]", "array is read from memory"),
    (KP + "\\1:string", None),
    (KP + "$comm", None),
    (KP + "x=$comm:string", None),
    (KP + "$comm:u32", "only as 'string'"),
    (KP + "$comm:ustring", "only as 'string'"),
    (KP + "x=$comm:string[2]", "only as 'string'"),
    (KP + '\\"abc"', None),
    (KP + '\\"abc":u8', "only as 'string'"),
    (KP + "x=+0($comm)", "cannot be dereferenced"),
    (KP + "@+16", "file offset"),
    (KP + "x=@jiffies x=@jiffies-8 y=@jiffies+0x10:ustring", "used by an earlier argument"),
    (KP + "x=@jiffies y=@jiffies-8 z=@jiffies+0x10:ustring", None),
    (KP + "$stack2048 $arg2048", None),
    (KP + "$stack2049", r"\$stack2049 is beyond the kernel stack"),
    (KP + "$arg2049", "argument numbers are 1 to 2048"),
    (KP + "x=$arg0", "argument numbers are 1 to 2048"),
    ("p:t/e vfs_read+4 $arg1", "only known at a function entry"),
    (KR + "$arg1", "return probe needs a kernel"),
    (KR + "$retval $comm", None),
    (KP + "x=$retval", "only known in a return probe"),
    ("r:t/e vfs_read+4 $retval", "must be at a function entry"),
    (KP + "abcdefghijabcdefghijabcdefghijab=%ax", None),
    (KP + "abcdefghijabcdefghijabcdefghijabc=%ax", "33 characters long"),
    (KP + "x=%ax x=%bx", "used by an earlier argument"),
    (KP + "common_pid=%ax", "field every event has"),
    (KP + "__probe_ip=%ax", "field every event has"),
    (KP + "arg2=%ax %bx", "the kernel's name for an unnamed argument"),
    (KP + "_=%ax a=%ax A=%bx", None),
    (KP + "x=+0" + "+" + "1" * 56 + "(%ax)", "characters long; the kernel takes at most 63"),
    (KP + "+0(" * 14 + "%ax" + ")" * 14, None),
    (KP + "+0(" * 15 + "%ax" + ")" * 15, "16 fetch operations; the kernel takes at most 15"),
    (KP + "x=" + "+0(" * 12 + "@jiffies" + ")" * 12, None),
    (KP + "x=" + "+0(" * 13 + "@jiffies" + ")" * 13, "16 fetch operations"),
    (KP + "x=+0(%si):u8[64] y=+0(%si):string[64] z=+0(%si):b3@0/8[2]", None),
    (KP + "x=+0(%si):u8[65]", "1 to 64"),
    (KP + "x=+0(%ax):x8[0]", "1 to 64"),
    (KP + "x=+0(%si):symstr y=%dx:symstr z=$stack1:symstr w=@jiffies:symstr", None),
    (KP + "x=+u0(%si):symstr", "symstr names the symbol"),
    (KP + "x=\\1:symstr", "symstr names the symbol"),
    (KP + "x=+0(%si):symstr[2]", "symstr names the symbol"),
    (KR + "x=$retval:symstr", None),
    (KP + "x=%si:b4@60/64 y=%ax:b64@0/64 z=%ax:b1@0/8", None),
    (KP + "x=%si:b4@61/64", "does not fit its 64-bit container"),
    (KP + "x=%ax:b0@0/8", "does not fit"),
    (KP + "x=%ax:b3@0/24", "no type"),
    (KP + "x=%ax:x642", "no type"),
    (KP + "x=%ax:char", "does not list the char type"),
    (KP + "x=%ax:%pd", "does not list the %pd/%pD types"),
    (KP + "x=\\-1 y=\\0x10 z=\\18446744073709551615", None),
    (KP + "x=\\abc", "not an immediate value"),
    (KP + "x=\\18446744073709551616", "not an immediate value"),
    (KP + "x=+2147483647(%si)", None),
    (KP + "x=+2147483648(%si)", "32-bit dereference offsets"),
    (KP + "x=+4294967296(%si)", "32-bit dereference offsets"),
    (KP + "x=-2147483649(%si)", "32-bit dereference offsets"),
    (KP + "x=+u0(%si):string y=+u-8(%sp) z=-u8(%sp) w=+0x10(%sp) v=+010(%sp)", None),
    (KP + "x=@0x1000 y=%ip:x64 z=+0(%ip):x64", None),
    (KP + "x=@0x10+4", "not a memory address"),
    (UP + "x=$stack2049 y=+u0(%sp) z=@+16:string w=%ax:b4@60/64", None),
    (UP + "x=$arg1", "for kprobes"),
    (UP + "x=+u0(%sp):u8[4]", "arrays of numbers only from"),
    (UP + "x=+u0(%sp):b3@0/8[2]", "arrays of numbers only from"),
    (UP + "x=+u0(%sp):string[2] y=+0(+u0(%sp)):u8[4] z=@0x1000:u8[4]", None),
    (UP + "x=@jiffies", "for kprobes"),
    (UP + "x=+0(%sp):symstr", "for kprobes"),
    (UP + "x=%ax:symbol", "for kprobes"),
    (UP + "x=+0(%ax):%pd", "for kprobes"),
]


@pytest.mark.parametrize("line,refused", RULES, ids=[line[len(KP):] for line, _ in RULES])
def test_rule(line, refused):
    d = EventDefinition.parse(line, is_uprobe=line.startswith(UP))
    if refused is None:
        check_definition(d, KERNEL_61)
    else:
        with pytest.raises(KernelRuleError, match=refused):
            check_definition(d, KERNEL_61)


def test_readme_features_refine_the_rules():
    """A form the running kernel's README does not list is refused, naming the feature."""
    old = Features(kprobe_events=True)
    for line, feature in [(KP + "x=+u0(%si)", r"\+u<offset>"), (KP + "x=\\1", r"\\imm-value"),
                          (KP + "x=%ax:x32", "x8/16/32/64"), (KP + "x=+0(%si):u8[2]", "array types"),
                          (KP + "x=+0(%si):symstr", "symstr"), (KP + "$arg1", r"\$arg<N>")]:
        d = EventDefinition.parse(line)
        with pytest.raises(KernelRuleError, match=f"README does not list.*{feature}"):
            check_definition(d, old)
        check_definition(d, KERNEL_61)


def test_the_error_points_at_the_argument():
    d = EventDefinition.parse(KP + "ok=%ax bad=%rax")
    with pytest.raises(KernelRuleError) as err:
        check_definition(d, None)
    text = str(err.value).splitlines()
    assert text[0].startswith("argument 2 (bad=%rax): the kernel knows no register %rax")
    assert text[2].index("^") - 2 == text[1].index("%rax") - 2 + 0, text


def test_a_long_line_shows_an_excerpt():
    d = EventDefinition.parse(KP + " ".join(f"a{i}=%ax" for i in range(60)) + " bad=%rax")
    with pytest.raises(KernelRuleError) as err:
        check_definition(d, None)
    _, shown, caret = str(err.value).splitlines()
    assert len(shown) < 120 and shown.strip().startswith("...")
    assert shown[caret.index("^"):].startswith("%rax")


def test_names_are_c_identifiers():
    from probectl.events import FetchArg

    d = EventDefinition("p", "t", "e", "vfs_read+0", (FetchArg("%ax", "9x"),))
    with pytest.raises(KernelRuleError, match="the name '9x' is not a C identifier"):
        check_definition(d, None)


def limit_lines(head: str = KP) -> tuple[str, str]:
    """A kprobe line of 4094 characters and one of 4095, of valid arguments."""
    base = head.rstrip()
    while len(base) < 4094 - 60:
        base += f" n{len(base):04d}{'_' * 27}=+1111111111(%ax):u64"
    filler = 4094 - len(base) - 1
    assert 3 < filler < 60
    return base + " z=" + "\\" + "0" * (filler - 3), base + " z=" + "\\" + "0" * (filler - 2)


def test_the_line_limit_is_4094_characters():
    ok_line, too_long_line = limit_lines()
    ok = EventDefinition.parse(ok_line)
    assert len(ok.render()) == 4094
    check_definition(ok, KERNEL_61)
    too_long = EventDefinition.parse(too_long_line)
    with pytest.raises(KernelRuleError, match="4095 characters long; the kernel takes lines of at most 4094"):
        check_definition(too_long, KERNEL_61)


# --- end to end: add -D -----------------------------------------------------------------------------


probectl = functools.partial(run_probectl, check=False, timeout=120)


@pytest.fixture(scope="module")
def structs():
    return str(build_fixture("dwarf_structs"))


def test_automatic_names_are_unique(structs):
    out = probectl("add", "-D", "-x", structs, "paint w->id w->next->id w->next->next->id id_1=scale")
    assert out.returncode == 0, out.stderr
    names = [a.split("=")[0] for a in out.stdout.split()[2:]]
    assert names == ["id", "id_2", "id_3", "id_1"], "perf's dedupe, avoiding the name the user gave"


def test_automatic_names_are_c_identifiers(structs):
    out = probectl("add", "-D", "-x", structs, "use_globals gbuf:u8[16] counter:x32")
    assert out.returncode == 0, out.stderr
    assert " gbuf_u8_16_=" in out.stdout and " counter_x32=" in out.stdout, out.stdout


@pytest.mark.parametrize("arg,message", [
    ("%rax", "no register %rax"),
    ("%eax", "no register %eax"),
    ("%nosuchreg", "no register %nosuchreg"),
    ("$stack0:string", "string is read from memory"),
    ("$comm:u32", "only as 'string'"),
    ("abcdefghijabcdefghijabcdefghijabc=w->id", "33 characters long"),
    ("@+16 arg1=%ax", "the name 'arg1' is used by an earlier argument"),
])
def test_add_d_refuses_what_the_kernel_refuses(structs, arg, message):
    out = probectl("add", "-D", "-x", structs, f"paint {arg}")
    assert out.returncode == 1 and out.stdout == ""
    assert message in out.stderr and "^" in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_struct_wider_than_64_bits_is_an_error(structs):
    """perf cuts it to x64 with an info message; probectl says what to do instead."""
    out = probectl("add", "-D", "-x", structs, "by_value wv")
    assert out.returncode == 1
    assert "'wv' is a struct widget of 200 bytes; a probe argument holds at most 8" in out.stderr
    assert "Hint: fetch a member of it (wv.MEMBER)" in out.stderr
    out = probectl("add", "-D", "-x", structs, "by_value wv.id p wv:x64")
    assert out.returncode == 0 and " id=" in out.stdout and " wv_x64=+16(%bp):x64" in out.stdout, out.stderr
    out = probectl("add", "-D", "-x", structs, "by_value $vars")
    assert out.returncode == 0 and " wv=" not in out.stdout and " p=" in out.stdout
    assert "'wv' is a struct widget of 200 bytes" in out.stderr and "$vars leaves it out" in out.stderr


def test_too_many_arguments_for_one_line(structs):
    args = " ".join(f"v{i:03d}_{'x' * 26}=w->next->next->label:string" for i in range(100))
    out = probectl("add", "-D", "-x", structs, f"paint {args}")
    assert out.returncode == 1 and "the kernel takes lines of at most 4094" in out.stderr, out.stderr


def test_user_on_an_explicit_dereference_reads_user_memory():
    vmlinux = kernel_testdata("vmlinux")
    out = probectl("add", "-D", "-k", str(vmlinux),
                   "vfs_read +0(%si):string@user +8(+0(%si)):u32@user +0(%si):string")
    assert out.returncode == 0, out.stderr
    args = out.stdout.split()[2:]
    assert args == ["+u0(%si):string", "+u8(+u0(%si)):u32", "+0(%si):string"]


def test_kprobe_only_and_uprobe_only_forms(structs):
    vmlinux = str(kernel_testdata("vmlinux"))
    out = probectl("add", "-D", "-k", vmlinux, "vfs_read @+16")
    assert out.returncode == 1 and "a file offset (@+OFFSET) is for uprobes" in out.stderr
    out = probectl("add", "-D", "-k", vmlinux, "vfs_read $stack2049")
    assert out.returncode == 1 and "beyond the kernel stack" in out.stderr
    out = probectl("add", "-D", "-x", structs, "paint $stack2049 x=+0(%sp):u8[4]")
    assert out.returncode == 0, out.stderr


def test_automatic_names_are_fitted_to_the_kernel():
    """Names made from expressions become C identifiers of at most 32 characters, unique, avoiding the
    given names, the reserved fields and the kernel's argN of unnamed arguments; given names stay."""
    from probectl.probes.naming import argument_names
    from probectl.resolve.points import ResolvedArg

    long = "a_very_long_variable_name_of_a_program_u8[16]"
    args = (ResolvedArg("%ax", name=long), ResolvedArg("%bx", name=long), ResolvedArg("%cx"),
            ResolvedArg("%dx", name="arg3"), ResolvedArg("%si", name="x", named=True),
            ResolvedArg("%di", name="x"), ResolvedArg("%bp", name="common_pid"), ResolvedArg("%sp", name="9lives"))
    names = argument_names(args)
    assert names == ["a_very_long_variable_name_of_a_p", "a_very_long_variable_name_of_a_1", "", "arg3_1", "x",
                     "x_1", "common_pid_1", "_9lives"]
    assert all(len(n) <= 32 for n in names)


@pytest.mark.parametrize("source", ["dwarf", "btf"])
def test_a_c_index_past_32_bits_is_refused_on_kprobes(source):
    """pos is a loff_t *: pos[268435456] is 2 GiB past it, an offset the kernel would wrap."""
    vmlinux = str(kernel_testdata("vmlinux"))
    extra = ["--btf"] if source == "btf" else []
    out = probectl("add", "-D", *extra, "-k", vmlinux, "vfs_read pos[268435455]")
    assert out.returncode == 0 and "+2147483640(%cx)" in out.stdout, out.stderr
    out = probectl("add", "-D", *extra, "-k", vmlinux, "vfs_read pos[268435456]")
    assert out.returncode == 1
    assert "'pos[268435456]' cannot be fetched" in out.stderr and "32-bit dereference offsets" in out.stderr
