"""Pause and resume (issue 15) of runs that a `durable worker` process executes, on
SQLite and PostgreSQL.

The test process pauses and resumes (``durable.get(id).pause()``); the worker learns
of a pause from the database alone: the request that comes back with its next fenced
write (a running run), or the run being PAUSED in place (a queued or waiting one).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

import durable
from durable import RunStatus, StepKind
from tests.e2e.harness import Children
from tests.e2e.test_cancel_on_workers import bodies, kinds, status
from tests.e2e.test_workers import stop_all, until
from tests.e2e.worker_command_app import careful, guardian, napper

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("url", SQL, indirect=True)]


def start_worker(children: Children, concurrency: int = 4, **env: str) -> subprocess.Popen[str]:
    """``durable worker tests.e2e.worker_command_app`` on the test's database."""
    command = ["-m", "durable", "worker", "tests.e2e.worker_command_app", "--db", children.url]
    return children.spawn(
        [*command, "--concurrency", str(concurrency), "--log-level", "INFO"], **env
    )


def threads(process: subprocess.Popen[str]) -> int:
    """How many threads the process has now (from /proc)."""
    for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count in /proc")


def test_a_run_paused_inside_a_task_parks_after_it_and_frees_its_worker(
    children: Children, engine: durable.Engine
) -> None:
    """Paused while its worker (one slot) is inside a task: the task finishes and its
    result is kept, the run is PAUSED before its next call, and the slot and thread
    are free: another run is executed meanwhile, and the worker holds no more threads
    than it did idle. Resumed, it goes on from there; no body runs twice."""
    worker = start_worker(children, concurrency=1, DURABLE_TEST_PAUSE="in-hold")
    warm = durable.dispatch(napper, 0.0, id="warm-up")
    assert warm.result(timeout=30) is not None
    until(lambda: threads(worker) > 0, 5, "the worker's threads")
    idle = threads(worker)
    handle = durable.dispatch(careful, id="careful")
    pid = children.wait_for_pause("in-hold")
    assert handle.pause() is True
    run = engine.backend.get_run("careful")
    assert run is not None and run.status is RunStatus.RUNNING and run.pause_requested
    children.release("in-hold", pid)
    until(lambda: status("careful") is RunStatus.PAUSED, 30, "the run to park")
    # hold's result is kept. It was written with mark's start, in one commit, and that
    # write brought the request back: mark's body never ran (the ledger says so).
    steps = engine.backend.load_history("careful")
    assert [(s.kind, s.status.value) for s in steps] == [
        (StepKind.TASK, "completed"), (StepKind.TASK, "running"),
    ]  # fmt: skip
    assert bodies(children)[("careful", 1)] == 0
    other = durable.dispatch(napper, 0.0, id="meanwhile")
    assert other.result(timeout=30) is not None, "the one slot is free for another run"
    assert threads(worker) <= idle, f"{threads(worker)} threads while paused, {idle} idle"
    time.sleep(1)
    assert status("careful") is RunStatus.PAUSED, "a paused run is never claimed"
    assert handle.resume() is True
    assert handle.result(timeout=30) == "finished"
    assert kinds(engine, "careful") == [StepKind.TASK] * 3
    assert engine.backend.load_history("careful")[1].attempts == 1, "not counted twice"
    assert bodies(children)[("careful", 0)] == 1
    assert bodies(children)[("careful", 1)] == 1 and bodies(children)[("careful", 2)] == 1
    stop_all(children, [worker])


def test_a_timer_due_during_the_pause_fires_after_resume(
    children: Children, engine: durable.Engine
) -> None:
    """Paused while asleep for 2 s (longer than a wait slept inline): the timer comes
    due while paused and nothing runs; resumed, the run wakes at once and finishes."""
    worker = start_worker(children)
    handle = durable.dispatch(napper, 2.0, id="napper")
    until(lambda: status("napper") is RunStatus.WAITING, 30, "the run to sleep")
    assert handle.pause() is True
    run = engine.backend.get_run("napper")
    assert run is not None and run.status is RunStatus.PAUSED and run.wake_at is not None
    time.sleep(3)
    assert status("napper") is RunStatus.PAUSED
    assert bodies(children)[("napper", 1)] == 0, "the timer did not fire while paused"
    assert handle.resume() is True
    assert handle.result(timeout=30) is not None
    assert bodies(children)[("napper", 1)] == 1
    stop_all(children, [worker])


def test_pausing_a_parent_pauses_its_running_and_waiting_children(
    children: Children, engine: durable.Engine
) -> None:
    """The parent waits on two children, one inside a task, one waiting for an event.
    Pausing the parent pauses all three (the running child once its task returns);
    an event sent meanwhile is kept; resumed, all three finish, each body run once."""
    handle = durable.dispatch(guardian, id="guardian")
    worker = start_worker(children, DURABLE_TEST_PAUSE="in-hold")
    pid = children.wait_for_pause("in-hold")
    until(lambda: status("guardian/1") is RunStatus.WAITING, 30, "the second child to wait")
    until(lambda: status("guardian") is RunStatus.WAITING, 30, "the parent to wait")
    assert handle.pause() is True
    assert status("guardian") is RunStatus.PAUSED
    assert status("guardian/1") is RunStatus.PAUSED
    assert status("guardian/0") is RunStatus.RUNNING  # asked; it parks after its task
    children.release("in-hold", pid)
    until(lambda: status("guardian/0") is RunStatus.PAUSED, 30, "the running child to park")
    durable.send("guardian/1", "go", "payload")
    time.sleep(0.5)
    assert status("guardian/1") is RunStatus.PAUSED, "the event is kept, the run stays"
    assert handle.resume() is True
    assert handle.result(timeout=30) == ["finished", "payload"]
    assert bodies(children) == {
        ("guardian/0", 0): 1,  # hold
        ("guardian/0", 1): 1,  # mark
        ("guardian/0", 2): 1,  # its tidy in finally
        ("guardian/1", 1): 1,  # its tidy
        ("guardian", 4): 1,  # the parent's tidy
    }
    stop_all(children, [worker])
