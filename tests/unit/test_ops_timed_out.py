"""The operations layer on runs that reached their deadline (status timed_out)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

import durable
from durable import workflow
from durable.core import tallies
from durable.ops import Conflict, Operations
from durable.ops._stats import stat
from durable.testing import DurableEnv

HOUR = dt.timedelta(hours=1)


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as environment:
        yield environment


@workflow(timeout=60)
def slow() -> str:
    durable.wait(HOUR)
    return "done"


@workflow
def patient() -> str:
    durable.wait(HOUR)
    return "done"


def test_the_run_view_carries_the_deadline(env: DurableEnv) -> None:
    """deadline_at is ISO like created_at (a minute after it here); null without one."""
    ops = Operations(env.engine)
    env.dispatch(slow, id="late")
    env.dispatch(patient, id="free")
    env.advance(dt.timedelta(minutes=2))
    late = ops.get_run("late")
    assert late["status"] == "timed_out"
    assert late["created_at"] == "2025-01-01T00:00:00.000000Z"
    assert late["deadline_at"] == "2025-01-01T00:01:00.000000Z"
    assert late["error"]["type"] == "durable.errors.WorkflowTimeout"
    assert ops.get_run("free")["deadline_at"] is None
    listed = ops.list_runs(status=["timed_out"])["items"]
    assert [(run["id"], run["deadline_at"]) for run in listed] == [("late", late["deadline_at"])]


def test_stats_count_timed_out_runs_as_failures(env: DurableEnv) -> None:
    ops = Operations(env.engine)
    env.dispatch(slow, id="late")
    env.advance(dt.timedelta(minutes=2))
    [found] = ops.stats(workflow=slow.name)["workflows"]
    assert (found["runs"], found["completed"], found["failed"]) == (1, 0, 1)
    assert found["success"] == 0.0
    assert found["failures_24h"] == 1
    assert found["last_failure_at"] == "2025-01-01T00:01:00.000000Z"


def test_stat_figures_with_every_ending() -> None:
    """Of completed, failed, dead and timed_out, only completed succeeds; cancelled is
    neither a success nor a failure."""
    endings = ["completed", "failed", "dead", "timed_out", "cancelled"]
    found = [
        tallies.of_run(tallies.HOUR, "w", s, created_at=0.0, started_at=0.0, finished_at=1.0)
        for s in endings
    ]
    figures = stat("w", found)
    assert (figures["runs"], figures["completed"], figures["failed"]) == (5, 1, 3)
    assert figures["success"] == 25.0
    assert figures["last_failure_at"] == "1970-01-01T00:00:01.000000Z"


def test_a_timed_out_run_is_not_retried(env: DurableEnv) -> None:
    """Its deadline has passed: a retried run would time out at once."""
    ops = Operations(env.engine)
    env.dispatch(slow, id="late")
    env.advance(dt.timedelta(minutes=2))
    with pytest.raises(Conflict, match="only failed or dead runs") as refused:
        ops.retry("late")
    assert "Its deadline has passed: start a new run instead." in str(refused.value)
    assert ops.get_run("late")["status"] == "timed_out"
    assert ops.actions("late") == []
