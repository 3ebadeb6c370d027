"""Cancellation on real databases, delivered to runs a `durable worker` process executes.

The test process cancels (``durable.get(id).cancel()``); the worker learns of it from
the database alone: the flag that comes back with its next fenced write (a running
run), or the run being queued again with the request (a waiting run).
"""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest

import durable
from durable import Cancelled, RunStatus, StepKind
from tests.e2e.checker import read_ledger
from tests.e2e.harness import Children
from tests.e2e.test_workers import stop_all, until
from tests.e2e.worker_command_app import careful, diligent, guardian, patient, prudent

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("url", SQL, indirect=True)]


def start_worker(children: Children, **env: str) -> subprocess.Popen[str]:
    """``durable worker tests.e2e.worker_command_app`` on the test's database."""
    command = ["-m", "durable", "worker", "tests.e2e.worker_command_app", "--db", children.url]
    return children.spawn([*command, "--concurrency", "4", "--log-level", "INFO"], **env)


def bodies(children: Children) -> Counter[tuple[str, int]]:
    """How many times a task body started at each (run, position), from the ledger."""
    return Counter((entry.run_id, entry.position) for entry in read_ledger(children.ledger))


def status(run_id: str) -> RunStatus | None:
    """The run's status now; None before it exists."""
    run = durable.get_engine().backend.get_run(run_id)
    return None if run is None else run.status


def kinds(engine: durable.Engine, run_id: str) -> list[StepKind]:
    """The kinds of a run's recorded steps, by position."""
    return [step.kind for step in engine.backend.load_history(run_id)]


def test_a_running_workflow_sees_cancelled_and_cleans_up(
    children: Children, engine: durable.Engine
) -> None:
    """Cancelled while a worker process is inside a task: the task's result is kept,
    Cancelled is raised at the next durable call (the next task never runs), the
    ``finally`` block calls a task, and the run ends CANCELLED."""
    handle = durable.dispatch(careful, id="careful")
    worker = start_worker(children, DURABLE_TEST_PAUSE="in-hold")
    pid = children.wait_for_pause("in-hold")
    assert pid == worker.pid
    assert handle.status() is RunStatus.RUNNING
    assert handle.cancel() is True
    assert handle.status() is RunStatus.RUNNING, "the run learns at its next durable call"
    children.release("in-hold", pid)
    with pytest.raises(Cancelled) as caught:
        handle.result(timeout=30)
    assert caught.value.run_id == "careful"
    assert handle.status() is RunStatus.CANCELLED
    assert kinds(engine, "careful") == [StepKind.TASK, StepKind.CANCEL, StepKind.TASK]
    # hold at 0 ran once; the cancel took position 1 (mark never ran); tidy ran at 2.
    assert bodies(children) == {("careful", 0): 1, ("careful", 2): 1}
    assert {entry.pid for entry in read_ledger(children.ledger)} == {worker.pid}
    stop_all(children, [worker])


def test_a_heartbeating_task_sees_the_cancel_within_one_interval(
    children: Children, engine: durable.Engine
) -> None:
    """A task body that would run a minute heartbeats; cancelled, its next heartbeat
    write (every 0.5 s) raises Cancelled inside it: the run ends CANCELLED in seconds,
    with its progress stored, the task's position recording the cancellation and the
    ``finally`` cleanup run."""
    handle = durable.dispatch(diligent, id="diligent")
    worker = start_worker(children)

    def progressed() -> bool:
        steps = engine.backend.load_history("diligent")
        return bool(steps) and steps[0].details is not None

    until(progressed, 30, "the task to store its first heartbeat details")
    (running,) = engine.backend.load_history("diligent")
    assert running.status.value == "running" and running.heartbeat_at is not None
    assert handle.cancel() is True
    with pytest.raises(Cancelled):
        handle.result(timeout=20)
    steps = engine.backend.load_history("diligent")
    assert [(s.kind, s.status.value) for s in steps] == [
        (StepKind.TASK, "failed"), (StepKind.TASK, "completed"),
    ]  # fmt: skip
    assert b"Cancelled" in (steps[0].error or b"")
    assert steps[0].details is not None and b'"of":6000' in steps[0].details
    assert bodies(children) == {("diligent", 0): 1, ("diligent", 1): 1}
    stop_all(children, [worker])


def test_a_cancel_during_the_last_task_still_runs_every_cleanup(
    children: Children, engine: durable.Engine
) -> None:
    """Cancelled while inside the last task before ``return``: Cancelled is raised as
    that task returns (its result recorded), so the cleanup tasks in ``except
    Cancelled`` and in ``finally`` each run once; they used to meet the Cancelled
    themselves, and neither ran."""
    handle = durable.dispatch(prudent, id="prudent")
    worker = start_worker(children, DURABLE_TEST_PAUSE="in-hold")
    pid = children.wait_for_pause("in-hold")
    assert handle.cancel() is True
    children.release("in-hold", pid)
    with pytest.raises(Cancelled):
        handle.result(timeout=30)
    assert handle.status() is RunStatus.CANCELLED
    assert kinds(engine, "prudent") == [
        StepKind.TASK,
        StepKind.CANCEL,
        StepKind.TASK,
        StepKind.TASK,
    ]
    assert bodies(children) == {("prudent", 0): 1, ("prudent", 2): 1, ("prudent", 3): 1}
    stop_all(children, [worker])


@pytest.mark.parametrize("where", ["in-hold", "in-except"])
def test_a_worker_killed_between_the_cancel_and_the_cleanup(
    children: Children, engine: durable.Engine, where: str
) -> None:
    """SIGKILL after the cancel, before any cleanup: inside the task (its outcome not
    recorded), or in the ``except Cancelled`` block (the delivery recorded). Another
    worker takes the run over: no finished body runs again, each cleanup runs once."""
    handle = durable.dispatch(prudent, id="prudent")
    # A short lease, so that the survivor takes the run over soon after the kill.
    victim = children.spawn(
        ["-m", "durable", "worker", "tests.e2e.worker_command_app", "--db", children.url,
         "--lease", "2"],
        DURABLE_TEST_PAUSE="in-hold,in-except",
    )  # fmt: skip
    pid = children.wait_for_pause("in-hold")
    assert handle.cancel() is True
    if where == "in-except":
        children.release("in-hold", pid)
        assert children.wait_for_pause("in-except") == pid
    children.kill(victim)
    survivor = start_worker(children)
    with pytest.raises(Cancelled):
        handle.result(timeout=30)
    assert handle.status() is RunStatus.CANCELLED
    cleanups = {("prudent", 2): 1, ("prudent", 3): 1}
    if where == "in-hold":  # the cancellation took the unfinished task's place
        assert kinds(engine, "prudent") == [StepKind.CANCEL, StepKind.TASK, StepKind.TASK]
        cleanups = {("prudent", 1): 1, ("prudent", 2): 1}
    else:
        assert kinds(engine, "prudent")[:2] == [StepKind.TASK, StepKind.CANCEL]
    assert bodies(children) == {("prudent", 0): 1, **cleanups}
    stop_all(children, [survivor])


@pytest.mark.parametrize("kind", ["event", "sleep"])
def test_a_waiting_workflow_is_woken_to_see_cancelled(
    children: Children, engine: durable.Engine, kind: str
) -> None:
    """Cancelled while suspended for an hour (on an event, or a timer): the worker
    takes the run up again long before the wait would end, Cancelled is raised at the
    wait, the ``finally`` block's task runs once, and the run ends CANCELLED."""
    handle = durable.dispatch(patient, kind, id="patient")
    worker = start_worker(children)
    until(lambda: status("patient") is RunStatus.WAITING, 30, "the run to suspend")
    assert handle.cancel() is True
    with pytest.raises(Cancelled):
        handle.result(timeout=30)
    assert handle.status() is RunStatus.CANCELLED
    # An unfinished wait leaves no step: the cancellation is recorded at its position.
    assert kinds(engine, "patient") == [StepKind.CANCEL, StepKind.TASK]
    assert bodies(children) == {("patient", 1): 1}, "the cleanup task ran, once"
    stop_all(children, [worker])


def test_cancelling_a_parent_cancels_its_running_and_waiting_children(
    children: Children, engine: durable.Engine
) -> None:
    """The parent waits on two dispatched children, one inside a task, one suspended
    on an event. Cancelling the parent alone ends all three CANCELLED, each having
    run its cleanup task once; the running child's next task never runs."""
    handle = durable.dispatch(guardian, id="guardian")
    worker = start_worker(children, DURABLE_TEST_PAUSE="in-hold")
    pid = children.wait_for_pause("in-hold")
    until(lambda: status("guardian/1") is RunStatus.WAITING, 30, "the second child to wait")
    until(lambda: status("guardian") is RunStatus.WAITING, 30, "the parent to wait")
    assert handle.cancel() is True
    # The waiting child needs nothing from the held one to see its cancellation.
    until(lambda: status("guardian/1") is RunStatus.CANCELLED, 30, "the waiting child to end")
    assert status("guardian/0") is RunStatus.RUNNING
    children.release("in-hold", pid)
    with pytest.raises(Cancelled):
        handle.result(timeout=30)
    for child in ("guardian/0", "guardian/1"):
        with pytest.raises(Cancelled):
            durable.get(child).result(timeout=30)
    assert kinds(engine, "guardian/0") == [StepKind.TASK, StepKind.CANCEL, StepKind.TASK]
    assert kinds(engine, "guardian/1") == [StepKind.CANCEL, StepKind.TASK]
    # Delivered at the parent's wait for its first child.
    assert kinds(engine, "guardian") == [
        StepKind.DISPATCH,
        StepKind.DISPATCH,
        StepKind.CANCEL,
        StepKind.TASK,
    ]
    assert bodies(children) == {
        ("guardian/0", 0): 1,  # hold
        ("guardian/0", 2): 1,  # its cleanup; mark at 1 never ran
        ("guardian/1", 1): 1,  # its cleanup
        ("guardian", 3): 1,  # the parent's cleanup
    }
    stop_all(children, [worker])
