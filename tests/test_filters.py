"""Event filters: the grammar (every operator and form, exact error columns), checks against real
format files of a 6.18 kernel, rendering of probectl's extensions to kernel syntax, fuzzing.
Filters written to a private tracefs instance (the kernel accepts what probectl renders, keeps
exactly the matching events, and its own parse error is shown when it refuses one) are live tests:
tests/live/test_filters.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from probectl.errors import ProbectlError, ProbeSyntaxError
from probectl.filters import (
    And, CpuList, Filter, FilterError, MAX_FILTER_BYTES, Not, Or, Predicate,
    StringValue, Term, Terms, compile_filter, parse_filter, print_fmt_symbols,
)
from probectl.formats import EventFormat

DATA = Path(__file__).parent / "data" / "formats"

# Format files copied from this project's 6.18 test machine (print formats shortened).
OPENAT = """name: sys_enter_openat
ID: 782
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;
\tfield:int dfd;\toffset:16;\tsize:8;\tsigned:0;
\tfield:const char * filename;\toffset:24;\tsize:8;\tsigned:0;
\tfield:int flags;\toffset:32;\tsize:8;\tsigned:0;
\tfield:umode_t mode;\toffset:40;\tsize:8;\tsigned:0;

print fmt: "dfd: 0x%08lx, filename: 0x%08lx, flags: 0x%08lx, mode: 0x%08lx", ((unsigned long)(REC->dfd)), ((unsigned long)(REC->filename)), ((unsigned long)(REC->flags)), ((unsigned long)(REC->mode))
"""

INET_SOCK_SET_STATE = """name: inet_sock_set_state
ID: 1613
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:const void * skaddr;\toffset:8;\tsize:8;\tsigned:0;
\tfield:int oldstate;\toffset:16;\tsize:4;\tsigned:1;
\tfield:int newstate;\toffset:20;\tsize:4;\tsigned:1;
\tfield:__u16 sport;\toffset:24;\tsize:2;\tsigned:0;
\tfield:__u16 dport;\toffset:26;\tsize:2;\tsigned:0;
\tfield:__u16 family;\toffset:28;\tsize:2;\tsigned:0;
\tfield:__u16 protocol;\toffset:30;\tsize:2;\tsigned:0;
\tfield:__u8 saddr[4];\toffset:32;\tsize:4;\tsigned:0;
\tfield:__u8 daddr[4];\toffset:36;\tsize:4;\tsigned:0;
\tfield:__u8 saddr_v6[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:__u8 daddr_v6[16];\toffset:56;\tsize:16;\tsigned:0;

print fmt: "family=%s protocol=%s sport=%hu dport=%hu oldstate=%s newstate=%s", __print_symbolic(REC->family, { 2, "AF_INET" }, { 10, "AF_INET6" }), __print_symbolic(REC->protocol, { 6, "IPPROTO_TCP" }, { 132, "IPPROTO_SCTP" }, { 262, "IPPROTO_MPTCP" }), REC->sport, REC->dport, __print_symbolic(REC->oldstate, { 1, "TCP_ESTABLISHED" }, { 2, "TCP_SYN_SENT" }, { 7, "TCP_CLOSE" }, { 10, "TCP_LISTEN" }), __print_symbolic(REC->newstate, { 1, "TCP_ESTABLISHED" }, { 2, "TCP_SYN_SENT" }, { 7, "TCP_CLOSE" }, { 10, "TCP_LISTEN" })
"""

KMALLOC = """name: kmalloc
ID: 658
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long call_site;\toffset:8;\tsize:8;\tsigned:0;
\tfield:const void * ptr;\toffset:16;\tsize:8;\tsigned:0;
\tfield:size_t bytes_req;\toffset:24;\tsize:8;\tsigned:0;
\tfield:size_t bytes_alloc;\toffset:32;\tsize:8;\tsigned:0;
\tfield:unsigned long gfp_flags;\toffset:40;\tsize:8;\tsigned:0;
\tfield:int node;\toffset:48;\tsize:4;\tsigned:1;

print fmt: "call_site=%pS bytes_req=%zu gfp_flags=%s", (void *)REC->call_site, REC->bytes_req, (REC->gfp_flags) ? __print_flags(REC->gfp_flags, "|", {( unsigned long)((( gfp_t)(((((1UL))) << (10))|((((1UL))) << (11)))) | (( gfp_t)((((1UL))) << (6))) | (( gfp_t)((((1UL))) << (7)))), "GFP_KERNEL"}, {( unsigned long)(( gfp_t)((((1UL))) << (0))), "__GFP_DMA"}, {( unsigned long)(( gfp_t)((((1UL))) << (22))), "__GFP_ACCOUNT"}, { 0, ((void *)0) } ) : "none"
"""

IPI_SEND_CPUMASK = """name: ipi_send_cpumask
ID: 353
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:__data_loc cpumask_t cpumask;\toffset:8;\tsize:4;\tsigned:0;
\tfield:void * callsite;\toffset:16;\tsize:8;\tsigned:0;
\tfield:void * callback;\toffset:24;\tsize:8;\tsigned:0;

print fmt: "cpumask=%s callsite=%pS callback=%pS", __get_cpumask(cpumask), REC->callsite, REC->callback
"""

# A uprobe event with a string, a bool, an unsigned byte and a dynamic array.
UPROBE = """name: probe_target
ID: 2400
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] name;\toffset:16;\tsize:4;\tsigned:1;
\tfield:u8 level;\toffset:20;\tsize:1;\tsigned:0;
\tfield:bool ready;\toffset:21;\tsize:1;\tsigned:0;
\tfield:s16 delta;\toffset:22;\tsize:2;\tsigned:1;
\tfield:__data_loc u64[] samples;\toffset:24;\tsize:4;\tsigned:0;
\tfield:u32 state;\toffset:28;\tsize:4;\tsigned:0;

print fmt: "(%lx) name=\\"%s\\" level=%u", REC->__probe_ip, __get_str(name), REC->level
"""


def _golden(name: str, system: str) -> EventFormat:
    return EventFormat.parse((DATA / name).read_text(), system)


SCHED_SWITCH = _golden("sched_switch.format", "sched")
SYS_ENTER_READ = _golden("sys_enter_read.format", "syscalls")
SYS_ENTER_OPENAT = EventFormat.parse(OPENAT, "syscalls")
SOCK_STATE = EventFormat.parse(INET_SOCK_SET_STATE, "sock")
KMEM_KMALLOC = EventFormat.parse(KMALLOC, "kmem")
IPI_CPUMASK = EventFormat.parse(IPI_SEND_CPUMASK, "ipi")
PROBE = EventFormat.parse(UPROBE, "probe_target")

STATES = {"RUNNING": 0, "SLEEPING": 1, "STOPPED": 3, "NEGATIVE": -2}
FLAGS = {"F_READ": 1, "F_WRITE": 2, "F_BIG": 0x400000}


def probe_enums(field: str):
    return {"state": STATES, "level": FLAGS, "delta": STATES}.get(field)


def kernel_text(text: str, fmt: EventFormat = SCHED_SWITCH, **kw) -> str:
    return compile_filter(text, fmt, **kw).text


def syntax_error(text: str) -> ProbeSyntaxError:
    with pytest.raises(ProbeSyntaxError) as info:
        parse_filter(text)
    return info.value


def filter_error(text: str, fmt: EventFormat = SCHED_SWITCH, **kw) -> FilterError:
    with pytest.raises(FilterError) as info:
        compile_filter(text, fmt, **kw)
    return info.value


# ---------------------------------------------------------------------------------------------
# Parsing
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">=", "&", "~"])
def test_every_operator_parses(op):
    tree = parse_filter(f"field {op} 1")
    assert tree == Predicate("field", "", op, Terms((Term("1", len(f"field {op} ")),)), 0, 6)


def test_operators_without_spaces():
    assert parse_filter("a<=1") == Predicate("a", "", "<=", Terms((Term("1", 3),)), 0, 1)
    assert parse_filter("a!=-1").value == Terms((Term("-1", 3),))
    assert parse_filter("a&0x4").op == "&"


def test_values():
    assert parse_filter('c == "a b"').value == StringValue("a b", '"', 5)
    assert parse_filter("c == 'say \"hi\"'").value == StringValue('say "hi"', "'", 5)
    assert parse_filter('c == ""').value == StringValue("", '"', 5)
    assert parse_filter("c ~ *sh*").value == Terms((Term("*sh*", 4),))
    assert parse_filter("c ~ [a-z]?x").value == Terms((Term("[a-z]?x", 4),))
    assert parse_filter("cpu & CPUS{0-3,8}").value == CpuList("0-3,8", 6)
    assert parse_filter("f & A|B|0x4").value == Terms((Term("A", 4), Term("B", 6), Term("0x4", 8)))
    assert parse_filter("f == 0X1F").value == Terms((Term("0X1F", 5),))
    assert parse_filter("f > 1.5MiB").value == Terms((Term("1.5MiB", 4),))
    assert parse_filter("a == 127.0.0.1").value == Terms((Term("127.0.0.1", 5),))
    assert parse_filter("a.function == ksys_read.cold").value == Terms((Term("ksys_read.cold", 14),))


def test_field_suffixes():
    assert parse_filter("buf.ustring ~ \"x\"").suffix == "ustring"
    pred = parse_filter("call_site.function == f")
    assert (pred.field, pred.suffix) == ("call_site", "function")


def _eq1(field: str, column: int) -> Predicate:
    """``FIELD == 1`` parsed at ``column``."""
    return Predicate(field, "", "==", Terms((Term("1", column + len(field) + 4),)), column, column + len(field) + 1)


def test_precedence_and_grouping():
    assert parse_filter("a == 1 || b == 1 && c == 1") == Or((_eq1("a", 0), And((_eq1("b", 10), _eq1("c", 20)))))
    assert parse_filter("(a == 1 || b == 1) && c == 1") == And((Or((_eq1("a", 1), _eq1("b", 11))), _eq1("c", 22)))
    assert parse_filter("a == 1 && b == 1 && c == 1") == And((_eq1("a", 0), _eq1("b", 10), _eq1("c", 20)))
    assert parse_filter("a == 1 || b == 1 || c == 1") == Or((_eq1("a", 0), _eq1("b", 10), _eq1("c", 20)))
    assert parse_filter("((a == 1))") == _eq1("a", 2)


def test_negation():
    assert parse_filter("!(a == 1 || b == 1)") == Not(Or((_eq1("a", 2), _eq1("b", 12))), 0)
    assert parse_filter("!!a == 1") == Not(Not(_eq1("a", 2), 1), 0)
    assert parse_filter("a == 1 && !b == 1") == And((_eq1("a", 0), Not(_eq1("b", 11), 10)))
    assert parse_filter("a != 1").op == "!="  # '!=' is the operator, not a negation


@pytest.mark.parametrize("text, column, message", [
    ("", 0, "empty filter"),
    ("   ", 0, "empty filter"),
    ("a", 1, "unexpected end of the filter: expected an operator"),
    ("a ==", 4, "expected a value"),
    ("a == 1 &&", 9, "expected a field name"),
    ("a == 1 && ", 10, "expected a field name"),
    ("(a == 1", 0, "this '(' is never closed"),
    ("x == 1 && (a == 1 || (b == 2)", 10, "this '(' is never closed"),
    ("a == 1)", 6, "unbalanced ')'"),
    ("a == 1 b == 2", 7, "unexpected 'b': expected '&&' or '||'"),
    ("(a == 1 b == 2)", 8, "unexpected 'b': expected '&&', '||' or ')'"),
    ("a == 1 & b == 2", 7, "unexpected '&'"),
    ("1 == a", 0, "expected a field name"),
    ('"a" == a', 0, "unexpected '\"a\"': expected a field name"),
    ("a 1", 2, "expected an operator"),
    ("a && b", 2, "expected an operator"),
    ("a = 1", 2, "'=' is not an operator: use '=='"),
    ("a === 1", 4, "unexpected '='"),
    ('a == "x', 5, 'missing closing " for this string'),
    ("a == 'x", 5, "missing closing ' for this string"),
    ('a == "x"y', 8, "unexpected 'y': expected '&&' or '||'"),
    ('a == "x"y"', 8, "unexpected 'y'"),
    ("a == CPUS{1", 11, "missing '}'"),
    ("a == 1 | | 2", 9, "expected a number or a name after '|'"),
    ("a == 1 |", 8, "expected a number or a name after '|'"),
    ("!", 1, "expected a field name"),
    ("()", 1, "unexpected ')': expected a field name"),
    ("(a == 1 && ())", 12, "unexpected ')': expected a field name"),
    ("(a == 1))", 8, "unbalanced ')'"),
    ("a == 1 ||| b == 2", 9, "unexpected '|'"),
    ("a. == 1", 2, "expected a suffix after '.'"),
    ("a == 1\x00", 6, "invalid character U+0000"),
    ("a == \x1b[1m", 5, "invalid character U+001B"),
])
def test_syntax_errors(text, column, message):
    err = syntax_error(text)
    assert message in err.message
    assert err.column == column
    assert str(err).splitlines()[-1] == "  " + " " * column + "^"


def test_syntax_error_display_keeps_columns_with_tabs():
    err = syntax_error("a ==\t1 b")
    assert err.column == 7
    assert err.text == "a == 1 b"


def test_nesting_limit():
    # parentheses alone add no depth (the kernel takes 1000 levels too)
    assert isinstance(parse_filter("(" * 1000 + "a == 1" + ")" * 1000), Predicate)
    err = syntax_error("!" * 150 + "a == 1")
    assert "nests too deeply" in err.message and err.column == 100
    text = "a == 1"
    for level in range(120):
        text = f"a == 1 {'&&' if level % 2 else '||'} ({text})"
    err = syntax_error(text)
    assert "nests too deeply" in err.message and err.column == 100 * len("a == 1 && (")


# ---------------------------------------------------------------------------------------------
# Checking against real formats and rendering
# ---------------------------------------------------------------------------------------------

def test_plain_kernel_filters_pass_through():
    assert kernel_text("prev_pid == 1") == "prev_pid == 1"
    assert kernel_text("prev_pid==1&&next_pid!=2") == "prev_pid == 1 && next_pid != 2"
    assert kernel_text('prev_comm ~ "*sh*" || next_comm == \'bash\'') == 'prev_comm ~ "*sh*" || next_comm == \'bash\''
    assert kernel_text("prev_prio < 120 && prev_prio >= 100 && next_prio <= 5 && next_prio > -5") == \
        "prev_prio < 120 && prev_prio >= 100 && next_prio <= 5 && next_prio > -5"
    assert kernel_text("prev_state & 0x2") == "prev_state & 0x2"
    assert kernel_text("count == 0644", SYS_ENTER_READ) == "count == 0644"
    assert kernel_text("prev_pid == -0x10") == "prev_pid == -0x10"
    assert kernel_text("prev_pid == 0X1F") == "prev_pid == 0x1f"


def test_rendering_keeps_precedence():
    assert kernel_text("(prev_pid == 1 || next_pid == 2) && prev_prio < 3") == \
        "(prev_pid == 1 || next_pid == 2) && prev_prio < 3"
    assert kernel_text("prev_pid == 1 || (next_pid == 2 && prev_prio < 3)") == \
        "prev_pid == 1 || next_pid == 2 && prev_prio < 3"
    assert kernel_text("((prev_pid == 1))") == "prev_pid == 1"
    assert kernel_text("!(prev_pid == 1 || next_pid == 2)") == "!(prev_pid == 1 || next_pid == 2)"
    assert kernel_text("!prev_pid == 1") == "!(prev_pid == 1)"
    assert kernel_text("!!(prev_pid == 1)") == "!(!(prev_pid == 1))"


def test_common_and_generic_fields():
    assert kernel_text("common_pid == 42 && common_flags & 0x1 && common_preempt_count < 2") == \
        "common_pid == 42 && common_flags & 0x1 && common_preempt_count < 2"
    assert kernel_text("CPU == 1 || cpu != 0 || common_cpu < 2") == "CPU == 1 || cpu != 0 || common_cpu < 2"
    assert kernel_text("COMM ~ bash || comm == 'sh'") == "COMM ~ \"bash\" || comm == 'sh'"
    flt = compile_filter("common_pid == 1 && prev_comm ~ x* && common_pid != 2 && CPU == 0", SCHED_SWITCH)
    assert flt.fields == ("common_pid", "prev_comm", "CPU")
    assert flt.source == "common_pid == 1 && prev_comm ~ x* && common_pid != 2 && CPU == 0"


def test_unknown_field_lists_fields_with_did_you_mean():
    err = filter_error("prev_pdi == 1")
    assert err.message == "sched:sched_switch has no field 'prev_pdi'"
    assert err.column == 0
    assert err.hint.startswith("did you mean prev_pid")
    for name in ("prev_comm", "next_prio", "common_pid", "CPU", "COMM"):
        assert name in err.hint
    err = filter_error("fd == 1 && cuont > 3", SYS_ENTER_READ)
    assert err.column == 11 and "did you mean count" in err.hint
    assert "did you mean PREV_PID" not in filter_error("PREV_PID == 1").hint
    assert "did you mean prev_pid" in filter_error("PREV_PID == 1").hint


def test_operator_must_suit_the_field():
    err = filter_error("prev_pid ~ \"1*\"")
    assert err.column == 9 and "'~' matches strings, and prev_pid is a number (pid_t, signed 4-byte)" in err.message
    for op in ("<", "<=", ">", ">=", "&"):
        err = filter_error(f'prev_comm {op} "a"')
        assert err.column == 10 and f"'{op}' does not apply to the string prev_comm" in err.message
    err = filter_error('filename > "a"', SYS_ENTER_OPENAT)
    assert "does not apply to the string filename (const char *)" in err.message
    err = filter_error('COMM & 1')
    assert "does not apply to the string COMM" in err.message


def test_value_must_suit_the_field():
    err = filter_error('prev_pid == "1"')
    assert err.column == 12 and "prev_pid is a number" in err.message
    err = filter_error("prev_comm == CPUS{1}")
    assert "CPUS{...} needs a number or cpumask field" in err.message
    err = filter_error("prev_comm == a|b")
    assert err.column == 14 and "'|' joins numbers" in err.message
    err = filter_error("prev_pid == next_pid")
    assert err.column == 12 and "next_pid is a field" in err.message


@pytest.mark.parametrize("text, fmt, column, message", [
    ("common_flags == 300", SCHED_SWITCH, 16, "300 is out of range for common_flags (unsigned char, unsigned 1-byte: 0..255)"),
    ("common_flags == -1", SCHED_SWITCH, 16, "-1 is out of range for common_flags"),
    ("common_type > 0x10000", SCHED_SWITCH, 14, "0x10000 (= 65536) is out of range for common_type"),
    ("prev_pid == 2147483648", SCHED_SWITCH, 12, "out of range for prev_pid (pid_t, signed 4-byte: -2147483648..2147483647)"),
    ("prev_pid > -2147483649", SCHED_SWITCH, 11, "out of range"),
    ("count == -1", SYS_ENTER_READ, 9, "-1 is out of range for count (size_t, unsigned 8-byte: 0..18446744073709551615)"),
    ("count == 18446744073709551616", SYS_ENTER_READ, 9, "out of range"),
    ("count > 16E", SYS_ENTER_READ, 10, "'E' is not a size unit"),
    ("count > 16T && count < 16777216T", SYS_ENTER_READ, 23, "out of range"),
    ("level == 256", PROBE, 9, "out of range for level (u8, unsigned 1-byte: 0..255)"),
    ("delta < -32769", PROBE, 8, "out of range for delta (s16, signed 2-byte"),
])
def test_numbers_must_fit_the_field(text, fmt, column, message):
    err = filter_error(text, fmt)
    assert message in err.message
    assert err.column == column


def test_bit_patterns_on_signed_fields():
    # The kernel reads a signed field's value with kstrtoll: 0xffffffffffffffff would be refused,
    # and 0xffffffff on an int means -1 anyway.
    assert kernel_text("prev_pid == 0xffffffff") == "prev_pid == -1"
    assert kernel_text("prev_state == 0xffffffffffffffff") == "prev_state == -1"
    assert kernel_text("prev_state & 0x8000000000000000") == "prev_state & -9223372036854775808"
    assert kernel_text("prev_state == 0x7fffffffffffffff") == "prev_state == 0x7fffffffffffffff"
    assert "out of range" in filter_error("prev_pid == 4294967295").message  # decimal is a value, not bits


def test_negative_syscall_argument_hint():
    err = filter_error("dfd == -100", SYS_ENTER_OPENAT)
    assert "out of range" in err.message
    assert "0xffffff9c" in err.hint
    assert kernel_text("dfd == 0xffffff9c", SYS_ENTER_OPENAT) == "dfd == 0xffffff9c"


@pytest.mark.parametrize("text, rendered", [
    ("count > 4k", "count > 4096"),
    ("count > 4K", "count > 4096"),
    ("count >= 4KiB", "count >= 4096"),
    ("count >= 4Ki", "count >= 4096"),
    ("count < 1M", "count < 1048576"),
    ("count < 1.5MiB", "count < 1572864"),
    ("count < 2G", "count < 2147483648"),
    ("count < 1TiB", "count < 1099511627776"),
    ("count == 512B", "count == 512"),
    ("count == 0.5k", "count == 512"),
])
def test_size_units(text, rendered):
    assert kernel_text(text, SYS_ENTER_READ) == rendered


@pytest.mark.parametrize("text, column, message", [
    ("count > 4KB", 9, "ambiguous unit 'KB'"),
    ("count > 4MB", 9, "ambiguous unit 'MB'"),
    ("count > 10ms", 10, "'ms' is not a size unit"),
    ("count == 1.1k", 9, "1.1k is not a whole number (1126.4)"),
    ("count == 1.5", 9, "1.5 is not an integer"),
    ("count == 08", 10, "a leading 0 means octal, and 8 is not an octal digit"),
    ("count == 0x", 11, "invalid hexadecimal number 0x"),
    ("count == 0x1g", 12, "invalid hexadecimal number 0x1g"),
    ("count == 1_000", 10, "invalid number 1_000"),
    ("count == -", 9, "unexpected '-'"),
])
def test_bad_numbers(text, column, message):
    with pytest.raises(ProbectlError) as info:
        compile_filter(text, SYS_ENTER_READ)
    assert message in info.value.message
    assert info.value.column == column


def test_enum_names_from_the_callback():
    assert kernel_text("state != SLEEPING", PROBE, enums=probe_enums) == "state != 1"
    assert kernel_text("state == RUNNING || state == STOPPED", PROBE, enums=probe_enums) == "state == 0 || state == 3"
    # a negative enum value on an unsigned field is the same bits
    assert kernel_text("state == NEGATIVE", PROBE, enums=probe_enums) == "state == 4294967294"
    assert kernel_text("delta == NEGATIVE", PROBE, enums=probe_enums) == "delta == -2"
    err = filter_error("state == SLEEPNG", PROBE, enums=probe_enums)
    assert err.column == 9 and "'SLEEPNG' is neither a number nor a known name for state" in err.message
    assert err.hint == "did you mean SLEEPING?"
    err = filter_error("state == XYZ", PROBE, enums=probe_enums)
    assert err.hint == "state knows NEGATIVE, RUNNING, SLEEPING, STOPPED"
    err = filter_error("state == RUNNING", PROBE)
    assert "has no symbolic names" in err.hint


def test_flag_names_and_bit_tests():
    assert kernel_text("level & F_WRITE", PROBE, enums=probe_enums) == "level & 2"
    assert kernel_text("level & F_READ|F_WRITE", PROBE, enums=probe_enums) == "level & 0x3"
    assert kernel_text("level & F_READ|0x80", PROBE, enums=probe_enums) == "level & 0x81"
    assert kernel_text("gfp_flags & 0x400000", KMEM_KMALLOC) == "gfp_flags & 0x400000"
    err = filter_error("level & F_BIG", PROBE, enums=probe_enums)
    assert "F_BIG (= 4194304) is out of range for level" in err.message
    err = filter_error("level & F_READ|-1", PROBE, enums=probe_enums)
    assert err.column == 15 and "negative" in err.message


def test_names_from_the_print_format():
    assert kernel_text("newstate == TCP_ESTABLISHED && oldstate != TCP_SYN_SENT", SOCK_STATE) == \
        "newstate == 1 && oldstate != 2"
    assert kernel_text("family == AF_INET6 && protocol == IPPROTO_TCP", SOCK_STATE) == "family == 10 && protocol == 6"
    assert kernel_text("gfp_flags & __GFP_ACCOUNT", KMEM_KMALLOC) == "gfp_flags & 4194304"
    assert kernel_text("gfp_flags & GFP_KERNEL|__GFP_DMA", KMEM_KMALLOC) == "gfp_flags & 0xcc1"
    # __print_flags(REC->prev_state & MASK, "|", { 0x00000001, "S" }, ...)
    assert kernel_text("prev_state & D") == "prev_state & 2"
    # the callback comes first
    assert kernel_text("newstate == TCP_ESTABLISHED", SOCK_STATE,
                       enums=lambda f: {"TCP_ESTABLISHED": 99}) == "newstate == 99"
    err = filter_error("newstate == TCP_ESTABLSHED", SOCK_STATE)
    assert err.hint.startswith("did you mean TCP_ESTABLISHED")


def test_print_fmt_symbols():
    assert print_fmt_symbols(SOCK_STATE.print_fmt)["protocol"] == {"IPPROTO_TCP": 6, "IPPROTO_SCTP": 132, "IPPROTO_MPTCP": 262}
    assert print_fmt_symbols(SCHED_SWITCH.print_fmt) == {
        "prev_state": {"S": 1, "D": 2, "T": 4, "t": 8, "X": 0x10, "Z": 0x20, "P": 0x40, "I": 0x80}}
    assert print_fmt_symbols(KMEM_KMALLOC.print_fmt) == {
        "gfp_flags": {"GFP_KERNEL": 0xcc0, "__GFP_DMA": 1, "__GFP_ACCOUNT": 1 << 22}}
    assert print_fmt_symbols(SYS_ENTER_READ.print_fmt) == {}
    odd = ('"%s", __print_symbolic(REC->a, { (1 << FOO), "SKIPPED" }, { -9ULL, "NEG" }, { 1, "not a name" }, '
           '{ 2, "FIRST" }, { 3, "FIRST" }), __print_symbolic(REC->a + REC->b, { 1, "TWO_FIELDS" }), '
           '__print_flags(REC->c, "|", { 0x1, "C1" }')
    assert print_fmt_symbols(odd) == {"a": {"NEG": -9, "FIRST": 2}}


def test_bool_fields():
    assert kernel_text("ready == true && level != 0", PROBE) == "ready == 1 && level != 0"
    assert kernel_text("ready == false", PROBE) == "ready == 0"
    assert "neither a number nor a known name" in filter_error("level == true", PROBE).message


def test_ipv4_addresses():
    expected = int.from_bytes(bytes([127, 0, 0, 1]), sys.byteorder)
    assert kernel_text("daddr == 127.0.0.1", SOCK_STATE) == f"daddr == 0x{expected:x}"
    assert "not an IPv4 address" in filter_error("saddr == 10.0.0.256", SOCK_STATE).message
    err = filter_error("sport == 10.0.0.1", SOCK_STATE)
    assert err.column == 9 and "needs a 4-byte address field" in err.message
    err = filter_error("daddr_v6 == 1", SOCK_STATE)
    assert "cannot filter on daddr_v6 (__u8[16]): it is an array of 16 bytes" in err.message


def test_unquoted_strings():
    assert kernel_text("prev_comm == bash") == 'prev_comm == "bash"'
    assert kernel_text("prev_comm ~ *sh* && next_comm != kworker/0:1") == \
        'prev_comm ~ "*sh*" && next_comm != "kworker/0:1"'
    assert kernel_text("prev_comm == 0day") == 'prev_comm == "0day"'
    assert kernel_text("name ~ [a-c]?x*", PROBE) == 'name ~ "[a-c]?x*"'


def test_string_limits():
    assert kernel_text('prev_comm == "' + "a" * 255 + '"').endswith('a"')
    err = filter_error('prev_comm == "' + "a" * 256 + '"')
    assert err.column == 13 and "too long for the kernel (256 bytes, at most 255)" in err.message
    err = filter_error('prev_comm == "' + "é" * 128 + '"')
    assert "256 bytes" in err.message


def test_syscall_string_arguments_read_user_memory():
    assert kernel_text('filename ~ "*.so"', SYS_ENTER_OPENAT) == 'filename.ustring ~ "*.so"'
    assert kernel_text('filename.ustring == "/etc/passwd"', SYS_ENTER_OPENAT) == \
        'filename.ustring == "/etc/passwd"'
    assert compile_filter('filename ~ "*.so"', SYS_ENTER_OPENAT).fields == ("filename",)
    # buf of sys_enter_read is a 'char *' too (the kernel calls it a string field)
    assert kernel_text('buf ~ "x*"', SYS_ENTER_READ) == 'buf.ustring ~ "x*"'


def test_ustring_suffix():
    assert kernel_text('name.ustring == "x"', PROBE) == 'name.ustring == "x"'
    err = filter_error('count.ustring == "x"', SYS_ENTER_READ)
    assert err.column == 5 and ".ustring reads a string, and count is not one" in err.message
    err = filter_error("prev_pid.foo == 1")
    assert err.column == 8 and "unknown field suffix '.foo'" in err.message


def test_function_suffix():
    assert kernel_text("call_site.function == ksys_read", KMEM_KMALLOC) == "call_site.function == ksys_read"
    assert kernel_text('call_site.function != "vfs_read"', KMEM_KMALLOC) == "call_site.function != vfs_read"
    assert kernel_text("__probe_ip.function == do_sys_open.isra.0", PROBE) == \
        "__probe_ip.function == do_sys_open.isra.0"
    err = filter_error("call_site.function < ksys_read", KMEM_KMALLOC)
    assert err.column == 19 and "use == or !=" in err.message
    err = filter_error("node.function == f", KMEM_KMALLOC)
    assert err.column == 4 and ".function needs an address field of 8 bytes" in err.message
    err = filter_error("prev_comm.function == f")
    assert ".function needs an address field" in err.message
    assert "is not a function name" in filter_error("call_site.function == 0x10", KMEM_KMALLOC).message
    assert "one function name" in filter_error("call_site.function == a|b", KMEM_KMALLOC).message


def test_cpu_lists():
    assert kernel_text("CPU & CPUS{0-1}") == "CPU & CPUS{0-1}"
    assert kernel_text("CPU == CPUS{ 1 , 3 }") == "CPU == CPUS{1,3}"
    assert kernel_text("prev_pid & CPUS{0-N,all,2-7:2/4,}") == "prev_pid & CPUS{0-N,all,2-7:2/4}"
    assert kernel_text("cpumask & CPUS{2}", IPI_CPUMASK) == "cpumask & CPUS{2}"
    assert kernel_text("cpumask != CPUS{0-3}", IPI_CPUMASK) == "cpumask != CPUS{0-3}"
    assert "'<' does not apply to CPUS" in filter_error("CPU < CPUS{1}").message
    assert "goes backwards" in filter_error("CPU & CPUS{3-1}").message
    assert "empty CPU list" in filter_error("CPU & CPUS{ }").message
    assert "USED/GROUP" in filter_error("CPU & CPUS{0-7:4/2}").message
    err = filter_error("CPU & CPUS{1,x}")
    assert err.column == 11 and "invalid CPU list item 'x'" in err.message
    err = filter_error("cpumask & 1", IPI_CPUMASK)
    assert err.column == 10 and "compare it with CPUS{LIST}" in err.message


def test_fields_the_kernel_cannot_filter():
    err = filter_error("samples == 1", PROBE)
    assert err.column == 0 and "cannot filter on samples (__data_loc u64[]): it is a dynamic array" in err.message


def test_too_long_for_the_kernel():
    text = " || ".join(["prev_pid == 1"] * 240)
    assert len(kernel_text(text)) == 4076
    err = filter_error(" || ".join(["prev_pid == 1"] * 300))
    assert f"at most {MAX_FILTER_BYTES}" in err.message


def test_errors_are_probectl_errors_with_caret():
    err = filter_error("prev_pid == 1 && next_prio ~ \"x\"")
    assert isinstance(err, ProbectlError)
    assert str(err).splitlines() == [
        "'~' matches strings, and next_prio is a number (int, signed 4-byte)",
        '  prev_pid == 1 && next_prio ~ "x"',
        "  " + " " * 27 + "^",
    ]


# ---------------------------------------------------------------------------------------------
# Fuzzing
# ---------------------------------------------------------------------------------------------

FORMATS = [SCHED_SWITCH, SYS_ENTER_READ, SYS_ENTER_OPENAT, SOCK_STATE, KMEM_KMALLOC, IPI_CPUMASK, PROBE]
PIECES = ["prev_pid", "prev_comm", "count", "buf", "state", "level", "name", "CPU", "COMM", "common_pid",
          "==", "!=", "<", "<=", ">", ">=", "&", "~", "=", "&&", "||", "!", "(", ")", "|", '"', "'",
          "CPUS{", "}", "0x", "1", "-1", "07", "4k", "1.5M", "TCP_ESTABLISHED", "SLEEPING", "F_READ",
          ".function", ".ustring", "*", "?", "[", "]", "127.0.0.1", " ", "\t", "é", "\x00"]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=60), st.lists(st.sampled_from(PIECES), max_size=25).map("".join)),
       st.sampled_from(FORMATS))
def test_random_input_raises_only_probectl_errors(text, fmt):
    try:
        flt = compile_filter(text, fmt, enums=probe_enums)
    except (ProbeSyntaxError, FilterError) as err:
        assert err.column is None or 0 <= err.column <= len(text)
        str(err)
        return
    except ProbectlError:
        return
    assert isinstance(flt, Filter) and len(flt.text.encode()) <= MAX_FILTER_BYTES
    # what probectl writes reads back the same
    assert compile_filter(flt.text, fmt, enums=probe_enums).text == flt.text


def _field_strategy(fmt: EventFormat):
    """Random valid predicates (source text) for the numeric and string fields of ``fmt``."""
    preds = []
    for field in fmt.fields:
        if field.is_string or field.type in ("char *", "const char *"):
            string = st.text(st.characters(min_codepoint=32, max_codepoint=126, exclude_characters="\"'\\"),
                             max_size=20)
            preds.append(st.tuples(st.just(field.name), st.sampled_from(["==", "!=", "~"]), string)
                         .map(lambda t: f'{t[0]} {t[1]} "{t[2]}"'))
        elif field.size in (1, 2, 4, 8) and not field.is_array:
            bits = 8 * field.size
            low, high = (-(1 << bits - 1), (1 << bits - 1) - 1) if field.signed else (0, (1 << bits) - 1)
            number = st.integers(low, high).flatmap(
                lambda n: st.sampled_from([str(n)] + ([hex(n), f"0{n:o}"] if n > 0 else [])))
            preds.append(st.tuples(st.just(field.name), st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "&"]),
                                   number).map(lambda t: f"{t[0]} {t[1]} {t[2]}"))
    return st.one_of(preds)


def _combine(children):
    return st.one_of(
        st.tuples(children, children).map(lambda t: f"{t[0]} && {t[1]}"),
        st.tuples(children, children).map(lambda t: f"{t[0]} || {t[1]}"),
        children.map(lambda c: f"!({c})"),
        children.map(lambda c: f"({c})"),
    )


SCHED_FILTERS = st.recursive(_field_strategy(SCHED_SWITCH), _combine, max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(SCHED_FILTERS)
def test_valid_filters_compile_and_round_trip(text):
    flt = compile_filter(text, SCHED_SWITCH)
    assert parse_filter(flt.text) == parse_filter(compile_filter(flt.text, SCHED_SWITCH).text)
