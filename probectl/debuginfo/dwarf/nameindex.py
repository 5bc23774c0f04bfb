"""The DWARF name index kept on disk (:mod:`probectl.debuginfo.indexcache`, keyed by build-id):

- ``dwarf-names``: the full name index of functions and variables (``dieindex.build_indexes``), in
  a compact form (``CompactIndex``: sorted names in one string, offsets and references in arrays)
  that is looked up by bisection without building a dict of a hundred thousand names;
- ``dwarf-lookups``: the answers for single names found without the full index
  (``namesearch.lookup_name``), so a repeated probe of the same function does not search again.
"""
from __future__ import annotations

import bisect
import itertools
import marshal
import sys
from array import array
from collections.abc import Mapping
from typing import TYPE_CHECKING, Iterable, Iterator, Optional

from ...cachedir import cache_dir
from ..indexcache import load, load_or_build as load_or_build_index, store

if TYPE_CHECKING:
    from . import DebugInfo

# Bump when the content of the name index changes (dieindex's rules), so older files are not trusted.
FORMAT = 6  # (5: a Rust unit's types are searched for the methods rustc defines in them; 6: definitions
# without code are left out, diescan.CODE_ATTRS)
_NAMES = "dwarf-names"
_LOOKUPS = "dwarf-lookups"
MAX_LOOKUPS = 512

Index = Mapping[str, list[tuple[int, int]]]


def debuginfo_fingerprint(debuginfo: "DebugInfo") -> tuple:
    """What an index of ``debuginfo`` depends on besides its key: formats and section sizes."""
    dwarf = debuginfo.dwarf
    return (FORMAT, marshal.version, sys.version_info[:2]) + tuple(
        sec.size if sec is not None else 0
        for sec in (dwarf.debug_info_sec, dwarf.debug_abbrev_sec, dwarf.debug_str_sec))


def _decode_names(stored: tuple) -> Optional[tuple[Index, Index]]:
    if len(stored) != 2:
        return None
    indexes = [CompactIndex.decode(part) for part in stored]
    if indexes[0] is None or indexes[1] is None:
        return None
    return indexes[0], indexes[1]


def load_names(debuginfo: "DebugInfo") -> Optional[tuple[Index, Index]]:
    """(functions, variables) from a cached full name index of ``debuginfo``, or None."""
    stored = load(_NAMES, debuginfo.index_key, debuginfo_fingerprint(debuginfo))
    return _decode_names(stored) if stored is not None else None


def load_or_build(debuginfo: "DebugInfo") -> tuple[Index, Index]:
    """(functions, variables) name indexes of ``debuginfo``: from the cache, else built and cached
    (by one process at a time: the others wait for it)."""
    from .dieindex import build_indexes  # (not needed when the cache answers)

    if cache_dir() is None:
        return build_indexes(debuginfo)

    def build() -> tuple[tuple[Index, Index], tuple]:
        funcs, variables = build_indexes(debuginfo)
        return (funcs, variables), (CompactIndex.encode(funcs), CompactIndex.encode(variables))

    return load_or_build_index(_NAMES, debuginfo.index_key, debuginfo_fingerprint(debuginfo),
                               decode=_decode_names, build=build, what=debuginfo.path)


def load_lookups(debuginfo: "DebugInfo") -> dict[str, Optional[tuple[list, list]]]:
    """The single names looked up in ``debuginfo`` by earlier runs: name → (functions, variables)."""
    if cache_dir() is None:
        return {}
    stored = load(_LOOKUPS, debuginfo.index_key, debuginfo_fingerprint(debuginfo))
    if stored is None or len(stored) != 1 or type(stored[0]) is not dict:
        return {}
    return stored[0]


def store_lookups(debuginfo: "DebugInfo", lookups: dict[str, Optional[tuple[list, list]]]) -> None:
    """Keep the names looked up (the ``MAX_LOOKUPS`` most recent ones)."""
    if cache_dir() is None:
        return
    kept = dict(list(lookups.items())[-MAX_LOOKUPS:])
    store(_LOOKUPS, debuginfo.index_key, debuginfo_fingerprint(debuginfo), (kept,))


def names_holding(index: Index, parts: tuple[str, ...]) -> list[str]:
    """The names of ``index`` that hold one of ``parts`` (an empty part holds none), in the order of
    their UTF-8 bytes, a CompactIndex's order."""
    parts = tuple(part for part in parts if part)
    return sorted((name for name in index if any(part in name for part in parts)),
                  key=lambda name: name.encode("utf-8", "surrogateescape"))


class CompactIndex(Mapping):
    """A name index (name → [(CU offset, DIE offset)]) kept as it is stored: the names sorted and
    joined by NULs, the start of each name, where each name's references start, and the references
    as pairs of 64-bit numbers. A name is found by bisection; nothing is decoded up front."""

    def __init__(self, blob: bytes, starts: array, ref_starts: array, refs: array):
        self._blob = blob
        self._starts = starts
        self._ref_starts = ref_starts
        self._refs = refs
        self._order = range(len(starts))

    @staticmethod
    def encode(index: Mapping[str, list[tuple[int, int]]]) -> tuple[bytes, bytes, bytes, bytes]:
        # (the columns made by C-level passes over the names: a cold funcs of libstdc++ encodes 12,700)
        names = sorted(index)
        blob = "\0".join(names).encode("utf-8", "surrogateescape")
        if blob.isascii():  # (str order is the bytes' order)
            lengths: Iterable[int] = map(len, names)
        else:  # (a surrogate escape sorts after U+0800..U+D7FF as text and before them as bytes)
            pairs = sorted((name.encode("utf-8", "surrogateescape"), name) for name in index)
            names = [name for _raw, name in pairs]
            blob = b"\0".join(raw for raw, _name in pairs)
            lengths = [len(raw) for raw, _name in pairs]
        starts = array("Q", itertools.accumulate(map((1).__add__, lengths), initial=0))
        starts.pop()  # (the end of the last name)
        by_name = list(map(index.__getitem__, names))
        ref_starts = array("Q", itertools.accumulate(map(len, by_name), initial=0))
        refs = array("Q", list(itertools.chain.from_iterable(itertools.chain.from_iterable(by_name))))
        return blob, starts.tobytes(), ref_starts.tobytes(), refs.tobytes()

    @classmethod
    def decode(cls, part) -> Optional["CompactIndex"]:
        """The index stored as ``part`` (what ``encode`` made), or None if it is not one."""
        if type(part) is not tuple or len(part) != 4 or any(type(p) is not bytes for p in part):
            return None
        blob, *numbers = part
        if any(len(p) % 8 for p in numbers):
            return None
        starts, ref_starts, refs = (array("Q", p) for p in numbers)
        if len(ref_starts) != len(starts) + 1 or len(refs) != 2 * ref_starts[-1] \
                or (starts and starts[-1] > len(blob)) or blob.count(b"\0") + bool(starts) != len(starts):
            return None
        return cls(blob, starts, ref_starts, refs)

    def _raw_name(self, k: int) -> bytes:
        starts = self._starts
        end = starts[k + 1] - 1 if k + 1 < len(starts) else len(self._blob)
        return self._blob[starts[k]:end]

    def _refs_of(self, k: int) -> list[tuple[int, int]]:
        refs = self._refs
        return [(refs[2 * j], refs[2 * j + 1]) for j in range(self._ref_starts[k], self._ref_starts[k + 1])]

    def __getitem__(self, name: str) -> list[tuple[int, int]]:
        key = name.encode("utf-8", "surrogateescape")
        k = bisect.bisect_left(self._order, key, key=self._raw_name)
        if k < len(self._starts) and self._raw_name(k) == key:
            return self._refs_of(k)
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self[name]
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        return len(self._starts)

    def __iter__(self) -> Iterator[str]:
        if not self._starts:
            return iter(())
        return (raw.decode("utf-8", "surrogateescape") for raw in self._blob.split(b"\0"))

    def items(self):
        return [(name, self._refs_of(k)) for k, name in enumerate(self)]

    def names_holding(self, parts: tuple[str, ...]) -> list[str]:
        """``names_holding(self, parts)``, the names searched as the one text they are kept in, not
        decoded one by one."""
        blob, starts, found = self._blob, self._starts, set()
        for part in parts:
            key = part.encode("utf-8", "surrogateescape")
            at = blob.find(key) if key and b"\0" not in key else -1
            while at != -1:
                k = bisect.bisect_right(starts, at) - 1
                found.add(k)
                at = blob.find(key, starts[k + 1]) if k + 1 < len(starts) else -1
        return [self._raw_name(k).decode("utf-8", "surrogateescape") for k in sorted(found)]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]
