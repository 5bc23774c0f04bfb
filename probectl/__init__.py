"""probectl: a dynamic-tracing probe manager (perf-probe definitions → kprobe/uprobe events)."""

__version__ = "0.1.0"
from .api import read_trace  # noqa: E402,F401
