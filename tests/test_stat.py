"""probectl stat's answers without a kernel: perf stat's output shapes, the spread of repeats, the
open-file budget and the cost notes (tests/live/test_stat.py counts for real)."""
from __future__ import annotations

import csv
import io
import json
import resource

import pytest

from probectl.analysis import counting
from probectl.analysis.counting import Count, CountRow, IntervalRows, StatResult
from probectl.errors import AnalysisError


def rows() -> list[CountRow]:
    return [CountRow("syscalls:sys_enter_read", 1234, running_ns=5000), CountRow("probe_x:alpha", 7, cpu=1),
            CountRow("probe_x:beta", 0, counted=False)]


def test_the_block_has_perf_stats_shape():
    text = counting.stat_text(StatResult("'ls /'", rows(), [0.5], 0.25, 0.125))
    lines = text.splitlines()
    assert lines[1] == " Performance counter stats for 'ls /':"
    assert lines[3].split() == ["1,234", "syscalls:sys_enter_read"]
    assert lines[4].split() == ["CPU1", "7", "probe_x:alpha"]
    assert lines[5].split() == ["<not", "counted>", "probe_x:beta"]
    assert "0.500000000 seconds time elapsed" in text and "0.250000000 seconds user" in text


def test_repeats_show_the_spread():
    result = StatResult("'x'", [CountRow("a:b", 10, spread_pct=2.5)], [1.0, 2.0, 3.0], runs=3)
    text = counting.stat_text(result)
    assert "(3 runs):" in text and "( +- 2.50% )" in text and "2.00000 +- 0.57735 seconds time elapsed" in text


def test_csv_and_json_parse():
    parsed = list(csv.reader(io.StringIO(counting.csv_lines(rows(), ",", at=1.5))))
    assert parsed[0][:4] == ["1.500000000", "1234", "", "syscalls:sys_enter_read"]
    assert parsed[1][:4] == ["1.500000000", "CPU1", "7", ""]
    assert parsed[2][1] == "<not counted>"
    objs = [json.loads(line) for line in counting.json_lines(rows(), at=2.0).splitlines()]
    assert objs[0]["counter-value"] == "1234.000000" and objs[1]["cpu"] == "1" and objs[0]["interval"] == 2.0


def test_interval_lines():
    text = counting.interval_text(IntervalRows(1.0, rows()[:1]))
    assert text.split() == ["1.000000000", "1,234", "syscalls:sys_enter_read"]


def test_a_multiplexed_count_is_scaled():
    assert Count(100, 2000, 1000).scaled() == 200 and Count(100, 1000, 1000).scaled() == 100
    assert not Count(0, 1000, 0).counted


def test_too_few_file_descriptors_say_what_to_raise():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit of open files")
    with pytest.raises(AnalysisError) as err:
        counting.fd_budget(hard)
    assert "ulimit -n" in err.value.hint
    counting.fd_budget(10)
    assert resource.getrlimit(resource.RLIMIT_NOFILE) == (soft, hard)


def test_costly_rates():
    assert counting.costly_rates({"a:b": 50_000, "c:d": 100}, 1.0) == [
        counting.costly_rates({"a:b": 50_000}, 1.0)[0]]
    assert "a:b fired 50,000 times a second" in counting.costly_rates({"a:b": 50_000}, 1.0)[0]
    assert counting.costly_rates({"a:b": 500}, 0.001) == []  # (few events: little cost in all)
    assert counting.costly_rates({"a:b": 50_000}, 0) == []
