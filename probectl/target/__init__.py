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
from .process import ProcessView, filesystem_type, root_of

# (.kernel is imported by the kprobe targets that use it: -x BINARY does not.)


@dataclass(frozen=True)
class Target:
    """What definitions are resolved against: a user binary (uprobes) or the running kernel (kprobes)."""

    kind: str  # "uprobe" or "kprobe"
    path: Path | None = None  # the user binary, or the kernel's vmlinux (None: the running kernel's symbols)
    module: str | None = None
    # /proc/PID/root when the binary is a file of another mount namespace (a container's): its path
    # goes through it, and its debug files are looked for in that tree first
    root: Path | None = None
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


def find_target(exec_: Optional[str] = None, vmlinux: Optional[str] = None, module: Optional[str] = None,
                target_ns: Optional[int] = None) -> Target:
    """-x BINARY: uprobes; else kprobes, described by -k VMLINUX or the running kernel's own vmlinux
    (found as perf finds it, checked by build-id), or by /proc/kallsyms alone when there is none;
    -m NAME|PATH: kprobes in a module (MOD:SYMBOL+OFF), described by its object file.
    --target-ns=PID: -x BINARY as process PID sees it (its mount namespace and root: a container's
    files, ``libc`` the libc it maps), as a ``/proc/PID/root/PATH`` given to -x is.

    The command line refuses -x together with -k or -m, and empty values, before it asks; an empty
    value is refused here too (it is not "no option": that would be the running kernel)."""
    for flag, value in (("-x", exec_), ("-k", vmlinux), ("-m", module)):
        if value is not None and not value.strip():
            raise TargetError(f"{flag} was given an empty {'name' if flag == '-m' else 'path'}",
                              hint=f"name the {'module' if flag == '-m' else 'file'}, or leave {flag} out")
    if target_ns is not None and not exec_:
        raise TargetError("--target-ns names the process whose files -x BINARY is one of; there is no -x",
                          hint="give -x BINARY as the process sees it (a path, or a name such as libc)")
    if exec_:
        path = find_binary(exec_, ProcessView.of(target_ns) if target_ns is not None else None)
        return Target(kind="uprobe", path=path, root=root_of(path), file_arch=file_arch(path))
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


def shared_file_note(target: Target) -> Optional[str]:
    """What to tell the user when the probed file is on an overlay filesystem (a container's image):
    the kernel attaches a uprobe to the file under the overlay, so a probe on a file of an image's
    lower layer fires in every container that runs it, and misses a container whose copy was changed
    (copied up: another file). None for any other file."""
    if not target.is_uprobe or target.path is None or filesystem_type(target.path) != "overlay":
        return None
    return (f"{target.path} is on an overlay filesystem: the kernel puts the probe on the file under it, so "
            "a probe on a file of an image's lower layer fires in every container that runs that layer's file "
            "(and not in one whose copy was changed); record with -p PID or --cgroup to keep to one container")
