"""The native call of the C++ runtime's demangler for a list of names (native/demangle.c,
``_native.cxa_demangle``) against the ctypes call it stands in for (``demangle.cxa_demangle``, the
reference): the same text, or the same refusal, for every symbol and every linkage name of the name
index of Debian's libstdc++6-12-dbg, and for damaged names (bytes changed, cut short, spliced, not
UTF-8, surrogate escapes, NULs); ``demangle_all`` the same with it as with the ctypes path, on that
library and on the C++ and Rust (legacy and v0) fixtures. The native signatures of demangled texts
(``_native.demangled_signatures``) against ``demangle.signature``, the same way: the library's texts,
damaged ones, and texts made of the pieces its walk looks at. And the C core under ASan and UBSan on
the library's names and damaged copies of them (native/fuzz/demangle_fuzz.c)."""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from probectl import _native
from probectl.debuginfo import demangle
from probectl.debuginfo.demangle import cxa_demangle, demangle_all, signature, signatures
from probectl.debuginfo.dwarf import DebugInfo
from probectl.debuginfo.elf import ElfFile
from tests.helpers import build_cxx_fixture, build_rust_fixture, missing, run_sanitized, sanitized_driver

LIBSTDCXX_DBG = Path("/usr/lib/x86_64-linux-gnu/debug/libstdc++.so.6.0.30")


def _library_names() -> list[str]:
    """Every symbol name of libstdc++6-12-dbg (both tables, with their versions) and every name of its
    DWARF's name index (the linkage names funcs demangles too)."""
    if not LIBSTDCXX_DBG.exists():
        missing("libstdc++6-12-dbg is not installed")
    names = {sym.versioned_name for sym in ElfFile(str(LIBSTDCXX_DBG)).symbols()}
    debuginfo = DebugInfo.open(str(LIBSTDCXX_DBG))
    try:
        names.update(debuginfo.name_index())
    finally:
        debuginfo.close()
    return sorted(names)


def _itanium_names(names: list[str]) -> list[str]:
    """The names demangle_all gives the C++ runtime: each ``_Z`` name without its version."""
    return [name.split("@", 1)[0] for name in names if name.startswith("_Z")]


def _damaged(names: list[str], count: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    out = ["", "_Z", "_Z\0", "\0_Z3fooi", "_Z3fooi\0garbage", "_Z3f\u00e9i", "_Z3f\udcffi", "_Z" + "N" * 5000,
           "_Z" + "3foo" * 3000 + "v", "_ZN" + "S_" * 2000 + "Ev", "\U0001f600"]
    marks = "SIEKT_0123456789NZvi\0\u00e9\udc80\udcff"
    for _ in range(count):
        name = list(rnd.choice(names))
        other = rnd.choice(names)
        kind = rnd.randrange(4)
        if kind == 0 and name:
            for _ in range(rnd.randint(1, 4)):
                name[rnd.randrange(len(name))] = chr(rnd.choice((rnd.randrange(1, 128), rnd.randrange(0xDC80, 0xDD00),
                                                                rnd.randrange(0x80, 0x800))))
        elif kind == 1:
            del name[rnd.randrange(len(name) + 1):]
        elif kind == 2:
            at = rnd.randrange(len(name) + 1)
            name[at:] = other[rnd.randrange(len(other) + 1):]
        elif name:
            name[rnd.randrange(len(name))] = rnd.choice(marks)
        out.append("".join(name))
    return out


def test_the_library_names_as_ctypes_gives_them():
    names = _itanium_names(_library_names())
    assert len(names) > 15000
    native = _native.cxa_demangle(names)
    assert native is not None
    reference = [cxa_demangle(name) for name in names]
    assert native == reference
    assert sum(text is not None for text in native) > 15000  # (nearly all: a refusal on both sides is no test)


def test_damaged_names_as_ctypes_gives_them():
    names = _itanium_names(_library_names())
    for seed in (1, 2):
        damaged = _damaged(names, 20000, seed)
        native = _native.cxa_demangle(damaged)
        assert native == [cxa_demangle(name) for name in damaged]
        assert any(text is None for text in native) and any(text is not None for text in native)


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError):
        _native.cxa_demangle(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _native.cxa_demangle(["_Z3fooi", b"_Z3fooi"])  # type: ignore[list-item]
    with pytest.raises(UnicodeEncodeError):  # (a lone surrogate no escape stands for: ctypes's encoding fails so too)
        _native.cxa_demangle(["_Z3f\ud800i"])
    assert _native.cxa_demangle([]) == [] and _native.cxa_demangle(("_Z3fooi",)) == ["foo(int)"]


def _program_names(path: Path) -> list[str]:
    return sorted({sym.versioned_name for sym in ElfFile(str(path)).symbols()})


@pytest.mark.parametrize("which", ["libstdc++", "cxx_shop", "rust legacy", "rust v0"])
def test_demangle_all_with_either_call(monkeypatch, which):
    """demangle_all's answers are the same whether the extension or ctypes calls the demangler (Rust's
    legacy paths unescaped after it, LLVM's copies and versions cut before it, v0 paths not sent)."""
    if which == "libstdc++":
        names = _library_names()
    elif which == "cxx_shop":
        names = _program_names(build_cxx_fixture("cxx_shop", "-O2"))
    else:
        names = _program_names(build_rust_fixture("rust_shop", "0", which.split()[1]))
    names += _damaged(names, 3000, 3)
    native = demangle_all(names)
    assert sum(text is not None for text in native) > 100
    # (the extension's answer when it finds no C++ runtime: demangle_all calls through ctypes then)
    monkeypatch.setattr(_native, "cxa_demangle", lambda names: None)
    assert demangle_all(names) == native
    assert [demangle.demangle(name) for name in names[:2000]] == native[:2000]


def _library_texts() -> list[str]:
    texts = [text for text in demangle_all(_library_names()) if text is not None]
    assert len(texts) > 15000 and all(text.isascii() for text in texts)
    return texts


def _assert_same_signatures(texts: list[str]) -> int:
    """The native signatures of ``texts`` are demangle.signature's (None only for a text not all
    ASCII), and signatures() gives the reference's for all; how many were native."""
    native = _native.demangled_signatures(texts)
    assert len(native) == len(texts)
    for text, written in zip(texts, native):
        assert written == (signature(text) if text.isascii() else None), text
    assert signatures(texts) == [signature(text) for text in texts]
    return sum(written is not None for written in native)


def test_signatures_of_the_library_texts():
    texts = _library_texts()
    assert _assert_same_signatures(texts) == len(texts)
    assert sum(signature(text) != text for text in texts) > 100  # (return types cut: a walk that did nothing fails)


# (what signature's walk looks at: brackets, spaces, "operator", clone suffixes, qualifiers, what
# Python's "\s" and "$" take: ASCII's other spaces, a newline at the end; and text not all ASCII)
_PIECES = ["(", ")", "<", ">", " ", "operator", "operator ", " [clone ", "]", " [clone .isra.0]", " const", "const",
           "volatile", "\n", "\t", "\x1c", "\x0b", "a", "int ", "f", "::", ">(", ",", "\u00e9", "\u00a0", "\u3000"]


def test_signatures_of_damaged_texts():
    rnd = random.Random(23)
    texts = _library_texts()
    damaged = ["", " ", "(", ")", "operator", " [clone .a]", "f() [clone .a]\n", "f()\n", "f() const\n", "int f<int>(int)"]
    for text in texts:
        chars = list(text)
        for _ in range(rnd.randint(1, 3)):
            if chars:
                chars[rnd.randrange(len(chars))] = rnd.choice(_PIECES)
        damaged.append("".join(chars))
    damaged += ["".join(rnd.choice(_PIECES) for _ in range(rnd.randrange(14))) for _ in range(100000)]
    assert _assert_same_signatures(damaged) > 50000


def test_signatures_bad_arguments_are_refused():
    with pytest.raises(TypeError):
        _native.demangled_signatures(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _native.demangled_signatures(["f(int)", None])  # type: ignore[list-item]
    assert _native.demangled_signatures([]) == []


def test_under_sanitizers(tmp_path):
    """native/fuzz/demangle_fuzz.c: the library's names (as many demangled as by ctypes, their
    signatures starting where demangle.signature's do), then damaged copies of them, under ASan and
    UBSan."""
    names = [name for name in _itanium_names(_library_names()) if "\0" not in name]
    data = b"".join(name.encode("utf-8", "surrogateescape") + b"\0" for name in names)
    (tmp_path / "input").write_bytes(data)
    texts = [text for text in map(cxa_demangle, names) if text is not None]
    assert all(text.isascii() for text in texts)
    starts = sum(len(text) - len(signature(text)) for text in texts)
    exe = sanitized_driver(tmp_path, ["fuzz/demangle_fuzz.c", "demangle.c"])
    for seed in ("1", "2"):
        out = run_sanitized(exe, str(tmp_path / "input"), "30000", seed)
        assert out == f"names {len(names)} demangled {len(texts)} signatures {starts}\nok 30000\n"
