"""The benchmarks still run (a smoke test: tiny sizes, numbers not judged)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import test_benchmarks_long as long
from tests.benchmark_runs import ROOT, run_quick


def test_steps_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/steps.py --quick prints one well-formed JSON line per backend."""
    for line in run_quick("steps.py", "memory,sqlite", tmp_path):
        assert line["us_per_step_200x10"] > 0 and line["ms_resume_1000_steps"] > 0
        assert line["us_per_step_200x10_concurrent"] > 0 and line["ms_resume_1000_steps_cold"] > 0
        assert line["us_per_step_with_metrics"] > 0 and line["us_per_step_without_metrics"] > 0
        assert line["us_per_heartbeat_call"] > 0 and "heartbeat_call" in line["meets_targets"]
        assert "meets_targets" in line
        if line["backend"] == "sqlite":  # 11 synced commits a ten-step workflow
            bound = line["raw_floor_us"] * 1.1
            assert abs(line["us_per_step_floor_bound"] - bound) < 0.1
            assert line["target_reachable_here"] == (bound <= 250)


def test_compare_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/compare.py --quick measures this checkout and HEAD, interleaved."""
    env = {**os.environ}
    backends = "sqlite"
    if os.environ.get("DURABLE_TEST_POSTGRES_URL"):
        backends += ",postgres"
        env["DURABLE_BENCH_POSTGRES_URL"] = os.environ["DURABLE_TEST_POSTGRES_URL"]
    script = str(ROOT / "benchmarks" / "compare.py")
    command = [sys.executable, script, "--quick", "--against", "HEAD", "--backends", backends]
    result = subprocess.run(
        [*command, "--tmpdir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, env=env, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["backend"] for line in lines] == backends.replace("postgres", "postgresql").split(
        ","
    )
    for line in lines:
        assert len(line["values_before"]) == len(line["values_after"]) == 1
        assert line["us_per_step_200x10_before"] > 0 and line["us_per_step_200x10_after"] > 0
        ratio = line["us_per_step_200x10_after"] / line["us_per_step_200x10_before"]
        assert abs(line["after_over_before"] - ratio) < 0.01
    if "postgres" in backends:  # each measurement's schema is dropped after it
        left = subprocess.run(
            ["psql", os.environ["DURABLE_TEST_POSTGRES_URL"], "-Atc",
             "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench\\_compare\\_%'"],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        assert left == []


def test_queue_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/queue.py --quick drains its queue with two worker processes."""
    for line in run_quick("queue.py", "sqlite", tmp_path):
        assert line["workflows_per_s"] > 0 and line["pickup_ms"]["p50"] >= 0


def test_flow_control_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/flow_control.py --quick drains an unlimited queue, one limited to 16
    and runs of 1,000 keys limited to 1 each, and reports each limited over unlimited."""
    for line in run_quick("flow_control.py", "sqlite", tmp_path):
        assert set(line["runs_per_s"]) == {"unlimited", "limit_16", "keys_1000"}
        assert all(value > 0 for value in line["runs_per_s"].values())
        assert set(line["over_unlimited"]) == set(line["meets_target"]) == {"limit_16", "keys_1000"}


def test_async_runs_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/async_runs.py --quick drains async runs on a worker's event loop, and
    the same smaller load both there and with a thread per run (each run awaits 0.25 s)."""
    backends = "sqlite,postgres" if os.environ.get("DURABLE_TEST_POSTGRES_URL") else "sqlite"
    env = {
        **os.environ,
        "DURABLE_BENCH_POSTGRES_URL": os.environ.get("DURABLE_TEST_POSTGRES_URL", ""),
    }
    script = str(ROOT / "benchmarks" / "async_runs.py")
    command = [sys.executable, script, "--quick", "--backends", backends, "--tmpdir", str(tmp_path)]
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    modes = [(line["backend"], line["mode"], line["runs"]) for line in lines]
    expected = [(b, mode, runs) for b in backends.replace("postgres", "postgresql").split(",")
                for mode, runs in (("lane", 100), ("lane", 32), ("threads", 32))]  # fmt: skip
    assert modes == expected
    for line in lines:
        assert line["drain_s"] >= 0.25, "each run awaits 0.25 s"
        assert 0 < line["threads_max"] < 50 and line["rss_mb_max"] > 0


def test_typed_events_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/typed_events.py --quick sends to untyped, declared and stored-schema
    waits and prints the time per send of each."""
    for line in run_quick("typed_events.py", "sqlite", tmp_path):
        assert line["runs_each"] == 20
        for key in ("raw", "untyped", "declared", "stored_schema"):
            assert line[f"{key}_send_us"] > 0


def test_schedules_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/schedules.py --quick fires 200 schedules due at once with two worker
    processes: every tick makes its run, none early."""
    for line in run_quick("schedules.py", "sqlite", tmp_path):
        assert line["schedules"] == 200 and line["fired"] == 200 and line["early"] == 0
        assert 0 <= line["lateness_p50_s"] <= line["lateness_p99_s"] <= line["lateness_max_s"]


@pytest.mark.parametrize(
    "name", sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))
)
def test_every_benchmark_has_a_smoke_test(name: str) -> None:
    """Each benchmark script is exercised here or in test_benchmarks_long.py."""
    test = f"test_{name.removesuffix('.py')}_benchmark_quick"
    assert test in globals() or hasattr(long, test)


def test_operate_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/operate.py --quick times every operator read on a small database, and
    the lookups by attribute among the runs it adds in bulk."""
    for line in run_quick("operate.py", "sqlite", tmp_path):
        assert line["runs"] == 500
        assert line["list_first_page"]["median"] > 0 and line["stats_7d"]["max"] > 0
        assert line["overview"]["median"] > 0 and line["workflows"]["median"] > 0
        attributes = line["attributes"]
        assert attributes["runs"] == 2_000
        assert all(attributes[name]["median"] > 0 for name in ("lookup", "list_region"))


def test_patches_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/patches.py --quick: per-call costs, and the history lookups counted
    (one for the old branch, two with a marker, none for a remembered id)."""
    for line in run_quick("patches.py", "memory,sqlite", tmp_path):
        assert line["k"] == 200 and line["us_per_call_live"] > 0
        assert line["lookups_per_call_old"] == 1.0 and line["lookups_per_call_marked"] == 2.0
        assert line["lookups_per_call_remembered"] < 0.05
        assert line["meets_targets"] == {"one_lookup": True}


def test_claims_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/claims.py --quick times claims with and without the version filter;
    on PostgreSQL every claim's plan walks the claim index under its LIMIT."""
    for line in run_quick("claims.py", "sqlite", tmp_path):
        assert {"plain", "stamping", "only_0", "only_100"} <= set(line)
        assert all(line[name]["median_us"] > 0 for name in ("plain", "only_0", "only_100"))
        assert (
            line["only_0_over_plain"]["median_us"] > 0 and line["only_0_over_plain"]["p10_us"] > 0
        )
        if line["backend"] == "postgresql":
            assert line["only_100"]["plan_walks_claim_index"], "the filter keeps the index walk"
            assert line["plain"]["plan_walks_claim_index"]


def test_continue_as_new_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/continue_as_new.py --quick runs a 200-run chain per backend and
    reports the per-iteration cost of its first and last 50 iterations."""
    for line in run_quick("continue_as_new.py", "memory,sqlite", tmp_path):
        assert line["iterations"] == 200 and line["window"] == 50
        assert line["ms_per_iteration_first"] > 0 and line["ms_per_iteration_last"] > 0
        assert "flat_chain" in line["meets_targets"] and line["ms_follow_from_base"] > 0


def test_flow_graph_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/flow_graph.py --quick runs a 100-task flow to its end, measures its
    graph's payload and draws it in headless Chromium (where there is one)."""
    for line in run_quick("flow_graph.py", "sqlite", tmp_path):
        assert line["tasks"] == 100 and line["dependencies"] >= 99
        assert line["payload_bytes"] > line["payload_gzip_bytes"] > 0
        assert line["ms_get_flow"] > 0 and line["ms_layout_cold"] > 0
        if "render_skipped" not in line:
            assert line["boxes_drawn"] == 100 and line["arrows_drawn"] == line["dependencies"]
            assert 0 < line["ms_render_build"] <= line["ms_render_page"]


def test_flows_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/flows.py --quick runs a 100-task flow of true commands to its end and
    reports the engine's overhead per task."""
    for line in run_quick("flows.py", "sqlite", tmp_path):
        assert line["tasks"] == 100 and line["max_running"] == 16
        assert line["seconds_total"] > line["command_seconds"] / 16 > 0
        assert line["ms_wall_per_task"] > 0 and line["ms_view"] > 0
        assert "meets_targets" in line or line["backend"] == "postgresql"


@pytest.mark.e2e  # three uvicorn server processes
def test_mounts_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/mounts.py --quick serves the dashboard through each of the three ASGI
    adapters under uvicorn and measures both requests through each."""
    command = [sys.executable, str(ROOT / "benchmarks" / "mounts.py"), "--quick"]
    result = subprocess.run(
        [*command, "--tmpdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    [line] = [json.loads(text) for text in result.stdout.splitlines()]
    for adapter in ("native", "a2wsgi", "starlette"):
        for kind in ("page", "api"):
            numbers = line[adapter][kind]
            assert 0 < numbers["ms_p50"] <= numbers["ms_p95"] and numbers["requests_per_s"] > 0
    assert line["fastest_page"] in line and line["fastest_api"] in line


def test_tracing_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/tracing.py --quick prints each mode's cost per step, per backend."""
    for line in run_quick("tracing.py", "memory,sqlite", tmp_path):
        assert min(line["us_per_step_off"], line["us_per_step_api"], line["us_per_step_sdk"]) > 0
        assert len(line["us_per_step_sdk_values"]) == line["repetitions"]


def test_streams_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/streams.py --quick prints one well-formed JSON line per backend."""
    for line in run_quick("streams.py", "memory,sqlite", tmp_path):
        assert line["us_per_write_workflow"] > 0 and line["us_per_write_replayed"] > 0
        assert line["us_per_write_task"] > 0
        assert 0 < line["ms_reader_latency_p50"] <= line["ms_reader_latency_p90"]


def test_tallies_benchmark_quick(tmp_path: Path) -> None:
    """benchmarks/tallies.py --quick times steps with the tallies' triggers and without
    (dropped: a database without them still runs workflows)."""
    for line in run_quick("tallies.py", "sqlite", tmp_path):
        assert line["us_per_step_tallied"] > 0 and line["us_per_step_untallied"] > 0
        assert line["tallied_over_untallied"] > 0 and line["target"] == 1.05
