"""`durable pause` and `durable resume`, one run or many, on SQLite and PostgreSQL, in
every output format; and how `ls` and `show` tell a paused run."""

from __future__ import annotations

import re
import threading
import time

import pytest

import durable
from durable import RunStatus, Worker, task, workflow
from durable.ops import Operations

from . import cli_app
from .cli_action_helpers import one_object
from .cli_world import BOTH, FORMATS, Cli, make_runs, settle, status

#: `hold` blocks until GATE is set; ENTERED says it got there.
GATE = threading.Event()
ENTERED = threading.Event()


@task
def hold() -> str:
    ENTERED.set()
    GATE.wait(30)
    return "held"


@workflow
def gated() -> list[str]:
    return [hold(), cli_app.add(1, 2)]


@pytest.fixture(autouse=True)
def _gate() -> None:
    GATE.clear()
    ENTERED.clear()


def logged(engine: durable.Engine, run_id: str) -> list[tuple[str, str | None, object]]:
    """(action, actor, detail) of everything operators did to the run."""
    return [(a["action"], a["actor"], a["detail"]) for a in Operations(engine).actions(run_id)]


def waiting_run(engine: durable.Engine, run_id: str) -> str:
    durable.dispatch(cli_app.approval, "o-1", id=run_id)
    settle(engine, lambda: status(engine, run_id) is RunStatus.WAITING)
    return run_id


def status_line(show: str) -> str:
    [line] = [line for line in show.splitlines() if line.startswith("status ")]
    return re.sub(r"\s+", " ", line)


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_pause_and_resume_a_waiting_run(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    """pause parks a waiting run at once; ls and show say paused; resume queues it and
    a worker takes it back to its wait; an event then completes it."""
    waiting_run(engine, "w-1")
    paused = cli("pause", "w-1", "--user", "alice", "-o", fmt)
    shown = one_object(paused, fmt)
    if shown is None:
        assert paused.out == "Paused run w-1.\n"
    else:
        assert (shown["id"], shown["status"]) == ("w-1", "paused")
        assert str(shown["pause_requested"]).lower() == "false"
    assert status(engine, "w-1") is RunStatus.PAUSED
    listed = cli("ls", "--status", "paused", "-o", "json").json()["items"]
    assert [run["id"] for run in listed] == ["w-1"]
    assert status_line(cli("show", "w-1").out) == "status paused"

    resumed = cli("resume", "w-1", "--user", "bob", "-o", fmt)
    shown = one_object(resumed, fmt)
    if shown is None:
        assert resumed.out == "Resumed run w-1 (queued).\n"
    else:
        assert (shown["id"], shown["status"]) == ("w-1", "queued")
    settle(engine, lambda: status(engine, "w-1") is RunStatus.WAITING)
    assert cli("send", "w-1", "approved", "--data", "true").code == 0
    settle(engine, lambda: status(engine, "w-1") is RunStatus.COMPLETED)
    assert logged(engine, "w-1")[:2] == [
        ("pause", "cli:alice", {"status_before": "waiting"}),
        ("resume", "cli:bob", {"status_before": "paused"}),
    ]


@BOTH
def test_a_running_run_shows_pause_requested(engine: durable.Engine, cli: Cli) -> None:
    """A run inside a task is asked: the answer, show and ls -o csv say so; it parks
    once the task returns."""
    durable.dispatch(gated, id="busy")
    with Worker(engine, concurrency=2, poll=0.02):
        deadline = time.monotonic() + 30
        assert ENTERED.wait(30), "the run did not reach its task"
        asked = cli("pause", "busy")
        assert asked.code == 0, asked.err
        assert asked.out == (
            "Asked run busy to pause (running): it stops at its next durable call in a worker.\n"
        )
        assert status_line(cli("show", "busy").out) == "status running (pause requested)"
        [row] = cli("ls", "--status", "running", "-o", "json").json()["items"]
        assert (row["id"], row["pause_requested"]) == ("busy", True)
        GATE.set()
        while status(engine, "busy") is not RunStatus.PAUSED:
            assert time.monotonic() < deadline, "the run did not park"
            time.sleep(0.01)
    assert status_line(cli("show", "busy").out) == "status paused"
    assert cli("resume", "busy").out == "Resumed run busy (queued).\n"
    settle(engine, lambda: status(engine, "busy") is RunStatus.COMPLETED)
    assert logged(engine, "busy") == [
        ("pause", "cli", {"status_before": "running"}),
        ("resume", "cli", {"status_before": "paused"}),
    ]


@BOTH
def test_pause_or_resume_what_cannot_be(engine: durable.Engine, cli: Cli) -> None:
    """A finished run: exit 4 with why; an unknown one: exit 3; nothing recorded."""
    durable.execute(cli_app.completes, 1, id="done")
    finished = cli("pause", "done")
    assert finished.code == 4
    assert finished.err == (
        "durable: Run 'done' has already finished (completed); there is nothing to pause.\n"
    )
    not_paused = cli("resume", "done")
    assert not_paused.code == 4
    assert "only paused runs (and cancelled ones) can be resumed" in not_paused.err
    assert cli("pause", "nope").code == 3 and cli("resume", "nope").code == 3
    assert status(engine, "done") is RunStatus.COMPLETED and logged(engine, "done") == []


@BOTH
def test_resume_a_cancelled_run(engine: durable.Engine, cli: Cli) -> None:
    waiting_run(engine, "c-1")
    assert cli("cancel", "c-1").code == 0
    settle(engine, lambda: status(engine, "c-1") is RunStatus.CANCELLED)
    assert cli("resume", "c-1", "--user", "carol").out == "Resumed run c-1 (queued).\n"
    settle(engine, lambda: status(engine, "c-1") is RunStatus.WAITING)
    assert logged(engine, "c-1")[-1] == ("resume", "cli:carol", {"status_before": "cancelled"})


@BOTH
def test_pause_all_then_resume_all(engine: durable.Engine, cli: Cli) -> None:
    """Without --status, pause --all takes the queued, running and waiting runs, and
    resume --all the paused ones."""
    make_runs(engine)
    paused = cli("pause", "--all", "--yes", "--user", "alice")
    assert paused.code == 0, paused.err
    assert paused.out.splitlines()[-1] == "Paused 2 of 2 runs."
    assert status(engine, "wait-1") is RunStatus.PAUSED
    assert status(engine, "queued-1") is RunStatus.PAUSED
    assert status(engine, "done-1") is RunStatus.COMPLETED
    resumed = cli("resume", "--all", "--yes", "-o", "json").json()
    assert (resumed["action"], resumed["matched"], resumed["succeeded"]) == ("resume", 2, 2)
    assert {item["id"] for item in resumed["items"]} == {"wait-1", "queued-1"}
    assert status(engine, "queued-1") is RunStatus.QUEUED
    assert [(action, who) for action, who, _ in logged(engine, "wait-1")] == [
        ("pause", "cli:alice"),
        ("resume", "cli"),
    ]


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_cancel_all_takes_paused_runs_too(engine: durable.Engine, cli: Cli) -> None:
    make_runs(engine)
    assert cli("pause", "queued-1").code == 0
    cancelled = cli("cancel", "--all", "--yes")
    assert cancelled.out.splitlines()[-1] == "Cancelled 2 of 2 runs."
    assert status(engine, "queued-1") is RunStatus.CANCELLED


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_pause_and_resume_help(engine: durable.Engine, cli: Cli) -> None:
    for command in ("pause", "resume"):
        shown = cli(command, "--help")
        assert shown.code == 0 and f"durable {command} --all" in shown.out
        assert "--user NAME" in shown.out and "--yes" in shown.out
    usage = cli("pause")
    assert usage.code == 2 and "give the ID of the run to pause, or --all" in usage.err
