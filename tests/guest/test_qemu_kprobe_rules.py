"""probectl's offline kprobe rules (read from the vmlinux: blacklist, noinstr/entry text, notrace) agree
with what the real kernel refuses: each refused function is written to kprobe_events in a qemu guest of
the same kernel, next to an allowed one."""
from __future__ import annotations

import pytest

from probectl.debuginfo.elf import ElfFile
from probectl.errors import ResolveError
from probectl.resolve.kprobe_rules import KprobeRules

from vmtest.busybox_guest import run_in_guest

pytestmark = pytest.mark.qemu

REFUSED = {
    "do_int3": "blacklisted",  # NOKPROBE_SYMBOL
    "get_kprobe": "blacklisted",
    "exc_page_fault": "noinstr text",
    "native_write_cr0": "notrace",
}
ALLOWED = ["tcp_sendmsg", "vfs_read", "__x64_sys_getpid"]


def test_offline_rules_match_the_kernel(kernel_dir):
    elf = ElfFile(kernel_dir / "vmlinux")
    rules = KprobeRules.from_vmlinux(elf)
    assert rules is not None
    for name, why in REFUSED.items():
        (sym,) = [s for s in elf.find_functions(name) if s.size]
        with pytest.raises(ResolveError, match=why):
            rules.check(sym.value, sym.name, sym.value, sym.size)
    for name in ALLOWED:
        sym = elf.find_functions(name)[0]
        rules.check(sym.value, sym.name, sym.value, sym.size)

    definitions = [f"p:rules/{name} {name}+0" for name in list(REFUSED) + ALLOWED]
    result = run_in_guest(kernel_dir, definitions, "true", enable=[])
    assert sorted(result.accepted) == sorted(f"p:rules/{name} {name}+0" for name in ALLOWED)
    assert sorted(result.rejected) == sorted(f"p:rules/{name} {name}+0" for name in REFUSED)


def test_generated_kprobe_definitions_agree_with_the_kernel(kernel_dir):
    """Random definitions over the 6.1 kernel's functions, parameters, registers, types and names,
    resolved against its vmlinux as ``add -D -k`` does, plus the hand-written lines of the rule table:
    in ONE boot of that kernel, every line probectl prints is accepted and every line its checker
    refuses is refused (the checker agrees with the kernel both ways)."""
    from dataclasses import replace
    from datetime import timedelta

    from hypothesis import HealthCheck, given, settings

    from probectl.errors import KernelRuleError, ProbectlError
    from probectl.events import EventDefinition
    from probectl.probes import ProbeSet
    from probectl.probes.kernel_rules import check_definition
    from probectl.probes.naming import assign_events
    from probectl.target import find_target

    from tests.definition_strategies import KPROBE_EXPRS, definitions
    from tests.test_kernel_rules import KERNEL_61, RULES, UP, limit_lines

    target = find_target(None, str(kernel_dir / "vmlinux"))
    expected: dict[str, bool] = {}  # line -> the kernel takes it, as probectl predicts
    stricter: set[str] = set()  # lines probectl refuses on purpose although the kernel takes them
    sources: dict[str, str] = {}
    unjudged = 0

    def add(line: str, text: str, rename: bool = True) -> None:
        d = EventDefinition.parse(line)
        if rename:
            d = replace(d, group="gen", event=f"e{len(expected)}")
        try:
            check_definition(d, KERNEL_61)
            expected[d.render()] = True
        except KernelRuleError as err:
            # The kernel keeps a dereference offset in an int and wraps a larger one silently: probectl
            # refuses what would read some other object.
            wraps = "32-bit dereference offsets" in err.message
            expected[d.render()] = wraps
            if wraps:
                stricter.add(d.render())
        sources[d.render()] = text

    @settings(max_examples=200, deadline=timedelta(seconds=60), database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(definitions(KPROBE_EXPRS))
    def generate(text):
        nonlocal unjudged
        try:
            probes = ProbeSet.resolve([text], target, KERNEL_61)
            lines = [d.render() for spec, points in probes.resolved
                     for d in assign_events(spec, points, group="gen", taken=set(), force=True, multiprobe=True,
                                            is_uprobe=False)]
        except ProbectlError:
            unjudged += 1
            return
        if len(lines) != 1:
            unjudged += 1
            return
        try:  # the path add -D takes gives the same verdict as the checker alone
            probes.name(force=True)
            took = True
        except KernelRuleError:
            took = False
        add(lines[0], text)
        line = list(expected)[-1]
        assert took == (expected[line] and line not in stricter)

    generate()
    for line, _ in RULES:
        if not line.startswith(UP):
            add(line, "the rule table")
    at_limit, over_limit = limit_lines("p:gen/lim1 vfs_read+0 ")
    add(at_limit, "the line limit", rename=False)
    add(over_limit.replace("gen/lim1", "gen/lim2", 1), "the line limit", rename=False)
    assert [len(line) for line in list(expected)[-2:]] == [4094, 4095]
    result = run_in_guest(kernel_dir, list(expected), "true", enable=[], timeout=600)
    wrong = [f"{sources[line]!r}: {line!r} " + ("was refused by the kernel" if ok else "was refused by probectl but "
                                                "accepted by the kernel")
             for line, ok in expected.items() if (line in result.accepted) != ok]
    taken = sum(expected.values()) - len(stricter)
    print(f"kprobe definitions judged in one boot: {len(expected)} lines, {taken} accepted, "
          f"{len(expected) - taken - len(stricter)} refused, {len(stricter)} refused by probectl for offsets the "
          f"kernel wraps (and the kernel took them); {unjudged} generated ones refused before the kernel rules")
    assert not wrong, "\n".join(wrong)
    assert taken >= 40 and len(expected) - taken >= 30 and len(stricter) >= 3
