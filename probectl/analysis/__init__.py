"""Answers from events: histograms, counts, latency, reports and SQL.

``probectl hist`` and ``probectl latency`` aggregate in the kernel (hist triggers, synthetic events with
``onmatch``) where the kernel has them and from the live event stream where it does not; ``report``
and ``query`` answer from recordings (trace.dat), with DuckDB as the SQL engine. The aggregation
itself lives here; cli/ only parses options and prints.
"""
