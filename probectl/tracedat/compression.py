"""Decompressing the sections and pages of compressed trace.dat files (version 7): zlib from the
standard library, zstd through the system's libzstd."""
from __future__ import annotations

import zlib
from typing import Any

from ..errors import TraceFileError

# A sanity bound for the size of a chunk read from a file (a corrupt size must not make us
# allocate gigabytes).
MAX_CHUNK = 256 << 20


class _Zstd:
    """zstd decompression through the system's libzstd (no Python binding is needed)."""

    _lib: Any = None

    @classmethod
    def decompress(cls, data: bytes, size: int) -> bytes:
        import ctypes  # (here: importing ctypes is a start-up cost, and few files are compressed)

        lib = cls._load()
        # Check the size the frame declares before allocating what the file claims: a corrupt
        # size must not cost gigabytes.
        declared = lib.ZSTD_getFrameContentSize(data, len(data))
        if declared < (1 << 63) and declared != size:
            raise ValueError(f"the data holds {declared} bytes, not {size}")
        if declared >= (1 << 63) and size > MAX_CHUNK:
            raise ValueError(f"{size} bytes is too big for a chunk of unknown size")
        out = ctypes.create_string_buffer(max(size, 1))
        n = lib.ZSTD_decompress(out, size, data, len(data))
        if lib.ZSTD_isError(n):
            raise ValueError(lib.ZSTD_getErrorName(n).decode(errors="replace"))
        if n != size:
            raise ValueError(f"{n} bytes instead of {size}")
        return out.raw[:size]

    @classmethod
    def _load(cls) -> Any:
        import ctypes
        import ctypes.util

        if cls._lib is None:
            name = ctypes.util.find_library("zstd") or "libzstd.so.1"
            try:
                lib = ctypes.CDLL(name)
            except OSError:
                raise TraceFileError("the file is zstd-compressed and libzstd is not installed",
                                     "install it ('apt install libzstd1'), or convert the file: "
                                     "'trace-cmd convert --compression none -i IN -o OUT'") from None
            lib.ZSTD_decompress.restype = ctypes.c_size_t
            lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
            lib.ZSTD_isError.restype = ctypes.c_uint
            lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
            lib.ZSTD_getErrorName.restype = ctypes.c_char_p
            lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
            lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong  # -1 unknown, -2 error
            lib.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
            cls._lib = lib
        return cls._lib


def decompress(algorithm: str, data: bytes, size: int) -> bytes:
    if algorithm == "zstd":
        return _Zstd.decompress(data, size)
    if algorithm == "zlib":
        out = zlib.decompressobj().decompress(data, size + 1)  # bounded by the expected size
        if len(out) != size:
            raise ValueError(f"{len(out)} bytes instead of {size}")
        return out
    raise TraceFileError(f"the file is compressed with {algorithm!r}, which probectl cannot read",
                         "convert it: 'trace-cmd convert --compression none -i IN -o OUT'")
