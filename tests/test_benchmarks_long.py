"""The benchmarks that take longest to run even at their smallest sizes (a worker or a
web server for seconds on end): apart from test_benchmarks.py, so that the test
run's two workers take a file each (a file's tests stay on one worker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmark_runs import ROOT, run_quick


def test_waits_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/waits.py --quick parks, signals and wakes runs with a worker process."""
    for line in run_quick("waits.py", "sqlite", tmp_path):
        assert line["parked_runs"] == 100 and line["wake_lag_ms"]["min"] >= 0
        assert line["meets_targets"]["no_early_wake"] and line["env_30_days_ms"] > 0


def test_soak_benchmark_quick() -> None:
    """benchmarks/soak.py --quick feeds a mixed load to two workers on PostgreSQL,
    purging as it goes, and its checker finds nothing wrong."""
    url = os.environ.get("DURABLE_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("DURABLE_REQUIRE_POSTGRES") == "1":
            pytest.fail("DURABLE_REQUIRE_POSTGRES=1 but DURABLE_TEST_POSTGRES_URL is not set")
        pytest.skip("the soak runs on PostgreSQL: set DURABLE_TEST_POSTGRES_URL")
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--quick", "--postgres-url", url],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    soak = json.loads(line)
    assert soak["checker"] == "ok", soak["checker"]
    assert soak["dispatched"] > 0 and soak["finished"] == soak["dispatched"]
    assert soak["purged"] > 0, "the periodic purges deleted finished runs"
    assert set(soak["kinds"]) == {"short", "nap", "listen", "retrying"}
    assert len(soak["samples"]) >= 5 and len(soak["rss_growth"]) == 2
    for sample in soak["samples"]:
        assert set(sample["tables"]) == {"durable_runs", "durable_history", "durable_events"}
        assert all(mb is not None and mb > 0 for mb in sample["rss_mb"])


def test_live_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/live.py --quick prints statements a second with 1 and 20 live tabs
    (and polling ones), per backend; 20 live tabs cost what one does."""
    for line in run_quick("live.py", "sqlite", tmp_path):
        assert line["statements_per_s_live_1_tab"] > 0
        assert line["requests_per_s_live_20_tabs"] > line["requests_per_s_live_1_tab"]
        assert line["versions_per_s_live_20_tabs"] > 0
        assert "statements_per_s_polling_20_tabs" in line
        assert line["meets_target"], line
