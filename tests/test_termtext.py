"""What probectl prints that it did not write itself is bounded and printable: an error echoes at most
an excerpt of a huge input (with the caret still under the error), and no command sends a control
character from a file or an argument to the terminal (``lines``, ``funcs``, ``vars``, errors)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import build_fixture, build_program
from probectl.errors import ProbeSyntaxError, TraceFileError, TracefsError
from probectl.termtext import EXCERPT, LINE, bounded, caret_excerpt, excerpt, printable

HUGE = "a" * 5000


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "probectl", *args], capture_output=True, text=True,
                          errors="surrogateescape")


def assert_terminal_safe(text: str) -> None:
    for line in text.split("\n"):
        assert len(line) <= LINE + 40, line[:80]
        assert all(ch == "\t" or ch >= " " and not 0x7F <= ord(ch) <= 0x9F for ch in line), repr(line[:300])


def test_printable_shows_controls_as_cat_v_does():
    assert printable("a\x1b[31mb\x07\x7f\tc") == "a^[[31mb^G^?\tc"
    assert printable("x\x9by") == "xM-^[y"  # a C1 CSI, which terminals obey too
    assert printable("ab\u202ecd\u2066") == "ab<U+202E>cd<U+2066>"  # Trojan Source overrides
    assert printable("one\ntwo") == "one^Jtwo" and printable("one\ntwo", newlines=True) == "one\ntwo"
    assert printable("naïve ✓") == "naïve ✓"


def test_errors_are_printable_for_api_callers_too():
    """An exception quotes what a file holds (a trace.dat's event system name): whoever prints it,
    the CLI or a program using the API, gets no escape sequence from the file."""
    err = TraceFileError("t.dat: corrupt: a \x1b]0;owned\x07 format claims 9 bytes\nsecond line", "a \x9b hint")
    assert str(err) == "t.dat: corrupt: a ^[]0;owned^G format claims 9 bytes\nsecond line"
    assert err.hint == "a M-^[ hint"


def test_excerpt_and_bounded():
    assert excerpt("short") == "short"
    assert excerpt(HUGE) == "a" * EXCERPT + "… (5,000 characters)"
    line = bounded(f"Error: cannot open /nope/{HUGE}: no such file\n  Hint: a \x1b hint")
    assert line == f"Error: cannot open {excerpt('/nope/' + HUGE + ':')} no such file\n  Hint: a ^[ hint"
    many = bounded(" ".join(["word"] * 1000))  # short words, a long line
    assert len(many) < LINE + 40 and many.endswith("(4,999 characters)")


@pytest.mark.parametrize("column", [0, 5, 2500, 4990, 5000])
def test_caret_excerpt_keeps_the_caret_under_the_error(column):
    text = "".join(chr(ord("a") + i % 26) for i in range(5000))
    shown, at = caret_excerpt(text, column)
    assert len(shown) <= EXCERPT
    if column < len(text):
        assert shown[at] == text[column]
    else:
        assert at == len(shown)


def test_syntax_error_of_a_huge_definition_is_an_excerpt():
    text = "main x=" + "b" * 3000 + "@" + "c" * 3000
    err = ProbeSyntaxError("unexpected '@'", text, text.index("@"))
    message, shown, caret = str(err).split("\n")
    assert len(shown) < EXCERPT + 10 and shown[caret.index("^")] == "@"


def test_kernel_error_log_caret_stays_under_the_error():
    command = "p:g/e /bin/true:0x1 " + " ".join(f"a{i}=%di" for i in range(600)) + " bad=%zz"
    log = ("[  1.000000] trace_uprobe: error: Invalid fetch argument\n"
           f"  Command: {command}\n" + " " * (len("  Command: ") + command.index("%zz")) + "^")
    lines = str(TracefsError("the kernel refused it", kernel_log=log)).split("\n")
    assert len(lines[2]) < EXCERPT + 20
    assert lines[2][lines[3].index("^"):].startswith("%zz")


@pytest.mark.parametrize("args", [
    ("add", "-D", "-x", "/nope/" + HUGE, "main"),
    ("add", "-D", "-k", "/nope/" + HUGE, "schedule"),
    ("add", "-D", "-m", "/nope/" + HUGE + ".ko", "schedule"),
    ("add", "-D", "-x", "/bin/true", HUGE),
    ("add", "-D", "-x", "/bin/true", "main+" + HUGE),
    ("add", "-D", "-x", "/bin/true", "main x=%di:" + HUGE),
    ("script", "-i", "/nope/" + HUGE),
    ("script", "-F", HUGE),
    ("script", "--" + HUGE),
    ("funcs", "-x", "/bin/true", HUGE),
    ("del", HUGE),
    ("lines", "-x", "/bin/true", HUGE + ":1"),
    ("add", "-D", "-x", "/bin/true", "ma\x1b]0;title\x07in"),
    ("funcs", "-x", "/bin/true", "x\x1b[2Jy"),
], ids=["-x path", "-k path", "-m path", "point", "offset", "type", "trace file", "fields", "option",
        "funcs glob", "del", "lines", "escape in point", "escape in glob"])
def test_errors_echo_bounded_printable_input(args):
    out = cli(*args)
    assert out.returncode != 0 and out.stderr.startswith(("Error: ", "Usage: ")), out.stderr[:300]
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr
    assert_terminal_safe(out.stderr)
    assert len(out.stderr) < 3 * LINE


CONTROL_SOURCE = (b"/* a comment \x1b]0;pwned\x07 with \x1b[31mred\x1b[0m */\n"
                  b"\x0c\n"  # a form feed alone on its line: still one line, as the compiler counts
                  b"int evil(void) __asm__(\"\\\"ev\\033[31mil\\\"\");\n"
                  b"int evil(void) { return 1; } /* \xe2\x80\xae */\n"
                  b"int main(void)\n"
                  b"{\n"
                  b"\treturn evil();\n"
                  b"}\n")


@pytest.fixture(scope="module")
def control_program(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("ctl") / "controls.c"
    src.write_bytes(CONTROL_SOURCE)
    return build_program("controls", [src])


def test_lines_never_print_raw_control_characters(control_program):
    out = cli("lines", "-x", str(control_program), "controls.c")
    assert out.returncode == 0, out.stderr
    assert_terminal_safe(out.stdout)
    shown = out.stdout.splitlines()
    assert "/* a comment ^[]0;pwned^G with ^[[31mred^[[0m */" in shown[1]
    assert shown[2].strip() == "^L"
    assert shown[5].split() == ["5", "int", "main(void)"]  # numbered as the compiler numbers lines
    assert "<U+202E>" in shown[4]
    main = cli("lines", "-x", str(control_program), "main")
    assert main.returncode == 0 and main.stdout.splitlines()[1].split() == ["0", "int", "main(void)"]


def test_symbol_names_from_the_file_are_printable(control_program):
    out = cli("funcs", "-x", str(control_program))
    assert out.returncode == 0, out.stderr
    assert_terminal_safe(out.stdout)
    assert "ev^[[31mil" in out.stdout.splitlines()
    defined = cli("add", "-D", "-x", str(control_program), "ev*")
    assert_terminal_safe(defined.stdout + defined.stderr)
