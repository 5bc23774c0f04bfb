"""The examples the help texts of hist and latency show for a user binary (``-x libc ...``) run as
shown (issue 26: ``hist``'s said ``malloc --key size`` where glibc's parameter is ``bytes``, and
without its debug information there is no name at all): each is taken from the help text itself.
"""
from __future__ import annotations

import re
import shlex

import pytest

from tests.helpers import probectl


def help_examples(command: str) -> list[list[str]]:
    text = probectl(command, "--help").stdout
    return [shlex.split(m)[1:] for m in re.findall(r"^\s+(probectl .*-x libc.*)$", text, re.M)]


@pytest.mark.parametrize("command", ["hist", "latency"])
def test_the_user_space_examples_of_the_help_run(live_tracefs, command):
    examples = help_examples(command)
    assert examples, f"{command} --help shows no -x libc example"
    for args in examples:
        out = probectl(*args, timeout=120)
        assert out.stdout.strip(), (args, out.stderr)
