"""Enum names in filters on probe events (`--filter 'skc_state != TCP_ESTABLISHED'`): the enumerators
of the debug information behind each event — the kernel's BTF for kprobes, the binary's DWARF for
uprobes — read only when a filter names something the event's own format does not define."""
from __future__ import annotations

from typing import Callable, Optional

from ..errors import ProbectlError
from ..events import EventDefinition

Enums = Callable[[str], Optional[dict[str, int]]]


class EnumNames:
    """Enumerator tables per debug source, built once per run and only when asked for."""

    def __init__(self, definitions: list[EventDefinition]):
        self._by_event = {(d.group, d.event): d for d in definitions}
        self._tables: dict[str, Optional[dict[str, int]]] = {}

    def for_event(self, group: str, event: str) -> Optional[Enums]:
        """The ``enums`` callback of ``compile_filter`` for one event (None for tracepoints)."""
        defn = self._by_event.get((group, event))
        if defn is None:
            return None
        key = defn.uprobe_path if defn.is_uprobe else "kernel"
        return lambda _field: self._table(key)

    def _table(self, key: str) -> Optional[dict[str, int]]:
        if key not in self._tables:
            try:
                self._tables[key] = kernel_enumerators() if key == "kernel" else dwarf_enumerators(key)
            except (ProbectlError, OSError):
                self._tables[key] = None
        return self._tables[key]


def kernel_enumerators() -> dict[str, int]:
    """Every enumerator of the running kernel's BTF (names are unique in C's one enum namespace)."""
    from ..debuginfo.btf import load_kernel_btf  # only when a filter needs a name
    from ..debuginfo.btf.format import ENUM, ENUM64

    btf = load_kernel_btf()
    table: dict[str, int] = {}
    for type_id in range(1, len(btf) + 1):
        t = btf.type(type_id)
        if t is not None and t.kind in (ENUM, ENUM64):
            for name, value in btf.enum_values(t):
                table.setdefault(name, value)
    return table


def dwarf_enumerators(path: str) -> dict[str, int]:
    """Every enumerator of a binary's DWARF (or its separate debug file)."""
    from ..debuginfo.dwarf import DebugInfo  # only when a filter needs a name

    table: dict[str, int] = {}
    with DebugInfo.open(path) as debuginfo:
        for cu in debuginfo.compile_units():
            for die in cu.iter_DIEs():
                if die.tag == "DW_TAG_enumerator":
                    name = die.attributes.get("DW_AT_name")
                    value = die.attributes.get("DW_AT_const_value")
                    if name is not None and value is not None:
                        label = name.value.decode(errors="replace") if isinstance(name.value, bytes) else name.value
                        table.setdefault(label, value.value)
    return table
