"""Go programs told apart from the others by their ELF file: the Go toolchain's own sections and symbol."""
from __future__ import annotations

from .elf import ElfFile

# .go.buildinfo: the build's version and settings (Go 1.13 on, executables and c-shared libraries);
# .note.go.buildid: the Go build id; runtime.buildVersion: the runtime's version string, in every
# Go program whose symbol table was kept, whatever the toolchain's version.
_GO_SECTIONS = (".go.buildinfo", ".note.go.buildid")


def is_go_program(elf: ElfFile) -> bool:
    """The file was linked by the Go toolchain (its goroutine stacks move: no kernel return probes)."""
    return any(elf.section(name) is not None for name in _GO_SECTIONS) or bool(elf.find_symbols("runtime.buildVersion"))
