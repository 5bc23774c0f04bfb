"""Recordings as Parquet datasets that a fleet can share: one dataset per event, hive-partitioned.

Layout, under the output directory::

    DIR/<system>.<event>/host=<host>/recording=<recording>/part-0.parquet

One directory per event, because each event has its own columns (a dataset has one schema); inside,
``host`` and ``recording`` partitions, so that the files of many machines and captures copied into
one ``DIR`` read as one table per event: ``read_parquet('DIR/probe_libc.malloc/**/*.parquet',
hive_partitioning = true)`` in DuckDB, ``spark.read.parquet('DIR/probe_libc.malloc')`` in Spark,
``pl.scan_parquet(..., hive_partitioning=True)`` in Polars. (``system.event``, not ``system:event``:
Hadoop's paths take no colon.) Partition values keep letters, digits and ``._-``; anything else
becomes ``_``.

The columns are the event tables' of :mod:`.columns` (typed: int64/uint64 numbers, strings, lists of
int64 for arrays, binary), without ``host`` and ``recording``, which the paths carry.

Writing is all or nothing: every file is first written into a private staging directory inside
``DIR`` and moved into place only when all are complete (a rename within one file system). An error
or Ctrl-C before that leaves ``DIR`` as it was; an existing partition is never overwritten.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from ..dataclass import dataclass, field
from ..errors import ProbectlError
from .columns import EventTables

PART_FILE = "part-0.parquet"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


NAME_MAX = 255  # bytes of a file name (Linux): the partitions are directories named key=value


def partition_value(text: str) -> str:
    """A value safe in a hive path (``host=...``): letters, digits and ``._-`` kept, the rest ``_``."""
    value = _UNSAFE.sub("_", text)
    return value if value.strip(".") else "_"


def dataset_name(event: str) -> str:
    """The directory of the dataset of ``system:event``."""
    system, _, name = event.partition(":")
    return partition_value(f"{system}.{name}")


@dataclass
class ParquetResult:
    files: list[Path] = field(default_factory=list)
    rows: int = 0


@dataclass
class ParquetDatasets:
    """The datasets of a directory written by :func:`write_parquet`: ``events`` maps each
    ``system:event`` to its files (found once: the SQL over them may open these and no other)."""

    path: Path
    events: dict[str, list[str]] = field(default_factory=dict)


def _is_utf8(text: str) -> bool:
    try:
        text.encode()
        return True
    except UnicodeEncodeError:
        return False


def _utf8_name(directory: Path) -> str:
    """A name of ``directory`` that DuckDB, which names files in UTF-8, can open: its path, or, when
    that is not UTF-8, ``/proc/self/fd/N`` of a descriptor of it kept open for the process's life."""
    if _is_utf8(str(directory)):
        return str(directory)
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise ProbectlError(f"cannot read {directory}: {err.strerror}") from None
    return f"/proc/self/fd/{fd}"


def find_datasets(directory: Path | str) -> ParquetDatasets:
    """The event datasets under ``directory`` (``SYSTEM.EVENT/**/*.parquet``); an error when there
    are none (it is not such a directory)."""
    out = ParquetDatasets(Path(directory))
    try:
        entries = sorted(p for p in out.path.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as err:
        raise ProbectlError(f"cannot read {directory}: {err.strerror}") from None
    base = _utf8_name(out.path)
    for d in entries:
        system, dot, name = d.name.partition(".")
        found = sorted(f.relative_to(out.path) for f in d.rglob("*.parquet") if f.is_file()) if dot and name else []
        # (DuckDB names files in UTF-8: a part of a name that is not is none write_parquet made)
        files = [f"{base}/{f}" for f in found if _is_utf8(str(f))]
        if files:
            out.events[f"{system}:{name}"] = files
    if not out.events:
        raise ProbectlError(f"{directory} is a directory without Parquet datasets",
                            "give a trace.dat file, or a directory written by "
                            "'probectl script --format parquet -o DIR'")
    return out


def partition_path(event: str, host: str, recording: str) -> Path:
    return Path(dataset_name(event)) / f"host={partition_value(host)}" / f"recording={partition_value(recording)}"


def write_parquet(tables: EventTables, out_dir: Path | str, *, host: str = "", recording: str = "",
                  compression: str = "zstd") -> ParquetResult:
    """Write the events of one recording under ``out_dir`` (created when missing), atomically."""
    out = Path(out_dir)
    host = host or tables.host
    recording = recording or tables.recording
    if not tables.tables:
        raise ProbectlError(f"{tables.path} holds no events to write",
                            "record some first; 'probectl report -i FILE' shows what a file holds")
    if out.exists() and not out.is_dir():
        raise ProbectlError(f"{out} exists and is not a directory", "give -o a directory (it is created when missing)")
    for flag, key, value in (("--host", "host", host), ("--recording", "recording", recording)):
        if len(f"{key}={partition_value(value)}".encode()) > NAME_MAX:
            raise ProbectlError(f"the {key} name of {len(value):,} characters is longer than a directory name may be "
                                f"({NAME_MAX} bytes with '{key}=')", f"give a shorter {flag} NAME")
    targets = {event: partition_path(event, host, recording) for event in tables.tables}
    taken = [str(out / p) for p in targets.values() if (out / p).exists()]
    if taken:
        raise ProbectlError(f"{taken[0]} already exists" + (f" (and {len(taken) - 1} more)" if len(taken) > 1 else ""),
                            "name this recording apart with --recording NAME (or --host NAME), "
                            "or remove the old partition")
    try:
        out.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".probectl-staging-", dir=out))
    except OSError as err:
        raise ProbectlError(f"cannot create {out}: {err.strerror}", "give -o a writable directory") from None
    import pyarrow.parquet as pq  # (here: its import is a large part of `report`'s start-up, which reads no Parquet)

    result = ParquetResult()
    moved: list[Path] = []
    try:
        for event, table in tables.tables.items():
            part = staging / targets[event]
            part.mkdir(parents=True)
            with open(part / PART_FILE, "wb") as f:  # (opened here: pyarrow names a path in UTF-8 only)
                pq.write_table(table, f, compression=compression)
            result.rows += table.num_rows
        for event in tables.tables:  # all written: move each partition into place
            final = out / targets[event]
            final.parent.mkdir(parents=True, exist_ok=True)
            os.rename(staging / targets[event], final)
            moved.append(final)
            result.files.append(final / PART_FILE)
    except OSError as err:
        for path in moved:  # (a failure half-way through the moves: take back the ones made)
            shutil.rmtree(path, ignore_errors=True)
        raise ProbectlError(f"cannot write Parquet files under {out}: {err.strerror or err}",
                            "check the free space and the permissions of the directory") from None
    except BaseException:
        for path in moved:
            shutil.rmtree(path, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result
