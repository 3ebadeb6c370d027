"""Durable waits across real processes: worker restarts, a thousand sleepers, dead callers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import durable
from durable import RunStatus
from tests.e2e.harness import Children
from tests.e2e.test_workers import finished, query, stop_all, until
from tests.e2e.workers_app import event_napper, napper

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("url", SQL, indirect=True)]


def status(url: str, run_id: str) -> str:
    """The run's status, or "missing" (also before the child process made the tables)."""
    try:
        rows = query(url, f"SELECT status FROM durable_runs WHERE id = '{run_id}'")
    except Exception:
        return "missing"
    return str(rows[0][0]) if rows else "missing"


def sleep_step(url: str, run_id: str) -> tuple[float, float]:
    """The recorded deadline of a run's sleep, and when the sleep was recorded over."""
    rows = query(
        url,
        f"SELECT wake_at, finished_at FROM durable_history WHERE run_id = '{run_id}' "
        "AND kind = 'sleep'",
    )
    ((wake_at, finished_at),) = rows
    return float(wake_at), float(finished_at)  # type: ignore[arg-type]


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")  # pragma: no cover


def test_a_sleep_survives_a_worker_restart_and_wakes_on_time(children: Children, url: str) -> None:
    """The worker that parked the run is killed; a new one wakes it at its deadline."""
    with durable.Engine(url) as engine:
        engine.dispatch_call(napper.bind(4.0), run_id="sleeper")
    first = children.start_worker("--concurrency", "2")
    until(lambda: status(url, "sleeper") == "waiting", 30, "the run to fall asleep")
    children.kill(first)
    second = children.start_worker("--concurrency", "2")
    until(lambda: status(url, "sleeper") == "completed", 30, "the run to wake and finish")
    stop_all(children, [second])
    wake_at, woke = sleep_step(url, "sleeper")
    lag = woke - wake_at
    print(f"wake-up lag after a worker restart: {lag * 1000:.0f} ms")
    assert lag >= 0, "a wake-up never fires early"
    assert lag < 2.0, f"the new worker woke the run {lag:.2f} s late"


def test_a_thousand_sleepers_share_four_slots(children: Children, url: str) -> None:
    """1,000 runs wait at once on one worker with --concurrency 4; all complete."""
    total = 1000
    with durable.Engine(url) as engine:
        for i in range(total):
            engine.dispatch_call(napper.bind(4.0), run_id=f"nap-{i:04d}")
    worker = children.start_worker("--concurrency", "4")
    most_waiting = 0
    most_threads = 0
    deadline = time.monotonic() + 120
    while finished(url) < total:
        assert time.monotonic() < deadline, f"only {finished(url)} of {total} finished"
        rows = query(url, "SELECT count(*) FROM durable_runs WHERE status = 'waiting'")
        most_waiting = max(most_waiting, int(rows[0][0]))  # type: ignore[call-overload]
        if worker.poll() is None:
            most_threads = max(most_threads, threads_of(worker.pid))
        time.sleep(0.1)
    stop_all(children, [worker])
    print(f"at most {most_waiting} runs waiting at once; worker threads peaked at {most_threads}")
    # Four held slots would allow 4 sleepers at a time (and 1,000 s in all). How many
    # sleep together depends on how fast the worker parks them, which a busy machine
    # slows: 100 is far above 4 and well below what an idle machine reaches (1,000).
    assert most_waiting >= 100, "waiting runs must not hold the worker's four slots"
    assert most_threads < 30, "no thread per waiting run"
    statuses = query(url, "SELECT status, count(*) FROM durable_runs GROUP BY status")
    assert statuses == [("completed", total)]
    late = query(
        url,
        "SELECT count(*) FROM durable_history WHERE kind = 'sleep' AND finished_at < wake_at",
    )
    assert late == [(0,)], "no wake-up fired early"


def test_an_execute_caller_that_dies_mid_wait_loses_nothing(children: Children, url: str) -> None:
    """The app process blocked in execute() is killed while the run sleeps; a worker
    finishes the run at its deadline."""
    app = children.start("nap", url, "app-nap", "3")
    until(lambda: status(url, "app-nap") == "waiting", 30, "the run to fall asleep")
    children.kill(app)
    worker = children.start_worker()
    until(lambda: status(url, "app-nap") == "completed", 30, "a worker to finish the run")
    stop_all(children, [worker])
    with durable.Engine(url) as engine:
        before, after = engine.outcome(engine.reread("app-nap"))
    assert after - before >= 3


def test_an_event_sent_from_another_process_resumes_the_run(children: Children, url: str) -> None:
    """send() in this process wakes a run parked by a worker process."""
    with durable.Engine(url) as engine:
        engine.dispatch_call(event_napper.bind(), run_id="ear")
        worker = children.start_worker()
        until(lambda: status(url, "ear") == "waiting", 30, "the run to wait")
        data = engine.dump({"ok": True}, "payload")
        engine.backend.send_event("ear", "go", data)
        until(lambda: status(url, "ear") == "completed", 30, "the event to resume the run")
        assert engine.outcome(engine.reread("ear")) == {"ok": True}
        assert engine.reread("ear").status is RunStatus.COMPLETED
    stop_all(children, [worker])
