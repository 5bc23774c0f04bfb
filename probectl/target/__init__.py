"""What is probed: a user binary or library (uprobes), or the kernel and its modules (kprobes).

:class:`Target` is what definitions are resolved against; :func:`find_target` turns what a perf
user types (``-x BINARY``, ``-k VMLINUX``, ``-m MODULE``, or nothing: the running kernel) into one.
Finding the files is done by :mod:`.binary` (paths, ``$PATH``, the ld.so cache, mapped libraries)
and :mod:`.kernel` (the running kernel's vmlinux checked by build-id, modules, unpacking ``.ko.xz``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..arch import Arch, host
from ..dataclass import dataclass
from ..errors import TargetError
from .binary import file_arch, find_binary, process_objects, uprobe_group_name

# (.kernel is imported by the kprobe targets that use it: -x BINARY does not.)


@dataclass(frozen=True)
class Target:
    """What definitions are resolved against: a user binary (uprobes) or the running kernel (kprobes)."""

    kind: str  # "uprobe" or "kprobe"
    path: Path | None = None  # the user binary, or the kernel's vmlinux (None: the running kernel's symbols)
    module: str | None = None
    file_arch: Arch | None = None  # the machine of ``path`` (None: the running kernel's, this machine)

    @property
    def arch(self) -> Arch:
        """The facts of the machine the target's code runs on: its file's, else this machine's."""
        if self.file_arch is not None:
            return self.file_arch
        found = host()
        if found is None:
            import platform

            raise TargetError(f"probectl does not know this machine ({platform.machine()})",
                              hint="it knows x86-64 and AArch64")
        return found

    @property
    def foreign(self) -> bool:
        """The target is code for another machine than this one (its definitions can be shown, not added)."""
        return self.file_arch is not None and self.file_arch is not host()

    @property
    def is_uprobe(self) -> bool:
        return self.kind == "uprobe"

    @property
    def default_group(self) -> str:
        return uprobe_group_name(self.path) if self.is_uprobe and self.path is not None else "probe"


def find_target(exec_: Optional[str] = None, vmlinux: Optional[str] = None, module: Optional[str] = None) -> Target:
    """-x BINARY: uprobes; else kprobes, described by -k VMLINUX or the running kernel's own vmlinux
    (found as perf finds it, checked by build-id), or by /proc/kallsyms alone when there is none;
    -m NAME|PATH: kprobes in a module (MOD:SYMBOL+OFF), described by its object file.

    The command line refuses -x together with -k or -m, and empty values, before it asks; an empty
    value is refused here too (it is not "no option": that would be the running kernel)."""
    for flag, value in (("-x", exec_), ("-k", vmlinux), ("-m", module)):
        if value is not None and not value.strip():
            raise TargetError(f"{flag} was given an empty {'name' if flag == '-m' else 'path'}",
                              hint=f"name the {'module' if flag == '-m' else 'file'}, or leave {flag} out")
    if exec_:
        path = find_binary(exec_)
        return Target(kind="uprobe", path=path, file_arch=file_arch(path))
    from .kernel import check_vmlinux, find_module, find_running_vmlinux

    if module and vmlinux:
        # perf takes -m's object as the module's description and ignores -k there: say so instead.
        raise TargetError("-k and -m cannot be used together: a module's probes are described by its own "
                          "object file", hint="give -m NAME|PATH alone for a module, -k VMLINUX alone for the kernel")
    if module:
        path, name = find_module(module)
        return Target(kind="kprobe", path=path, module=name, file_arch=file_arch(path))
    if vmlinux:
        path = check_vmlinux(Path(vmlinux))
        return Target(kind="kprobe", path=path, file_arch=file_arch(path))
    found, _tried = find_running_vmlinux()
    return Target(kind="kprobe", path=found)
