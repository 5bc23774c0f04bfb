"""Ring-buffer page decoding and per-CPU recording (C core of probectl).

The C code does the per-event work, without the GIL; :mod:`probectl.ringbuf` is the documented
interface on top of it. Shapes the functions share:

* a stream is ``(cpu, buffer, offset, size)``: ``size`` bytes of pages at ``offset`` of ``buffer``
  (bytes, an mmap: anything with the buffer protocol);
* a field is ``(offset, size, loc, kind, elem_size, signed[, bound_size, bound_offset, head_size,
  head_offset])`` (``LOC_*``, ``KIND_*``; a counted ``KIND_STR`` ends at the length in the integer
  of ``bound_size`` bytes at ``bound_offset``, and is its head, ``head_size`` bytes at
  ``head_offset``, where the text to the NUL falls short; a ``KIND_INT_ARRAY`` with a bound ends
  at that many elements or, with a ``head_size`` too, a C++ vector's, at the elements between the
  pointer there and the bound, its end pointer; a ``KIND_INT`` with a bound is a C++ vector's begin
  pointer, and its value the elements, of ``head_size`` bytes, up to its end pointer, the bound), as
  :func:`probectl.ringbuf.field_spec` makes it.
"""
# The one place the Python types and the documentation of probectl._native are written (as drgn's
# _drgn.pyi): what each function and method of native/py*.c takes (names, keyword-only parameters,
# defaults, as PyArg_ParseTupleAndKeywords reads them) and gives back. The C docstrings are these
# (native/docstrings.h, written by tools/regenerate_native_docstrings.py); tests/test_native_stub.py
# checks that the module and this file name the same things and that each signature is what the C code
# parses. Names with a leading underscore exist only here.
from typing import Any, Callable, Literal, Optional, Sequence, TypedDict, Union, final, overload

from typing_extensions import Buffer

_Stream = tuple[int, Buffer, int, int]
_FieldSpec = Union[tuple[int, int, int, int, int, bool], tuple[int, int, int, int, int, bool, int, int, int, int]]
_Lost = tuple[int, int, int]  # (index of the event it comes before, cpu, count: -1 unknown)
_Threads = tuple[Buffer, Buffer]  # (tids ascending, their tgids): int32 buffers of one length

LOC_FIXED: int
LOC_DATA: int
LOC_REL: int
LOC_TAIL: int
KIND_INT: int
KIND_STR: int
KIND_BYTES: int
KIND_INT_ARRAY: int
KIND_STR_ARRAY: int
MISSED_EVENTS: int
MISSED_STORED: int

# Text formatter plans (native/textfmt.h): sources, conversions, flags.
TF_SRC_LIT: int
TF_SRC_FIELD: int
TF_SRC_COMM: int
TF_SRC_TGID: int
TF_SRC_TID: int
TF_SRC_CPU: int
TF_SRC_SECS: int
TF_SRC_USECS: int
TF_SRC_NSECS: int
TF_SRC_CELL_BEGIN: int
TF_SRC_CELL_END: int
TF_SRC_EMPTY_QUOTE: int
TF_SRC_ELEM: int
TF_SRC_NSPID: int
TF_CONV_INT: int
TF_CONV_CHAR: int
TF_CONV_STR: int
TF_CONV_RAW: int
TF_CONV_HEX_LIST: int
TF_CONV_DEC_LIST: int
TF_CONV_HEX_BYTES: int
TF_CONV_SYM: int
TF_CONV_JSON_STR: int
TF_CONV_JSON_LIST: int
TF_CONV_JSON_BYTES: int
TF_F_LEFT: int
TF_F_PLUS: int
TF_F_SPACE: int
TF_F_ALT: int
TF_F_ZERO: int
TF_F_EMPTY_CELL: int
TF_MAX_WIDTH: int


class DecodeError(ValueError):
    """A corrupt ring-buffer page: args are (message, code, cpu, page_offset, position); cpu is
    None for a page decoded on its own (:func:`parse_page`)."""


class _Page(TypedDict):
    timestamp: int
    size: int
    flags: int
    missed: int  # 0 none, > 0 events lost before this page, -1 lost but not counted
    data_offset: int
    events: list[tuple[int, bytes]]  # (timestamp, payload)


def parse_page(data: Buffer, long_size: int = 8, big_endian: bool = False, page_size: int = -1) -> _Page:
    """One page, for tests and tools; ``page_size`` -1: the length of ``data``. Raises
    :class:`DecodeError` for a corrupt page, ValueError for a bad layout."""


def event_ids(streams: Sequence[_Stream], *, long_size: int = 8, big_endian: bool = False,
              page_size: int = 4096) -> list[int]:
    """The sorted ids of every record of the streams, found by walking the pages without
    decoding: which formats a reader will need."""


class _Columns(TypedDict):
    n: int  # events in the batch
    ts: bytes  # u64 per event
    cpu: bytes  # s32
    id: bytes  # u16
    pid: bytes  # s32
    flags: bytes  # u8
    preempt: bytes  # u8
    row: bytes  # u32: the event's row in its format's columns (u32 max: no format)
    formats: list[list[Union[bytes, list[Any]]]]  # per format, per field: int64s, or a value per row
    raw: Optional[list[bytes]]  # with raw=True: each record's payload
    lost: list[_Lost]


_VarColumn = tuple[bytes, bytes, Optional[bytes], int]  # (offsets, data, validity or None, nulls)
# (rows, ts, cpu, pid, fields, thread, tgid); thread and tgid are None without threads.
_Table = tuple[int, bytes, bytes, bytes, list[Union[bytes, _VarColumn]], Optional[bytes], Optional[bytes]]
_SliceVarColumn = tuple["ColumnBuffer", "ColumnBuffer", Optional["ColumnBuffer"], int]
# As _Table, with ColumnBuffers; a header column the slices skipped is None.
_SliceTable = tuple[int, Optional["ColumnBuffer"], Optional["ColumnBuffer"], Optional["ColumnBuffer"],
                    list[Union["ColumnBuffer", _SliceVarColumn]], Optional["ColumnBuffer"],
                    Optional["ColumnBuffer"]]
# (ts, cpu, id, pid, flags, preempt, values or None when the id has no format[, raw payload])
_Row = tuple[Any, ...]


class _StreamStats(TypedDict):
    cpu: int
    pages: int
    events: int
    missed_events: int
    missed_unknown: int
    bad_pages: int


@final
class Reader:
    """The streams of a trace merged by time and decoded in batches, handed to Python as columns,
    row tuples, Arrow-layout tables or event ids. ``formats`` are ``(id, fields)`` per event;
    records of other ids come out without values. With ``strict`` off a corrupt page is skipped
    (counted in :meth:`stats`); with ``raw`` each record's payload comes too. Each read method
    returns the next batch, or None at the end."""

    def __init__(self, streams: Sequence[_Stream], formats: Sequence[tuple[int, Sequence[_FieldSpec]]], *,
                 long_size: int = 8, big_endian: bool = False, page_size: int = 4096, strict: bool = True,
                 raw: bool = False) -> None: ...

    def read_columns(self, max_events: int = 1048576) -> Optional[_Columns]:
        """The next batch as columns."""

    def read_tables(self, max_events: int = 1048576, threads: Optional[_Threads] = None
                    ) -> Optional[tuple[int, list[Optional[_Table]]]]:
        """(events, per format: None without rows, or its table) with columns as bytes in Arrow's
        layout (native/columns.h); ``threads`` adds each row's index in them and its tgid."""

    def plan_slices(self, n: int, /) -> int:
        """The number of time slices (at most ``n``) the pages are cut into for :meth:`read_slices`,
        or 0 when they cannot be (a page that does not load: read them merged)."""

    def read_slices(self, first: int, count: int, threads: Optional[_Threads] = None, *, skip: int = 0
                    ) -> Optional[list[tuple[int, list[Optional[_SliceTable]]]]]:
        """Slices ``first`` .. ``first + count - 1``, decoded on ``count`` threads: per slice (events,
        tables as :meth:`read_tables` gives them, columns as :class:`ColumnBuffer`; None for the
        header columns of ``skip``: 1 ts, 2 cpu, 4 tid, 8 thread, 16 tgid); None when a slice's time
        stamps are out of order or a page is bad (read them merged)."""

    def read_rows(self, max_events: int = 65536) -> Optional[tuple[list[_Row], list[_Lost]]]:
        """The next batch as (rows, lost)."""

    @overload
    def format_text(self, formatter: "TextFormatter", max_events: int = 262144) -> Optional[tuple[int, bytes]]:
        """format_text(formatter, max_events=262144, *, fd=-1)

        Without ``fd``: the next batch of events as (count, text bytes); with an ``fd``: every
        remaining event formatted as it is merged, written to it, and their count returned."""
    @overload
    def format_text(self, formatter: "TextFormatter", max_events: int = 262144, *, fd: int = -1) -> int: ...

    def scan_ids(self, max_events: int = 1048576) -> Optional[list[int]]:
        """The sorted event ids of the next batch."""

    def stats(self, /) -> list[_StreamStats]:
        """Per-stream page and event counts."""

    def close(self, /) -> None:
        """Release the buffers."""

    @property
    def short_records(self) -> int:
        """Records so far too short for one of their fields."""


@final
class ColumnBuffer:
    """A column decoded by :meth:`Reader.read_slices`: a read-only buffer (``bytes(b)`` copies it);
    made only by the reader."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...


class _RecorderStats(TypedDict):
    cpu: int
    bytes: int  # written, page padding included
    splice_bytes: int
    read_bytes: int
    pages: int
    wakeups: int
    errno: int
    error_op: Optional[str]


@final
class Recorder:
    """Per-CPU copying of ``trace_pipe_raw`` (``in_fds``) to files (``out_fds``), a thread per CPU.
    ``poll_ms`` is the longest sleep before moving data anyway (<= 0: 250), ``idle_ms`` the sleep
    after a wake-up that found only a partial page (<= 0: 1), ``pipe_size`` the splice pipe size to
    ask for (0: 1 MiB), ``use_read`` copies with read(2) instead of splice, ``flush_max_bytes`` caps
    the final drain per CPU (0: until the buffer is empty)."""

    def __init__(self, cpus: Sequence[int], in_fds: Sequence[int], out_fds: Sequence[int], subbuf_size: int, *,
                 poll_ms: int = 0, idle_ms: int = 0, pipe_size: int = 0, use_read: bool = False,
                 flush_max_bytes: int = 0) -> None: ...

    def start(self, /) -> None:
        """Start the per-CPU threads."""

    def stop(self, /) -> bool:
        """Drain, join the threads; True unless a CPU failed (see :meth:`stats`)."""

    def stats(self, /) -> list[_RecorderStats]:
        """Per-CPU counters."""

    @property
    def running(self) -> bool:
        """Threads are running."""


class _PerfRingStats(TypedDict):
    cpu: int
    bytes: int  # records copied
    samples: int
    lost: int  # events the kernel lost (PERF_RECORD_LOST counts)
    lost_records: int
    errno: int
    error_op: Optional[str]


@final
class PerfRings:
    """Copying of perf event mmap rings (``perf_fds``, one per CPU, mapped with ``data_pages`` data
    pages, a power of two) to files (``out_fds``), verbatim, from one thread; samples and lost events
    counted. ``poll_ms`` is the longest sleep before moving data anyway (<= 0: 100). ``stream``:
    (pages_fds, events, long_size, big_endian, page_size, callchain_id): each CPU's samples are written
    as they come into pages to its ``pages_fds`` entry, each event's record then its callchain record
    (native/chainmerge.h, ``cm_stream``; ``events`` as :func:`write_callchains` takes them, every one
    flag 1, and flag 4 only with its last item), and only the other records go to ``out_fds``. Its
    last item, ``stack`` = (nregs, ip, sp, bp, max_frames) or None: samples of flag 4 are walked
    natively by the rules :meth:`put_rules` gives (native/unwind.h), each address's rule asked for
    once (:meth:`wanted`); a sample whose walk needs a rule not known goes whole to ``out_fds``."""

    def __init__(self, cpus: Sequence[int], perf_fds: Sequence[int], out_fds: Sequence[int], data_pages: int, *,
                 poll_ms: int = 0,
                 stream: Optional[tuple[Sequence[int], Sequence[tuple[int, int, int]], int, bool, int, int,
                                        Optional[tuple[int, int, int, int, int]]]] = None
                 ) -> None: ...

    def start(self, /) -> None:
        """Start the copying thread."""

    def stop(self, /) -> bool:
        """Drain every ring, join the thread; True unless a CPU failed (see :meth:`stats`)."""

    def stats(self, /) -> list[_PerfRingStats]:
        """Per-CPU counters."""

    def streamed(self, /) -> list[tuple[int, int, list[int], int, int]]:
        """Per CPU of a ``stream``, once stopped: (samples written, pages written, the threads of the
        samples, samples whose stack copies were walked, samples with stack copies left whole); []
        without one."""

    def wanted(self, /) -> list[tuple[int, int]]:
        """The (pid, address) pairs whose rules the stream's walks wanted and did not have (each
        given once): [] without a ``stack``."""

    def put_rules(self, rules: Sequence[tuple[int, int, tuple[int, int, int, int, int, int]]], /) -> None:
        """Rules for the stream's walks: (pid, address, rule), a rule as :func:`unwind_copies`'s
        ``rule_of`` gives it (kind 2: none the walk can use)."""

    @property
    def running(self) -> bool:
        """The thread is running."""


_Mmap = tuple[int, int, int, int, int, int, int, int, int, bytes]


def write_callchains(src: Optional[Buffer], perf: Buffer, out_fd: int, long_size: int, big_endian: bool,
                     page_size: int, callchain_id: int, window_ns: int, events: Sequence[tuple[int, int, int]],
                     pids: Optional[Sequence[int]], chains: Optional[tuple[Buffer, Buffer]] = None
                     ) -> tuple[int, int, int, list[tuple[int, int, bytes]], list[_Mmap]]:
    """One CPU's pages ``src`` written to ``out_fd`` with the perf samples of ``perf`` in them
    (native/chainmerge.h): ``events`` are (perf id, ftrace event id, flags: 1 the samples carry the
    event's record, 2 an entry uprobe's stack word, 4 the user registers and a stack copy, 8 the record
    without a callchain record after it); ``pids``
    keep only their samples (sorted; None: all); ``chains`` the callchains that replace the kernel's
    in samples of flag 4: (u64 triples (record offset, start, count) sorted by offset, u64 addresses
    the triples point into). Returns (callchains written, samples left over, pages written, the (pid,
    tid, name) of each exec the ring reported, and each executable mapping it reported: (pid, address,
    length, file offset, device major, minor, inode, prot, flags, path))."""


def perf_names(perf: Buffer) -> tuple[list[tuple[int, int, bytes]], list[_Mmap]]:
    """The (pid, tid, name) of each exec and each executable mapping the perf records ``perf`` report
    (as :func:`write_callchains` returns them)."""


def unwind_copies(perf: Buffer, events: Sequence[tuple[int, int, int]], nregs: int, ip: int, sp: int, bp: int,
                  max_frames: int, rule_of: Callable[[int, int], Optional[tuple[int, int, int, int, int, int]]]
                  ) -> tuple[bytes, bytes, list[tuple[int, int, int, int, int, bytes, int, int]]]:
    """The stack copies of the samples of ``perf`` (one CPU's perf records; ``events`` as
    :func:`write_callchains` takes them, the samples of flag 4 with ``nregs`` user registers; ``ip``,
    ``sp``, ``bp`` the indices of those registers, ``bp`` -1 if absent) unwound by simple call-frame
    rules (native/unwind.h). ``rule_of(pid, address)``, asked once per process and address: None, or
    (kind 0 a step / 1 the outermost frame, the CFA's register 0 sp / 1 bp, its offset, the return
    address's offset from the CFA, the frame pointer's rule 0 kept / 1 saved / 2 lost, its offset from
    the CFA). Returns the u64 triples (record offset, start, count) of every sample in order, the u64
    addresses they point into (innermost first), and the samples a step of which needs more than
    those rules, or whose frames ``max_frames`` do not all hold: (the index of its triple, whose count
    is 0; its record's offset, pid, tid, time, registers; its copy's offset and length in ``perf``)."""


def fold_stacks(streams: Sequence[tuple[int, Buffer, int, int]], selected: Sequence[int],
                stacks: Sequence[tuple[int, int, Optional[tuple], Optional[tuple]]],
                probe_ips: Sequence[tuple[int, tuple]], *, long_size: int = 8, big_endian: bool = False,
                page_size: int = 4096, strict: bool = True) -> tuple[int, int, list[tuple[bytes, int]]]:
    """The events of ids ``selected`` in the pages of ``streams`` (as :class:`Reader` takes them)
    counted by thread and stacks (native/fold.h): ``stacks`` the stack record formats, (id, kind 0
    kernel / 1 user, the field spec of its first field or None, of its address array or None);
    ``probe_ips`` the probe address field of each probe event, (id, field spec). Returns (records
    read, events counted, [(key, count)]): a key is the pid (u32), then per stack its kind, tgid and
    address count (u32 each) and the addresses (u64 each), innermost first."""


def dwarf_definitions(info: Buffer, info_base: int, abbrev: Buffer, strtab: Buffer, line_strtab: Buffer,
                      str_offsets: Buffer, unit: tuple[int, int, int, int, int, int, int], strings: dict[int, str],
                      /) -> Optional[list[tuple[bool, str, tuple[int, int]]]]:
    """The definitions of one DWARF unit that the name index lists (native/dwscan.h), as
    ``dieindex.UnitScanner.definitions`` gives them: (is a function, name, (unit offset, DIE offset))
    under each of a definition's names, in DIE order. ``info`` holds ``.debug_info`` from
    ``info_base`` on (positions are section offsets); ``abbrev``, ``strtab``, ``line_strtab`` and
    ``str_offsets`` the other sections (empty when absent); ``unit`` is (offset, end, first DIE
    offset, abbrev offset, offset size, address size, version); ``strings`` keeps the names decoded,
    from one call to the next. None when the unit has a shape this scanner leaves to the Python one."""


def dwarf_instances(info: Buffer, info_base: int, abbrev: Buffer, unit: tuple[int, int, int, int, int, int, int],
                    unit_base: int, /) -> Optional[dict[int, list[tuple[int, Optional[int]]]]]:
    """The subprograms and inline instances with code of one DWARF unit by the offset of their
    abstract origin in that unit (native/dwscan.h), as ``dieindex.instances_by_origin`` gives them:
    origin → [(offset, the offset of the nearest enclosing DIE with code, for an inline instance, else
    None)], in DIE order. ``info`` holds ``.debug_info`` from ``info_base`` on, or the unit's bytes
    alone; ``unit`` is (offset, end, first DIE offset, abbrev offset, offset size, address size,
    version), its offsets positions in ``info``; ``unit_base`` is the section offset of ``info``'s
    first position (0 when it holds the whole section): a DW_FORM_ref_addr origin, a section offset,
    is made a position by taking it away, and the offsets given back are section offsets. None when
    the unit has a shape this scanner leaves to the Python one."""


def cxa_demangle(names: Sequence[str], /) -> Optional[list[Optional[str]]]:
    """Each of ``names`` demangled by the C++ runtime's ``__cxa_demangle`` (native/demangle.h): the
    process's, else libstdc++.so.6's, found at the first call; as :mod:`probectl.debuginfo.demangle`'s
    ctypes call gives it: the name's UTF-8 bytes (surrogate escapes as the bytes they stand for) read
    to their first NUL, the text decoded as UTF-8 with bad bytes replaced, None for a name the
    demangler refuses. None (the whole answer) when there is no ``__cxa_demangle`` to call."""

def demangled_signatures(texts: Sequence[str], /) -> list[Optional[str]]:
    """:func:`probectl.debuginfo.demangle.signature` of each of ``texts`` (demangled C++ functions),
    the reference this equals (native/demangle.h): the function without a template's return type
    (``int f<int>(int)`` -> ``f<int>(int)``); None for a text that is not all ASCII, which is left to
    the reference."""

def elf_symbols(raw: Buffer, strtab: Buffer, is64: bool, big_endian: bool, versions: Optional[tuple[int, ...]],
                version_names: dict[int, tuple[str, bool]], xindex: Optional[tuple[int, ...]], cls: type,
                table: str, types: tuple[str, ...], binds: tuple[str, ...], /) -> tuple[list[int], list[Any], int]:
    """The named symbols of the whole ELF symbol table ``raw`` (native/elfsym.h), as
    :class:`probectl.debuginfo.symtab.SymbolTables` decodes them, its reference: (entry indexes,
    symbols, the index of the first entry whose name lies outside ``strtab``, where the list stops,
    or -1). Each symbol is an object of ``cls`` with the fields of ``ElfSymbol`` (name, value, size,
    type, bind, shndx, version, default_version, table); ``versions`` the table's ``.gnu.version``
    indexes and ``version_names`` their (name, defined in this file); ``xindex`` its
    ``SHT_SYMTAB_SHNDX`` section indexes; ``types`` and ``binds`` the 16 names of each."""

# An op of a plan: literal bytes, or (src, conv, flags, letter, cast_size, cast_signed, width, prec,
# field, index) (native/textfmt.h).
_Op = Union[bytes, tuple[int, int, int, int, int, int, int, int, int, int]]
# None: the event is not printed; True: each event through line(); or its ops.
_Plan = Union[None, Literal[True], Sequence[_Op]]


@final
class TextFormatter:
    """Plans and name tables for :meth:`Reader.format_text`; the callables fill them when an event
    needs what is missing: ``plan(id)`` the event's plan, ``thread(tid)`` (comm as UTF-8 bytes, tgid,
    the thread's pid in its PID namespace),
    ``symbol(tgid, addr)`` a name as UTF-8 bytes, ``line(row)`` the text of one event (str or bytes)
    from its :meth:`Reader.read_rows` tuple."""

    def __init__(self, plan: Callable[[int], _Plan], thread: Callable[[int], tuple[bytes, int, int]],
                 symbol: Callable[[int, int], bytes], line: Callable[[_Row], Union[str, bytes]]) -> None: ...

    def set_plan(self, id: int, plan: _Plan, /) -> None:
        """Set the plan of an event id ahead of time."""


# A part of a key or value: (src, field or None, bucket, step, width) (native/aggregate.h).
_AggPart = tuple[int, Optional[_FieldSpec], int, int, int]
# A plan: (id, role, key parts, value part or None).
_AggPlan = tuple[int, int, Sequence[_AggPart], Optional[_AggPart]]


class _AggCounters(TypedDict):
    events: int
    unmatched: int
    replaced: int
    short_records: int
    pending: int


@final
class Aggregator:
    """Keyed counts, sums and latency pairs of fed pages: no Python object per event. ``time_div`` is
    the unit of latencies in ns (1: ns, 1000: us)."""

    def __init__(self, plans: Sequence[_AggPlan], *, time_div: int = 1) -> None: ...

    def feed(self, streams: Sequence[_Stream], *, long_size: int = 8, big_endian: bool = False,
             page_size: int = 4096, strict: bool = True) -> int:
        """Aggregate the records of the streams; the number read."""

    def entries(self, /) -> list[tuple[bytes, int, int, int, int]]:
        """[(key, count, sum, min, max)] of the answer table, in no particular order."""

    def pairs(self, /) -> tuple[bytes, bytes]:
        """(completion times, latencies) as native u64 bytes, one item per pair."""

    def counters(self, /) -> _AggCounters:
        """{events, unmatched, replaced, short_records, pending}."""
