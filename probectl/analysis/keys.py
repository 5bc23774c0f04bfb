"""What a histogram is keyed by and what it sums: ``--key size.log2,comm --value len`` checked against
an event's format, and written both as a hist trigger's text and as the native aggregator's plan.

One key part is a field of the event, ``comm`` (the thread's name, the kernel's
``common_pid.execname``), ``pid``, ``cpu`` or ``stacktrace`` (the kernel stack of the event),
with at most one modifier as the kernel spells them: ``.log2``, ``.buckets=N``, ``.hex``, ``.sym``,
``.syscall``, ``.execname``. The kernel's limits are kept in user space too, so that both paths
answer the same questions."""
from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Optional, Sequence

from .. import _native
from ..dataclass import dataclass
from ..errors import AnalysisError, did_you_mean
from ..formats import EventFormat, Field, variant_name
from ..ringbuf import KIND_INT, KIND_STR, field_spec, format_specs
from . import histogram

if TYPE_CHECKING:
    from .table import HistTable

MAX_KEYS = 3  # the kernel's TRACING_MAP_KEYS_MAX
# The kernel's room for a key (HIST_KEY_SIZE_MAX, kernel/trace/trace_events_hist.c): a text of variable
# length (__data_loc, as a probe's :string) takes MAX_FILTER_STR_VAL bytes, a stack HIST_STACKTRACE_SIZE,
# any other field its size rounded up to 8 (6.1 in qemu: stacktrace,prev_comm,prev_pid is taken, a
# stack, a :string and comm are not); more is refused (EINVAL) without a word in error_log.
KERNEL_KEY_BYTES = 256 + 16 * 8
KERNEL_TEXT_KEY_BYTES, KERNEL_STACK_KEY_BYTES = 256, 16 * 8
MODIFIERS = ("log2", "buckets", "hex", "sym", "syscall", "execname")
PSEUDO_KEYS = ("comm", "pid", "cpu", "stacktrace")
STRING_KEY_BYTES = 64  # text keys are compared on their first 64 bytes (the kernel: MAX_FILTER_STR_VAL)

# Native plan constants (native/aggregate.h)
SRC_NONE, SRC_FIELD, SRC_PID, SRC_CPU, SRC_LATENCY, SRC_STACK = 0, 1, 2, 3, 4, 5
EXACT, LOG2, LINEAR = 0, 1, 2
ROLE_HIST, ROLE_START, ROLE_END, ROLE_STACK = 0, 1, 2, 3
STACK_DEPTH = 16  # kernel frames kept in a user-space key (AGG_STACK_DEPTH)


@dataclass(frozen=True)
class KeyPart:
    """One part of a key: ``name`` (a field or a pseudo key) and its ``modifier`` ('' for none)."""

    name: str
    modifier: str = ""
    step: int = 0  # buckets=N
    field: Optional[Field] = None  # None for the pseudo keys

    @property
    def is_pseudo(self) -> bool:
        """comm, pid, cpu or stacktrace of the event rather than a field of that name."""
        return self.field is None

    @property
    def is_thread_name(self) -> bool:
        """``comm`` as the thread's name (counted by thread id in user space, named at the end)."""
        return self.field is None and self.name == "comm"

    @property
    def is_stack(self) -> bool:
        return self.field is None and self.name == "stacktrace"

    @property
    def is_text(self) -> bool:
        return self.is_thread_name or (self.field is not None and self.field.is_string)

    @property
    def is_variant(self) -> bool:
        """An enum's discriminant, counted by its number and shown by its variant's name."""
        return self.field is not None and bool(self.field.variants) and not self.modifier

    @property
    def bucketed(self) -> bool:
        return self.modifier in ("log2", "buckets")

    @property
    def kernel_bytes(self) -> int:
        """What this part takes of the kernel's key (see KERNEL_KEY_BYTES)."""
        if self.is_stack:
            return KERNEL_STACK_KEY_BYTES
        if self.field is not None and self.field.is_string and self.field.is_data_loc:
            return KERNEL_TEXT_KEY_BYTES
        return (self.field.size + 7) // 8 * 8 if self.field is not None else 8

    @property
    def rule(self) -> Optional[histogram.Buckets]:
        """The bucket rule of a .log2 or .buckets=N key (None for the others)."""
        if self.modifier == "log2":
            return histogram.LOG2
        if self.modifier == "buckets":
            return histogram.Buckets(self.step)
        return None

    @property
    def label(self) -> str:
        """As the user wrote it: ``size.log2``, ``len.buckets=64``."""
        if self.modifier == "buckets":
            return f"{self.name}.buckets={self.step}"
        return f"{self.name}.{self.modifier}" if self.modifier else self.name

    def trigger_text(self) -> str:
        """The key as a hist trigger writes it."""
        if self.field is not None:
            base = self.name
        elif self.name == "comm":
            return "common_pid.execname"
        elif self.name == "pid":
            base = "common_pid"
        elif self.name == "cpu":
            base = "common_cpu"
        elif self.name == "stacktrace":
            base = "stacktrace"
        else:
            base = self.name
        if self.modifier == "buckets":
            return f"{base}.buckets={self.step}"
        return f"{base}.{self.modifier}" if self.modifier else base

    def plan_part(self, long_size: int = 8) -> tuple:
        """The native aggregator's (src, field, bucket, step, width) of this part."""
        bucket = {"log2": LOG2, "buckets": LINEAR}.get(self.modifier, EXACT)
        if self.field is None and self.name in ("pid", "comm"):  # comm: by thread, named once at the end
            return (SRC_PID, None, bucket, self.step, 8)
        if self.field is None and self.name == "cpu":
            return (SRC_CPU, None, bucket, self.step, 8)
        if self.is_stack:
            return (SRC_STACK, None, EXACT, 0, STACK_DEPTH * 8)
        assert self.field is not None
        spec = field_spec(self.field, long_size)
        if spec[3] == KIND_STR:
            width = min(max(self.field.size, 8) if not self.field.is_data_loc else STRING_KEY_BYTES,
                        STRING_KEY_BYTES)
            return (SRC_FIELD, spec, EXACT, 0, (width + 7) // 8 * 8)
        return (SRC_FIELD, spec, bucket, self.step, 8)


def _field_names(fmt: EventFormat) -> list[str]:
    return [f.name for f in fmt.event_fields]


def parse_part(text: str, fmt: EventFormat) -> KeyPart:
    """One ``NAME[.MODIFIER]`` checked against ``fmt``: unknown names get a did-you-mean hint."""
    name, _, mod = text.strip().partition(".")
    step = 0
    if mod.startswith("buckets"):
        _, eq, num = mod.partition("=")
        if not eq or not num.isdigit() or int(num) < 1:
            raise AnalysisError(f"{text!r}: .buckets needs a bucket size, as in {name}.buckets=100")
        mod, step = "buckets", int(num)
    if mod and mod not in MODIFIERS:
        raise AnalysisError(f"{text!r}: unknown modifier .{mod}", did_you_mean(mod, MODIFIERS)
                            or f"the modifiers are {', '.join('.' + m for m in MODIFIERS)}")
    if name == "common_pid":
        name = "comm" if mod == "execname" else "pid"
        mod = "" if mod == "execname" else mod
    if name == "common_stacktrace":  # the kernel's name since 6.5
        name = "stacktrace"
    if name in PSEUDO_KEYS and fmt.field(name) is None:
        if name in ("comm", "stacktrace") and mod:
            raise AnalysisError(f"{text!r}: {name} takes no modifier")
        if mod == "execname":
            raise AnalysisError(f"{text!r}: .execname applies to pid (common_pid.execname); use the key 'comm'")
        return KeyPart(name, mod, step)
    field = fmt.field(name)
    if field is None or field.is_common:
        names = _field_names(fmt)
        raise AnalysisError(f"{fmt.full_name} has no field {name!r}",
                            did_you_mean(name, names + list(PSEUDO_KEYS), quote=True)
                            or f"its fields: {', '.join(names) or '(none)'}; also {', '.join(PSEUDO_KEYS)}")
    if mod == "execname":
        raise AnalysisError(f"{text!r}: .execname applies to pid only")
    spec = field_spec(field)
    if spec[3] not in (KIND_INT, KIND_STR):
        raise AnalysisError(f"{name!r} of {fmt.full_name} is {field.type}: a histogram key is a number or text",
                            "key by a number field or a string")
    if spec[3] == KIND_STR and mod:
        raise AnalysisError(f"{text!r}: .{mod} applies to numbers, and {name} is text")
    return KeyPart(name, mod, step, field)


def parse_keys(text: str, fmt: EventFormat, *, bucket: str = "") -> list[KeyPart]:
    """``--key`` text: parts joined with ','. ``bucket`` (``log2`` or ``buckets=N``, from --log2 and
    --buckets) is the modifier of the first number key that has none."""
    items = [t for t in text.split(",") if t.strip()]
    if not items:
        raise AnalysisError("no key: name one or more fields, comm, pid or cpu", "e.g. --key size.log2")
    if len(items) > MAX_KEYS:
        raise AnalysisError(f"{len(items)} keys: the kernel's hist triggers take at most {MAX_KEYS}, and so does "
                            "probectl", "drop a key, or bucket one with .log2")
    parts = [parse_part(t, fmt) for t in items]
    if bucket:
        i = next((i for i, p in enumerate(parts) if not p.modifier and not p.is_text and p.name != "stacktrace"), None)
        if i is None:
            raise AnalysisError(f"--log2/--buckets: no number key without a modifier in {text!r}")
        parts[i] = parse_part(f"{items[i].strip()}.{bucket}", fmt)
    seen = [p.label for p in parts]
    if len(set(seen)) != len(seen):
        raise AnalysisError(f"a key is named twice in {text!r}")
    size = sum(p.kernel_bytes for p in parts)
    if size > KERNEL_KEY_BYTES:
        raise AnalysisError(f"the key {text!r} takes {size} bytes, and the kernel's hist triggers take at most "
                            f"{KERNEL_KEY_BYTES} (a string {KERNEL_TEXT_KEY_BYTES}, a stack {KERNEL_STACK_KEY_BYTES}, "
                            "a number 8); so does probectl", "drop a text or stack key")
    return parts


def parse_value(name: Optional[str], fmt: EventFormat) -> Optional[KeyPart]:
    """``--value FIELD``: a number field that is summed."""
    if not name:
        return None
    field = fmt.field(name)
    if field is None or field.is_common:
        names = _field_names(fmt)
        raise AnalysisError(f"{fmt.full_name} has no field {name!r}", did_you_mean(name, names, quote=True)
                            or f"its fields: {', '.join(names) or '(none)'}")
    if field_spec(field)[3] != KIND_INT:
        raise AnalysisError(f"--value {name}: {field.type} is not a number, and only numbers are summed")
    if name == "hitcount":  # (vals=hitcount,hitcount: the kernel sums nothing and says nothing)
        raise AnalysisError("--value hitcount: the kernel's hist triggers take 'hitcount' for their own count, "
                            "not for a field of that name", "name the argument otherwise, as in 'FUNC bytes=count'")
    return KeyPart(name, "", 0, field)


def hist_plan(fmt: EventFormat, keys: Sequence[KeyPart], value: Optional[KeyPart], long_size: int = 8) -> tuple:
    """The native aggregator's plan for a histogram of ``fmt``."""
    return (fmt.id, ROLE_HIST, [k.plan_part(long_size) for k in keys],
            value.plan_part(long_size) if value else None)


def stack_plan(kernel_stack: EventFormat, long_size: int = 8) -> tuple:
    """The plan of ftrace's ``kernel_stack`` records: its frame count and its frames (found by name)."""
    specs = dict(zip((f.name for f in kernel_stack.event_fields), format_specs(kernel_stack, long_size)))
    if "size" not in specs or "caller" not in specs:
        raise AnalysisError(f"{kernel_stack.full_name} has no 'size' and 'caller' fields: cannot read its stacks")
    return (kernel_stack.id, ROLE_STACK, [(SRC_FIELD, specs["size"], EXACT, 0, 8),
                                          (SRC_FIELD, specs["caller"], EXACT, 0, 8)], None)


def native_aggregator(plans: Sequence[tuple], time_div: int = 1) -> _native.Aggregator:
    """A native Aggregator (native/aggregate.c) for ``plans``."""
    return _native.Aggregator(list(plans), time_div=time_div)


def decode_key(key: bytes, keys: Sequence[KeyPart]) -> tuple:
    """The native aggregator's key bytes back into one value per part: ints, or str for text."""
    out: list = []
    pos = 0
    for part in keys:
        width = part.plan_part()[4]
        chunk = key[pos:pos + width]
        pos += width
        if part.is_stack:
            frames = [int.from_bytes(chunk[i:i + 8], "little") for i in range(0, len(chunk), 8)]
            out.append(tuple(f for f in frames if f))
        elif part.is_text and not part.is_thread_name:
            out.append(chunk.split(b"\0", 1)[0].decode(errors="backslashreplace"))
        else:
            signed = part.field is not None and part.field.signed and not part.bucketed
            out.append(int.from_bytes(chunk, "little", signed=signed or (part.is_pseudo and part.name == "pid")))
    return tuple(out)


def named_variants(table: "HistTable", keys: Sequence[KeyPart]) -> None:
    """The enum keys of ``table`` (:attr:`KeyPart.is_variant`) named by their variants (``Some``,
    ``Green``), the counts of a name's numbers added up (a niche's ``Some`` is every pointer)."""
    for i, k in enumerate(keys):
        if k.is_variant and k.field is not None:
            table.merge_by(partial(variant_name, k.field), i)

