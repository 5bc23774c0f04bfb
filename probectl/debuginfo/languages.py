"""The language a program was written in, where probes depend on it, told by its ELF file: Go's
toolchain's own sections and symbol, Rust's runtime symbols."""
from __future__ import annotations

from .elf import ElfFile

# .go.buildinfo: the build's version and settings (Go 1.13 on, executables and c-shared libraries);
# .note.go.buildid: the Go build id; runtime.buildVersion: the runtime's version string, in every
# Go program whose symbol table was kept, whatever the toolchain's version.
_GO_SECTIONS = (".go.buildinfo", ".note.go.buildid")


def is_go_program(elf: ElfFile) -> bool:
    """The file was linked by the Go toolchain (its goroutine stacks move: no kernel return probes)."""
    return any(elf.section(name) is not None for name in _GO_SECTIONS) or bool(elf.find_symbols("runtime.buildVersion"))


# Rust's standard library: its panic entry and allocator shim, in every program that links it.
_RUST_SYMBOLS = ("rust_begin_unwind", "__rust_alloc")


def is_rust_program(elf: ElfFile) -> bool:
    """The file links Rust's standard library (its C ``main`` is the runtime's, which calls the
    program's own ``CRATE::main``)."""
    return any(elf.find_symbols(name) for name in _RUST_SYMBOLS)
