"""What the engine and workers do while the database is away, on a memory backend that
can be switched off (the chaos tests in tests/chaos do the same against real outages)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable import RunStatus, Worker, dispatch, task, workflow
from durable.backends import MemoryBackend
from durable.core.clock import DatabaseClock
from durable.errors import StorageError


class Flaky(MemoryBackend):
    """A memory backend whose writes fail while ``down`` (a database outage), and whose
    next claim raises an unforeseen error once ``surprise`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.down = threading.Event()
        self.surprise = threading.Event()

    def release_run(self, run_id: str, epoch: int) -> bool:
        if self.down.is_set():
            raise StorageError("Releasing a run failed: the database is away")
        return super().release_run(run_id, epoch)

    def renew_leases(self, owner: str, lease: float) -> int:
        if self.down.is_set():
            raise StorageError("Renewing leases failed: the database is away")
        return super().renew_leases(owner, lease)

    def claim_next(self, **kwargs: Any) -> Any:
        if self.surprise.is_set():
            self.surprise.clear()
            raise RuntimeError("an error nobody foresaw")
        return super().claim_next(**kwargs)


@pytest.fixture
def flaky() -> Flaky:
    """A memory backend that can be switched off."""
    return Flaky()


@pytest.fixture
def engine(flaky: Flaky) -> Iterator[durable.Engine]:
    """The default engine on the flaky backend; a long lease, so only a release helps."""
    engine = durable.configure(backend=flaky, lease=30.0)
    try:
        yield engine
    finally:
        engine.close()


@task
def triple(n: int) -> int:
    return n * 3


@workflow
def thrice(n: int) -> int:
    return triple(n)


def test_a_release_that_failed_is_retried_by_the_heartbeat(flaky: Flaky) -> None:
    """A run the engine could not hand back is released once the database answers; its
    lease would not expire on its own while the heartbeat renews this owner's leases."""
    with durable.Engine(backend=flaky, lease=0.3) as engine:
        handle = engine.dispatch_call(thrice.bind(1), run_id="stranded")
        run = engine.claim(engine.reread(handle.id))
        assert run is not None and run.status is RunStatus.RUNNING
        flaky.down.set()
        engine.release_quietly(run)  # logs; the heartbeat takes it from here
        assert engine.reread("stranded").status is RunStatus.RUNNING
        flaky.down.clear()
        deadline = time.monotonic() + 30
        while engine.reread("stranded").status is not RunStatus.QUEUED:
            assert time.monotonic() < deadline, "the heartbeat never released the run"
            time.sleep(0.02)
        assert engine.reread("stranded").lease_owner is None


def test_the_worker_loop_survives_an_unforeseen_error(
    engine: durable.Engine, flaky: Flaky, caplog: pytest.LogCaptureFixture
) -> None:
    """An error the loop does not expect is logged with its traceback; the worker goes
    on claiming instead of sitting there with a dead loop."""
    flaky.surprise.set()
    handle = dispatch(thrice, 5)
    with caplog.at_level(logging.ERROR, logger="durable.worker"), Worker(engine, poll=0.05):
        assert handle.result(timeout=10) == 15
    failures = [r for r in caplog.records if "worker loop failed" in r.getMessage()]
    assert len(failures) == 1 and failures[0].exc_info is not None


def test_a_claim_nobody_executes_is_handed_back(engine: durable.Engine) -> None:
    """A run claimed in this worker's name that it is not executing (a claim whose
    acknowledgement a restart lost) is released by the sweep, not renewed for ever."""
    handle = dispatch(thrice, 7)
    lost = engine.backend.claim_next(
        owner=engine.owner, queue="default", workflows=[thrice.name], limit=1, lease=30.0
    )
    assert [run.id for run in lost] == [handle.id]
    with Worker(engine, poll=0.05):
        assert handle.result(timeout=10) == 21  # long before the 30 s lease ran out


class FakeTime:
    """Stands in for the time module: a wall clock and a monotonic clock set by hand."""

    def __init__(self) -> None:
        self.wall = 1_000_000.0
        self.mono = 50.0

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    """Replace the time module the clocks read."""
    fake = FakeTime()
    monkeypatch.setattr("durable.core.clock.time", fake)
    return fake


def test_the_database_clock_ignores_jumps_of_the_host_clock(fake_time: FakeTime) -> None:
    """Time is the server's reading plus monotonic time since: the wall clock of the
    host, wherever it jumps, does not move it."""
    server = [2_000_000.0]
    clock = DatabaseClock(lambda: server[0], every=60)
    assert clock.now() == 2_000_000.0
    fake_time.wall += 3600  # the host's clock jumps an hour ahead
    fake_time.mono += 2
    assert clock.now() == 2_000_002.0
    fake_time.wall -= 7200
    fake_time.mono += 1
    assert clock.now() == 2_000_003.0


def test_the_database_clock_reads_again_and_rides_out_outages(fake_time: FakeTime) -> None:
    """It reads the server once a period; while the server is away it counts on from
    the last reading (before the first, from the host clock)."""
    readings: Iterator[float | StorageError] = iter(
        [StorageError("away"), 5_000_000.0, StorageError("away"), 6_000_000.0]
    )

    def read() -> float:
        reading = next(readings)
        if isinstance(reading, Exception):
            raise reading
        return reading

    clock = DatabaseClock(read, every=60)
    assert clock.now() == 1_000_000.0  # unreachable at first: the host clock
    fake_time.mono += 5  # tried again after a failure within 5 s
    assert clock.now() == 5_000_000.0
    fake_time.mono += 30
    assert clock.now() == 5_000_030.0  # no reading within the period
    fake_time.mono += 30
    assert clock.now() == 5_000_060.0  # the server is away: count on
    fake_time.mono += 5
    assert clock.now() == 6_000_000.0
