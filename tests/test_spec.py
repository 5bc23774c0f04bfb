"""probectl.spec: perf probe's definition syntax into ProbeSpec trees, and its errors."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import probectl
from probectl import spec as spec_module
from probectl.errors import ProbectlError, ProbeSemanticError, ProbeSyntaxError
from probectl.spec import (
    AddressRef,
    ArgSpec,
    Deref,
    Immediate,
    Index,
    LineRange,
    Member,
    PointSpec,
    ProbeSpec,
    Register,
    SpecialVar,
    SymbolRef,
    TypeSpec,
    Variable,
    grammar_path,
    parse_line_range,
    parse_point,
    parse_probe,
    render_expr,
)

# ---------------------------------------------------------------------------------------------
# Probe points
# ---------------------------------------------------------------------------------------------

POINTS = [
    ("vfs_read", dict(function="vfs_read")),
    ("vfs_*", dict(function="vfs_*")),
    ("[a-z]?_open", dict(function="[a-z]?_open")),
    ("foo.isra.0", dict(function="foo.isra.0")),
    ("do_sys_open:3", dict(function="do_sys_open", line=3)),
    ("do_sys_open:0", dict(function="do_sys_open", line=0)),
    ("do_sys_open:010", dict(function="do_sys_open", line=8)),  # C/strtoul rules, like perf
    ("do_sys_open+16", dict(function="do_sys_open", offset=16)),
    ("do_sys_open+0x10", dict(function="do_sys_open", offset=16)),
    ("do_sys_open%return", dict(function="do_sys_open", is_return=True)),
    ("do_sys_open+0%return", dict(function="do_sys_open", offset=0, is_return=True)),
    ("do_sys_open;*filename*", dict(function="do_sys_open", lazy="*filename*")),
    ("do_sys_open;a+b", dict(function="do_sys_open", lazy="a+b")),
    ("f;x\\=1", dict(function="f", lazy="x\\=1")),  # escapes stay in the pattern
    ("do_sys_open@fs/open.c", dict(function="do_sys_open", source="fs/open.c")),
    ("do_sys_open@fs/open.c:5", dict(function="do_sys_open", source="fs/open.c", line=5)),
    ("do_sys_open@fs/open.c%return", dict(function="do_sys_open", source="fs/open.c", is_return=True)),
    ("do_sys_open@fs/open.c;x=*", dict(function="do_sys_open", source="fs/open.c", lazy="x=*")),
    ("do_sys_open%return@fs/open.c", dict(function="do_sys_open", source="fs/open.c", is_return=True)),
    ("do_sys_open+4@fs/open.c", dict(function="do_sys_open", source="fs/open.c", offset=4)),
    ("fs/open.c:1027", dict(source="fs/open.c", line=1027)),
    ("open.c;do_sys*", dict(source="open.c", lazy="do_sys*")),
    ("a.c;x+=1", dict(source="a.c", lazy="x+=1")),  # perf would call this a function (the '+')
    ("foo.isra.0:10", dict(source="foo.isra.0", line=10)),  # perf's rule: a '.' before ':' is a file
    ("foo.isra.0@*:10", dict(function="foo.isra.0", line=10)),
    ("foo.isra.0@*", dict(function="foo.isra.0")),
    ("@a.c:10", dict(source="a.c", line=10)),
    ("@a.c;pat", dict(source="a.c", lazy="pat")),
    ("0xffffffff81000000", dict(address=0xFFFFFFFF81000000)),
    ("0x0", dict(address=0)),
    ("0x400%return", dict(address=0x400, is_return=True)),
    ("malloc_get_state\\@GLIBC_2.2.5", dict(function="malloc_get_state@GLIBC_2.2.5")),
    ("foo\\+bar.c:4", dict(source="foo+bar.c", line=4)),
    ("foo\\:bar", dict(function="foo:bar")),
    ('"main.(*Server).poll"@*', dict(function="main.(*Server).poll")),
    ("'cro3::cmd::servo::run_show'", dict(function="cro3::cmd::servo::run_show")),
    ('"operator new"@*:3', dict(function="operator new", line=3)),
    ('"my file.c":12', dict(source="my file.c", line=12)),
    ("f@\"dir with space/x.c\"", dict(function="f", source="dir with space/x.c")),
    # a template's arguments as the demangler writes them, spaces and all, need no quotes
    ("std::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_append",
     dict(function="std::basic_string<char, std::char_traits<char>, std::allocator<char> >::_M_append")),
    ("m<int, v<p<int, s<char> > > >::f(int, long)%return",
     dict(function="m<int, v<p<int, s<char> > > >::f(int, long)", is_return=True)),
    ("<Vec<u8> as core::ops::Drop>::drop:2", dict(function="<Vec<u8> as core::ops::Drop>::drop", line=2)),
    ("A::operator<(A const&) const", dict(function="A::operator<(A const&) const")),
]


@pytest.mark.parametrize("text, function, args", [
    ("A::operator< x", "A::operator<", ["x"]),  # (operator<'s '<' opens no template)
    ("A::operator<< a->b y", "A::operator<<", ["a->b", "y"]),
    ("f<int, long> a n=b", "f<int, long>", ["a", "b"]),
])
def test_a_templates_arguments_do_not_take_the_arguments_after_it(text, function, args):
    spec = parse_probe(text)
    assert spec.point.function == function and [a.text for a in spec.args] == args


@pytest.mark.parametrize("text, hinted", [
    ("a<b<c<d<e<f> > > > >::g x", True), ("A::operator<< x:", False), ("f<int, long> x:", False)])
def test_a_template_deeper_than_the_grammar_takes_is_hinted_to_be_quoted(text, hinted):
    with pytest.raises(ProbeSyntaxError) as err:
        parse_probe(text)
    assert ("quote a deeper name" in err.value.hint) == hinted




@pytest.mark.parametrize("text,fields", POINTS, ids=[p[0] for p in POINTS])
def test_point_forms(text, fields):
    point = parse_probe(text).point
    assert point == PointSpec(text=text, **fields)
    assert parse_point(text) == point


def test_specs_are_frozen_and_hashable():
    spec = parse_probe("g:e=f@a.c:3 x=a->b[1]:u8[4]@user")
    assert hash(spec) == hash(parse_probe("g:e=f@a.c:3 x=a->b[1]:u8[4]@user"))
    with pytest.raises(AttributeError):
        spec.point.line = 4  # type: ignore[misc]


def test_point_text_excludes_event_and_args():
    spec = parse_probe("  grp:ev=vfs_read@fs/read_write.c:3  count  ")
    assert spec.point.text == "vfs_read@fs/read_write.c:3"
    assert spec.text == "grp:ev=vfs_read@fs/read_write.c:3  count"


@pytest.mark.parametrize(
    "text,group,event",
    [
        ("myev=vfs_read", None, "myev"),
        ("grp:myev=vfs_read", "grp", "myev"),
        ("_g1:_e2=vfs_read", "_g1", "_e2"),
        ("ev=fs/open.c:3", None, "ev"),
    ],
)
def test_event_names(text, group, event):
    spec = parse_probe(text)
    assert (spec.group, spec.event) == (group, event)


@pytest.mark.parametrize(
    "text,message",
    [
        ("1ev=f", "1ev is bad for event name -it must follow C symbol-naming rule."),
        ("my.ev=f", "my.ev is bad for event name -it must follow C symbol-naming rule."),
        ("=f", "(empty) is bad for event name -it must follow C symbol-naming rule."),
        ("g:my\\:ev=f", "my:ev is bad for event name -it must follow C symbol-naming rule."),
        ("a:b:c=f", "b:c is bad for event name -it must follow C symbol-naming rule."),
        ("g-1:ev=f", "g-1 is bad for group name -it must follow C symbol-naming rule."),
        (":ev=f", "(empty) is bad for group name -it must follow C symbol-naming rule."),
    ],
)
def test_bad_event_names(text, message):
    with pytest.raises(ProbeSemanticError) as info:
        parse_probe(text)
    assert info.value.message == message


# ---------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------

ARGS = [
    ("size", Variable("size")),
    ("sk->__sk_common.skc_state",
     Variable("sk", (Member("__sk_common", True), Member("skc_state", False)))),
    ("a.b[2]->c", Variable("a", (Member("b", False), Index(2), Member("c", True)))),
    ("arr[0x10][-1]", Variable("arr", (Index(16), Index(-1)))),
    ("%di", Register("di")),
    ("%r8", Register("r8")),
    ("%ip", Register("ip")),
    ("%flags", Register("flags")),
    ("%sp", Register("sp")),
    ("%ax", Register("ax")),
    ("$retval", SpecialVar("retval")),
    ("$params", SpecialVar("params")),
    ("$vars", SpecialVar("vars")),
    ("$comm", SpecialVar("comm")),
    ("$stack", SpecialVar("stack")),
    ("$stack0", SpecialVar("stack", 0)),
    ("$stack12", SpecialVar("stack", 12)),
    ("$arg1", SpecialVar("arg", 1)),
    ("$arg6", SpecialVar("arg", 6)),
    ("@jiffies", SymbolRef("jiffies")),
    ("@jiffies+8", SymbolRef("jiffies", 8)),
    ("@jiffies-0x10", SymbolRef("jiffies", -16)),
    ("@counter.0", SymbolRef("counter.0")),
    ("@user", SymbolRef("user")),  # a whole argument '@user' is a symbol named user
    ("@0xffff888000000000", AddressRef(0xFFFF888000000000)),
    ("@4096", AddressRef(4096)),
    ("@+0x1000", AddressRef(0x1000, relative=True)),
    ("+8(+0(%di))", Deref(8, Deref(0, Register("di")))),
    ("-4(%bp)", Deref(-4, Register("bp"))),
    ("+0x10(%di)", Deref(16, Register("di"))),
    ("+u8(%si)", Deref(8, Register("si"), user=True)),
    ("-u4(%si)", Deref(-4, Register("si"), user=True)),
    ("+8($stack)", Deref(8, SpecialVar("stack"))),
    ("+0(@jiffies+8)", Deref(0, SymbolRef("jiffies", 8))),
    ("+8(sk)", Deref(8, Variable("sk"))),
    ("+0(\\4096)", Deref(0, Immediate(4096))),
    ("\\123", Immediate(123)),
    ("\\0x10", Immediate(16)),
    ("\\-5", Immediate(-5)),
    ("\\+5", Immediate(5)),
    ('\\"hello"', Immediate("hello")),
    ('\\""', Immediate("")),
]


@pytest.mark.parametrize("text,expr", ARGS, ids=[a[0] for a in ARGS])
def test_argument_forms(text, expr):
    (arg,) = parse_probe(f"vfs_read%return {text}").args
    assert arg.expr == expr
    assert arg.text == text
    assert arg.name is None and arg.type is None and not arg.user


def test_argument_name_type_and_user():
    spec = parse_probe("f x=+8(%di):u32 fname=filename:string@user len:s@user bits=v:b4@3/32@user")
    x, fname, length, bits = spec.args
    assert x == ArgSpec(Deref(8, Register("di")), name="x", type=TypeSpec("u", 32), text="+8(%di):u32")
    assert fname == ArgSpec(Variable("filename"), name="fname", type=TypeSpec("string"), user=True,
                            text="filename:string@user")
    assert length == ArgSpec(Variable("len"), type=TypeSpec("s"), user=True, text="len:s@user")
    assert bits.type == TypeSpec("bitfield", bitfield=(4, 3, 32)) and bits.user


def test_arguments_split_on_any_whitespace():
    spec = parse_probe("f\ta \n b\r\nc")
    assert [a.expr for a in spec.args] == [Variable("a"), Variable("b"), Variable("c")]


def test_lazy_pattern_ends_at_whitespace_like_perf():
    spec = parse_probe("func;a b")
    assert spec.point.lazy == "a"
    assert spec.args == (ArgSpec(Variable("b"), text="b"),)
    with pytest.raises(ProbeSyntaxError) as info:
        parse_probe("func;a = b")
    assert info.value.column == 7
    assert "lazy pattern ends at the first space" in info.value.hint


# ---------------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------------

TYPES = [
    ("u8", TypeSpec("u", 8)), ("u16", TypeSpec("u", 16)), ("u32", TypeSpec("u", 32)), ("u64", TypeSpec("u", 64)),
    ("s8", TypeSpec("s", 8)), ("s16", TypeSpec("s", 16)), ("s32", TypeSpec("s", 32)), ("s64", TypeSpec("s", 64)),
    ("x8", TypeSpec("x", 8)), ("x16", TypeSpec("x", 16)), ("x32", TypeSpec("x", 32)), ("x64", TypeSpec("x", 64)),
    ("u", TypeSpec("u")), ("s", TypeSpec("s")), ("x", TypeSpec("x")),
    ("string", TypeSpec("string")), ("ustring", TypeSpec("ustring")), ("char", TypeSpec("char")),
    ("symbol", TypeSpec("symbol")), ("symstr", TypeSpec("symstr")),
    ("%pd", TypeSpec("pd")), ("%pD", TypeSpec("pD")),
    ("b4@3/32", TypeSpec("bitfield", bitfield=(4, 3, 32))),
    ("b1@0/8", TypeSpec("bitfield", bitfield=(1, 0, 8))),
    ("b64@0/64", TypeSpec("bitfield", bitfield=(64, 0, 64))),
    ("b1@15/16", TypeSpec("bitfield", bitfield=(1, 15, 16))),
    ("x8[16]", TypeSpec("x", 8, array=16)),
    ("string[2]", TypeSpec("string", array=2)),
    ("char[63]", TypeSpec("char", array=63)),
    ("u32[1]", TypeSpec("u", 32, array=1)),
    ("x[4]", TypeSpec("x", array=4)),
]


@pytest.mark.parametrize("text,typ", TYPES, ids=[t[0] for t in TYPES])
def test_types(text, typ):
    (arg,) = parse_probe(f"f +0(%di):{text}").args
    assert arg.type == typ
    assert typ.text == text


@pytest.mark.parametrize(
    "type_text,offset,message",
    [
        ("u12", 1, "u12 is not a valid type: the width must be 8, 16, 32 or 64"),
        ("x7", 1, "x7 is not a valid type"),
        ("s128", 1, "s128 is not a valid type"),
        ("u08", 1, "u08 is not a valid type"),
        ("foo", 0, "unknown type 'foo'"),
        ("int", 0, "unknown type 'int'"),
        ("%px", 0, "unknown type '%px'"),
        ("b4@30/32", 3, "bitfield b4@30/32 does not fit: offset 30 + width 4 > 32 bits"),
        ("b0@0/32", 1, "bitfield width must be at least 1"),
        ("b4@0/12", 5, "bitfield container size must be 8, 16, 32 or 64, not 12"),
        ("b4@3", 0, "b4@3 is not a valid bitfield"),
        ("b4", 0, "b4 is not a valid bitfield"),
        ("bx@0/8", 1, "expected a decimal bitfield width"),
        ("x8[65]", 3, "array length must be 1 to 64, not 65"),
        ("x8[0]", 3, "array length must be 1 to 64, not 0"),
        ("x8[]", 3, "expected an array length"),
        ("x8[q]", 3, "'q' is not a valid array length"),
        ("x8[4", 4, "missing ']' after the array length"),
        ("b4@0/32[2]", 7, "b4@0/32 can't be used as an array element type"),
        ("%pd[2]", 3, "%pd can't be used as an array element type"),
    ],
)
def test_bad_types(type_text, offset, message):
    text = f"f +0(%di):{type_text}"
    with pytest.raises(ProbeSyntaxError) as info:
        parse_probe(text)
    assert info.value.message.startswith(message)
    assert info.value.column == len("f +0(%di):") + offset


def test_typespec_text_is_canonical():
    assert TypeSpec("u", 32).text == "u32"
    assert TypeSpec("x").text == "x"
    assert TypeSpec("bitfield", bitfield=(4, 3, 32)).text == "b4@3/32"
    assert TypeSpec("x", 8, array=16).text == "x8[16]"
    assert TypeSpec("pd").text == "%pd"
    assert TypeSpec("pD").text == "%pD"
    assert TypeSpec("string", array=2).text == "string[2]"


# ---------------------------------------------------------------------------------------------
# needs_dwarf / is_c_expr
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text,needs",
    [
        ("vfs_read", False),
        ("vfs_read+8 %di $comm @jiffies +8(%si):u64", False),
        ("vfs_read%return $retval", False),
        ("vfs_read $arg1 $arg2", False),
        ("0x1000", False),
        ("vfs_read:3", True),
        ("vfs_read@fs/read_write.c", True),
        ("fs/read_write.c:500", True),
        ("vfs_read;*count*", True),
        ("vfs_read count", True),
        ("vfs_read +8(file)", True),
        ("vfs_read $vars", True),
        ("vfs_read $params", True),
    ],
)
def test_needs_dwarf(text, needs):
    assert parse_probe(text).needs_dwarf is needs


def test_is_c_expr():
    args = parse_probe("f a %di $arg1 +8(b) +8(%di) @sym \\1").args
    assert [a.is_c_expr for a in args] == [True, False, False, True, False, False, False]


# ---------------------------------------------------------------------------------------------
# Semantic errors
# ---------------------------------------------------------------------------------------------

SEMANTIC = [
    ("f:10;x", "Lazy pattern can't be used with line number."),
    ("f+4;x", "Lazy pattern can't be used with offset."),
    ("f:10+4", "Offset can't be used with line number."),
    ("f+4:10", "Offset can't be used with line number."),
    ("@a.c", "File always requires line number or lazy pattern."),
    ("0x1000+4", "Offset requires an entry function."),
    ("f:3%return", "Offset/Line/Lazy pattern can't be used with return probe."),
    ("f+4%return", "Offset/Line/Lazy pattern can't be used with return probe."),
    ("f%return;x", "Offset/Line/Lazy pattern can't be used with return probe."),
    ("f@a.c@b.c", "SRC@SRC is not allowed."),
    ("f%foo", "%foo is not supported."),
    ("f%", "% is not supported."),
    ("@*", "Only '@*' is not allowed."),
    ("0x1000@a.c", "An absolute address can't be used with a source file, line number or lazy pattern."),
    ("f $retval", "$retval can only be used with %return (a return probe)"),
    ("f:3 $arg1", "$arg1 can only be used at function entry or with %return"),
    ("f+8 $arg2", "$arg2 can only be used at function entry or with %return"),
    ("f x=a x=b", "argument name x is used twice"),
    ("f common_pid=a", "common_pid is a reserved field name; choose another argument name"),
    ("f " + " ".join(["a"] * 129), "Too many probe arguments (129)."),
    ("f %di@user", "@user needs a value in memory (a C variable or +OFFS(...)): %di@user"),
    ("f \\1:x8[2]", "an array type needs a value in memory, not \\1: \\1:x8[2]"),
    ("f $stack3:x8[8]", "an array type needs a value in memory, not $stack3: $stack3:x8[8]"),
    ("f %di:string", "a string is read from memory, not from the register %di: %di:string"),
    ("f $vars:u8", "$vars expands to several arguments and can't have a name, a type or @user"),
    ("f p=$params", "$params expands to several arguments and can't have a name, a type or @user"),
    ("sdt_libc:setjmp %di", "'%di': the arguments of an SDT probe are arg1, arg2, ... (the note's operands)"),
    ("%libc:setjmp arg0", "'arg0': the arguments of an SDT probe are arg1, arg2, ... (the note's operands)"),
    ("%libc:setjmp arg1->x", "'arg1->x': the arguments of an SDT probe are arg1, arg2, ... (the note's operands)"),
]


@pytest.mark.parametrize("text,message", SEMANTIC, ids=[s[0][:40] for s in SEMANTIC])
def test_semantic_errors(text, message):
    with pytest.raises(ProbeSemanticError) as info:
        parse_probe(text)
    assert info.value.message == message


@pytest.mark.parametrize("text,sdt,event,args", [
    ("sdt_libc:setjmp", ("libc", "setjmp"), None, ()),
    ("%sdt_libc:setjmp", ("libc", "setjmp"), None, ()),
    ("%libc:memory_*", ("libc", "memory_*"), None, ()),
    ("sdt_*:*", ("*", "*"), None, ()),
    ("jmp=%libc:setjmp env=arg1 arg3:x32", ("libc", "setjmp"), "jmp", (("env", "arg1"), (None, "arg3:x32"))),
])
def test_sdt_points(text, sdt, event, args):
    """perf's is_sdt_event(): '%[sdt_]PROVIDER:NAME', or 'sdt_PROVIDER:NAME' without '='."""
    spec = parse_probe(text)
    assert spec.point.sdt == sdt and spec.event == event and not spec.needs_dwarf
    assert tuple((a.name, a.text) for a in spec.args) == args


def test_sdt_prefix_with_a_line_number_stays_a_function():
    point = parse_probe("sdt_helper:12").point
    assert point.sdt is None and point.function == "sdt_helper" and point.line == 12


def test_semantic_rules_that_are_allowed():
    assert len(parse_probe("f " + " ".join(["a"] * 128)).args) == 128
    assert parse_probe("f%return $arg1 x").args[0].expr == SpecialVar("arg", 1)  # kernels read args at exit
    assert parse_probe("f+0 $arg1").point.offset == 0
    assert parse_probe("f %di:u32 +0(%di):string").args[1].type == TypeSpec("string")
    assert parse_probe("f%return $retval:string").args[0].type == TypeSpec("string")  # BTF adds the deref


# ---------------------------------------------------------------------------------------------
# Syntax errors and their columns
# ---------------------------------------------------------------------------------------------

SYNTAX = [
    ("", 0, "empty probe definition"),
    ("   ", 3, "empty probe definition"),
    ("func:foo", 5, "expected a line number after ':', found 'foo'"),
    ("func:", 5, "expected a line number after ':'"),
    ("func+", 5, "expected an offset after '+'"),
    ("func+x", 5, "expected an offset after '+', found 'x'"),
    ("func@", 5, "expected a source file after '@'"),
    ("func;", 5, "expected a pattern after ';'"),
    ("f:08", 2, "08 is not a valid line number (a leading 0 means octal)"),
    ("f:12ab", 2, "'12ab' is not a valid line number"),
    ("f:99999999999", 2, "line number 99999999999 is out of range"),
    ("f+0x1ffffffffffffffffff", 2, "offset 0x1ffffffffffffffffff is out of range"),
    ("f+" + "9" * 5000, 2, "offset " + "9" * 5000 + " is out of range"),
    ("0xzz", 0, "'0xzz' is not a valid absolute address"),
    ("f:1:2", 4, "the line number is given twice"),
    ("f+1+2", 4, "the offset is given twice"),
    ("f%return%return", 8, "the %return is given twice"),
    ('""', 0, "empty function name"),
    ('"abc', 0, "unterminated quote"),
    ("ev=", 3, "expected a function name or source file"),
    ("ev= f", 3, "expected a function name or source file, found a space"),
    (";x", 0, "expected a function name or source file"),
    ("ev=;x", 3, "expected a function name or source file"),
    (":10", 0, "expected a function name or source file"),
    ("f\\", 1, "a backslash must be followed by the character it escapes"),
    ("f\x00", 1, "invalid character U+0000"),
    ("f \u200b", 2, "invalid character U+200B"),
    ("f x:", 4, "expected a type after ':'"),
    ("f x: u8", 4, "expected a type after ':', found a space"),
    ("f +8(%di", 8, "expected ')'"),
    ("f +8(%di))", 9, "unexpected ')'"),
    ("f x)", 3, "unexpected ')'"),
    ("f 8(%di)", 2, "expected an argument"),
    ('f \\"a b"', 5, "missing closing '\"' of the immediate string"),
    ("f +8", 2, "expected an argument"),
    ("f +(%di)", 3, "expected an offset after '+'"),
    ("f +zz(%di)", 3, "'zz' is not a valid dereference offset"),
    ("f +4294967296(%di)", 3, "dereference offset 4294967296 is out of range"),
    ("f -2147483649(%di)", 3, "dereference offset -2147483649 is out of range"),
    ("f +8()", 5, "expected an argument inside '(...)', found ')'"),
    ("f $arg0", 6, "$arg numbers start at 1"),
    ("f $arg", 6, "$arg needs an argument number"),
    ("f $foo", 2, "unknown special variable $foo"),
    ("f $", 3, "expected a special variable name after '$'"),
    ("f $stack01", 8, "$stack01: write the number without leading zeros"),
    ("f %", 3, "expected a register name after '%'"),
    ("f %1x", 3, "expected a register name after '%'"),
    ("f a[2", 5, "missing ']'"),
    ("f a[]", 4, "expected an array index"),
    ("f a[x]", 4, "'x' is not a valid array index"),
    ("f a.", 4, "expected a member name after '.'"),
    ("f a->", 5, "expected a member name after '->'"),
    ("f a->1", 5, "expected a member name after '->', found '1'"),
    ("f a-b", 3, "unexpected '-b'"),
    ("f x=", 4, "expected an argument after '='"),
    ("f 1x=y", 2, "bad argument name '1x': it must follow C symbol-naming rule"),
    ("f \\x", 3, "'x' is not a valid immediate value"),
    ('f \\"abc', 7, "missing closing '\"' of the immediate string"),
    ("f @0xzz", 3, "'0xzz' is not a valid address"),
    ("f @+", 4, "expected a file offset after '@+'"),
    ("f @sym+", 7, "expected a number for the symbol offset"),
    ("f +0($comm)", 5, "$comm can not be dereferenced"),
    ('f +0(\\"s")', 5, '\\"s" can not be dereferenced'),
    ("f +0($vars)", 5, "$vars can not be dereferenced"),
    ('f "x"', 2, "expected an argument"),
    ("f x@usr", 3, "unexpected '@usr'"),
    ("f x:u32 y:u7", 11, "u7 is not a valid type"),
]


@pytest.mark.parametrize("text,column,message", SYNTAX, ids=[s[0][:40] for s in SYNTAX])
def test_syntax_error_columns(text, column, message):
    with pytest.raises(ProbeSyntaxError) as info:
        parse_probe(text)
    err = info.value
    assert err.message.startswith(message), err.message
    assert err.column == column
    rendered = str(err).splitlines()
    caret = rendered[-1].index("^")
    if len(text) <= 160:
        assert rendered[-1] == "  " + " " * column + "^"
        assert len(rendered[1]) == len(text) + 2  # the text is shown with one character per column
    else:  # a long text is shown as an excerpt around the column, the caret under the same character
        assert len(rendered[1]) < 200 and rendered[1][caret] == (text + " ")[column]


def test_nested_dereferences_are_limited():
    ok = "f " + "+8(" * 12 + "%di" + ")" * 12
    assert render_expr(parse_probe(ok).args[0].expr) == ok[2:]
    too_deep = "f " + "+8(" * 13 + "%di" + ")" * 13
    with pytest.raises(ProbeSyntaxError) as info:
        parse_probe(too_deep)
    assert info.value.column == 2 + 3 * 12
    assert "at most 12" in info.value.message
    absurd = "f " + "+8(" * 20000 + "%di" + ")" * 20000
    with pytest.raises(ProbeSyntaxError):
        parse_probe(absurd)


def test_unprintable_text_is_shown_safely():
    with pytest.raises(ProbeSyntaxError) as info:
        parse_probe("f\tx\x01")
    assert info.value.column == 3
    assert info.value.text == "f x?"


def test_parse_point_rejects_event_and_arguments():
    with pytest.raises(ProbeSyntaxError) as info:
        parse_point("vfs_read count")
    assert (info.value.message, info.value.column) == ("a probe point takes no arguments", 9)
    with pytest.raises(ProbeSyntaxError) as info:
        parse_point("  ev=vfs_read")
    assert (info.value.message, info.value.column) == ("a probe point takes no event name", 2)
    with pytest.raises(ProbeSemanticError):
        parse_point("f:3;x")


def test_non_strings_are_a_programming_error():
    with pytest.raises(TypeError):
        parse_probe(b"vfs_read")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Line ranges (perf's test_line_semantics.sh cases, and more)
# ---------------------------------------------------------------------------------------------

LINE_RANGES = [
    ("func", LineRange("func", None, None, None)),
    ("func:10", LineRange("func", None, 10, None)),
    ("func:0-10", LineRange("func", None, 0, 10)),
    ("func:2+10", LineRange("func", None, 2, 11)),
    ("func@source.c", LineRange("func", "source.c", None, None)),
    ("func@source.c:1", LineRange("func", "source.c", 1, None)),
    ("source.c:1", LineRange(None, "source.c", 1, None)),
    ("source.c:1+1", LineRange(None, "source.c", 1, 1)),
    ("source.c:1-10", LineRange(None, "source.c", 1, 10)),
    ("kernel/sched/core.c", LineRange(None, "kernel/sched/core.c", None, None)),
    ("Makefile/x:3", LineRange(None, "Makefile/x", 3, None)),
    ("@source.c:4", LineRange(None, "source.c", 4, None)),
    ("foo.isra.0@*:3", LineRange("foo.isra.0", None, 3, None)),
    ('"ns::f"', LineRange("ns::f", None, None, None)),
    ("  func:5-5  ", LineRange("func", None, 5, 5)),
]


@pytest.mark.parametrize("text,expected", LINE_RANGES, ids=[r[0] for r in LINE_RANGES])
def test_line_ranges(text, expected):
    assert parse_line_range(text) == expected


@pytest.mark.parametrize(
    "text,column,message",
    [
        ("func:foo", 5, "expected a line number after ':', found 'foo'"),
        ("func:1-foo", 7, "expected an end line after '-', found 'foo'"),
        ("func:1+foo", 7, "expected a number of lines after '+', found 'foo'"),
        ("func;lazy*pattern", 4, "unexpected ';lazy*pattern'"),
        ("func:1-", 7, "expected an end line after '-'"),
        ("fu-nc", 0, "'fu-nc' is not a valid function name"),
        ("", 0, "empty line range"),
        ("func:1 x", 7, "unexpected 'x'"),
        ("func%return", 4, "unexpected '%return'"),
    ],
)
def test_bad_line_ranges(text, column, message):
    with pytest.raises(ProbeSyntaxError) as info:
        parse_line_range(text)
    assert info.value.message.startswith(message), info.value.message
    assert info.value.column == column


@pytest.mark.parametrize("text", ["func:5-2", "func:2+0"])
def test_line_range_start_after_end(text):
    with pytest.raises(ProbeSemanticError, match="Start line must be smaller than end line."):
        parse_line_range(text)


def test_line_range_only_at_star():
    with pytest.raises(ProbeSemanticError, match=r"Only '@\*' is not allowed."):
        parse_line_range("@*")


# ---------------------------------------------------------------------------------------------
# render_expr
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "text,rendered",
    [
        ("+8(+0(%di))", "+8(+0(%di))"),
        ("sk->__sk_common.skc_state", "sk->__sk_common.skc_state"),
        ("a.b[2]->c", "a.b[2]->c"),
        ("a[0x10]", "a[16]"),
        ("-u0x4(%si)", "-u4(%si)"),
        ("@jiffies-0x10", "@jiffies-16"),
        ("@jiffies+0", "@jiffies"),
        ("@4096", "@0x1000"),
        ("@+4096", "@+0x1000"),
        ("$stack3", "$stack3"),
        ("$arg2", "$arg2"),
        ("\\0x10", "\\16"),
        ("\\-3", "\\-3"),
        ('\\"hi"', '\\"hi"'),
    ],
)
def test_render_expr(text, rendered):
    (arg,) = parse_probe(f"f%return {text}").args
    assert render_expr(arg.expr) == rendered


IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
SIGNED = st.integers(-(2**31), 2**31 - 1)
LEAVES = st.one_of(
    st.builds(Variable, IDENT, st.lists(st.one_of(
        st.builds(Member, IDENT, st.booleans()), st.builds(Index, st.integers(-(2**63) + 1, 2**63 - 1))),
        max_size=4).map(tuple)),
    st.builds(Register, IDENT),
    st.sampled_from(["retval", "params", "vars", "comm", "stack"]).map(SpecialVar),
    st.builds(SpecialVar, st.just("stack"), st.integers(0, 10**6)),
    st.builds(SpecialVar, st.just("arg"), st.integers(1, 10**6)),
    st.builds(SymbolRef, st.from_regex(r"[A-Za-z_.][A-Za-z0-9_.]{0,8}", fullmatch=True),
              st.integers(-(2**63) + 1, 2**63 - 1)),
    st.builds(AddressRef, st.integers(0, 2**64 - 1), st.booleans()),
    st.builds(Immediate, st.integers(-(2**63), 2**64 - 1)),
    st.builds(Immediate, st.from_regex(r'[^"\s]{0,10}', fullmatch=True).filter(
        lambda s: s.isprintable() and s.isascii())),
)
EXPRS = st.recursive(LEAVES, lambda inner: st.builds(Deref, SIGNED, inner, st.booleans()), max_leaves=12)


def _derefs_and_leaf(expr):
    depth = 0
    while isinstance(expr, Deref):
        depth, expr = depth + 1, expr.inner
    return depth, expr


def _parseable(expr):
    depth, leaf = _derefs_and_leaf(expr)
    cannot_deref = (isinstance(leaf, Immediate) and isinstance(leaf.value, str)
                    or isinstance(leaf, SpecialVar) and leaf.name in ("comm", "vars", "params"))
    return depth <= 12 and not (depth and cannot_deref)


@settings(max_examples=300, deadline=None)
@given(EXPRS.filter(_parseable))
def test_render_expr_round_trips(expr):
    (arg,) = parse_probe(f"f%return {render_expr(expr)}").args
    assert arg.expr == expr


# ---------------------------------------------------------------------------------------------
# Nothing but ProbectlError, whatever the input
# ---------------------------------------------------------------------------------------------

VALID = [
    "tcp_sendmsg size sk->__sk_common.skc_state",
    "grp:ev=do_sys_open@fs/open.c:5 fname=filename:string@user flags:x32",
    "vfs_read%return $retval:s64 $arg1",
    "fs/open.c;*filename* $vars",
    "0x4000 +8(+0(%di)):u32 -u4(%si):x8[4] @jiffies+8 \\\"str\" \\-1 v:b4@3/32 %ax:symbol",
    "malloc_get_state\\@GLIBC_2.2.5 $comm $stack3 +0($stack):%pd",
    '"main.(*Server).poll"@* $params',
    "foo.isra.0+0x10 a.b[2]->c:u8[8]",
]
LINES = ["func:0-10", "func@source.c:1", "source.c:1+1", "kernel/fork.c"]
SPECIALS = list("\\;:+@%=\"' ()[]$.->_0x19azAZu\t/*?") + ["\x00", "é", "\u2028", "\udc80", "%return", "@user"]


def _check_only_probectl_errors(text):
    for parse in (parse_probe, parse_point, parse_line_range):
        try:
            result = parse(text)
        except ProbeSyntaxError as err:
            assert 0 <= err.column <= len(text)
            assert len(err.text) == len(text)
            str(err)
        except ProbectlError as err:
            assert err.message
            str(err)
        else:
            assert isinstance(result, (ProbeSpec, PointSpec, LineRange))
            if isinstance(result, ProbeSpec):
                for arg in result.args:
                    render_expr(arg.expr)
                    if arg.type is not None:
                        assert arg.type.text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=40), st.lists(st.sampled_from(SPECIALS), max_size=30).map("".join)))
def test_random_text_raises_only_probectl_errors(text):
    _check_only_probectl_errors(text)


MUTATION = st.tuples(
    st.sampled_from(["insert", "delete", "replace", "duplicate", "truncate"]),
    st.integers(0, 200), st.integers(0, 12), st.sampled_from(SPECIALS),
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID + LINES), st.lists(MUTATION, min_size=1, max_size=4))
def test_mutated_definitions_raise_only_probectl_errors(text, mutations):
    for op, pos, length, piece in mutations:
        pos %= len(text) + 1
        if op == "insert":
            text = text[:pos] + piece + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + length:]
        elif op == "replace":
            text = text[:pos] + piece + text[pos + 1:]
        elif op == "duplicate":
            text = text[:pos] + text[pos:pos + length] * 2 + text[pos + length:]
        else:
            text = text[:pos]
    _check_only_probectl_errors(text)


@pytest.mark.parametrize("text", VALID)
def test_valid_corpus_parses(text):
    assert isinstance(parse_probe(text), ProbeSpec)


# ---------------------------------------------------------------------------------------------
# Grammar loading
# ---------------------------------------------------------------------------------------------

def test_grammar_found_in_source_checkout():
    path = grammar_path("probe.lark")
    assert path.name == "probe.lark" and path.parent.name == "grammar"


def test_grammar_prefers_the_installed_package(tmp_path, monkeypatch):
    package = tmp_path / "probectl"
    (package / "grammar").mkdir(parents=True)
    (package / "grammar" / "probe.lark").write_text("// installed copy\n")
    (package / "__init__.py").write_text("")
    monkeypatch.setattr(probectl, "__file__", str(package / "__init__.py"))
    assert grammar_path("probe.lark") == (package / "grammar" / "probe.lark").resolve()


def test_missing_grammar_is_a_probectl_error(tmp_path, monkeypatch):
    monkeypatch.setattr(probectl, "__file__", str(tmp_path / "probectl" / "__init__.py"))
    with pytest.raises(ProbectlError, match="grammar file nope.lark not found"):
        grammar_path("nope.lark")


def test_parser_is_built_once():
    assert spec_module._parser() is spec_module._parser()


@pytest.mark.parametrize(
    "text,hint",
    [
        ("f 8(%di)", "the sign is required"),
        ("f 0x10", "@ADDR for the memory at an address"),
        ("f +8", "a dereference is written +OFFS(ARG)"),
        ("f x@user:u8", "write the type before @user"),
        ("f%return $retval->name", "only C variables have members"),
        ("f %di.x", "only C variables have members"),
        ("f:1 x%return", "%return belongs to the probe point"),
        ('f \\"a b"', "an immediate string can't contain spaces"),
        ("f x:", "types are u8/16/32/64"),
    ],
)
def test_error_hints(text, hint):
    with pytest.raises(ProbeSyntaxError) as info:
        parse_probe(text)
    assert hint in info.value.hint
