"""A crash at every fault point, for every kind of durable call, on SQLite and PostgreSQL.

Each case dispatches one `every_kind` run (a task, a patch's marker, now, uuid4, random,
a sleep, a send, an event wait, a dispatch, a join and an inline child workflow), starts
a worker armed with one fault (``DURABLE_FAULTS``), and, if the fault killed it, a clean
worker that takes the run over. Then the checker holds the run to the invariants: the
result the pure-Python model predicts, every position recorded once, and no task body
run again after its result was committed. A body may run twice only where the crash fell
between the body starting and its result being committed, and only in the process that
died; a lost acknowledgement re-runs nothing.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from typing import Any

import pytest

import durable
from durable import RunStatus
from durable.errors import StorageError
from durable.testing import arm_fault, disarm_faults
from tests.chaos.fault_app import (
    SeedOrder,
    Tally,
    bounded,
    every_kind,
    every_kind_async,
    expected,
    expected_async,
    seed_expected,
    tally_expected,
)
from tests.e2e.checker import Report, check, read_ledger
from tests.e2e.harness import Children

# Kills at fault points and checks what the runs end with, never how fast: these run
# on two pytest-xdist workers beside the other tests (scripts/check.py).
pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.untimed]

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
KINDS = [
    "task", "patch", "now", "uuid4", "random", "sleep", "send", "event", "dispatch", "join",
    "workflow",
]  # fmt: skip

#: (point, action, match, task bodies expected to run twice)
CASES = [
    ("after_claim", "exit", "fault", 0),
    ("before_task", "exit", "task:", 0),
    ("after_task", "exit", "task:", 1),
    *(("before_checkpoint", "exit", f"{kind}:", int(kind == "task")) for kind in KINDS),
    *(("checkpoint_lost_ack", "raise", f"{kind}:", 0) for kind in KINDS),
    ("before_complete", "exit", "every_kind", 0),
    ("dispatch_lost_ack", "raise", "dispatch:", 0),
]
RUN = "fault-7"


def worker(children: Children, faults: str = "") -> subprocess.Popen[str]:
    command = ["-m", "durable", "worker", "tests.chaos.fault_app", "--db", children.url]
    options = ["--concurrency", "1", "--lease", "5", "--log-level", "INFO"]
    return children.spawn([*command, *options], DURABLE_FAULTS=faults)


def finish(url: str, run_id: str, timeout: float = 60) -> durable.Run:
    """Wait until *run_id* has finished; return it."""
    deadline = time.monotonic() + timeout
    with durable.Engine(url) as engine:
        while time.monotonic() < deadline:
            run = engine.backend.get_run(run_id)
            if run is not None and run.status.finished:
                return run
            time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish within {timeout}s")


def ready(children: Children, process: subprocess.Popen[str]) -> subprocess.Popen[str]:
    """*process*, once its worker has started (it logs what it serves)."""
    deadline = time.monotonic() + 60
    while "workflows and tasks known" not in children.log(process):
        assert process.poll() is None, children.log(process)
        assert time.monotonic() < deadline, f"the worker did not start:\n{children.log(process)}"
        time.sleep(0.05)
    return process


def stop(children: Children, process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0, children.log(process)


def crash_at(
    children: Children, url: str, call: Any, case: tuple[str, str, str, int], result: object
) -> Report:
    """Dispatch *call* as run `RUN`, crash a worker at *case*'s fault point, let a clean
    worker finish it if the fault killed the first, and check it against *result*."""
    point, action, match, repeats = case
    with durable.Engine(url) as engine:
        engine.dispatch_call(call, run_id=RUN)
    fault = json.dumps([{"point": point, "action": action, "match": match}])
    first = worker(children, fault)
    killed: list[int] = []
    if action == "exit":
        assert first.wait(60) == 137, f"the fault did not fire:\n{children.log(first)}"
        killed.append(first.pid)
        second = worker(children)
        run = finish(url, RUN)
        stop(children, second)
    else:
        run = finish(url, RUN)
        stop(children, first)
    assert f"fault injected: {point}" in children.log(first), "the fault never fired"
    assert run.status is RunStatus.COMPLETED, run
    report = check(children.url, children.ledger, {RUN: result}, killed=killed)
    assert report.repeated == repeats, report
    return report


@pytest.mark.parametrize("url", SQL, indirect=True)
@pytest.mark.parametrize(
    "case", CASES, ids=[f"{point}-{match.rstrip(':')}" for point, _, match, _ in CASES]
)
def test_crash_at_fault_point(
    children: Children, url: str, case: tuple[str, str, str, int]
) -> None:
    report = crash_at(children, url, every_kind.bind(7, RUN), case, expected(7))
    assert report.steps == 11


#: (point, action, match, task bodies expected to run twice) for an async workflow on a
#: worker's event loop, whose writes are made off the loop, in the lane's threads.
ASYNC_CASES = [
    ("after_claim", "exit", "fault", 0),
    ("before_task", "exit", "task:", 0),
    ("after_task", "exit", "task:", 1),
    ("before_checkpoint", "exit", "task:", 1),
    ("before_checkpoint", "exit", "workflow:", 0),
    ("checkpoint_lost_ack", "raise", "task:", 0),
    ("checkpoint_lost_ack", "raise", "event:", 0),
    # The last task's result is written with the run's outcome (deferred, as for a sync
    # task awaited alone): a crash before that commit runs the task again.
    ("before_complete", "exit", "every_kind_async", 1),
]


@pytest.mark.parametrize("url", SQL, indirect=True)
@pytest.mark.parametrize(
    "case", ASYNC_CASES, ids=[f"{point}-{match.rstrip(':')}" for point, _, match, _ in ASYNC_CASES]
)
def test_crash_at_fault_point_of_an_async_run(
    children: Children, url: str, case: tuple[str, str, str, int]
) -> None:
    """The same crashes, for an async workflow executed on a worker's event loop."""
    report = crash_at(children, url, every_kind_async.bind(7, RUN), case, expected_async(7))
    assert report.steps == 10


#: (point, action, match, nth, cleanup bodies expected): crashes around a run's deadline.
DEADLINE_CASES = [
    ("before_checkpoint", "exit", "cancel:durable.timeout", 1, 1),
    ("checkpoint_lost_ack", "raise", "cancel:durable.timeout", 1, 1),
    ("before_task", "exit", "task:", 2, 1),
    ("after_task", "exit", "task:", 2, 2),
    ("before_complete", "exit", "workflow:", 1, 1),
]


@pytest.mark.parametrize("url", SQL, indirect=True)
@pytest.mark.parametrize(
    "case", DEADLINE_CASES, ids=[f"{c[0]}-{c[2].split(':')[0]}-{c[3]}" for c in DEADLINE_CASES]
)
def test_crash_around_a_deadline(
    children: Children, url: str, case: tuple[str, str, str, int, int]
) -> None:
    """A run stopped by its deadline while it sleeps, with a crash where the deadline is
    delivered (its marker), in the cleanup task, or before the outcome: the run that
    takes it over ends TIMED_OUT all the same, the task before the deadline never runs
    again, and the cleanup runs twice only if the crash fell inside its body."""
    point, action, match, nth, cleanups = case
    run_id = "bounded-3"
    fault = json.dumps([{"point": point, "action": action, "match": match, "nth": nth}])
    # The deadline (2 s) counts from the dispatch: the worker is up first, so that a
    # slow start under load does not spend it (that case is the test below).
    first = ready(children, worker(children, fault))
    with durable.Engine(url) as engine:
        engine.dispatch_call(bounded.bind(3), run_id=run_id)
    if action == "exit":
        assert first.wait(60) == 137, f"the fault did not fire:\n{children.log(first)}"
        second = worker(children)
        run = finish(url, run_id)
        stop(children, second)
    else:
        run = finish(url, run_id)
        stop(children, first)
    assert f"fault injected: {point}" in children.log(first), "the fault never fired"
    assert run.status is RunStatus.TIMED_OUT, run
    bodies = [entry.position for entry in read_ledger(children.ledger) if entry.run_id == run_id]
    assert bodies.count(0) == 1, bodies  # committed before the deadline: never again
    assert bodies.count(2) == cleanups, bodies
    with durable.Engine(url) as engine:
        history = engine.backend.load_history(run_id)
    assert [(step.position, step.name) for step in history] == [
        (0, "tests.chaos.fault_app.effect"),
        (1, "durable.timeout"),
        (2, "tests.chaos.fault_app.effect"),
    ]


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_crash_timing_out_a_run_whose_deadline_passed_before_it_ran(
    children: Children, url: str
) -> None:
    """A run whose deadline passed while it was queued is stopped before its first
    line; a crash before that outcome is recorded (after the hand-over asked its
    children to cancel) leaves a run the next worker still ends TIMED_OUT, not
    CANCELLED, and whose code never ran."""
    run_id = "bounded-4"
    with durable.Engine(url) as engine:
        engine.dispatch_call(bounded.bind(4), run_id=run_id)
    time.sleep(2.2)  # its deadline (2 s) passes before any worker is up
    fault = json.dumps([{"point": "before_complete", "action": "exit", "match": "workflow:"}])
    first = worker(children, fault)
    assert first.wait(60) == 137, f"the fault did not fire:\n{children.log(first)}"
    second = worker(children)
    run = finish(url, run_id)
    stop(children, second)
    assert run.status is RunStatus.TIMED_OUT, run
    assert [entry for entry in read_ledger(children.ledger) if entry.run_id == run_id] == []
    with durable.Engine(url) as engine:
        assert engine.backend.load_history(run_id) == []


#: (point, action, match, nth): a crash at each task of a workflow class (its first,
#: in the parallel group, and its last), and before its outcome.
SEED_CASES = [
    ("before_task", "exit", "task:", 1),
    *(("after_task", "exit", "task:", nth) for nth in (1, 2, 3, 4)),
    ("checkpoint_lost_ack", "raise", "task:", 1),
    ("before_complete", "exit", "workflow:", 1),
]


@pytest.mark.parametrize("url", SQL, indirect=True)
@pytest.mark.parametrize(
    "case", SEED_CASES, ids=[f"{c[0]}-{c[2].rstrip(':')}-{c[3]}" for c in SEED_CASES]
)
def test_crash_in_a_workflow_class(
    children: Children, url: str, case: tuple[str, str, str, int]
) -> None:
    """Seed 000's example as a workflow class, killed at a task or before its outcome:
    the run that takes it over rebuilds the instance by replay, its hooks run again in
    the same order, and it ends with the properties and result computed without durable;
    no task body whose result was committed runs again."""
    point, action, match, nth = case
    run_id = "seed-4"
    with durable.Engine(url) as engine:
        engine.dispatch_call(SeedOrder.bind(4), run_id=run_id)
    fault = json.dumps([{"point": point, "action": action, "match": match, "nth": nth}])
    first = worker(children, fault)
    killed: list[int] = []
    if action == "exit":
        assert first.wait(60) == 137, f"the fault did not fire:\n{children.log(first)}"
        killed.append(first.pid)
        second = worker(children)
        finish(url, run_id)
        stop(children, second)
    else:
        finish(url, run_id)
        stop(children, first)
    assert f"fault injected: {point}" in children.log(first), "the fault never fired"
    want = seed_expected(4)
    report = check(children.url, children.ledger, {run_id: want["total"]}, killed=killed)
    with durable.Engine(url) as engine:
        assert durable.Handle(engine, run_id).state() == want
    # Bodies re-run only where the killed process ran them and died before their
    # results were committed: the last task's (its result goes with the outcome), or
    # some of the parallel three.
    if (point, nth) in (("after_task", 4), ("before_complete", 1)):
        assert report.repeated == 1, report
    elif action == "exit":
        assert report.repeated <= 3, report
    else:
        assert report.repeated == 0, report


#: A crash as a handler takes its event (the first, the second), in a handler's task,
#: with the consumption's acknowledgement lost, and before the outcome.
TALLY_CASES = [
    ("before_checkpoint", "exit", "handler:", 1),
    ("before_checkpoint", "exit", "handler:", 2),
    ("after_task", "exit", "task:", 2),
    ("checkpoint_lost_ack", "raise", "handler:", 1),
    ("before_complete", "exit", "workflow:", 1),
]


@pytest.mark.parametrize("url", SQL, indirect=True)
@pytest.mark.parametrize(
    "case", TALLY_CASES, ids=[f"{c[0]}-{c[2].rstrip(':')}-{c[3]}" for c in TALLY_CASES]
)
def test_crash_in_an_event_handler(
    children: Children, url: str, case: tuple[str, str, str, int]
) -> None:
    """A workflow class handling two events sent before it started, killed as a handler
    takes its event, inside a handler's task, or before its outcome: the run that takes
    it over runs the handlers recorded, takes each remaining event once, and ends with
    the properties computed without durable; each event is consumed exactly once."""
    point, action, match, nth = case
    run_id = "tally-6"
    with durable.Engine(url) as engine:
        engine.dispatch_call(Tally.bind(6), run_id=run_id)
        for n in (2, 3):  # queued, not started: the events wait in its inbox
            engine.backend.send_event(run_id, "add", engine.dump(n, "an event"))
    fault = json.dumps([{"point": point, "action": action, "match": match, "nth": nth}])
    first = worker(children, fault)
    killed: list[int] = []
    if action == "exit":
        assert first.wait(60) == 137, f"the fault did not fire:\n{children.log(first)}"
        killed.append(first.pid)
        second = worker(children)
        finish(url, run_id)
        stop(children, second)
    else:
        finish(url, run_id)
        stop(children, first)
    assert f"fault injected: {point}" in children.log(first), "the fault never fired"
    want = tally_expected(6, [2, 3])
    report = check(children.url, children.ledger, {run_id: want["total"]}, killed=killed)
    with durable.Engine(url) as engine:
        assert durable.Handle(engine, run_id).state() == want
        consumed = [event.consumed_position for event in engine.backend.events(run_id)]
        steps = [(s.position, s.kind.value, s.name) for s in engine.backend.load_history(run_id)]
    assert consumed == [0, 2], consumed
    assert [step[1] for step in steps] == ["handler", "task", "handler", "task", "task"], steps
    assert report.repeated <= 1, report


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_lost_ack_of_a_dispatch_still_makes_one_run(url: str) -> None:
    """The insert commits, then the driver fails: the caller either gets its handle (the
    backend read its own row back) or an error, and dispatching again with the same id
    returns that same run: never two runs, never a conflict."""
    arm_fault("dispatch_lost_ack", "raise")
    try:
        with durable.Engine(url) as engine:
            if url.startswith("postgresql"):
                # psycopg reports a lost connection: the backend retries, finds its own
                # row, and the caller never knows.
                handle = engine.dispatch_call(every_kind.bind(1, "d"), run_id="d")
            else:
                with pytest.raises(StorageError, match="ack was lost"):
                    engine.dispatch_call(every_kind.bind(1, "d"), run_id="d")
                handle = engine.dispatch_call(every_kind.bind(1, "d"), run_id="d")
            assert handle.id == "d"
            run = engine.backend.get_run("d")
            assert run is not None and run.status is RunStatus.QUEUED and run.epoch == 0
    finally:
        disarm_faults()
