"""report, query and script --format parquet: answers from recordings, checked against what a program did.

The fixture program (fixtures/answers_target.c) calls alloc_block(size) with sizes from fixed tables
from two callers in two processes (itself and a child named answers-child) and tag_event(label), then
prints exactly what it did (COUNT/SIZE/LABEL/PID lines). It is probed with uprobes and recorded live;
the counts, sums, histograms and groups of report, query and the Parquet files must equal its lines.
The columnar path itself is checked against the row decoder on the committed sample files, and bad
input (unknown keys, fields and tables, bad SQL, truncated and empty recordings) must give an Error.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from tests.helpers import TRACEFS, build_fixture, fails, missing, probectl
from probectl.analysis import histogram
from probectl.analysis.columns import open_recordings, read_tables
from probectl.analysis.parquet import write_parquet
from probectl.errors import ProbectlError
from probectl.tracedat import open_trace

DATA = Path(__file__).parent / "data" / "tracedat"
G = f"pans{os.getpid()}"
ROUNDS = 7


def did(stdout: str) -> dict:
    """What answers_target printed it did."""
    got: dict = {"count": Counter(), "size": {}, "label": {}, "pid": {}}
    for line in stdout.splitlines():
        kv = dict(re.findall(r"(\w+)=(\S+)", line))
        if line.startswith("COUNT "):
            got["count"][(kv["comm"], kv["func"])] += int(kv["calls"])
        elif line.startswith("SIZE "):
            got["size"][int(kv["size"])] = int(kv["calls"])
        elif line.startswith("LABEL "):
            got["label"][kv["label"]] = int(kv["calls"])
        elif line.startswith("PID "):
            got["pid"][kv["comm"]] = int(kv["pid"])
    assert got["count"] and got["size"] and got["label"] and len(got["pid"]) == 2, stdout
    return got


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """answers_target recorded with probes on alloc_block (entry and return) and tag_event."""
    if os.geteuid() != 0:
        missing("live tracing tests need root")
    if not (TRACEFS / "uprobe_events").exists():
        missing(f"no tracefs with uprobe_events at {TRACEFS}")
    binary = build_fixture("answers_target")
    probectl("add", "-x", str(binary), f"{G}:alloc=alloc_block size=%di:u64",
             f"{G}:done=alloc_block%return r=$retval:u64", f"{G}:tag=tag_event label=+0(%di):string")
    try:
        path = tmp_path_factory.mktemp("answers") / "answers.dat"
        out = probectl("record", "-e", f"{G}:*", "-o", str(path), "--", str(binary), str(ROUNDS))
        empty = path.parent / "empty.dat"
        probectl("record", "-e", f"{G}:alloc", "--filter", "size == 77777", "-o", str(empty), "--",
                 str(binary), "1")
    finally:
        probectl("del", f"{G}:*", check=False)
    # (only this test's own probes are checked: other tests add and remove theirs meanwhile)
    assert f"{G}/" not in (TRACEFS / "uprobe_events").read_text()
    return path, did(out.stdout), empty


def report_json(*args: str) -> dict:
    return json.loads(probectl("report", "--json", *args).stdout)


def query_json(*args: str) -> list[dict]:
    return json.loads(probectl("query", "--json", *args).stdout)


# ---- report ---------------------------------------------------------------------------------------


def test_report_counts_each_event(recording):
    path, want, _ = recording
    got = report_json("-i", str(path))
    allocs = sum(n for (_, func), n in want["count"].items() if func == "alloc_block")
    tags = sum(n for (_, func), n in want["count"].items() if func == "tag_event")
    assert {r["event"]: r["samples"] for r in got["rows"]} == {
        f"{G}:alloc": allocs, f"{G}:done__return": allocs, f"{G}:tag": tags}
    assert got["total"] == 2 * allocs + tags
    text = probectl("report", "-i", str(path)).stdout
    assert text.startswith("# Available samples\n")
    assert re.search(rf"^\s+{allocs}\s+[\d.]+%\s+{G}:alloc$", text, re.M), text


def test_report_by_command_and_probed_function(recording):
    path, want, _ = recording
    got = report_json("-i", str(path), "--sort", "comm,sym", "-e", "alloc", "-e", "tag")
    assert {(r["comm"], r["sym"]): r["samples"] for r in got["rows"]} == dict(want["count"])
    counts = [r["samples"] for r in got["rows"]]
    assert counts == sorted(counts, reverse=True)
    # the return probe's function is the probed one too (its __probe_func)
    ret = report_json("-i", str(path), "--sort", "sym", "-e", "done__return")
    assert [r["sym"] for r in ret["rows"]] == ["alloc_block"]


def test_report_by_pid_and_by_field_value(recording):
    path, want, _ = recording
    got = report_json("-i", str(path), "--sort", "pid,comm", "-e", "alloc")
    per_comm = Counter()
    for (comm, func), n in want["count"].items():
        if func == "alloc_block":
            per_comm[comm] += n
    assert {(r["pid"], r["comm"]) for r in got["rows"]} == {(want["pid"][c], c) for c in per_comm}
    assert {r["comm"]: r["samples"] for r in got["rows"]} == dict(per_comm)
    labels = report_json("-i", str(path), "--sort", "label")
    assert {r["label"]: r["samples"] for r in labels["rows"]} == want["label"]
    top = report_json("-i", str(path), "--sort", "size", "-e", "alloc", "--top", "2")
    best = sorted(want["size"].items(), key=lambda kv: (-kv[1], kv[0]))[:2]
    assert [(r["size"], r["samples"]) for r in top["rows"]] == best


def test_report_hist_is_the_programs_distribution(recording):
    path, want, _ = recording
    buckets = Counter()
    for size, n in want["size"].items():
        buckets[0 if size <= 1 else (size - 1).bit_length()] += n  # (the kernel's .log2, computed here)
    got = report_json("-i", str(path), "--hist", "size", "-e", "alloc")
    (h,) = got["histograms"]
    assert {b["bucket"]: b["count"] for b in h["buckets"]} == dict(buckets)
    assert h["total"] == sum(want["size"].values())
    text = probectl("report", "-i", str(path), "--hist", "size", "-e", "alloc").stdout
    assert text.startswith(f"@size.log2: {sum(want['size'].values()):,} events\n")
    assert re.search(rf"^\(512K, 1M\]\s+{want['size'][1048576]} \|@+\s*\|$", text, re.M), text
    assert re.search(r"^\[0, 1\]\s+\d+ \|", text, re.M), text
    best = histogram.LOG2.label(max(buckets, key=buckets.__getitem__))
    assert re.search(rf"^{re.escape(best)}\s+{max(buckets.values())} \|@{{52}}\|$", text, re.M), text  # (a full bar)
    per_comm = report_json("-i", str(path), "--hist", "size", "-e", "alloc", "--sort", "comm")
    assert {h["keys"]["comm"] for h in per_comm["histograms"]} == set(want["pid"])


def test_report_sym_names_a_tracepoints_symbol_field(tmp_path):
    """sym of a tracepoint is its %pS field (kmem:kmalloc's call_site) named from the file's kallsyms:
    the functions trace-cmd report prints for the same file, counted."""
    if os.geteuid() != 0 or not (TRACEFS / "events" / "kmem" / "kmalloc").exists():
        missing("live tracing tests need root and the kmem:kmalloc tracepoint")
    if shutil.which("trace-cmd") is None:
        missing("trace-cmd (apt trace-cmd) is not installed")
    path = tmp_path / "kmalloc.dat"
    probectl("record", "-e", "kmem:kmalloc", "-o", str(path), "--", "/bin/true")
    text = subprocess.run(["trace-cmd", "report", str(path)], capture_output=True, text=True, check=True).stdout
    want = Counter(m.split("+")[0] for m in re.findall(r" call_site=(\S+)", text))
    assert want and not any(name.startswith("0x") for name in want), text
    got = report_json("-i", str(path), "--sort", "sym")
    assert {r["sym"]: r["samples"] for r in got["rows"]} == dict(want)


# The report shapes both engines answer: (sort keys, --hist field, -e globs, --top).
ENGINE_SHAPES = [([], None, [], 0), (["comm"], None, [], 0), (["event", "comm", "pid"], None, [], 0),
                 (["tid", "cpu"], None, [], 2), (["sym"], None, [], 0), (["comm", "sym"], None, ["alloc", "tag"], 0),
                 (["recording", "host", "event"], None, [], 0), (["size"], None, ["alloc"], 2), (["r", "pid"], None, [], 0),
                 ([], "size", ["alloc"], 0), (["comm"], "size", [], 0), (["comm", "pid"], "size", ["alloc"], 1),
                 (["cpu"], "__probe_ip", [], 0), (["sym"], "r", ["done__return"], 0), (["event"], "__probe_ip", [], 0)]


def _both_engines(paths, names, keys, value, globs, top):
    """The answer of the SQL reporter and of the aggregator (None: it leaves the shape to SQL)."""
    from probectl.analysis.report_aggregate import aggregate_report
    from probectl.analysis.report_sql import Reporter
    from probectl.analysis.sql import RecordingsDatabase

    with RecordingsDatabase(list(open_recordings(paths, names))) as db:
        reporter = Reporter(db, globs)
        sql = reporter.histograms(value, keys, top) if value else reporter.counts(keys or ["event"], top)
        sql_selected = reporter.selected
    got = aggregate_report(paths, names, globs, keys, value, top)
    if got is None:
        return sql, None
    assert got.selected == sql_selected
    return sql, got.histograms if value else got.report


def test_report_engines_give_the_same_answers(recording, tmp_path):
    """The aggregator (report's common shapes, no DuckDB) and SQL (every shape) count the same rows,
    in the same order, with the same totals and histograms: on the live recording, on two files at
    once, on trace-cmd's files (kernel events, ftrace's own formats); text keys are SQL's alone."""
    path, _, _ = recording
    copy = tmp_path / "again.dat"
    shutil.copy(path, copy)
    for paths, names in (([path], []), ([path, copy], ["one", "two"])):
        for keys, value, globs, top in ENGINE_SHAPES:
            sql, native = _both_engines(paths, names, keys, value, globs, top)
            assert native is not None and native == sql and (sql if value else sql.rows), (keys, value, globs, top)
    for paths in ([DATA / "sample-v7.dat"], [DATA / "tracecmd-v7-zstd.dat", DATA / "tracecmd-v6.dat"]):
        for keys, value in (([], None), (["comm", "sym"], None), (["cpu", "tid"], None), (["__syscall_nr"], None),
                            (["pid"], "old_pid"), ([], "__syscall_nr")):
            sql, native = _both_engines(paths, [], keys, value, [], 0)
            assert native is not None and native == sql and (sql if value else sql.rows), (paths, keys, value)
    for keys in (["label"], ["comm", "label"]):  # (text: SQL's)
        sql, native = _both_engines([path], [], keys, None, [], 0)
        assert native is None and sql.rows


def test_report_counts_without_duckdb(recording):
    """report's common shapes import neither DuckDB nor pyarrow (their import is a third of its time)."""
    path, _, _ = recording
    code = ("import sys\nfrom probectl.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('duckdb', 'pyarrow') if m in sys.modules), file=sys.stderr)")
    for args in (["--sort", "comm,sym"], ["--hist", "size", "--sort", "pid"]):
        out = subprocess.run([sys.executable, "-c", code, "report", "-i", str(path), *args],
                             capture_output=True, text=True, check=True)
        assert out.stderr.strip().endswith("[]"), out.stderr
    out = subprocess.run([sys.executable, "-c", code, "report", "-i", str(path), "--sort", "label"],
                         capture_output=True, text=True, check=True)
    assert "'duckdb'" in out.stderr


# ---- query ----------------------------------------------------------------------------------------


def test_query_tables_and_events_view(recording):
    path, want, _ = recording
    rows = query_json("-i", str(path), f"SELECT size, count(*) AS n FROM {G}.alloc GROUP BY size")
    assert {r["size"]: r["n"] for r in rows} == want["size"]
    # each call returns size + 1: the returns' sum exceeds the sizes' by the number of calls (the two
    # processes' calls interleave, so the tables are compared as wholes, not row by row)
    sums = query_json("-i", str(path), f"SELECT (SELECT sum(r) FROM {G}.done__return) - (SELECT sum(size) "
                      f"FROM {G}.alloc) AS d, (SELECT count(*) FROM {G}.done__return) AS n")
    assert sums == [{"d": sum(want["size"].values()), "n": sum(want["size"].values())}]
    per_comm = query_json("-i", str(path), "SELECT comm, count(*) AS n FROM events GROUP BY comm")
    want_comm = Counter()
    for (comm, func), n in want["count"].items():
        want_comm[comm] += 2 * n if func == "alloc_block" else n
    assert {r["comm"]: r["n"] for r in per_comm} == dict(want_comm)
    csv_text = probectl("query", "-i", str(path), "--csv", f"SELECT label, count(*) AS n FROM {G}.tag "
                        "GROUP BY label ORDER BY label").stdout
    assert csv_text == "label,n\n" + "".join(f"{k},{v}\n" for k, v in sorted(want["label"].items()))
    table = probectl("query", "-i", str(path), f"SELECT label, count(*) AS n FROM {G}.tag GROUP BY label "
                     "ORDER BY n DESC").stdout.splitlines()
    assert table[0].split() == ["label", "n"] and table[2].split() == ["gamma", str(want["label"]["gamma"])]


def test_query_lists_its_tables(recording):
    path, _, _ = recording
    text = probectl("query", "-i", str(path), "--list-tables").stdout
    for name in ("events", f"{G}.alloc", f"{G}.done__return", f"{G}.tag"):
        assert re.search(rf"^{re.escape(name)}\s", text, re.M), text
    assert "size ubigint" in text and "label varchar" in text and "comm varchar" in text


def test_query_many_recordings(recording, tmp_path):
    path, want, _ = recording
    copy = tmp_path / "answers.dat"
    shutil.copy(path, copy)
    err = fails("query", "-i", str(path), "-i", str(copy), "SELECT 1")
    assert "two recordings are named 'answers'" in err and "--name" in err
    rows = query_json("-i", str(path), "-i", str(copy), "--name", "first", "--name", "second",
                      f"SELECT recording, host, count(*) AS n FROM {G}.tag GROUP BY ALL ORDER BY recording")
    assert [r["recording"] for r in rows] == ["first", "second"]
    assert all(r["n"] == sum(want["label"].values()) and r["host"] == os.uname().nodename for r in rows)


def test_query_columns_a_text_names():
    from probectl.analysis.sqlcolumns import columns_named

    assert columns_named('SELECT comm, count(*), sum("Size") FROM p.malloc GROUP BY ALL') == {
        "select", "comm", "count", "sum", "size", "from", "p", "malloc", "group", "by", "all"}
    assert columns_named('SELECT "a ""b""" FROM t') == {"select", 'a "b"', "from", "t"}
    for sql in ("SELECT * FROM t", "SELECT t.* FROM t", "SELECT a*b FROM t", "SELECT COLUMNS('s.*') FROM t",
                "SELECT 1 FROM t NATURAL JOIN u", "SUMMARIZE t", "PIVOT t ON a USING sum(b)", "DESCRIBE t"):
        assert columns_named(sql) is None, sql


def test_query_reads_only_the_columns_duckdb_binds():
    from probectl.analysis.sqlcolumns import reads_only_columns

    con = duckdb.connect()
    cols = {"comm", "size", "ts"}
    assert reads_only_columns(con, "SELECT comm, count(*) AS n, sum(size) FROM a.b GROUP BY comm ORDER BY n", cols)
    assert reads_only_columns(con, "SELECT t.size FROM a.b t WHERE ts > 5", cols)
    assert reads_only_columns(con, "SELECT size, count(*) FROM a.b GROUP BY ALL ORDER BY ALL", cols)
    for sql in ("SELECT t FROM a.b t", "SELECT b FROM a.b", "SELECT size FROM a.b ORDER BY COLUMNS(*)", "SELECT * FROM a.b", "SELECT size FROM a.b NATURAL JOIN c",
                "SELECT x FROM (SELECT size FROM a.b) x", "SELEC 1", "CREATE TABLE x AS SELECT size FROM a.b",
                "SELECT list_transform([size], v -> v + 1) FROM a.b", "SELECT sise FROM a.b"):
        assert not reads_only_columns(con, sql, cols), sql


# (query, whether its columns are read alone)
QUERIES = [("SELECT comm, count(*) AS n, sum(size) AS s FROM {g}.alloc GROUP BY comm ORDER BY n DESC, comm", True),
           ("SELECT count(*) AS n FROM {g}.done__return", True),
           ("SELECT pid, tid, cpu, count(*) AS n FROM events GROUP BY ALL ORDER BY ALL", True),
           ("SELECT a.size, count(*) AS n FROM {g}.alloc a GROUP BY ALL ORDER BY ALL", True),
           ("SELECT label, count(*) AS n FROM {g}.tag GROUP BY label ORDER BY label", True),
           ("SELECT t FROM {g}.tag t ORDER BY t.ts LIMIT 3", False),
           ("SELECT * FROM {g}.alloc ORDER BY ts LIMIT 3", False),
           ("SELECT min(ts) AS first, max(r) AS most FROM {g}.done__return", True)]
SAMPLE_QUERIES = [("SELECT pid, common_pid, count(*) AS n FROM sched.sched_process_exec GROUP BY ALL ORDER BY ALL", True),
                  ("SELECT pid, comm, event, count(*) AS n FROM events GROUP BY ALL ORDER BY ALL", True),
                  ("SELECT count(*) AS n FROM ftrace.print", True)]


def test_query_decodes_the_columns_it_reads(recording):
    """query decodes only the columns its text names (the others are typed NULLs): the answers are
    those of every column decoded, for header columns under either name, aliases, a row as a
    struct, ``*``; and a table that names no column still counts its rows."""
    from probectl.analysis.sql import RecordingsDatabase
    from probectl.analysis.sqlcolumns import columns_named, reads_only_columns

    path, _, _ = recording
    for paths, queries in (([path], [(q.format(g=G), alone) for q, alone in QUERIES]),
                           ([DATA / "sample-v7.dat", DATA / "tracecmd-v7-zstd.dat"], SAMPLE_QUERIES)):
        with RecordingsDatabase(list(open_recordings(paths))) as db:
            for sql, alone in queries:
                assert (columns_named(sql) is not None and reads_only_columns(db.con, sql, db.column_names)) == alone
                want = [dict(zip(r.keys(), r.values())) for r in json.loads(json.dumps(
                    [dict(zip(db.sql(sql).columns, row)) for row in db.sql(sql).rows], default=str))]
                args = [a for p in paths for a in ("-i", str(p))]
                assert json.loads(json.dumps(query_json(*args, sql), default=str)) == want, sql
    # what was decoded: the named columns, the header ones under both names; one column of the others
    (tables,) = open_recordings([DATA / "sample-v7.dat"], columns={"pid", "select", "comm"})
    assert tables.tables["sched:sched_process_exec"].schema.names == ["common_pid", "comm", "pid"]
    assert tables.tables["syscalls:sys_enter_getpid"].schema.names == ["pid", "comm"]
    assert tables.schemas["sched:sched_process_exec"].names[:5] == ["ts", "cpu", "tid", "common_pid", "comm"]
    (tables,) = open_recordings([DATA / "sample-v7.dat"], columns={"nothing"})
    assert {t.schema.names[0] for t in tables.tables.values()} == {"cpu"}
    for with_slices in (True, False):  # (the merged reader, where a file's slices cannot be cut, alike)
        with open_trace(DATA / "sample-v7.dat") as trace:
            got = read_tables(trace, columns={"ts", "__syscall_nr"}, workers=None if with_slices else 0)
        assert got.tables["syscalls:sys_enter_getpid"].schema.names == ["ts", "__syscall_nr"]
        assert got.tables["syscalls:sys_enter_getpid"].num_rows == 100


# ---- parquet ---------------------------------------------------------------------------------------


def test_parquet_datasets_read_back_in_duckdb(recording, tmp_path):
    path, want, _ = recording
    out = tmp_path / "fleet"
    probectl("script", "-i", str(path), "--format", "parquet", "-o", str(out))
    host = re.sub(r"[^A-Za-z0-9._-]", "_", os.uname().nodename)
    part = out / f"{G}.alloc" / f"host={host}" / "recording=answers" / "part-0.parquet"
    assert part.is_file()
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "the staging directory is left"
    probectl("script", "-i", str(path), "--format", "parquet", "-o", str(out), "--recording", "again", "-e", "alloc")
    rows = duckdb.sql(f"SELECT recording, size, count(*) FROM read_parquet('{out}/{G}.alloc/**/*.parquet', "
                      "hive_partitioning = true) GROUP BY ALL").fetchall()
    for rec in ("answers", "again"):
        assert {s: n for r, s, n in rows if r == rec} == want["size"]
    types = dict(duckdb.sql(f"DESCRIBE SELECT * FROM '{part}'").fetchall() and
                 [(r[0], r[1]) for r in duckdb.sql(f"DESCRIBE SELECT * FROM '{part}'").fetchall()])
    assert types["size"] == "UBIGINT" and types["ts"] == "BIGINT" and types["comm"] == "VARCHAR"
    labels = duckdb.sql(f"SELECT label, count(*) FROM '{out}/{G}.tag/*/*/*.parquet' GROUP BY ALL").fetchall()
    assert dict(labels) == want["label"]
    # another reader: Arrow's dataset reader, with its own hive partitioning
    import pyarrow.dataset as ds

    table = ds.dataset(out / f"{G}.alloc", format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 2 * sum(want["size"].values())
    assert set(table.column("recording").to_pylist()) == {"answers", "again"}
    assert Counter(table.column("size").to_pylist()) == Counter({s: 2 * n for s, n in want["size"].items()})
    # the directory is an input of query, with trace.dat files
    rows = query_json("-i", str(out), "-i", str(path), "--name", "file", f"SELECT host, recording, count(*) AS n "
                      f"FROM {G}.alloc GROUP BY ALL ORDER BY recording")
    n = sum(want["size"].values())
    assert rows == [{"host": host, "recording": r, "n": n} for r in ("again", "answers")] + \
        [{"host": os.uname().nodename, "recording": "file", "n": n}]
    tables = probectl("query", "-i", str(out), "--list-tables").stdout
    assert re.search(rf"^{G}\.tag\s+{sum(want['label'].values())}\s", tables, re.M), tables
    # ... and of report: the same counts and histograms as of the trace.dat files they came from
    file_counts = report_json("-i", str(path), "--sort", "comm", "-e", "alloc")
    got = report_json("-i", str(out), "--sort", "recording,comm", "-e", "alloc")
    assert {(r["recording"], r["comm"]): r["samples"] for r in got["rows"]} == \
        {(rec, r["comm"]): r["samples"] for rec in ("answers", "again") for r in file_counts["rows"]}
    (file_hist,) = report_json("-i", str(path), "--hist", "size", "-e", "alloc")["histograms"]
    dir_hists = report_json("-i", str(out), "-i", str(path), "--name", "file", "--hist", "size", "-e", "alloc",
                            "--sort", "recording")["histograms"]
    assert sorted(h["keys"]["recording"] for h in dir_hists) == ["again", "answers", "file"]
    assert all(h["buckets"] == file_hist["buckets"] for h in dir_hists)
    sym = report_json("-i", str(out), "--sort", "sym", "-e", "tag")  # (Parquet keeps no process maps)
    assert sym["rows"] == [{"sym": "[unknown]", "samples": sum(want["label"].values())}]
    # an existing partition is never overwritten
    before = sorted(p for p in out.rglob("*"))
    err = fails("script", "-i", str(path), "--format", "parquet", "-o", str(out))
    assert "already exists" in err and "--recording" in err
    assert sorted(p for p in out.rglob("*")) == before


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_parquet_is_all_or_nothing(recording, tmp_path, monkeypatch, failure):
    """A write that fails (a full disk, Ctrl-C) after some files leaves the directory as it was.
    The failure is injected into pyarrow's writer: a full disk cannot be made on demand here."""
    path, _, _ = recording
    import pyarrow.parquet as pq

    real, calls = pq.write_table, []

    def failing(table, where, **kw):
        calls.append(where)
        if len(calls) == 2:
            raise failure
        return real(table, where, **kw)

    monkeypatch.setattr(pq, "write_table", failing)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with open_trace(path) as trace:
        tables = read_tables(trace)
    with pytest.raises(ProbectlError if isinstance(failure, OSError) else KeyboardInterrupt):
        write_parquet(tables, out)
    assert len(calls) == 2
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]


# ---- bad input ---------------------------------------------------------------------------------------


def test_unknown_keys_fields_and_tables(recording):
    path, _, _ = recording
    err = fails("report", "-i", str(path), "--sort", "comm,szie", "-e", "alloc")
    assert "unknown sort key 'szie'" in err and "did you mean size?" in err
    err = fails("report", "-i", str(path), "--hist", "sise", "-e", "alloc")
    assert "no field 'sise'" in err and "did you mean size?" in err
    err = fails("report", "-i", str(path), "--hist", "label")
    assert "needs an integer field" in err
    err = fails("report", "-i", str(path), "-e", "alocc")
    assert "no event of the recordings matches 'alocc'" in err
    err = fails("query", "-i", str(path), "SELECT * FROM alloc")
    assert "Table with name alloc does not exist" in err and f"{G}.alloc" in err
    err = fails("query", "-i", str(path), f"SELECT sise FROM {G}.alloc")
    assert 'Referenced column "sise" not found' in err and '"size"' in err
    err = fails("query", "-i", str(path), "SELEC 1")
    assert "syntax error" in err and "^" in err


def test_truncated_and_empty_recordings(recording, tmp_path):
    path, _, empty = recording
    cut = tmp_path / "cut.dat"
    data = path.read_bytes()
    cut.write_bytes(data[:len(data) - 3000])
    for args in (("report", "-i", str(cut)), ("query", "-i", str(cut), "SELECT 1"),
                 ("script", "-i", str(cut), "--format", "parquet", "-o", str(tmp_path / "p"))):
        err = fails(*args)
        assert "truncated" in err or "corrupt" in err, err
    assert not (tmp_path / "p").exists()
    err = fails("report", "-i", str(empty))
    assert "holds no events" in err
    assert query_json("-i", str(empty), "SELECT count(*) AS n FROM events") == [{"n": 0}]
    err = fails("script", "-i", str(empty), "--format", "parquet", "-o", str(tmp_path / "q"))
    assert "holds no events" in err
    assert not (tmp_path / "q").exists()


# ---- offline: the columnar path and the buckets --------------------------------------------------


@pytest.mark.parametrize("name", ["sample-v7.dat", "sample-v6.dat", "tracecmd-v7-zstd.dat"])
def test_columns_equal_the_row_decoder(name):
    """Every value of the Arrow tables equals the row decoder's (Event objects), event by event."""
    with open_trace(DATA / name) as trace:
        tables = read_tables(trace, batch_events=7)  # (small batches: many per table)
        formats = {f.full_name: f for f in trace.present_formats()}
        rows: dict[str, list] = {}
        for e in trace.events():
            if e.format is not None and e.name in tables.tables:
                rows.setdefault(e.name, []).append(
                    {"ts": e.ts, "cpu": e.cpu, "tid": e.pid, "pid": trace.tgids.get(e.pid, e.pid),
                     "comm": trace.comm(e.pid),
                     **{f.name: v for f, v in zip(formats[e.name].event_fields, e.values)}})
        tgids = dict(trace.tgids)
    assert sorted(rows) == sorted(tables.tables)
    for event, table in tables.tables.items():
        fixed = []
        for r in table.to_pylist():
            if "common_pid" in r:  # (a field named pid: the header's thread group is common_pid)
                assert r.pop("common_pid") == tgids.get(r["tid"], r["tid"])
            fixed.append({k: (tuple(v) if isinstance(v, list) else v) for k, v in r.items()})
        assert fixed == rows[event], event


def test_the_sql_bucket_is_the_kernels_log2_bucket():
    """ilog2(roundup_pow_of_two(v)) of the value as u64, as the kernel's .log2 and native/aggregate.c
    count: the SQL expression, exact and fast, and the Python rule agree with it."""
    values = [0, 1, 2, 3, 4, 5, 7, 8, 9, 1023, 1024, 1025, 2**53 - 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1, -1, -2,
              -2**63]

    def kernel(v):  # roundup_pow_of_two, then ilog2, on the u64
        u = v % 2**64
        p = 1
        while p < u:
            p <<= 1
        return p.bit_length() - 1

    con = duckdb.connect()
    for v in values:
        assert histogram.log2_bucket(v) == kernel(v), v
        exact = histogram.sql_log2_bucket(f"CAST('{v}' AS BIGINT)")
        assert con.execute(f"SELECT {exact}").fetchone()[0] == kernel(v), v
        fast = con.execute(f"SELECT {histogram.sql_log2_bucket_fast(f'CAST({v!r} AS BIGINT)')}").fetchone()[0]
        assert fast == kernel(v) or not histogram.exact_groups([(fast, v, v)]), v
    assert con.execute(f"SELECT {histogram.sql_log2_bucket(f'{2**64 - 1}::UBIGINT')}").fetchone()[0] == 64
    assert [histogram.LOG2.label(k) for k in (0, 1, 2, 3, 11, 20, 64)] == \
        ["[0, 1]", "(1, 2]", "(2, 4]", "(4, 8]", "(1K, 2K]", "(512K, 1M]", "(8E, 16E]"]
    assert [histogram.LOG2.range(k) for k in (0, 1, 3)] == [(0, 2), (2, 3), (5, 9)]
    assert histogram.Buckets(100).label(200) == "[200, 300)" and histogram.Buckets(1024).label(1024) == "[1K, 2K)"
    lines = histogram.histogram_lines(histogram.LOG2, {0: 2, 3: 4})
    assert [l.split("|")[0].split()[-1] for l in lines] == ["2", "0", "0", "4"]
    assert lines[3].endswith("|" + "@" * 52 + "|") and lines[0].endswith("|" + "@" * 26 + " " * 26 + "|")


def test_many_recordings_open_as_one_database():
    from probectl.analysis.sql import RecordingsDatabase

    recs = list(open_recordings([DATA / "sample-v7.dat", DATA / "tracecmd-v7-zstd.dat"]))
    with RecordingsDatabase(recs) as db:
        assert db.table_names() == ["events", "ftrace.print", "sched.sched_process_exec",
                                    "syscalls.sys_enter_getpid"]
        got = db.sql("SELECT recording, count(*) FROM syscalls.sys_enter_getpid GROUP BY ALL ORDER BY 1").rows
        assert got == [("sample-v7", 100), ("tracecmd-v7-zstd", 100)]
        # a field named like a header column keeps its name; the header one is common_<name>
        cols = [c for c, _ in db.describe("sched.sched_process_exec")]
        assert cols[:5] == ["ts", "cpu", "tid", "common_pid", "comm"] and "pid" in cols


def test_hist_values_next_to_large_powers_of_two_are_exact():
    """floor(log2(x)) of a double puts 2^53 + 1 ... 2^64 - 1 next to a power of two in the wrong
    bucket; the histogram sees it from the buckets' extremes and counts them exactly."""
    import pyarrow as pa

    from probectl.analysis.columns import EventTables, event_schema
    from probectl.analysis.report_sql import Reporter
    from probectl.analysis.sql import RecordingsDatabase
    from probectl.formats import EventFormat

    fmt = EventFormat.parse("name: big\nID: 7\nformat:\n"
                            "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
                            "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
                            "\tfield:u64 v;\toffset:8;\tsize:8;\tsigned:0;\n\nprint fmt: \"v=%llu\", REC->v\n", "t")
    values = [2**53 - 1, 2**53 + 1, 2**63 - 1, 2**64 - 1, 5, 0]
    n = len(values)
    schema = event_schema(fmt)
    table = pa.table([pa.array(range(n), pa.int64()), pa.array([0] * n, pa.int32()), pa.array([1] * n, pa.int32()),
                      pa.array([1] * n, pa.int32()), pa.array(["x"] * n).dictionary_encode().cast(schema[4].type),
                      pa.array(values, pa.uint64())], schema=schema)
    tables = EventTables(Path("big.dat"), "big", "h", {"t:big": fmt}, {"t:big": table}, n)
    assert not histogram.exact_groups([(64, 2**63 + 1, 2**64 - 1), (65, 2**64 - 1, 2**64 - 1)])
    with RecordingsDatabase([tables]) as db:
        (h,) = Reporter(db).histograms("v")
    assert h.counts == dict(Counter(histogram.log2_bucket(v) for v in values))


def test_hist_counts_by_value_or_by_event_alike(recording, monkeypatch):
    """A field of few values is counted by value first, one of many event by event: the two ways
    give the same histograms, with keys, with --top, of every integer field (sizes, times, ids)."""
    from probectl.analysis.report_sql import Reporter
    from probectl.analysis.sql import RecordingsDatabase

    path, _, _ = recording
    with RecordingsDatabase(list(open_recordings([path]))) as db:
        reporter = Reporter(db, ["alloc"])
        assert reporter._few_values(reporter._source([], "size")) and not reporter._few_values(
            reporter._source([], "size"), sample=1 << 16, few=1)
        for glob, value, keys, top in (("alloc", "size", [], 0), ("alloc", "size", ["comm"], 0),
                                       ("alloc", "size", ["comm", "pid"], 1), ("alloc", "__probe_ip", ["cpu"], 0),
                                       ("done__return", "r", [], 0), ("done__return", "r", ["pid"], 0)):
            reporter = Reporter(db, [glob])
            answers = []
            for few in (True, False):
                monkeypatch.setattr(Reporter, "_few_values", lambda self, source, few=few: few)
                answers.append([(h.keys, h.counts) for h in reporter.histograms(value, keys, top)])
            assert answers[0] == answers[1] and answers[0], (value, keys, top)


@pytest.mark.parametrize("be", [False, True])
def test_columns_of_every_field_kind(be):
    """Integers of every size and sign, text (fixed, __data_loc, __rel_loc; invalid UTF-8 as U+FFFD),
    integer arrays (fixed and dynamic, as lists), raw bytes, and a record too short for its fields
    (nulls), in both byte orders: the Arrow columns hold what the row decoder reads."""
    import pyarrow as pa

    from probectl.analysis.columns import ThreadNames, batch_of, event_schema
    from probectl.formats import EventFormat
    from probectl.ringbuf import EventReader, PageLayout
    from tests.test_native import KINDS_FORMAT, data_record, kinds_payload, make_page

    fmt = EventFormat.parse(KINDS_FORMAT, "test")
    payloads = [
        kinds_payload(7, -5, 65535, -100000, 2**64 - 1, -2**63, b"comm-\xc3\xa9", b"name", b"rel",
                      (1, 2, 2**32 - 1), (-1, 2, -32768), b"\x00\x01\xfe\xff\x10\x20", be=be),
        kinds_payload(8, 127, 0, 0, 0, 0, b"bad\xff\xfeutf8", b"x\xe9y", b"", (0, 0, 0), (), b"abcdef", be=be),
        kinds_payload(9, 1, 1, 1, 1, 1, b"short", b"n", b"r", (3, 4, 5), (7,), b"zzzzzz", be=be)[:40],
    ]
    page = make_page(b"".join(data_record(p, 10, be=be) for p in payloads), 1000, be=be)
    layout = PageLayout(8, be, 4096)

    def reader() -> EventReader:
        return EventReader([(0, page, 0, len(page))], [fmt], layout, strict=True)

    rows = [r for rs, _ in reader().rows() for r in rs]

    class Names:  # (what a trace file says of its threads: 7 is a thread of process 100)
        cmdlines = {8: "eight", 100: "main"}
        tgids = {7: 100, 8: 8}

    schema = event_schema(fmt)
    names = ThreadNames(Names())
    ((n, (table,)),) = list(reader().tables(threads=names.lookup))
    got = batch_of(table, schema, names).to_pylist()
    assert n == 3 and [g["tid"] for g in got] == [7, 8, 9] and [g["ts"] for g in got] == [r[0] for r in rows]
    # (the format has a field named comm: the header one is common_comm)
    assert [(g["pid"], g["common_comm"]) for g in got] == [(100, "<...>"), (8, "eight"), (9, "<...>")]

    def arrow_value(v):  # the row decoder's value as the Arrow column holds it
        if isinstance(v, str):
            return v.encode("utf-8", "surrogateescape").decode("unicode_escape").encode("latin-1").decode(
                "utf-8", "replace") if "\\x" in v else v
        return list(v) if isinstance(v, tuple) else v

    for g, r in zip(got, rows):
        want = {f.name: arrow_value(v) for f, v in zip(fmt.event_fields, r[6])}
        assert {k: g[k] for k in want} == want
    assert got[1]["comm"] == "bad\ufffd\ufffdutf8" and got[1]["name"] == "x\ufffdy"
    assert got[0]["arr"] == [1, 2, 2**32 - 1] and got[0]["dyn"] == [-1, 2, -32768] and got[1]["dyn"] == []
    assert got[0]["d64"] == 2**64 - 1 and got[0]["e64"] == -2**63 and got[0]["raw"] == b"\x00\x01\xfe\xff\x10\x20"
    assert got[2]["name"] is None and got[2]["dyn"] is None and got[2]["raw"] is None  # (past the short record)
    assert pa.types.is_large_list(schema.field("dyn").type) and pa.types.is_large_binary(schema.field("raw").type)


def test_progress_on_a_terminal_only():
    """Reading a recording shows its progress on stderr when that is a terminal, and clears it; not
    otherwise (a pipe or a file gets only the answer)."""
    import pty
    import select

    sample = str(DATA / "sample-v7.dat")
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "probectl", "report", "-i", sample], stderr=slave,
                              stdout=subprocess.PIPE, timeout=60)
        os.close(slave)
        slave = -1
        data = b""
        while select.select([master], [], [], 0.1)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    assert proc.returncode == 0 and b"syscalls:sys_enter_getpid" in proc.stdout
    assert re.search(rf"\r\[ reading {re.escape(sample)}: 104 events \]\x1b\[K\r\x1b\[K$", data.decode()), data
    piped = probectl("report", "-i", sample)
    assert piped.stderr == ""


def test_columns_under_address_sanitizer(tmp_path):
    """native/fuzz/columns_fuzz.c built with ASan+UBSan: random spans laid out as every kind of
    variable-size column in buffers of the exact sizes asked for, and random batches scattered over
    random thread tables, each checked against a plain computation."""
    from tests.helpers import run_sanitized, sanitized_driver

    exe = sanitized_driver(tmp_path, ["fuzz/columns_fuzz.c", "columns.c", "ringbuf.c", "reader.c"])
    for seed in ("1", "2"):
        assert run_sanitized(exe, "20000", seed, timeout=120) == "ok 20000\n"


def test_report_and_query_say_which_formats_could_not_be_read(tmp_path):
    """A file whose format texts do not all parse (another tool's, a newer kernel's): report and
    query count what they can and say, once on stderr, which formats they could not read."""
    from tests.test_native import SIMPLE_FORMAT, data_record, make_page, simple_payload
    from tests.test_native_slices import write_file

    broken = "name: broken\nID: 1003\nformat:\n\tfield:int x;\toffset:oops;\tsize:4;\tsigned:1;\n"
    page = make_page(b"".join(data_record(simple_payload(10, i), 5) for i in range(7)), 1000)
    path = tmp_path / "partly.dat"
    write_file(path, [(0, page, 0, len(page))], tmp_path, formats=(SIMPLE_FORMAT, broken))
    for args in (("report", "-i", str(path), "--json"), ("query", "-i", str(path), "--json",
                                                         "SELECT count(*) AS n FROM test.simple")):
        out = probectl(*args)
        assert out.stderr.count("Warning: 1 event format of") == 1, out.stderr
        assert "could not be read (test: " in out.stderr and "their events are in no table" in out.stderr
        assert "Traceback" not in out.stderr
    assert json.loads(probectl("report", "-i", str(path), "--json").stdout)["total"] == 7


def test_an_early_error_waits_for_the_duckdb_import(recording, tmp_path):
    """report and query import DuckDB on another thread while the files decode: a run that fails
    before that import ends (a cut file is refused at once) exits with its error, not with an abort
    in DuckDB's C++ as the interpreter shuts down under a half-done import (1 run in 4 did)."""
    path, _, _ = recording
    cut = tmp_path / "cut.dat"
    cut.write_bytes(path.read_bytes()[:3000])
    for _ in range(12):
        for args in (("report", "-i", str(cut)), ("query", "-i", str(cut), "SELECT 1")):
            err = fails(*args)
            assert "truncated" in err or "corrupt" in err, err
