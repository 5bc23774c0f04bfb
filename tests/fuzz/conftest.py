"""The fuzz pass's budget and seed, from the environment: PROBECTL_FUZZ_SECONDS (default 75, for CI)
and PROBECTL_FUZZ_SEED (default: a new one each run, printed with the counts and with every failure)."""
from __future__ import annotations

import os
import time

import pytest


@pytest.fixture(scope="session")
def fuzz_seconds() -> float:
    return float(os.environ.get("PROBECTL_FUZZ_SECONDS", "75"))


@pytest.fixture(scope="session")
def fuzz_seed() -> int:
    return int(os.environ.get("PROBECTL_FUZZ_SEED", str(int(time.time()) % 100000)))
