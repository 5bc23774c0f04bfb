"""probectl: a dynamic-tracing probe manager (perf-probe definitions → kprobe/uprobe events).

``probectl.read_trace(path)`` reads a trace.dat file (see probectl.api); it is imported on first use
so that the command line does not pay for it.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name == "read_trace":
        from .api import read_trace

        return read_trace
    raise AttributeError(f"module 'probectl' has no attribute {name!r}")
