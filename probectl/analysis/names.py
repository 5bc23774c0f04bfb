"""Names for key values that the user-space path has only as numbers (the kernel's hist file names
them itself): system calls of ``.syscall`` keys, kernel symbols of stack frames and ``.sym`` keys
(from ``kallsyms``: the running kernel's, or a recording's)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from .keys import KeyPart


class KeyNames:
    """``names(part, value)``: the text of a key value, or None to print the number as it is."""

    def __init__(self, kallsyms: Optional[bytes] = None):
        self._kallsyms = kallsyms
        self._symbols: dict = {}  # data? -> KernelSymbols

    def symbol(self, addr: int, data: bool = False) -> str:
        """``func+0x1c`` of a kernel address (hex when kallsyms has no symbol there); with ``data``
        among data symbols too, as the kernel's ``.sym`` (a pointer to ``null_fops`` is not code)."""
        from ..script.symbols import KernelSymbols, symbol_offset

        if data not in self._symbols:
            if self._kallsyms is None:
                try:
                    self._kallsyms = Path("/proc/kallsyms").read_bytes()
                except OSError:
                    self._kallsyms = b""
            self._symbols[data] = KernelSymbols(self._kallsyms, data=data)
        hit = self._symbols[data].lookup(addr)
        return symbol_offset(*hit) if hit else hex(addr)

    def __call__(self, part: KeyPart, value) -> Optional[str]:
        if part.is_stack and isinstance(value, tuple):
            return "\n".join(self.symbol(a) for a in value)
        if part.is_stack and isinstance(value, str):  # the kernel's frames, already named
            return "\n".join(f for f in value.split(";") if f)
        if part.modifier == "sym" and isinstance(value, int):
            return self.symbol(value, data=True)
        if part.modifier == "syscall" and isinstance(value, int):
            from ..arch.x86_64_syscalls import SYSCALL_NAMES

            name = SYSCALL_NAMES.get(value)
            return f"sys_{name}" if name else None
        return None
