"""probectl: a dynamic-tracing probe manager (perf-probe definitions → kprobe/uprobe events).

``probectl.read_trace(path)`` reads a trace.dat file (see probectl.api); it is imported on first use
so that the command line does not pay for it.

The package is laid out along its data flow, one package per stage; imports point down this map
and never back (``tests/test_layout.py`` checks it)::

    cli/                 click commands: parse options, call the stages below, print
      │
      ├─ probes/         the add transaction (parse, resolve, name under the lock, write all or none),
      │                  naming as perf names events, and the list / lines / vars views
      ├─ record/         a recording session: private instance, filters written, workload, per-CPU
      │                  native recorder, live streams for `trace`, clean-up of crashed runs
      ├─ script/, api    recorded events as text, CSV, JSON, folded stacks; the Python reading API
      ├─ analysis/       answers: hist and latency (kernel triggers or the live stream), report, SQL
      │                  (it may use record/ and script/)
      └─ pictures/       flame graphs, off-CPU graphs, heat maps, timelines (it may use analysis/ and
      │                  script/)
    resolve/             ProbeSpec + target → ProbePoints: places from symbols, DWARF or BTF, and
      │                  C expressions → kernel fetch text (one member-chain walker, fetch.py)
      ├─ spec/, filters/ probe definitions and event filters: text → checked trees (grammar/*.lark;
      │                  spec/ runs parser tables generated from its grammar, filters/ runs lark)
      ├─ target/         what is probed: binaries and libraries, the kernel, its modules
      └─ debuginfo/      reading files only: elf, symtab, sdt, kallsyms, indexcache, place, typemodel;
                         dwarf/ (DIEs, names, lines, locations, call frames, types), btf/
      │
    arch/                x86-64 facts: registers, instruction lengths

    shared vocabulary and one-file layers: errors, events (definition lines), formats (event
    formats), tracefs (the kernel's tracing files), ringbuf (native pages), tracedat/ (trace.dat
    files), compression (zlib and zstd for the ELF and trace.dat readers), grammars, cachedir, and
    the leaves every layer may use (dataclass, notice, termtext, regularfile, outputfile); ``_native``
    is the C core (``native/``).

docs/architecture.md walks one definition through these layers.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "read_trace":
        from .api import read_trace

        return read_trace
    raise AttributeError(f"module 'probectl' has no attribute {name!r}")
