"""The benchmarks still run (a smoke test: tiny sizes, numbers not judged)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_steps_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/steps.py --quick prints one well-formed JSON line per backend."""
    backends = "memory,sqlite" + (
        ",postgres" if os.environ.get("DURABLE_TEST_POSTGRES_URL") else ""
    )
    env = {**os.environ}
    if os.environ.get("DURABLE_TEST_POSTGRES_URL"):
        env["DURABLE_BENCH_POSTGRES_URL"] = os.environ["DURABLE_TEST_POSTGRES_URL"]
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "steps.py"),
            "--quick",
            "--backends",
            backends,
            "--tmpdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["backend"] for line in lines] == backends.replace("postgres", "postgresql").split(
        ","
    )
    for line in lines:
        assert line["us_per_step_200x10"] > 0 and line["ms_resume_1000_steps"] > 0
        assert "meets_targets" in line


def test_queue_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/queue.py --quick drains its queue with two worker processes."""
    backends = "sqlite" + (",postgres" if os.environ.get("DURABLE_TEST_POSTGRES_URL") else "")
    env = {**os.environ}
    if os.environ.get("DURABLE_TEST_POSTGRES_URL"):
        env["DURABLE_BENCH_POSTGRES_URL"] = os.environ["DURABLE_TEST_POSTGRES_URL"]
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "queue.py"),
            "--quick",
            "--backends",
            backends,
            "--tmpdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["backend"] for line in lines] == backends.replace("postgres", "postgresql").split(
        ","
    )
    for line in lines:
        assert line["workflows_per_s"] > 0 and line["pickup_ms"]["p50"] >= 0


@pytest.mark.parametrize(
    "name", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
)
def test_every_benchmark_has_a_smoke_test(name: str) -> None:
    """Each benchmark script is exercised above."""
    assert f"test_{name.removesuffix('.py')}_benchmark_quick" in globals()
