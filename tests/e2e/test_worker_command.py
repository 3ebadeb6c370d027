"""The `durable worker` command as users start it: the console script, its options, and
how it stops on SIGINT and when the grace period runs out."""

from __future__ import annotations

import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

import durable
from durable import RunStatus, workflow
from durable.core.records import StepStatus
from tests.e2e.checker import check, read_ledger
from tests.e2e.harness import Children
from tests.e2e.test_workers import finished, query, stop_all, until
from tests.e2e.workers_app import slow, storm

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = pytest.mark.e2e

#: The console script pip installed next to this interpreter (`durable = durable.cli.main:main`).
SCRIPT = Path(sys.executable).parent / "durable"


def worker_command(url: str, *options: str) -> list[str]:
    """``python -m durable worker tests.e2e.workers_app --db URL OPTIONS`` (no --log-level)."""
    return [
        sys.executable,
        "-m",
        "durable",
        "worker",
        "tests.e2e.workers_app",
        "--db",
        url,
        *options,
    ]


def statuses(url: str) -> dict[str, tuple[str, int]]:
    """Each run's (status, epoch)."""
    rows = query(url, "SELECT id, status, epoch FROM durable_runs")
    return {str(run): (str(status), int(str(epoch))) for run, status, epoch in rows}


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_the_console_script_drains_work(children: Children, url: str) -> None:
    """``.venv/bin/durable worker MODULE`` itself (not ``python -m durable``) runs queued
    workflows to completion, in its own process, and stops cleanly on SIGTERM."""
    assert SCRIPT.is_file(), f"no console script at {SCRIPT}"
    with durable.Engine(url) as engine:
        for i in range(3):
            engine.dispatch_call(storm.bind(i), run_id=f"script-{i}")
    worker = children.command([str(SCRIPT), "worker", "tests.e2e.workers_app", "--db", url])
    until(lambda: finished(url) == 3, 30, "the console-script worker to finish")
    stop_all(children, [worker])
    check(url, children.ledger, {f"script-{i}": [10 * i, 10 * i + 1, 10 * i + 2] for i in range(3)})
    assert {entry.pid for entry in read_ledger(children.ledger)} == {worker.pid}


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_queue_given_twice_serves_exactly_those_queues(children: Children, url: str) -> None:
    """``--queue alpha --queue beta`` serves both, and neither ``gamma`` nor the
    ``default`` queue (the option replaces the default, it does not add to it)."""
    with durable.Engine(url) as engine:
        for queue in ("gamma", "default", "alpha", "beta"):
            engine.dispatch_call(storm.bind(1), run_id=queue, queue=queue)
    worker = children.command(worker_command(url, "--queue", "alpha", "--queue", "beta"))
    served = ("alpha", "beta")
    until(
        lambda: all(statuses(url)[run][0] == "completed" for run in served),
        30,
        "the alpha and beta runs to finish",
    )
    stop_all(children, [worker])
    runs = statuses(url)
    # Every queued run was there before the worker started: had it served gamma or
    # default, it would have claimed them in the same pass as alpha and beta.
    assert runs["gamma"] == runs["default"] == ("queued", 0), "never claimed"
    assert {entry.run_id for entry in read_ledger(children.ledger)} == {"alpha", "beta"}


@workflow(name="tests.e2e.worker_command.only_in_the_test_process")
def only_here() -> None:
    """A workflow the worker processes do not know: they log an ERROR about its run."""


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_log_level_filters_what_the_worker_logs(children: Children, url: str) -> None:
    """By default the worker logs INFO lines (start, stop); ``--log-level warning``
    drops them yet still logs an ERROR, while the worker works the same."""
    with durable.Engine(url) as engine:
        engine.dispatch_call(only_here.bind(), run_id="unknown")
        engine.dispatch_call(storm.bind(1), run_id="first")
    chatty = children.command(worker_command(url))
    until(lambda: finished(url) == 1, 30, "the default worker to finish its run")
    stop_all(children, [chatty])
    with durable.Engine(url) as engine:
        engine.dispatch_call(storm.bind(2), run_id="second")
    quiet = children.command(worker_command(url, "--log-level", "warning"))
    # Finishing a run means its signal handlers are set (they are set before it starts).
    until(lambda: finished(url) == 2, 30, "the quiet worker to finish its run")
    quiet.send_signal(signal.SIGTERM)
    assert quiet.wait(30) == 0, children.log(quiet)
    loud_log, quiet_log = children.log(chatty), children.log(quiet)
    for line in ("INFO durable.worker: worker ", "INFO durable.cli: SIGTERM: stopping", " stopped"):
        assert line in loud_log, loud_log
        assert line not in quiet_log, quiet_log
    assert " INFO " not in quiet_log, quiet_log
    for log in (loud_log, quiet_log):
        assert "ERROR durable: queued work in default needs" in log, log
    assert {e.run_id: e.pid for e in read_ledger(children.ledger) if e.position == 0} == {
        "first": chatty.pid,
        "second": quiet.pid,
    }


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_sigint_hands_running_work_back(children: Children, url: str) -> None:
    """SIGINT (Ctrl-C), like SIGTERM, stops a busy worker gracefully: exit code 0, its
    runs handed back at their next durable call; another worker finishes them and no
    task body runs twice."""
    with durable.Engine(url) as engine:
        for i in range(6):
            engine.dispatch_call(slow.bind(0.2), run_id=f"int-{i}")
    first = children.command(worker_command(url, "--concurrency", "3", "--grace", "10"))
    until(lambda: len(read_ledger(children.ledger)) >= 3, 30, "the first worker to get busy")
    first.send_signal(signal.SIGINT)
    assert first.wait(30) == 0, children.log(first)
    log = children.log(first)
    assert "SIGINT: stopping" in log and "stopped" in log, log
    assert "KeyboardInterrupt" not in log, log
    runs = statuses(url)
    steps = Counter(str(run) for (run,) in query(url, "SELECT run_id FROM durable_history"))
    handed_back = [run for run, (state, _) in runs.items() if state == "queued" and steps[run]]
    assert handed_back, f"some run must have been stopped midway: {runs} {steps}"
    assert finished(url) < 6, "the first worker must not have simply run everything"
    second = children.command(worker_command(url, "--concurrency", "6"))
    until(lambda: finished(url) == 6, 60, "the second worker to finish")
    stop_all(children, [second])
    report = check(url, children.ledger, {f"int-{i}": [0, 1, 2] for i in range(6)})
    assert report.repeated == 0, "nobody was killed: no task body may have run twice"
    assert {entry.pid for entry in read_ledger(children.ledger)} == {first.pid, second.pid}


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_work_still_busy_after_the_grace_period_is_released(children: Children, url: str) -> None:
    """SIGTERM with ``--grace 0.5`` while a task body is still busy: after the grace
    period the run is released (QUEUED, no lease) although the body has not returned,
    the worker exits without waiting for the body, and a second worker finishes the
    run. The recorded result is the second worker's, and no finished task ran twice."""
    with durable.Engine(url) as engine:
        engine.dispatch_call(slow.bind(0.0), run_id="stuck")
    first = children.command(
        worker_command(url, "--grace", "0.5", "--log-level", "INFO"), DURABLE_TEST_PAUSE="in-slow"
    )
    pid = children.wait_for_pause("in-slow")  # the first task body is busy, held here
    assert pid == first.pid
    first.send_signal(signal.SIGTERM)
    until(lambda: "released" in children.log(first), 30, "the grace period to expire")
    with durable.Engine(url) as engine:
        run = engine.backend.get_run("stuck")
        assert run is not None
        assert (
            run.status is RunStatus.QUEUED and run.lease_owner is None and run.lease_until is None
        )
        assert run.epoch == 1
        started = [(s.position, s.status) for s in engine.backend.load_history("stuck")]
        assert started == [(0, StepStatus.RUNNING)], "the held body has only started"
    assert "run stuck: still busy after 0.5s; released" in children.log(first)
    # The body is still held, and the worker exits anyway: it does not wait for it.
    assert first.wait(10) == 0, children.log(first)
    assert "exiting with 1 task bodies still running" in children.log(first)
    second = children.command(worker_command(url))
    until(lambda: finished(url) == 1, 30, "the second worker to finish the run")
    children.release("in-slow", pid)
    stop_all(children, [second])
    # The checker: the recorded result at each position is from the last body the
    # ledger saw there; so position 0 ran twice (the first body was never recorded).
    check(url, children.ledger, {"stuck": [0, 1, 2]}, only_killed_repeat=False)
    ledger = [(e.position, e.pid) for e in read_ledger(children.ledger)]
    assert ledger == [(0, first.pid), (0, second.pid), (1, second.pid), (2, second.pid)]
    with durable.Engine(url) as engine:
        assert [step.epoch for step in engine.backend.load_history("stuck")] == [2, 2, 2]
