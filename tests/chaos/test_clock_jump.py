"""A worker host's clock jumps an hour, forward or back, while work is in flight.

The jump is real to the worker: libfaketime (Debian package ``faketime``) is
preloaded into it and reads its offset from a file the test rewrites mid-run, so
``time.time()``, SQLite's ``julianday('now')`` and log timestamps all jump together.
The monotonic clock is left alone, as a real clock step leaves it, and the timed
sleeper measures real time with it (tests/chaos/chaos_app.py).

On PostgreSQL, time is the server's: leases are written and compared with its
``clock_timestamp()``, and so are the deadlines of durable waits, so a jump on a
worker host changes nothing. On SQLite there is no server: the database clock is the
host clock of whichever process runs the statement. A worker whose clock runs an hour
ahead sees every other worker's lease as expired and takes their runs over: the
epoch fence rejects the old owner's late writes, so a task body may run twice
(at-least-once) but no outcome is recorded twice. (An hour behind, its own leases
look expired to the others, with the same result; and a deadline it records lies an
hour early, so on SQLite keep worker clocks in sync.)
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

import durable
from tests.chaos.chaos_app import timed_nap
from tests.chaos.fleet import chaos_seed, log_lines, start_worker
from tests.e2e.checker import check
from tests.e2e.harness import Children
from tests.e2e.test_workers import finished, query, stop_all, until
from tests.e2e.workers_app import storm

pytestmark = [pytest.mark.chaos, pytest.mark.e2e]

REQUIRED = os.environ.get("CI") == "true" or os.environ.get("DURABLE_REQUIRE_POSTGRES") == "1"
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
OPTIONS = ("--concurrency", "4", "--lease", "2")
NAP = 3.0


def libfaketime() -> Path:
    """The preloadable library, or skip (fail in CI, where .ci/run installs it)."""
    configured = os.environ.get("DURABLE_LIBFAKETIME")
    library = Path(configured) if configured else LIBFAKETIME
    if not library.exists():
        reason = f"libfaketime is not installed ({library}): apt-get install faketime"
        if REQUIRED:
            pytest.fail(reason)
        pytest.skip(reason)
    return library


class Skew:
    """The clock offset of skewed workers: a file that libfaketime re-reads each second."""

    def __init__(self, tmp: Path) -> None:
        self.file = tmp / "faketime"
        self.file.write_text("+0\n")
        self.env = {
            "LD_PRELOAD": str(libfaketime()),
            "FAKETIME_TIMESTAMP_FILE": str(self.file),
            "FAKETIME_CACHE_DURATION": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }

    def jump(self, offset: str) -> None:
        """Move the skewed workers' clocks to *offset* (``+1h``, ``-1h``) from real time;
        returns once they have seen it."""
        self.file.write_text(f"{offset}\n")
        time.sleep(1.5)


@pytest.fixture
def skew(tmp_path: Path) -> Skew:
    """A clock offset file, at +0 until the test jumps it."""
    return Skew(tmp_path)


def seconds_ahead(children: Children, worker: subprocess.Popen[str]) -> float:
    """How far the worker's clock is ahead of ours, from the time of its last log line."""
    stamped_at = log_lines(children, worker)[-1][0]
    return stamped_at - time.time()


def takeovers(children: Children, workers: list[subprocess.Popen[str]]) -> int:
    """How many runs the workers took over from another owner."""
    return sum(
        "taken over" in line for worker in workers for _, line in log_lines(children, worker)
    )


@pytest.mark.postgres
@pytest.mark.parametrize("offset", ["+1h", "-1h"])
def test_postgres_ignores_a_worker_clock_jump(
    pg_url: str, tmp_path: Path, skew: Skew, offset: str
) -> None:
    """A worker's clock jumps an hour: no lease is stolen, no body runs twice, and
    durable sleeps last their real length, whichever worker records or wakes them."""
    rng = chaos_seed()
    children = Children(tmp_path, pg_url)
    try:
        total = 150
        with durable.Engine(pg_url) as engine:
            for i in range(total):
                engine.dispatch_call(storm.bind(i), run_id=f"storm-{i:03d}")
        steady = start_worker(children, *OPTIONS, DURABLE_TEST_STEP_MS="100")
        skewed = start_worker(children, *OPTIONS, DURABLE_TEST_STEP_MS="100", **skew.env)
        jump_at = int(total * rng.uniform(0.2, 0.4))
        until(lambda: finished(pg_url) >= jump_at, 60, f"{jump_at} runs to finish")
        skew.jump(offset)
        after_jump = finished(pg_url)
        until(lambda: finished(pg_url) >= total, 90, "every run to finish")
        assert after_jump < total * 0.8, "the jump came too late to overlap the load"
        assert takeovers(children, [steady, skewed]) == 0, "a healthy lease was stolen"
        epochs = query(pg_url, "SELECT max(epoch) FROM durable_runs")[0][0]
        assert epochs == 1, "every run was claimed exactly once"

        # Sleeps recorded by the skewed worker, woken by the steady one...
        stop_all(children, [steady])
        with durable.Engine(pg_url) as engine:
            for i in range(3):
                engine.dispatch_call(timed_nap.bind(NAP), run_id=f"nap-skewed-{i}")
        until(lambda: waiting(pg_url, "skewed") == 3, 30, "the skewed worker to park them")
        steady = start_worker(children, *OPTIONS)
        stop_all(children, [skewed])
        # ...and sleeps recorded by the steady worker, woken by a skewed one.
        with durable.Engine(pg_url) as engine:
            for i in range(3):
                engine.dispatch_call(timed_nap.bind(NAP), run_id=f"nap-steady-{i}")
        # (The skewed worker's sleepers may have woken already, if this one was slow
        # to start: it wakes them then.)
        until(lambda: waiting(pg_url, "steady") == 3, 30, "the steady worker to park them")
        skewed = start_worker(children, *OPTIONS, **skew.env)
        until(lambda: ready(children, skewed), 30, "the skewed worker to start")
        stop_all(children, [steady])
        until(lambda: finished(pg_url) >= total + 6, 60, "the sleepers to wake")
        ahead = seconds_ahead(children, skewed)
        assert abs(ahead - (3600 if offset == "+1h" else -3600)) < 60, ahead
        stop_all(children, [skewed])

        with durable.Engine(pg_url) as engine:
            for kind in ("skewed", "steady"):
                for i in range(3):
                    run = engine.reread(f"nap-{kind}-{i}")
                    before, after = engine.outcome(run)
                    slept = after - before
                    print(f"{offset}: a sleep recorded by the {kind} worker took {slept:.2f} s")
                    assert slept >= NAP, f"a {NAP} s sleep woke after {slept:.2f} s"
                    assert slept < NAP + 8, f"a {NAP} s sleep woke after {slept:.2f} s"
        expected = {f"storm-{i:03d}": [10 * i, 10 * i + 1, 10 * i + 2] for i in range(total)}
        report = check(pg_url, children.ledger, expected)  # nobody killed: no repeats at all
        assert report.repeated == 0
    finally:
        children.close()


def waiting(url: str, kind: str) -> int:
    """How many of the sleepers ``nap-KIND-*`` are parked waiting for their timer."""
    sql = f"SELECT count(*) FROM durable_runs WHERE status = 'waiting' AND id LIKE 'nap-{kind}-%'"
    count = query(url, sql)[0][0]
    assert isinstance(count, int)
    return count


def ready(children: Children, worker: subprocess.Popen[str]) -> bool:
    """Whether a worker has started serving."""
    return "slots" in children.log(worker)


def test_sqlite_forward_jump_at_most_takes_runs_over(
    sqlite_url: str, tmp_path: Path, skew: Skew
) -> None:
    """On SQLite a worker an hour ahead takes healthy runs over; fencing keeps every
    recorded outcome single, and everything completes."""
    rng = chaos_seed()
    children = Children(tmp_path, sqlite_url)
    try:
        total = 150
        with durable.Engine(sqlite_url) as engine:
            for i in range(total):
                engine.dispatch_call(storm.bind(i), run_id=f"storm-{i:03d}")
        steady = start_worker(children, *OPTIONS, DURABLE_TEST_STEP_MS="100")
        skewed = start_worker(children, *OPTIONS, DURABLE_TEST_STEP_MS="100", **skew.env)
        jump_at = int(total * rng.uniform(0.2, 0.4))
        until(lambda: finished(sqlite_url) >= jump_at, 60, f"{jump_at} runs to finish")
        skew.jump("+1h")
        after_jump = finished(sqlite_url)
        until(lambda: finished(sqlite_url) >= total, 90, "every run to finish")
        assert after_jump < total * 0.8, "the jump came too late to overlap the load"
        for worker in (steady, skewed):
            assert worker.poll() is None, children.log(worker)
        stolen = takeovers(children, [skewed])
        fenced = children.log(steady).count("lease lost")
        stop_all(children, [steady, skewed])
        expected = {f"storm-{i:03d}": [10 * i, 10 * i + 1, 10 * i + 2] for i in range(total)}
        report = check(sqlite_url, children.ledger, expected, only_killed_repeat=False)
        print(f"+1h on SQLite: {stolen} takeovers, {fenced} fenced-off owners, {report}")
        assert stolen > 0, "an hour ahead, the skewed worker must see leases as expired"
        assert report.runs == total
    finally:
        children.close()
