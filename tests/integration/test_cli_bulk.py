"""`durable cancel --all` and `retry --all` on SQLite and PostgreSQL, in every output
format: the runs that match the filters, asking first (or --yes), each failure reported
while the rest go on, and an ID or --all but not both."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest

import durable
from durable import RunStatus

from . import cli_app
from .cli_action_helpers import APP, actors, failed_pipelines, log_of
from .cli_world import BOTH, FORMATS, Cli, make_runs, settle, status


class Terminal(io.StringIO):
    """A stdin that says it is a terminal and holds the answer typed into it."""

    def isatty(self) -> bool:
        return True


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_retry_all_that_match(engine: durable.Engine, cli: Cli, tmp_path: Path, fmt: str) -> None:
    """retry --all with filters retries exactly the matching runs, after saying how many
    match, and reports each; finished tasks are not run again."""
    flag = failed_pipelines(engine, tmp_path, "p-1", "p-2", "p-3")
    with pytest.raises(ValueError, match="boom"):
        durable.execute(cli_app.fails, "boom", id="other")
    flag.touch()
    result = cli(
        "retry", "--all", "--status", "failed", "--workflow", f"{APP}.pipeline",
        "--since", "1h", "--yes", "-o", fmt,
    )  # fmt: skip
    assert result.code == 0, result.err
    assert "3 runs match." in result.err
    expected = ["p-3", "p-2", "p-1"]  # newest first
    if fmt == "json":
        answer = json.loads(result.out)
        assert (answer["action"], answer["matched"], answer["succeeded"]) == ("retry", 3, 3)
        assert [item["id"] for item in answer["items"]] == expected
    elif fmt == "jsonl":
        lines = [json.loads(line) for line in result.out.splitlines()]
        assert lines == [{"id": i, "ok": True, "error": None} for i in expected]
    elif fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(result.out)))
        assert [(row["id"], row["ok"]) for row in rows] == [(i, "true") for i in expected]
    else:
        lines = result.out.splitlines()
        assert [line.split() for line in lines[:3]] == [[i, "ok"] for i in expected]
        assert lines[3] == "Retried 3 of 3 runs."
    assert status(engine, "other") is RunStatus.FAILED
    settle(engine, lambda: all(status(engine, i) is RunStatus.COMPLETED for i in expected))
    assert all(log_of(tmp_path, i) == ["prepare", "flaky", "flaky"] for i in expected)


@BOTH
def test_bulk_without_a_terminal_needs_yes(
    engine: durable.Engine, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With stdin not a terminal and no --yes, a bulk action refuses (exit 2) and
    changes nothing."""
    make_runs(engine)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    result = cli("cancel", "--all")
    assert result.code == 2
    assert "2 runs match" in result.err and "pass --yes" in result.err
    assert status(engine, "wait-1") is RunStatus.WAITING
    assert status(engine, "queued-1") is RunStatus.QUEUED


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_bulk_on_a_terminal_asks_first(
    engine: durable.Engine, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal it shows the count, asks, and acts only after a yes. Without
    --status, cancel --all takes the unfinished runs."""
    make_runs(engine)
    monkeypatch.setattr(sys, "stdin", Terminal("n\n"))
    declined = cli("cancel", "--all")
    assert declined.code == 0
    assert declined.err == "2 runs match.\nProceed? [y/N] Nothing done.\n"
    assert status(engine, "wait-1") is RunStatus.WAITING
    monkeypatch.setattr(sys, "stdin", Terminal("y\n"))
    accepted = cli("cancel", "--all", "--user", "alice")
    assert accepted.code == 0
    assert accepted.out.splitlines()[-1] == "Cancelled 2 of 2 runs."
    assert status(engine, "queued-1") is RunStatus.CANCELLED
    waiting = engine.backend.get_run("wait-1")
    assert waiting is not None and waiting.cancel_requested  # a worker delivers it
    assert status(engine, "done-1") is RunStatus.COMPLETED
    assert actors(engine, "wait-1") == [("cancel", "cli:alice")]


@BOTH
def test_bulk_reports_each_failure_and_goes_on(engine: durable.Engine, cli: Cli) -> None:
    """A run the action does not apply to is reported and the rest still go; exit 1."""
    make_runs(engine)
    result = cli("cancel", "--all", "--status", "completed,queued", "--yes")
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0].split() == ["queued-1", "ok"]
    assert lines[1].startswith("parent-1/0") and "failed: Run 'parent-1/0' has already" in lines[1]
    assert lines[-1] == "Cancelled 1 of 4 runs; 3 could not be (see above)."
    assert status(engine, "queued-1") is RunStatus.CANCELLED


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_bulk_with_no_match(engine: durable.Engine, cli: Cli) -> None:
    """Nothing matching is not an error and asks nothing."""
    make_runs(engine)
    none = cli("retry", "--all", "--workflow", "nope")
    assert (none.code, none.out) == (0, "No runs match.\n")
    as_json = cli("retry", "--all", "--workflow", "nope", "-o", "json").json()
    assert as_json == {"action": "retry", "matched": 0, "succeeded": 0, "failed": 0, "items": []}


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["cancel"], "give the ID of the run to cancel, or --all"),
        (["retry", "r-1", "--all"], "give a run ID or --all, not both"),
        (["retry", "r-1", "--status", "failed"], "the filters (--status, --workflow"),
    ],
)
def test_one_run_or_all_but_not_both(
    engine: durable.Engine, cli: Cli, args: list[str], message: str
) -> None:
    """An ID, or --all with filters: anything else is a usage error (exit 2)."""
    result = cli(*args)
    assert result.code == 2
    assert message in result.err
