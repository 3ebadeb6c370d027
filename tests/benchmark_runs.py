"""Running a benchmark script at its smallest sizes, for the smoke tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_quick(script: str, backends: str, tmp_path: Path) -> list[dict[str, Any]]:
    """Run ``benchmarks/SCRIPT --quick`` on *backends* (plus PostgreSQL when the tests
    have it); check it printed one JSON line per backend, in order; return them."""
    env = {**os.environ}
    if os.environ.get("DURABLE_TEST_POSTGRES_URL"):
        backends += ",postgres"
        env["DURABLE_BENCH_POSTGRES_URL"] = os.environ["DURABLE_TEST_POSTGRES_URL"]
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / script),
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
    return lines
