"""What the kernel can filter on, by field: its ``filter_assign_type`` from the type text of the
event's format file (numbers, strings, user-string pointers, CPU masks, or nothing)."""
from __future__ import annotations

from typing import Optional

from ..dataclass import dataclass
from ..formats import Field

NUMBER, STRING, PTR_STRING, CPUMASK = "number", "string", "string pointer", "cpumask"


@dataclass(frozen=True)
class FieldInfo:
    """A field as the kernel's filters see it: its kind, C type, size and signedness."""

    name: str
    kind: str                  # one of the kinds above, or "" when the kernel cannot filter on it
    type: str
    size: int
    signed: bool
    reason: str = ""           # why it cannot be filtered on
    field: Optional[Field] = None

    def describe(self) -> str:
        if self.kind == NUMBER:
            return f"{self.type}, {'signed' if self.signed else 'unsigned'} {self.size}-byte"
        return self.type


# The fields every event can be filtered on without having them in its format.
GENERIC_FIELDS = {
    "CPU": FieldInfo("CPU", NUMBER, "int", 4, True),
    "cpu": FieldInfo("cpu", NUMBER, "int", 4, True),
    "common_cpu": FieldInfo("common_cpu", NUMBER, "int", 4, True),
    "COMM": FieldInfo("COMM", STRING, "char[16]", 16, False),
    "comm": FieldInfo("comm", STRING, "char[16]", 16, False),
}


def field_info(field: Field) -> FieldInfo:
    """How the kernel's filters read ``field``, from its type text (``filter_assign_type``)."""
    def make(kind: str, reason: str = "") -> FieldInfo:
        return FieldInfo(field.name, kind, field.type, field.size, field.signed, reason, field)

    if field.is_data_loc:
        if field.is_string and field.array_len is None:
            return make(STRING)
        if "cpumask_t" in field.type and field.array_len is None:
            return make(CPUMASK)
        return make("", "it is a dynamic array, which the kernel's filters cannot read")
    if field.is_string:
        return make(STRING)
    if field.type in ("char *", "const char *"):
        return make(PTR_STRING)
    if "cpumask_t" in field.type:
        return make(CPUMASK)
    if field.size not in (1, 2, 4, 8):
        what = "an array" if field.is_array else "a field"
        return make("", f"it is {what} of {field.size} bytes, and the kernel compares only "
                        "numbers of 1, 2, 4 or 8 bytes and strings")
    return make(NUMBER)
