"""PostgreSQL crashes and goes away under load; the workers ride it out.

Each test runs its own throw-away cluster (tests/chaos/pg_cluster.py), never the
shared test server, so it can restart it at will.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from tests.chaos.fleet import chaos_seed, start_worker, unexplained_repeats
from tests.chaos.pg_cluster import Knocks, PgCluster
from tests.e2e.checker import check
from tests.e2e.harness import Children
from tests.e2e.test_workers import finished, query, stop_all, until
from tests.e2e.workers_app import storm

pytestmark = [pytest.mark.chaos, pytest.mark.e2e, pytest.mark.postgres]

LEASE = 3.0
SLOTS = 4


@pytest.fixture
def cluster() -> Iterator[PgCluster]:
    """A private PostgreSQL cluster on a spare port, removed afterwards."""
    with PgCluster.running() as running:
        yield running


@pytest.fixture
def children(tmp_path: Path, cluster: PgCluster) -> Iterator[Children]:
    """Worker processes on the private cluster; all killed and reaped afterwards."""
    harness = Children(tmp_path, cluster.url)
    try:
        yield harness
    finally:
        harness.close()


def running(url: str) -> set[tuple[str, int]]:
    """The runs RUNNING now, each with the epoch of its current claim."""
    rows = query(url, "SELECT id, epoch FROM durable_runs WHERE status = 'running'")
    return {(str(run_id), epoch) for run_id, epoch in rows if isinstance(epoch, int)}


def listeners(url: str) -> int:
    """How many sessions LISTEN on the cluster now."""
    sql = "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'"
    count = query(url, sql)[0][0]
    assert isinstance(count, int)
    return count


def test_restart_and_outage_under_load(cluster: PgCluster, children: Children) -> None:
    """An immediate restart at ~30% and a 5 s outage at ~60%: nothing lost or doubled.

    Two workers drain 600 three-task workflows. The workers never exit, try to
    connect at most a few times a second while the server is gone, and hand the
    runs the outage interrupted back within a lease of its end; a worker whose
    LISTEN never came back still picks up new work within a poll interval. In the
    end every run completed once with its result, no step was recorded twice or by
    a body that ran after it was committed, and each repeated body belongs to an
    execution a storage error abandoned.
    """
    rng = chaos_seed()
    url = cluster.url
    total = 600
    with durable.Engine(url) as engine:
        for i in range(total):
            engine.dispatch_call(storm.bind(i), run_id=f"pg-{i:04d}")
    options = ("--concurrency", str(SLOTS), "--lease", str(LEASE))
    steady = start_worker(children, *options, DURABLE_TEST_STEP_MS="20")
    deaf = start_worker(children, *options, DURABLE_TEST_STEP_MS="20", DURABLE_CHAOS_LISTEN="once")
    workers = [steady, deaf]
    started = time.monotonic()

    crash_at = int(total * rng.uniform(0.25, 0.35))
    until(lambda: finished(url) >= crash_at, 90, f"{crash_at} runs to finish")
    before = time.monotonic()
    cluster.restart("immediate")
    print(f"restart -m immediate at {finished(url)}/{total}: {time.monotonic() - before:.2f} s")

    outage_at = int(total * rng.uniform(0.55, 0.65))
    until(lambda: finished(url) >= outage_at, 90, f"{outage_at} runs to finish")
    down = time.time()
    cluster.stop("fast")
    with Knocks.on(cluster.port) as knocks:
        time.sleep(5.0)
    counted = time.time() - down
    cluster.start()
    up = time.time()
    stranded = running(url)  # nothing could be claimed meanwhile: the outage left these
    print(f"stop -m fast at {outage_at}/{total}, down for {up - down:.2f} s")
    # Handed back as soon as the database answers, not left RUNNING (their leases
    # renewed by a heartbeat) until their workers run out of other work.
    until(lambda: not stranded & running(url), LEASE, "the interrupted runs to be handed back")
    back = time.time() - up
    print(f"{len(stranded)} runs interrupted by the outage, handed back after {back:.2f} s")

    until(lambda: finished(url) >= total, 120, "every run to finish")
    drained = time.monotonic() - started
    for worker in workers:
        assert worker.poll() is None, f"a worker exited:\n{children.log(worker)}"

    # No reconnect storm: every connection attempt reached our stand-in on the port.
    rate = knocks.count / counted / len(workers)
    print(f"{knocks.count} connection attempts in {counted:.1f} s: {rate:.1f}/s per worker")
    assert rate <= 5, "workers must back off while the database is away"

    # Polling alone picks up new work: the deaf worker's LISTEN never came back.
    stop_all(children, [steady])
    assert listeners(url) == 0, "the deaf worker must not be listening"
    probe_started = time.monotonic()
    with durable.Engine(url) as engine:
        for i in range(3):
            engine.dispatch_call(storm.bind(total + i), run_id=f"probe-{i}")
    until(lambda: finished(url) >= total + 3, 30, "the probes to finish")
    latency = time.monotonic() - probe_started
    print(f"new work after the outage, polling only: done in {latency:.2f} s")
    assert latency < 3.0, "a worker must poll at least every second"
    stop_all(children, [deaf])

    expected = {f"pg-{i:04d}": [10 * i, 10 * i + 1, 10 * i + 2] for i in range(total)}
    expected |= {f"probe-{i}": [10 * (total + i) + n for n in range(3)] for i in range(3)}
    report = check(url, children.ledger, expected, only_killed_repeat=False)
    print(f"drained in {drained:.1f} s; {report}")
    assert report.runs == total + 3 and report.steps == 3 * (total + 3)

    # Repeats are at-least-once around the failures only: each belongs to an execution
    # a storage error abandoned, at most one per slot busy at each of the two failures.
    abandoned, unexplained = unexplained_repeats(children, workers)
    print(f"{report.repeated} repeated bodies, {abandoned} executions abandoned")
    assert not unexplained, unexplained
    assert report.repeated <= 2 * len(workers) * SLOTS


def test_first_statement_after_a_restart_succeeds(cluster: PgCluster) -> None:
    """A restart kills every pooled session; the first statement afterwards fails on
    one of them, drops them all, and succeeds on a fresh connection."""
    with durable.Engine(cluster.url) as engine:
        db = engine.backend._db  # type: ignore[attr-defined]
        sessions = [db.checkout() for _ in range(4)]
        for session in sessions:
            session.execute("SELECT 1")
            db.checkin(session)
        cluster.restart("immediate")
        assert engine.backend.now() > 0
