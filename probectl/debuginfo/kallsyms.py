"""The running kernel's symbol table from /proc/kallsyms, for kernel probes by symbol."""
from __future__ import annotations

import fnmatch
from pathlib import Path

from ..dataclass import dataclass
from ..errors import TargetError

KALLSYMS = Path("/proc/kallsyms")


@dataclass(frozen=True)
class KernelSymbol:
    """One kallsyms line: address, type letter (``t``/``T`` for text), name and module (``""`` for vmlinux)."""

    name: str
    address: int
    kind: str
    module: str = ""

    @property
    def is_function(self) -> bool:
        return self.kind in "tTwW"


class Kallsyms:
    """Text symbols of the running kernel, loaded once."""

    def __init__(self, path: Path = KALLSYMS):
        try:
            text = path.read_text()
        except OSError as err:
            raise TargetError(f"cannot read {path}: {err.strerror}",
                              hint="kernel probes by symbol need /proc/kallsyms; run as root") from err
        symbols = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 3:
                continue
            module = parts[3].strip("[]") if len(parts) > 3 else ""
            try:
                address = int(parts[0], 16)
            except ValueError:
                continue
            symbols.append(KernelSymbol(parts[2], address, parts[1], module))
        self.symbols = symbols
        if symbols and all(s.address == 0 for s in symbols[:100]):
            self.addresses_hidden = True
        else:
            self.addresses_hidden = False

    def find_functions(self, pattern: str, module: str | None = None) -> list[KernelSymbol]:
        """Text symbols whose name matches ``pattern`` (exact or glob), optionally only in ``module``."""
        is_glob = any(c in pattern for c in "*?[")
        found = []
        for sym in self.symbols:
            if not sym.is_function:
                continue
            if module is not None and sym.module != module:
                continue
            if sym.name == pattern or (is_glob and fnmatch.fnmatchcase(sym.name, pattern)):
                found.append(sym)
        return found
