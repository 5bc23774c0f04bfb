"""probectl's offline kprobe rules (read from the vmlinux: blacklist, noinstr/entry text, notrace) agree
with what the real kernel refuses: each refused function is written to kprobe_events in a qemu guest of
the same kernel, next to an allowed one."""
from __future__ import annotations

import pytest

from probectl.debuginfo.elf import ElfFile
from probectl.errors import ResolveError
from probectl.resolve.kprobe_rules import KprobeRules

from qemu_kernel import run_in_guest
from test_qemu_kprobes import kernel_dir  # noqa: F401  (the module fixture: the kernel data, or a skip)

pytestmark = pytest.mark.qemu

REFUSED = {
    "do_int3": "blacklisted",  # NOKPROBE_SYMBOL
    "get_kprobe": "blacklisted",
    "exc_page_fault": "noinstr text",
    "native_write_cr0": "notrace",
}
ALLOWED = ["tcp_sendmsg", "vfs_read", "__x64_sys_getpid"]


def test_offline_rules_match_the_kernel(kernel_dir):  # noqa: F811
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
