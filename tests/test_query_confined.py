"""query reads the recordings it was given and nothing else (issue 26): the SQL of a query runs as
root, so a query someone shared must not read, write or attach any file, load or install an
extension, change a setting, or be more than one SELECT. Each attempt below fails with DuckDB's own
"disabled by configuration" / "configuration has been locked" or probectl's "query runs a SELECT
only", and leaves no file behind; the recordings (trace.dat and Parquet directories) still answer.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import fails, probectl

DATA = Path(__file__).parent / "data" / "tracedat"
SAMPLE = str(DATA / "sample-v7.dat")
DISABLED = "disabled by configuration"
LOCKED = "the configuration has been locked"
SELECT_ONLY = "query runs a SELECT only"


def refused(sql: str, *inputs: str) -> str:
    err = fails("query", *(inputs or ("-i", SAMPLE)), sql)
    return err


@pytest.mark.parametrize("sql,why", [
    ("SELECT * FROM read_csv('/etc/shadow', header=false)", DISABLED),
    ("SELECT * FROM read_csv_auto('/etc/passwd')", DISABLED),
    ("SELECT * FROM read_text('/etc/hostname')", DISABLED),
    ("SELECT * FROM read_blob('/etc/hostname')", DISABLED),
    ("SELECT * FROM read_json('/etc/hostname')", DISABLED),
    ("SELECT * FROM read_parquet('/etc/hostname')", DISABLED),
    ("SELECT * FROM sniff_csv('/etc/passwd')", DISABLED),
    ("SELECT * FROM glob('/root/**')", DISABLED),
    ("SELECT * FROM '/etc/passwd.csv'", DISABLED),
    ("SELECT * FROM query('SELECT * FROM read_text(''/etc/hostname'')')", DISABLED),
    ("LOAD httpfs", SELECT_ONLY),
    ("INSTALL httpfs", SELECT_ONLY),
    ("SET memory_limit = '1GB'", SELECT_ONLY),
    ("PRAGMA memory_limit = '1GB'", SELECT_ONLY),
    ("RESET lock_configuration", SELECT_ONLY),
    ("CREATE TABLE t AS SELECT 1", SELECT_ONLY),
    ("EXPLAIN ANALYZE SELECT 1", SELECT_ONLY),
    ("SELECT 1; SELECT 2", "2 statements"),
    ("SELECT 1; COPY (SELECT 1) TO '/tmp/x'", "2 statements"),
    ("  ;  ", "no statement"),
    ("PIVOT events ON comm", "PIVOT without IN"),
    # (bytes of an argument that are not UTF-8, which DuckDB cannot take: found by the fuzz pass)
    (os.fsdecode(b"SELECT * FR\xffOM read_text('/etc/hostname')"), "the SQL is not UTF-8 text: byte 0xff at character 12"),
])
def test_a_query_reaches_nothing_but_the_recordings(sql, why):
    assert why in refused(sql), sql


def test_writes_and_attaches_leave_no_file(tmp_path):
    """COPY ... TO, EXPORT DATABASE and ATTACH are refused as statements; the COPY TO, ATTACH and
    EXPORT that DuckDB would run are also refused by its configuration (checked on the database
    itself, past probectl's statement check), and no file is made."""
    keys = tmp_path / "authorized_keys"
    for sql in (f"COPY (SELECT 'ssh-ed25519 AAAA x') TO '{keys}' (FORMAT csv, HEADER false, QUOTE '')",
                f"EXPORT DATABASE '{tmp_path / 'exp'}'", f"ATTACH '{tmp_path / 'a.db'}' AS a"):
        assert SELECT_ONLY in refused(sql), sql
    from probectl.analysis.columns import open_recordings
    from probectl.analysis.sql import RecordingsDatabase

    import duckdb
    with RecordingsDatabase(list(open_recordings([DATA / "sample-v7.dat"]))) as db:
        for sql in (f"COPY (SELECT 'ssh-ed25519 AAAA x') TO '{keys}' (FORMAT csv, HEADER false, QUOTE '')",
                    f"EXPORT DATABASE '{tmp_path / 'exp'}'", f"ATTACH '{tmp_path / 'a.db'}' AS a",
                    "SELECT * FROM read_text('/etc/hostname')", "LOAD httpfs", "INSTALL httpfs"):
            with pytest.raises(duckdb.Error, match="disabled"):
                db.con.execute(sql)
        for sql in ("SET enable_external_access = true", "SET lock_configuration = false",
                    "SET memory_limit = '1GB'", "SET autoload_known_extensions = true",
                    "SET allowed_paths = ['/etc/shadow']", "SET allowed_directories = ['/']"):
            with pytest.raises(duckdb.Error, match="locked"):
                db.con.execute(sql)
    assert list(tmp_path.iterdir()) == []


def test_the_recordings_still_answer(tmp_path):
    """A trace.dat, and a directory of Parquet datasets, which DuckDB reads from its files when
    queried: both answer under the lock (and the Parquet directory's own files are the only paths
    it may open: another file beside them is refused)."""
    rows = json.loads(probectl("query", "--json", "-i", SAMPLE,
                               "SELECT count(*) AS n FROM syscalls.sys_enter_getpid").stdout)
    assert rows == [{"n": 100}]
    out = tmp_path / "pq"
    probectl("script", "-i", SAMPLE, "--format", "parquet", "-o", str(out))
    rows = json.loads(probectl("query", "--json", "-i", str(out), "-i", SAMPLE, "--name", "file",
                               "SELECT recording, count(*) AS n FROM syscalls.sys_enter_getpid "
                               "GROUP BY ALL ORDER BY ALL").stdout)
    assert [r["n"] for r in rows] == [100, 100]
    (out / "other.csv").write_text("secret\n")
    assert DISABLED in refused(f"SELECT * FROM read_csv('{out / 'other.csv'}')", "-i", str(out))
    files = sorted(out.rglob("*.parquet"))
    got = json.loads(probectl("query", "--json", "-i", str(out),
                              f"SELECT count(*) AS n FROM read_parquet('{files[0]}')").stdout)
    assert got and got[0]["n"] > 0


def test_report_runs_under_the_lock_too(tmp_path):
    """report's SQL engine (a Parquet directory) runs on the same locked database."""
    out = tmp_path / "pq"
    probectl("script", "-i", SAMPLE, "--format", "parquet", "-o", str(out))
    rep = json.loads(probectl("report", "--json", "-i", str(out)).stdout)
    assert rep["total"] > 0


def test_a_query_that_spills_stays_in_a_private_bounded_directory(tmp_path, monkeypatch):
    """What does not fit in memory spills to a private directory (not DuckDB's default ``.tmp`` in the
    working directory, up to 90% of that disk), bounded by half the free space there and removed at
    the end; the query cannot move it (the setting is locked)."""
    import duckdb
    import shutil
    from probectl.analysis.columns import open_recordings
    from probectl.analysis.sql import SPILL_SHARE, RecordingsDatabase

    monkeypatch.chdir(tmp_path)
    with RecordingsDatabase(list(open_recordings([DATA / "sample-v7.dat"])), memory_limit="64MB", threads=1) as db:
        spill = Path(db.spill.name)
        (where, most), = db.con.execute("SELECT current_setting('temp_directory'), "
                                        "current_setting('max_temp_directory_size')").fetchall()
        assert Path(where) == spill and spill.stat().st_mode & 0o077 == 0
        # (DuckDB prints the size rounded, in its units)
        number, unit = most.split()
        assert float(number) * 1024 ** {"KiB": 1, "MiB": 2, "GiB": 3, "TiB": 4}[unit] \
            <= shutil.disk_usage(spill).free * SPILL_SHARE * 1.01
        # (64 MB do not hold this sort: without a temporary directory DuckDB fails it, out of memory)
        rows = db.sql("SELECT count(*) FROM (SELECT x, md5(x::VARCHAR) FROM range(3000000) t(x) ORDER BY 2)").rows
        assert rows == [(3000000,)]
        with pytest.raises(duckdb.Error, match="locked"):
            db.con.execute(f"SET temp_directory = '{tmp_path}'")
    assert not spill.exists() and list(tmp_path.iterdir()) == []
