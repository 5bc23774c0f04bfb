"""SDT (USDT) probes where C++ and Rust programs have them: libstdc++'s own (``libstdcxx:throw`` and
``libstdcxx:catch``, which every C++ program's exceptions fire: fixtures/cxx_shop.cc) and a Rust
program's, as the ``probe`` and ``usdt`` crates emit them (fixtures/rust_usdt.rs). The recorded
arguments are the values the programs print; perf -D is the oracle of the definitions."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import build_cxx_fixture, build_rust_fixture, missing, probectl
from tests.live.test_live_uprobes import expect_lines
from tests.live.test_sdt import expected_values

GROUP = f"psdtl{os.getpid()}"


@pytest.fixture
def cleanup_group(live_tracefs):
    yield live_tracefs
    probectl("del", f"{GROUP}:*", check=False)


def _recorded(path: Path) -> list[tuple[str, dict[str, int]]]:
    out = []
    for line in probectl("script", "-i", str(path), "--format", "json").stdout.splitlines():
        event = json.loads(line)
        fields = event.get("fields", event)
        out.append((event["event"].split(":")[1], {k: fields[k] for k in ("arg1", "arg2")}))
    return out


@pytest.mark.root
@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_a_cxx_programs_exceptions_by_libstdcxx_probes(cleanup_group, tmp_path, opt):
    """Each exception the program throws and catches is one throw and one catch event whose
    arguments are the exception object and its type_info, as the program prints their addresses."""
    binary = build_cxx_fixture("cxx_shop", opt)
    probectl("add", "-x", "libstdc++", f"{GROUP}:throw=%libstdcxx:throw", f"{GROUP}:catch=%libstdcxx:catch")
    path = tmp_path / "throw.dat"
    out = probectl("record", "-e", f"{GROUP}:*", "-o", str(path), "--", str(binary), "3")
    want = [(int(c["arg1"]), int(c["arg2"])) for c in expect_lines(out.stdout)["throw"]]
    assert len(want) == 2  # (3 rounds: 4 and 6 wanted, 3 left)
    got = _recorded(path)
    assert [name for name, _ in got] == ["throw", "catch"] * len(want)
    assert [(f["arg1"], f["arg2"]) for _, f in got] == [pair for pair in want for _ in (0, 1)]


@pytest.mark.parametrize("opt", ["0", "2"])
def test_rust_sdt_probes_are_listed_and_defined_as_perf_defines_them(opt):
    binary = build_rust_fixture("rust_usdt", opt)
    assert probectl("funcs", "--sdt", "-x", str(binary)).stdout.split() == ["sdt_rust_shop:order",
                                                                            "sdt_rust_shop:done"]
    perf = shutil.which("perf") or missing("perf (linux-perf) is not installed")
    theirs = subprocess.run([perf, "probe", "-x", str(binary), "-D", "sdt_rust_shop:*"], capture_output=True,
                            text=True, check=True)
    ours = probectl("add", "-D", "-x", str(binary), "sdt_rust_shop:*")
    assert ours.stdout.splitlines() == theirs.stdout.splitlines()


@pytest.mark.root
@pytest.mark.parametrize("opt", ["0", "2"])
def test_rust_sdt_probes_record_the_programs_values(cleanup_group, tmp_path, opt):
    binary = build_rust_fixture("rust_usdt", opt)
    probectl("add", "-x", str(binary), f"{GROUP}:order=%rust_shop:order", f"{GROUP}:done=%rust_shop:done")
    path = tmp_path / "rust.dat"
    out = probectl("record", "-e", f"{GROUP}:*", "-o", str(path), "--", str(binary), "3")
    want = expected_values(out.stdout)
    assert [name for name, _ in want] == ["order"] * 3 + ["done"]
    assert _recorded(path) == want
