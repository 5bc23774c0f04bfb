"""Decompressing a block whose decompressed size is known beforehand: zlib from the standard library,
zstd through the system's libzstd (by ctypes: no Python binding is needed; on Debian, binutils and
systemd depend on libzstd1).

Both readers of compressed data use these: ``debuginfo.elf`` for SHF_COMPRESSED and ``.zdebug``
sections, ``tracedat.compression`` for compressed trace.dat sections and pages. Damaged data is a
ValueError, a missing libzstd a :class:`LibzstdMissing`; each reader turns them into its own error,
naming its file and what to do. (The DWARF reader's ``dwarf.inflating`` streams a zlib section in
steps instead, inflating only what is read: a different job.)"""
from __future__ import annotations

import zlib
from typing import Any

# A zstd frame that does not declare its decompressed size is not trusted beyond this size: a corrupt
# size must not make us allocate gigabytes.
MAX_UNDECLARED = 256 << 20


class LibzstdMissing(Exception):
    """The system's libzstd cannot be loaded."""


def inflate(data: bytes, size: int) -> bytes:
    """The zlib stream ``data`` inflated to ``size`` bytes (never more are made); ValueError when
    the stream is damaged or holds another size."""
    try:
        out = zlib.decompressobj().decompress(data, size + 1)
    except zlib.error as err:
        raise ValueError(f"bad zlib data ({err})") from None
    if len(out) != size:
        raise ValueError(f"decompressed to {len(out)} bytes, not {size}")
    return out


def unzstd(data: bytes, size: int) -> bytes:
    """The zstd frame ``data`` decompressed to ``size`` bytes; ValueError when it is damaged or holds
    another size, LibzstdMissing without libzstd."""
    import ctypes  # (here: importing ctypes is a start-up cost, and few files are compressed)

    lib = _libzstd()
    # Check the size the frame declares before allocating what the file claims.
    declared = lib.ZSTD_getFrameContentSize(data, len(data))
    if declared < (1 << 63) and declared != size:
        raise ValueError(f"the data holds {declared} bytes, not {size}")
    if declared >= (1 << 63) and size > MAX_UNDECLARED:
        raise ValueError(f"{size} bytes is too big for zstd data of undeclared size")
    out = ctypes.create_string_buffer(max(size, 1))
    n = lib.ZSTD_decompress(out, size, data, len(data))
    if lib.ZSTD_isError(n):
        raise ValueError(f"bad zstd data ({lib.ZSTD_getErrorName(n).decode(errors='replace')})")
    if n != size:
        raise ValueError(f"decompressed to {n} bytes, not {size}")
    return out.raw[:size]


_LIBZSTD: Any = None


def _libzstd() -> Any:
    """libzstd with the prototypes of the four functions used, loaded at the first use."""
    global _LIBZSTD
    if _LIBZSTD is None:
        import ctypes
        import ctypes.util

        name = ctypes.util.find_library("zstd") or "libzstd.so.1"
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            raise LibzstdMissing(f"libzstd ({name}) cannot be loaded") from None
        lib.ZSTD_decompress.restype = ctypes.c_size_t
        lib.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        lib.ZSTD_isError.restype = ctypes.c_uint
        lib.ZSTD_isError.argtypes = [ctypes.c_size_t]
        lib.ZSTD_getErrorName.restype = ctypes.c_char_p
        lib.ZSTD_getErrorName.argtypes = [ctypes.c_size_t]
        lib.ZSTD_getFrameContentSize.restype = ctypes.c_ulonglong  # -1 unknown, -2 error
        lib.ZSTD_getFrameContentSize.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
        _LIBZSTD = lib
    return _LIBZSTD
