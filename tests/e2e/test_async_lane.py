"""Async runs on a `durable worker`'s event loop: ten thousand at once on a few threads,
and a worker killed with SIGKILL in the middle of hundreds of them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import durable
from durable.core.records import RunQuery, RunStatus
from durable.runtime import runs
from tests.e2e.checker import check, read_ledger
from tests.e2e.harness import Children
from tests.e2e.test_workers import finished, stop_all, until
from tests.e2e.workers_app import io_bound, io_storm

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
# They check what the runs end with and the worker's threads, never how fast: they run
# on two pytest-xdist workers beside the other tests (scripts/check.py).
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.untimed,
    pytest.mark.parametrize("url", SQL, indirect=True),
]


def threads_of(pid: int) -> int:
    """The number of threads process *pid* has now (0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return 0
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("Threads"))


def test_ten_thousand_async_runs_on_one_worker(children: Children, url: str) -> None:
    """10,000 async workflows, each awaiting 1 s of I/O in an async task, all complete on
    one worker process whose thread count stays under 50 (a thread per run would be
    10,000); each returns its own result."""
    total = 10_000
    with durable.Engine(url) as engine:
        for first in range(0, total, 500):
            calls = [(io_bound.bind(i, 1.0), f"io-{i:05d}") for i in range(first, first + 500)]
            engine.backend.create_runs(
                [
                    runs.prepare(
                        engine, call, run_id, None, owner=None, queue="default", priority=0
                    )
                    for call, run_id in calls
                ]
            )
    worker = children.start_worker("--async-concurrency", str(total), "--concurrency", "4")
    most = 0
    deadline = time.monotonic() + 240
    with durable.Engine(url) as engine:
        done = RunQuery(statuses=(RunStatus.COMPLETED,))
        while engine.backend.count_runs(done) < total:
            assert worker.poll() is None, children.log(worker)
            assert time.monotonic() < deadline, f"{engine.backend.count_runs(done)} completed"
            most = max(most, threads_of(worker.pid))
            time.sleep(0.1)
        sample = [0, 1, 4_999, 9_998, 9_999]
        assert [engine.outcome(engine.backend.get_run(f"io-{i:05d}")) for i in sample] == [  # type: ignore[arg-type]
            i + 1 for i in sample
        ]
    assert 0 < most < 50, f"the worker had {most} threads"
    stop_all(children, [worker])


def test_sigkill_of_an_async_worker_mid_run(children: Children, url: str) -> None:
    """100 async workflows of three async tasks; the worker running them on its event
    loop is SIGKILLed while their task bodies await; another worker recovers them (one
    at a time until each proves itself: runs taken from a dead owner are suspects).
    Every run completes with its result, each position recorded once, and a body ran
    again only where the killed process had started it."""
    total = 100
    with durable.Engine(url) as engine:
        for i in range(total):
            engine.dispatch_call(io_storm.bind(i, 0.1), run_id=f"io-{i:03d}")
    options = ("--async-concurrency", "1000", "--lease", "2")
    victim = children.start_worker(*options)
    # Mid-run: every run has started a body, and none has finished.
    until(lambda: len(read_ledger(children.ledger)) >= total + 20, 60, "bodies in flight")
    assert finished(url) < total
    children.kill(victim)
    rescuer = children.start_worker(*options)
    until(lambda: finished(url) >= total, 180, "every run to finish")
    stop_all(children, [rescuer])
    expected = {f"io-{i:03d}": [10 * i, 10 * i + 1, 10 * i + 2] for i in range(total)}
    report = check(url, children.ledger, expected, killed=[victim.pid])
    assert report.runs == total and report.steps == 3 * total
    assert report.repeated > 0, "the kill must have caught bodies in flight"


def test_the_heartbeat_keeps_the_leases_of_async_runs(children: Children, url: str) -> None:
    """Async task bodies awaiting 2.5 s, three times the 0.8 s lease, beside a second
    worker that would take any expired lease over: the heartbeat renews the lane's runs
    with the others, so no body runs twice."""
    with durable.Engine(url) as engine:
        for i in range(4):
            engine.dispatch_call(io_storm.bind(i, 2.5), run_id=f"long-{i}")
    first = children.start_worker("--lease", "0.8")
    until(lambda: len(read_ledger(children.ledger)) >= 4, 30, "every run's first body")
    second = children.start_worker("--lease", "0.8")
    until(lambda: finished(url) >= 4, 60, "every run to finish")
    stop_all(children, [first, second])
    expected = {f"long-{i}": [10 * i, 10 * i + 1, 10 * i + 2] for i in range(4)}
    report = check(url, children.ledger, expected)  # a repeat would need a killed process
    assert report.repeated == 0 and report.bodies == 12
