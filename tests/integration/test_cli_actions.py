"""`durable start`, `cancel`, `retry` and `send`, one run or many, on SQLite and
PostgreSQL, in every output format."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import RunStatus
from durable.ops import Operations

from . import cli_app
from .cli_world import BOTH, FORMATS, Cli, Result, make_runs, settle, status

APP = "tests.integration.cli_app"
REPO = Path(__file__).resolve().parents[2]


class Terminal(io.StringIO):
    """A stdin that says it is a terminal and holds the answer typed into it."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def cli(url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The CLI pointed at the test's database (the `engine` fixture opens it)."""
    return Cli(capsys, url)


def actors(engine: durable.Engine, run_id: str) -> list[tuple[str, str | None]]:
    """(action, actor) of everything operators did to the run."""
    return [(done["action"], done["actor"]) for done in Operations(engine).actions(run_id)]


def one_object(result: Result, fmt: str) -> dict[str, Any] | None:
    """The object an action printed as json, jsonl or csv (None for the table)."""
    assert result.code == 0, result.err
    if fmt == "json":
        return dict(json.loads(result.out))
    if fmt == "jsonl":
        (line,) = result.out.splitlines()
        return dict(json.loads(line))
    if fmt == "csv":
        (row,) = csv.DictReader(io.StringIO(result.out))
        return row
    return None


def failed_pipelines(engine: durable.Engine, tmp_path: Path, *run_ids: str) -> Path:
    """Runs of `pipeline` that failed in `flaky`; returns the flag file that lets
    `flaky` pass. Each run logs its task bodies to ``<tmp>/<id>.log``."""
    flag = tmp_path / "flag"
    for run_id in run_ids:
        with pytest.raises(RuntimeError, match="no flag file"):
            durable.execute(cli_app.pipeline, str(tmp_path / f"{run_id}.log"), str(flag), id=run_id)
    return flag


def log_of(tmp_path: Path, run_id: str) -> list[str]:
    return (tmp_path / f"{run_id}.log").read_text().split()


# -- start ------------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_start_queues_a_run(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    """start queues a run of a registered workflow, records who started it, and prints
    the RunSummary; a worker then runs it."""
    result = cli(
        "start", f"{APP}.completes", "--args", "[3]", "--id", "s-1", "--queue", "later",
        "--priority", "5", "--user", "alice", "-o", fmt,
    )  # fmt: skip
    shown = one_object(result, fmt)
    if shown is None:
        assert result.out == f"Started run s-1 of {APP}.completes on queue later (queued).\n"
    else:
        assert (shown["id"], shown["status"], shown["queue"]) == ("s-1", "queued", "later")
        assert str(shown["priority"]) == "5"
    assert actors(engine, "s-1") == [("start", "cli:alice")]
    with durable.Worker(engine, queues=["later"], poll=0.02):
        assert durable.get("s-1").result(timeout=30) == 9


@BOTH
def test_start_with_keyword_arguments_and_the_users_name(
    engine: durable.Engine, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--kwargs fills keyword arguments; the actor defaults to cli:$USER."""
    monkeypatch.setenv("USER", "bob")
    run = cli("start", f"{APP}.approval", "--kwargs", '{"order": "o-9"}', "-o", "json").json()
    detail = cli("show", run["id"], "-o", "json").json()
    assert detail["input"] == {"args": [], "kwargs": {"order": "o-9"}}
    assert actors(engine, run["id"]) == [("start", "cli:bob")]


@BOTH
def test_start_with_attributes_that_ls_finds(engine: durable.Engine, cli: Cli) -> None:
    """--attributes are the run's, typed, and `durable ls --attr` finds it by them."""
    given = '{"customer": "c-42", "vip": true, "n": 5}'
    run = cli(
        "start", f"{APP}.completes", "--args", "[1]", "--attributes", given, "-o", "json"
    ).json()
    found = cli("ls", "--attr", "customer=c-42", "--attr", "n=5", "-o", "json").json()
    assert [item["id"] for item in found["items"]] == [run["id"]]
    assert found["items"][0]["attributes"] == {"customer": "c-42", "vip": True, "n": 5}


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nope.flows.missing"], 3, "No workflow named 'nope.flows.missing' is registered"),
        ([f"{APP}.completes", "--args", "[1,"], 2, "--args is not valid JSON"),
        ([f"{APP}.completes", "--args", '{"x": 1}'], 2, "--args must be a JSON array"),
        ([f"{APP}.completes", "--kwargs", "[1]"], 2, "--kwargs must be a JSON object"),
        ([f"{APP}.completes", "--args", "[1, 2, 3]"], 2, "The arguments do not fit"),
        ([f"{APP}.completes", "--attributes", "[1]"], 2, "--attributes must be a JSON object"),
        ([f"{APP}.completes", "--attributes", '{"k": null}'], 2, "k"),
        (["x", "--import", "tests.integration.no_such_module"], 2, "cannot import"),
    ],
)
def test_start_refuses_what_it_cannot_start(
    engine: durable.Engine, cli: Cli, args: list[str], code: int, message: str
) -> None:
    """An unknown workflow is not found (3); bad JSON, arguments that do not fit and a
    module that cannot be imported are bad input (2); nothing is written."""
    result = cli("start", *args)
    assert result.code == code
    assert result.err.startswith("durable: ") and message in result.err
    assert cli("ls", "-o", "json").json()["items"] == []


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_start_reports_a_module_that_fails_to_import(
    engine: durable.Engine,
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module under the workflow's name that exists but raises is bad input (2), with
    its error; a name past the last module is not found (3)."""
    (tmp_path / "brokenpkg").mkdir()
    (tmp_path / "brokenpkg" / "__init__.py").write_text("raise ImportError('needs pyyaml')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # start puts the cwd on it
    broken = cli("start", "brokenpkg.flows.nightly")
    assert broken.code == 2
    assert "durable: cannot import brokenpkg.flows: needs pyyaml" in broken.err
    nested = cli("start", f"{APP}.Holder.nightly")
    assert nested.code == 3
    assert f"No workflow named '{APP}.Holder.nightly'" in nested.err


@BOTH
def test_start_with_a_taken_id_conflicts(engine: durable.Engine, cli: Cli) -> None:
    """The same id with the same call returns the run; with another call, exit 4."""
    first = cli("start", f"{APP}.completes", "--args", "[1]", "--id", "dup", "-o", "json")
    again = cli("start", f"{APP}.completes", "--args", "[1]", "--id", "dup", "-o", "json")
    assert again.json() == first.json()
    other = cli("start", f"{APP}.completes", "--args", "[2]", "--id", "dup")
    assert other.code == 4
    assert other.err.startswith("durable: ")


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_start_imports_the_module_a_dotted_name_starts_with(url: str, tmp_path: Path) -> None:
    """In a fresh process, `start pkg.module.workflow` imports pkg.module by itself."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "durable", "start", f"{APP}.completes", "--args", "[4]"),
            *("--id", "fresh", "-o", "json", "--db", url),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "USER": "carol"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["id"] == "fresh"
    with durable.Engine(url) as engine:
        assert actors(engine, "fresh") == [("start", "cli:carol")]


# -- cancel -----------------------------------------------------------------------------


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


# -- retry ------------------------------------------------------------------------------


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


# -- send -------------------------------------------------------------------------------


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


# -- bulk -------------------------------------------------------------------------------


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
