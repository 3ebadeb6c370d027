"""Every view survives any stored time (finding 8 of issue 23): a run whose wake time
lies in year 2.7 million (what wait(timeout=timedelta.max) recorded before deadlines
had a horizon), or at infinity, is listed and shown by `durable ls/show/history`, the
REST API and the dashboard, instead of breaking them for every run."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

import durable
from durable import RunStatus, Worker, dispatch, wait, workflow
from durable.cli.main import main
from durable.ops import Operations
from durable.web import make_app
from tests.conftest import BACKENDS
from tests.integration.test_bad_rows import execute_sql, until
from tests.web.client import Client

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
TOKEN = "far-times-token"
LAST = "9999-12-31T23:59:59.999999Z"
#: What timedelta.max from now was stored as; far past ISO 8601; infinity.
FAR = [8.5e13, 1e300, float("inf")]


@workflow
def patient(order: str) -> Any:
    return wait("go", timeout=600)


def waiting_far(engine: durable.Engine, url: str, run_id: str, wake_at: float) -> None:
    """*run_id* waits for "go"; its stored deadline (run row and step) is *wake_at*."""
    dispatch(patient, run_id, id=run_id)
    with Worker(engine, poll=0.02):
        until(lambda: engine.reread(run_id).status is RunStatus.WAITING, f"{run_id} waits")
    if url.startswith("memory"):
        backend: Any = engine.backend
        with backend._lock:
            backend._runs[run_id] = dataclasses.replace(backend._runs[run_id], wake_at=wake_at)
            steps = backend._history[run_id]
            steps[0] = dataclasses.replace(steps[0], wake_at=wake_at)
        return
    execute_sql(url, "UPDATE durable_runs SET wake_at = ? WHERE id = ?", wake_at, run_id)
    execute_sql(url, "UPDATE durable_history SET wake_at = ? WHERE run_id = ?", wake_at, run_id)


@pytest.fixture
def far_runs(engine: durable.Engine, url: str) -> list[str]:
    ids = [f"far-{n}" for n in range(len(FAR))]
    for run_id, wake_at in zip(ids, FAR, strict=True):
        waiting_far(engine, url, run_id, wake_at)
    return ids


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_operations_show_any_stored_time(engine: durable.Engine, far_runs: list[str]) -> None:
    ops = Operations(engine)
    listed = {run["id"]: run for run in ops.list_runs()["items"]}
    for run_id in far_runs:
        assert listed[run_id]["wake_at"] == LAST
        run = ops.get_run(run_id)
        assert run["waiting"]["until"] == LAST and run["status"] == "waiting"
        assert ops.history(run_id)[0]["wake_at"] == LAST


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_the_command_line_shows_any_stored_time(
    engine: durable.Engine, far_runs: list[str], url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["ls"], ["ls", "--output", "json"], ["stats"]):
        capsys.readouterr()
        assert main([*command, "--db", url]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert all(run_id in out for run_id in far_runs) or command == ["stats"]
    for run_id in far_runs:
        for command in (["show", run_id], ["history", run_id], ["show", run_id, "-o", "json"]):
            capsys.readouterr()
            assert main([*command, "--db", url]) == 0, capsys.readouterr().err
            assert "9999-12-31" in capsys.readouterr().out
    capsys.readouterr()
    assert main(["show", far_runs[0], "--output", "json", "--db", url]) == 0
    assert json.loads(capsys.readouterr().out)["wake_at"] == LAST


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_the_api_and_dashboard_show_any_stored_time(
    engine: durable.Engine, far_runs: list[str]
) -> None:
    """The calls the dashboard's home and run pages make, and the page itself."""
    client = Client(make_app(engine, token=TOKEN), token=TOKEN)
    page = client.get("/")
    assert page.status == 200 and page.content_type == "text/html"
    listed = client.get("/api/v1/runs", "limit=500")
    assert listed.status == 200, listed.body
    shown = {run["id"]: run["wake_at"] for run in listed.json()["items"]}
    assert {run_id: shown[run_id] for run_id in far_runs} == dict.fromkeys(far_runs, LAST)
    assert client.get("/api/v1/stats").status == 200
    for run_id in far_runs:
        for path in ("", "/history", "/graph"):
            reply = client.get(f"/api/v1/runs/{run_id}{path}")
            assert reply.status == 200, (path, reply.body)
        assert client.get(f"/api/v1/runs/{run_id}").json()["waiting"]["until"] == LAST
