"""The kernel's rules for definition lines on this machine's uprobes: checked before anything is written,
and generated definitions on which the kernel and the rules agree (offline: tests/test_kernel_rules.py)."""
from __future__ import annotations

import os

import pytest

from probectl.errors import KernelRuleError

from tests.test_kernel_rules import probectl
from tests.test_kernel_rules import structs  # noqa: F401  (fixtures)


class Verdicts:
    """Generated definitions judged by the kernel, and the disagreements with probectl's checker."""

    def __init__(self):
        self.accepted = 0  # probectl printed them, the kernel took them
        self.refused = 0  # probectl refused them, the kernel refused them too
        self.unjudged = 0  # refused before the kernel rules (grammar, resolution): not the checker's
        self.disagreements: list[str] = []


def write_lines(path, lines: list[str], removals: list[str]) -> str:
    """Write ``lines`` to ``path`` one write each; remove what was written (``removals``) whatever
    happens; '' if every line was taken, else the errno text of the first refusal."""
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        for line in lines:
            try:
                os.write(fd, (line + "\n").encode())
            except OSError as err:
                return os.strerror(err.errno)
            written += 1
        return ""
    finally:
        if written:
            for removal in removals:
                try:
                    os.write(fd, (removal + "\n").encode())
                except OSError:
                    pass
        os.close(fd)


def judge_definition(text: str, target, tfs, events_file, group: str, event: str, verdicts: Verdicts) -> None:
    """Resolve ``text`` as ``add`` does; write the lines probectl prints (or refuses) to the kernel."""
    from dataclasses import replace

    from probectl.errors import ProbectlError
    from probectl.probes import ProbeSet
    from probectl.probes.naming import assign_events

    try:
        probes = ProbeSet.resolve([text], target, tfs.features)
    except ProbectlError:
        verdicts.unjudged += 1
        return
    taken: set = set()
    lines = [replace(d, group=group, event=event).render()
             for spec, points in probes.resolved
             for d in assign_events(spec, points, group=group, taken=taken, force=True,
                                    multiprobe=probes.multiprobe, is_uprobe=target.is_uprobe)]
    try:
        probes.name(force=True)
        refusal = None
    except KernelRuleError as err:
        refusal = err
    except ProbectlError:
        verdicts.unjudged += 1
        return
    kernel = write_lines(events_file, lines, [f"-:{group}/{event}"])
    if refusal is None and not kernel:
        verdicts.accepted += 1
    elif refusal is not None and kernel:
        verdicts.refused += 1
    elif refusal is None:
        verdicts.disagreements.append(f"{text!r}: -D printed {lines[0]!r}; the kernel said {kernel}")
    else:
        verdicts.disagreements.append(f"{text!r}: probectl refused {lines[0]!r} ({refusal.message}); "
                                      f"the kernel took it")


@pytest.mark.root
def test_generated_uprobe_definitions_agree_with_the_kernel(live_tracefs, structs):
    """Random definitions over the fixture's functions, variables, registers, types and names: every
    line -D prints is taken by this machine's kernel, and every line the checker refuses is refused
    by it (each written and removed again at once)."""
    from datetime import timedelta

    from hypothesis import HealthCheck, given, settings

    from probectl.target import find_target
    from probectl.tracefs import Tracefs

    from tests.definition_strategies import UPROBE_EXPRS, definitions

    tfs = Tracefs(live_tracefs)
    target = find_target(structs)
    group = f"krules{os.getpid()}"
    verdicts = Verdicts()
    count = iter(range(10**6))

    @settings(max_examples=150, deadline=timedelta(seconds=20), database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(definitions(UPROBE_EXPRS))
    def judge(text):
        judge_definition(text, target, tfs, live_tracefs / "uprobe_events", group, f"e{next(count)}", verdicts)

    judge()
    print(f"uprobe definitions judged by the kernel: {verdicts.accepted} accepted, {verdicts.refused} refused "
          f"(both agreeing with probectl), {verdicts.unjudged} refused before the kernel rules")
    assert not verdicts.disagreements, "\n".join(verdicts.disagreements)
    assert verdicts.accepted >= 20 and verdicts.refused >= 10, vars(verdicts)


@pytest.mark.root
@pytest.mark.parametrize("command", [["add", "-n"], ["add"], ["trace"]])
def test_add_n_add_and_trace_check_before_writing(live_tracefs, structs, command):
    """The checker sits where the definitions are named, so every path that writes goes through it
    (and nothing is written: the live_tracefs fixture checks)."""
    extra = ["--", "true"] if command == ["trace"] else []
    out = probectl(*command, "-x", structs, f"ptest{os.getpid()}:e=paint scale %eax", *extra)
    assert out.returncode == 1, out.stdout
    assert "argument 2 (%eax): the kernel knows no register %eax" in out.stderr, out.stderr
