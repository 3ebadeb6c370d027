"""`durable ls`, `show`, `stats` and `retry` on a run that reached its deadline (status
timed_out), SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import durable
from durable import RunStatus, wait, workflow

from . import cli_app
from .cli_world import BOTH, Cli, settle, status

#: How long `overdue` may run: short, so that a worker sees it pass.
TIMEOUT = 0.3


@workflow(timeout=TIMEOUT)
def overdue(order: str) -> Any:
    """Waits for an event that never comes, past its deadline."""
    return wait("approved")


@pytest.fixture
def cli(engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """done-1 completed, then late-1 timed out; the CLI pointed at their database."""
    durable.execute(cli_app.completes, 1, id="done-1")
    durable.dispatch(overdue, "o-1", id="late-1")
    settle(engine, lambda: status(engine, "late-1") is RunStatus.TIMED_OUT)
    return Cli(capsys, url)


def moment(iso: str) -> dt.datetime:
    return dt.datetime.fromisoformat(iso)


@BOTH
def test_ls_lists_and_filters_timed_out_runs(cli: Cli) -> None:
    """timed_out is a status of its own: --status picks it, failed does not; every run
    carries its deadline (null: none)."""
    (late,) = cli("ls", "--status", "timed_out", "-o", "json").json()["items"]
    assert late["id"] == "late-1" and late["status"] == "timed_out"
    given = moment(late["deadline_at"]) - moment(late["created_at"])
    assert abs(given.total_seconds() - TIMEOUT) < 0.01
    assert moment(late["finished_at"]) >= moment(late["deadline_at"])
    assert cli("ls", "--status", "failed", "-o", "json").json()["items"] == []
    done = cli("ls", "--status", "completed", "-o", "json").json()["items"]
    assert [(run["id"], run["deadline_at"]) for run in done] == [("done-1", None)]
    table = cli("ls", "--status", "timed_out,completed").out.splitlines()
    assert [line.split()[:3:2] for line in table[1:]] == [
        ["late-1", "timed_out"],
        ["done-1", "completed"],
    ]


@BOTH
def test_show_a_timed_out_run_with_its_deadline(cli: Cli) -> None:
    """show: the status, the deadline (only for a run that has one) and the
    WorkflowTimeout it ended with."""
    detail = cli("show", "late-1", "-o", "json").json()
    assert detail["status"] == "timed_out"
    assert detail["error"]["type"] == "durable.errors.WorkflowTimeout"
    table = cli("show", "late-1").out
    # the deadline stopped it through a cancellation, but it was not cancelled
    assert "status    timed_out\n" in table
    assert f"deadline  {detail['deadline_at'][:19]}Z\n" in table
    assert "error     WorkflowTimeout: Run 'late-1'" in table
    assert "deadline" not in cli("show", "done-1").out


@BOTH
def test_a_timed_out_run_counts_as_a_failure_and_is_not_retried(cli: Cli) -> None:
    """stats count it among the failures; retry refuses it (exit 4), and retry --all
    does not pick it."""
    stats = cli("stats", "-o", "json").json()
    (late,) = [stat for stat in stats["workflows"] if stat["name"] == overdue.name]
    assert (late["completed"], late["failed"], late["success"]) == (0, 1, 0)
    assert late["failures_24h"] == 1 and late["last_failure_at"] is not None

    refused = cli("retry", "late-1")
    assert refused.code == 4
    assert "only failed or dead runs can be retried" in refused.err
    assert "start a new run" in refused.err
    assert cli("retry", "--all", "--yes", "-o", "json").json()["matched"] == 0
