"""`durable cancel`, `retry` and `send` on one run, on SQLite and PostgreSQL, in every
output format: what each does to the run, who it records, and the runs it refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import durable
from durable import RunStatus

from . import cli_app
from .cli_action_helpers import actors, failed_pipelines, log_of, one_object
from .cli_world import BOTH, FORMATS, Cli, settle, status


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_cancel_a_run(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    """cancel ends a queued run at once and prints its summary."""
    durable.dispatch(cli_app.completes, 1, id="c-1", queue="later")
    result = cli("cancel", "c-1", "--user", "alice", "-o", fmt)
    shown = one_object(result, fmt)
    if shown is None:
        assert result.out == "Cancelled run c-1.\n"
    else:
        assert (shown["id"], shown["status"]) == ("c-1", "cancelled")
    assert status(engine, "c-1") is RunStatus.CANCELLED
    assert actors(engine, "c-1") == [("cancel", "cli:alice")]


@BOTH
def test_cancel_a_finished_or_unknown_run(engine: durable.Engine, cli: Cli) -> None:
    """A finished run cannot be cancelled (exit 4); an unknown one is not found (3)."""
    durable.execute(cli_app.completes, 1, id="done")
    finished = cli("cancel", "done")
    assert finished.code == 4
    assert "has already finished (completed)" in finished.err
    assert cli("cancel", "nope").code == 3
    assert status(engine, "done") is RunStatus.COMPLETED


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_retry_reruns_only_the_failed_task(
    engine: durable.Engine, cli: Cli, tmp_path: Path, fmt: str
) -> None:
    """retry queues a failed run again from its failure: the task that failed runs
    again, the one that completed before it does not."""
    flag = failed_pipelines(engine, tmp_path, "p-1")
    assert log_of(tmp_path, "p-1") == ["prepare", "flaky"]
    flag.touch()
    result = cli("retry", "p-1", "--user", "alice", "-o", fmt)
    shown = one_object(result, fmt)
    if shown is None:
        assert result.out == "Retried run p-1 (queued); reopened positions: 1.\n"
    elif fmt == "csv":
        assert json.loads(shown["run"])["status"] == "queued"
        assert json.loads(shown["reopened"]) == [1]
    else:
        assert shown["run"]["status"] == "queued"
        assert shown["reopened"] == [1]
    settle(engine, lambda: status(engine, "p-1") is RunStatus.COMPLETED)
    assert durable.get("p-1").result(timeout=5) == ["prepared", "done"]
    assert log_of(tmp_path, "p-1") == ["prepare", "flaky", "flaky"]
    assert actors(engine, "p-1") == [("retry", "cli:alice")]


@BOTH
def test_stats_still_count_a_failure_that_retry_erased(
    engine: durable.Engine, cli: Cli, tmp_path: Path
) -> None:
    """A run that failed, was retried and completed: stats say one run, one completed,
    one failed (50 %), and the task that failed once counts its failure too."""
    flag = failed_pipelines(engine, tmp_path, "p-9")
    flag.touch()
    assert cli("retry", "p-9").code == 0
    settle(engine, lambda: status(engine, "p-9") is RunStatus.COMPLETED)
    found = json.loads(cli("stats", "-o", "json").out)
    (flow,) = found["workflows"]
    assert (flow["runs"], flow["completed"], flow["failed"], flow["success"]) == (1, 1, 1, 50.0)
    assert flow["failures_24h"] == 1 and flow["last_failure_at"] is not None
    flaky = next(t for t in found["tasks"] if t["name"].endswith("flaky"))
    assert (flaky["runs"], flaky["completed"], flaky["failed"]) == (1, 1, 1)


@BOTH
def test_retry_a_run_that_did_not_fail(engine: durable.Engine, cli: Cli) -> None:
    """Only failed or dead runs can be retried: exit 4 otherwise, 3 for no such run."""
    durable.execute(cli_app.completes, 1, id="done")
    completed = cli("retry", "done")
    assert completed.code == 4
    assert "only failed or dead runs can be retried" in completed.err
    assert cli("retry", "nope").code == 3


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_send_an_event(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    """send delivers data to a waiting run, which then finishes with it."""
    durable.dispatch(cli_app.approval, "o-1", id="w-1")
    settle(engine, lambda: status(engine, "w-1") is RunStatus.WAITING)
    result = cli(
        "send", "w-1", "approved", "--data", '{"by": "ann"}', "--key", "k-1",
        "--user", "ann", "-o", fmt,
    )  # fmt: skip
    shown = one_object(result, fmt)
    if shown is None:
        assert result.out.startswith("Sent event 'approved' to run w-1 (event ")
    else:
        event = json.loads(shown["event"]) if fmt == "csv" else shown["event"]
        assert (event["run_id"], event["name"], event["key"]) == ("w-1", "approved", "k-1")
        assert event["sender"] == "cli:ann"
    settle(engine, lambda: status(engine, "w-1") is RunStatus.COMPLETED)
    assert durable.get("w-1").result(timeout=5) == {"order": "o-1", "approved": {"by": "ann"}}
    assert actors(engine, "w-1") == [("send", "cli:ann")]


@BOTH
def test_send_refusals(engine: durable.Engine, cli: Cli) -> None:
    """Bad --data is bad input (2), an unknown run not found (3), a finished run a
    conflict (4)."""
    durable.execute(cli_app.completes, 1, id="done")
    bad = cli("send", "done", "approved", "--data", "{by: ann}")
    assert bad.code == 2
    assert "--data is not valid JSON" in bad.err
    assert cli("send", "nope", "approved").code == 3
    assert cli("send", "done", "approved", "--data", "1").code == 4
