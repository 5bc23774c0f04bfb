"""Decompressing the sections and pages of compressed trace.dat files (version 7), through
:mod:`probectl.compression` (zlib, and zstd by the system's libzstd)."""
from __future__ import annotations

from ..compression import LibzstdMissing, inflate, unzstd
from ..errors import TraceFileError

# A sanity bound for the size of a chunk read from a file (a corrupt size must not make us
# allocate gigabytes).
MAX_CHUNK = 256 << 20


def decompress(algorithm: str, data: bytes, size: int) -> bytes:
    """``data`` decompressed by ``algorithm`` (the file's compression name) to ``size`` bytes;
    ValueError for damaged data."""
    if algorithm == "zstd":
        try:
            return unzstd(data, size)
        except LibzstdMissing:
            raise TraceFileError("the file is zstd-compressed and libzstd is not installed",
                                 "install it ('apt install libzstd1'), or convert the file: "
                                 "'trace-cmd convert --compression none -i IN -o OUT'") from None
    if algorithm == "zlib":
        return inflate(data, size)
    raise TraceFileError(f"the file is compressed with {algorithm!r}, which probectl cannot read",
                         "convert it: 'trace-cmd convert --compression none -i IN -o OUT'")
