"""durable.Client in a process without the workflow code, and the outbox's crash case,
with `durable worker` subprocesses running what they start."""

from __future__ import annotations

import signal
import subprocess
import time

import pytest

import durable
from durable import RunStatus
from tests.e2e.harness import Children

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.e2e


def worker(children: Children) -> subprocess.Popen[str]:
    """A worker that imports the workflow module (the client does not)."""
    command = ["-m", "durable", "worker", "tests.e2e.client_app", "--db", children.url]
    return children.spawn(command)


def stop(children: Children, process: subprocess.Popen[str]) -> None:
    """SIGTERM a worker this test started; it must exit cleanly."""
    assert process in children.started
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0, children.log(process)


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_client_without_the_code_starts_and_watches_runs(children: Children, url: str) -> None:
    """A process that never imports the workflow module dispatches it by name (plainly
    and in its own committed transaction), sends it events and reads its results; a
    worker subprocess that imports the module runs both. Its default engine is untouched."""
    running = worker(children)
    caller = children.spawn(["-m", "tests.e2e.client_caller", "client", url])
    report = children.finish(caller, timeout=120)
    stop(children, running)
    assert report["imported"] is False and report["default_engine"] is False
    first, second = report["results"]
    assert first == {"item": "widget", "total": 18, "rush": True, "confirmed": {"by": "client"}}
    assert second == {"item": "bolt", "total": 4, "rush": False, "confirmed": {"by": "client"}}
    assert report["listed"] == ["client-1", "client-2"]


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_caller_killed_before_commit_leaves_no_run(children: Children, url: str) -> None:
    """A caller SIGKILLed between its outbox dispatch and its commit leaves no run, so
    the worker runs nothing; the id is free again (a new start by that id is new)."""
    running = worker(children)
    caller = children.spawn(["-m", "tests.e2e.client_caller", "crash", url])
    assert caller.stdout is not None and caller.stdout.readline().strip() == "ready"
    children.kill(caller)
    with durable.Client(url) as client:
        time.sleep(1.5)  # a worker poll or more: it would have seen a committed run
        assert client.list_runs() == []
        handle = client.dispatch("tests.e2e.client_app.order", "again", id="crash-1")
        client.send("crash-1", "confirm", True)
        assert handle.result(timeout=60)["item"] == "again"
        assert [run.status for run in client.list_runs()] == [RunStatus.COMPLETED]
    stop(children, running)
