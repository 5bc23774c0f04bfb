"""One section of a file, mapped and read like the in-memory stream pyelftools makes of a section:
what :mod:`.sections` and :mod:`.mappedelf` put in place of copying large DWARF sections."""
from __future__ import annotations

import mmap
import os

# From this size on a section is mapped rather than copied.
MAP_MIN = 1 << 20


class SectionMap(mmap.mmap):
    """A read-only mapping of one section of a file, read like the in-memory streams pyelftools
    makes of sections: positions are relative to the section's start, and it ends where the
    section ends. ``read`` is mmap's own; only ``seek`` and ``tell`` shift positions."""

    base: int

    def __new__(cls, fileno: int, offset: int, size: int) -> "SectionMap":
        start = offset - offset % mmap.ALLOCATIONGRANULARITY
        self = super().__new__(cls, fileno, offset + size - start, access=mmap.ACCESS_READ, offset=start)
        self.base = offset - start
        mmap.mmap.seek(self, self.base)
        return self

    def seek(self, pos: int, whence: int = os.SEEK_SET) -> None:
        # (typeshed takes only the named whence values; mmap checks any int itself)
        mmap.mmap.seek(self, pos + self.base if whence == os.SEEK_SET else pos, whence)  # type: ignore[arg-type]

    def tell(self) -> int:
        return mmap.mmap.tell(self) - self.base

    def getvalue(self) -> bytes:
        """The whole section, as bytes."""
        return self[self.base:]
