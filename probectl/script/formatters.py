"""The output formats: perf-script-like text, JSON lines and CSV, each a :class:`Formatter` that makes
the plan of an event format."""
from __future__ import annotations

import csv
import io
import json
from json.encoder import encode_basestring  # the C version when available
from typing import Any, Callable, Iterable, Optional

from ..formats import EventFormat
from ..ringbuf import KIND_INT, KIND_INT_ARRAY, KIND_STR, KIND_STR_ARRAY, field_spec
from .plan import Formatter, Header, Plan
from .printfmt import Slot, escape_text, literal, native, probe_ip, trace_template, whole_value_slot
from .stacks import Record
from .symbols import symbol_offset


class TextFormatter(Formatter):
    """perf-script-like lines: ``COMM TID [CPU] SECS.USECS: GROUP:EVENT: (IP) name=value ...``,
    with the stack frames below each event (``ADDR SYMBOL (DSO)``) when the file has stacks."""

    _HEADER = {
        "comm": ("%16s", ("comm",)),
        "pid": ("%6d", ("pid",)),
        "tid": ("%6d", ("tid",)),
        "nspid": ("(%d)", ("nspid",)),  # (the thread's pid in its container, after the host's)
        "cpu": ("[%03d]", ("cpu",)),
        "time": ("%5d.%06d:", ("secs", "usecs")),
    }

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> Plan:
        parts: list[str] = []
        slots: list[Slot] = []
        ips = probe_ip(fmt)
        names = {f.name: i for i, f in enumerate(fmt.event_fields)} if fmt else {}
        for key in self.fields:
            if key == "pid" and "tid" in self.fields:
                parts.append("%6d/%-6d")
                slots += [Slot("pid"), Slot("tid")]
            elif key == "tid" and "pid" in self.fields:
                continue  # printed as pid/tid
            elif key in self._HEADER:
                text, keys = self._HEADER[key]
                parts.append(text)
                slots += [Slot(k) for k in keys]
            elif key == "event":
                parts.append(literal(fmt.full_name if fmt else f"unknown:{event_id}") + ":")
            elif key == "ip" and ips:
                parts.append("(%x)" if len(ips) == 1 else "(%x <- %x)")
                slots += [Slot(names[n]) for n in ips]
            elif key == "sym" and ips:
                parts.append("%s")
                slots.append(Slot(names[ips[0]], self.sym, with_pid=True))
            elif key == "trace" and fmt is not None:
                text, tslots = trace_template(fmt, self.long_size)
                if text:
                    parts.append(text)
                    slots += tslots
        return Plan(fmt, " ".join(parts) + "\n", slots)

    def after_record(self, rec: Record) -> str:
        if not rec.stacks or not ({"ip", "sym"} & set(self.fields)):
            return ""
        lines = []
        for _kind, addr, name, off, dso in self.frames(rec):
            lines.append(f"\t{addr:16x} {symbol_offset(name, off)} ({dso})\n")
        return "".join(lines) + "\n"


class JsonFormatter(Formatter):
    """One JSON object per line: time (seconds, to the nanosecond), cpu, pid, tid (and nspid, the
    thread's pid in its own PID namespace, when the recording has threads of containers), comm, event,
    fields (numbers as numbers, strings as strings, arrays as lists), and with stacks
    ``kernel_stack``/``user_stack`` (symbol names, innermost first)."""

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> Plan:
        name = fmt.full_name if fmt else f"unknown:{event_id}"
        nspid = "nspid" in self.fields or self.source.has_nspids()
        head = ('{"time": %d.%09d, "cpu": %d, "pid": %d, "tid": %d, ' + ('"nspid": %d, ' if nspid else "")
                + '"comm": %s, "event": ' + literal(json.dumps(name)) + ', "fields": {')
        slots = [Slot("secs"), Slot("nsecs"), Slot("cpu"), Slot("pid"), Slot("tid"),
                 *([Slot("nspid")] if nspid else []), Slot("comm", _json_str)]
        parts = []
        for j, f in enumerate(fmt.event_fields if fmt else ()):
            kind = field_spec(f, self.long_size)[3]
            parts.append(literal(json.dumps(f.name)) + ": %s")
            if f.is_composed:  # (an enum's variant, a slice of structs: text)
                slots.append(Slot(j, _json_str))
            elif kind == KIND_INT:
                slots.append(Slot(j, None))
                parts[-1] = parts[-1][:-1] + "d"
            elif kind == KIND_STR:
                slots.append(Slot(j, _json_str))
            elif kind == KIND_INT_ARRAY:
                slots.append(Slot(j, _json_list))
            elif kind == KIND_STR_ARRAY:
                slots.append(Slot(j, _json_str_list))
            else:
                slots.append(Slot(j, _json_bytes))
        if not self.has_stacks:
            return Plan(fmt, head + ", ".join(parts) + "}}\n", slots)
        slots.append(Slot("stacks"))
        return Plan(fmt, head + ", ".join(parts) + "}%s}\n", slots)

    def stack_item(self, rec: Record) -> str:
        if not rec.stacks:
            return ""
        frames = self.frames(rec)
        out = []
        for kind in ("kernel", "user"):
            names = [symbol_offset(n, off) for k, _a, n, off, _d in frames if k == kind]
            if any(k == kind for k, _t, _a in rec.stacks):
                out.append(f', "{kind}_stack": {json.dumps(names)}')
        return "".join(out)


@native("json_str")
def _json_str(value: Any) -> str:
    return "null" if value is None else encode_basestring(value)


@native("json_list")
def _json_list(values: Optional[tuple]) -> str:
    return "null" if values is None else "[" + ", ".join(map(str, values)) + "]"


def _json_str_list(values: Optional[tuple]) -> str:
    return "null" if values is None else "[" + ", ".join(map(_json_str, values)) + "]"


@native("json_bytes")
def _json_bytes(value: Optional[bytes]) -> str:
    return "null" if value is None else '"' + bytes(value).hex() + '"'


class CsvFormatter(Formatter):
    """A header row, then one row per event: the selected fields, ``trace`` expanded to one column
    per event field (the union over the events in the file; empty where an event lacks one), and
    with stacks ``kernel_stack``/``user_stack`` (symbols joined by ``;``, outermost first)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.columns: list[str] = []
        self._trace_columns: list[str] = []

    def set_present(self, formats: Iterable[EventFormat]) -> None:
        """Fix the columns from the formats that occur in the data (call before :meth:`begin`)."""
        names: dict[str, None] = {}
        for fmt in formats:
            if self.selected(fmt):
                for f in fmt.event_fields:
                    names.setdefault(f.name, None)
        self._trace_columns = list(names)
        cols: list[str] = []
        header = set(self.fields) | {"kernel_stack", "user_stack"}
        for key in self.fields:
            if key == "time":
                cols.append("time")
            elif key == "trace":
                # (an event field named like a header column, e.g. sched_process_exec's pid)
                cols += [f"trace.{n}" if n in header else n for n in self._trace_columns]
            else:
                cols.append(key)
        if self.has_stacks:
            cols += ["kernel_stack", "user_stack"]
        self.columns = cols

    def begin(self) -> str:
        return self.emit([tuple(self.columns)])

    def make_plan(self, fmt: Optional[EventFormat], event_id: int) -> Plan:
        slots: list[Slot] = []
        ips = probe_ip(fmt)
        names = {f.name: i for i, f in enumerate(fmt.event_fields)} if fmt else {}
        convs: dict[str, Callable[[Any], Any]] = {}
        if fmt is not None:
            for s in trace_template(fmt, self.long_size)[1]:
                if isinstance(s.source, int) and fmt.event_fields[s.source].name not in convs:
                    field = fmt.event_fields[s.source]
                    # (an array's text prints element by element: its cell holds it whole)
                    convs[field.name] = _csv_cell(whole_value_slot(fmt, s.source, self.long_size)
                                                  if field_spec(field, self.long_size)[3] == KIND_INT_ARRAY else s)
            for name in ips or ():
                convs[name] = _csv_cell(Slot(names[name], None, spec="0x%x"))
        for key in self.fields:
            if key == "time":
                slots.append(Slot("time9"))
            elif key == "event":
                slots.append(Slot(("const", fmt.full_name if fmt else f"unknown:{event_id}")))
            elif key == "ip":
                slots.append(Slot(names[ips[0]], _hex) if ips else Slot(("const", "")))
                if ips and len(ips) == 2:
                    slots[-1] = Slot(names[ips[0]], _hex)
            elif key == "sym":
                slots.append(Slot(names[ips[0]], self.sym, with_pid=True) if ips else Slot(("const", "")))
            elif key == "trace":
                for col in self._trace_columns:
                    if col in names:
                        slots.append(Slot(names[col], convs.get(col, _csv_plain)))
                    else:
                        slots.append(Slot(("const", "")))
            else:
                slots.append(Slot(key))
        if self.has_stacks:
            slots += [Slot("kstack"), Slot("ustack")]
        return Plan(fmt, None, slots)

    def header_column(self, key: str, hdr: Header) -> list[Any]:
        if key == "time9":
            return list(map("%d.%09d".__mod__, zip(hdr.column("secs"), hdr.column("nsecs"))))
        if key in ("kstack", "ustack"):
            return [""] * len(hdr.batch)
        return super().header_column(key, hdr)

    def row_header(self, rec: Record) -> dict[str, Any]:
        h = super().row_header(rec)
        h["time9"] = "%d.%09d" % (h["secs"], h["nsecs"])
        frames = self.frames(rec)
        for kind, key in (("kernel", "kstack"), ("user", "ustack")):
            h[key] = ";".join(reversed([n for k, _a, n, _o, _d in frames if k == kind]))
        return h

    def emit(self, items: list[Any]) -> str:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(items)
        return buf.getvalue()


@native("hex")
def _hex(value: Optional[int]) -> str:
    return "" if value is None else f"{value:x}"


@native("csv_plain")
def _csv_plain(value: Any) -> Any:
    return "" if value is None else value


def _csv_cell(slot: Slot) -> Callable[[Any], Any]:
    """A field's CSV cell: its text rendering (hex stays hex, with 0x), without quotes."""
    convert, spec = slot.convert, slot.spec
    if convert is escape_text:
        convert = None  # (the CSV writer quotes what needs it)
    if spec in ("%s", "%d") and convert is None:
        return _csv_plain

    @native("csv_cell", spec, convert)
    def cell(value: Any) -> Any:
        if value is None:
            return ""
        return spec % (convert(value) if convert else value)
    return cell
