"""Code versions in the runtime: what a process stamps, what an only-version process
claims (workers, recovery, joins), and the versions it refuses."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

import durable
from durable import Engine, RunStatus, Worker, task, workflow
from durable.backends import MemoryBackend
from durable.core.records import RunQuery
from durable.errors import ConfigurationError
from durable.runtime import joining, runs
from durable.runtime.defaults import swap
from durable.testing import DurableEnv


@task
def v_step(x: int) -> int:
    return x + 1


@workflow
def v_child(x: int) -> int:
    return v_step(x)


@workflow
def v_parent(x: int) -> int:
    durable.dispatch(v_child, x + 10)
    return v_child(x)


@pytest.fixture
def backend() -> Iterator[MemoryBackend]:
    shared = MemoryBackend()
    try:
        yield shared
    finally:
        shared.close()


def engine_on(backend: MemoryBackend, version: str | None = None, only: bool = False) -> Engine:
    # Engines share the backend; closing one would close it for the others.
    return Engine(backend=backend, lease=5.0, version=version, only_version=only)


def until(condition: object, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def test_a_process_stamps_the_runs_it_creates(backend: MemoryBackend) -> None:
    """execute, its inline child and what its workflow dispatches all carry the
    configured version; so does a plain dispatch."""
    engine = engine_on(backend, "2024-11-24.1")
    previous = swap(engine)
    try:
        assert durable.execute(v_parent, 1, id="p") == 2
        durable.dispatch(v_child, 5, id="queued")
    finally:
        swap(previous)
    stamped = {run.id: run.version for run in backend.list_runs(RunQuery(), limit=10)}
    assert stamped == dict.fromkeys(["p", "p/0", "p/1", "queued"], "2024-11-24.1")


def test_a_worker_stamps_the_runs_it_first_starts(backend: MemoryBackend) -> None:
    """A run created without a version (or by another version) takes the version of the
    worker that first starts it; a run already started keeps its own."""
    creator = engine_on(backend, "v1")
    creator.dispatch_call(v_child.bind(1), run_id="fresh")
    worker = Worker(engine_on(backend, "v2"), poll=0.01).start()
    try:
        until(lambda: backend.get_run("fresh").status is RunStatus.COMPLETED, "the run")  # type: ignore[union-attr]
    finally:
        worker.stop(grace=1)
    assert backend.get_run("fresh").version == "v2"  # type: ignore[union-attr]


def _blocked(backend: MemoryBackend, run_id: str, version: str) -> None:
    """A run that *version*'s code started and that ended blocked."""
    creator = engine_on(backend, version)
    new = runs.prepare(creator, v_child.bind(3), run_id, None, owner="h:1:1:x", queue="default",
                       priority=0)  # fmt: skip
    run, _ = backend.create_run(new)
    assert backend.finish_run(run_id, run.epoch, RunStatus.BLOCKED, error=None)


def test_recovery_leaves_another_versions_runs_alone(backend: MemoryBackend) -> None:
    """recover() on an only-version engine takes over no run another version started;
    the engine of that version does."""
    _blocked(backend, "old", "v1")
    assert engine_on(backend, "v2", only=True).recover() == []
    assert backend.get_run("old").status is RunStatus.BLOCKED  # type: ignore[union-attr]
    assert engine_on(backend, "v2").recover() == ["old"], "without only_version it is taken"
    _blocked(backend, "old-2", "v1")
    assert engine_on(backend, "v1", only=True).recover() == ["old-2"]
    assert backend.get_run("old-2").status is RunStatus.COMPLETED  # type: ignore[union-attr]


def test_an_only_version_worker_leaves_other_versions_runs_queued(backend: MemoryBackend) -> None:
    """A worker with only_version claims runs of no version and its own version's, and
    leaves queued for that version's workers a run another version started, and one it
    created (an old deploy's worker takes nothing the new code creates, and vice
    versa)."""
    started = engine_on(backend, "v1")
    new = runs.prepare(started, v_child.bind(1), "theirs", None, owner="h:1:1:x",
                       queue="default", priority=0)  # fmt: skip
    run, _ = backend.create_run(new)
    assert backend.release_run("theirs", run.epoch)  # QUEUED again, started by v1
    engine_on(backend).dispatch_call(v_child.bind(2), run_id="new")
    engine_on(backend, "v1").dispatch_call(v_child.bind(3), run_id="v1-new")
    worker = Worker(engine_on(backend, "v2", only=True), poll=0.01).start()
    try:
        until(lambda: backend.get_run("new").status is RunStatus.COMPLETED, "the new run")  # type: ignore[union-attr]
        time.sleep(0.1)  # several polls
        for left in ("theirs", "v1-new"):
            assert backend.get_run(left).status is RunStatus.QUEUED, left  # type: ignore[union-attr]
    finally:
        worker.stop(grace=1)
    assert backend.get_run("new").version == "v2"  # type: ignore[union-attr]


def test_a_join_does_not_claim_another_versions_run(backend: MemoryBackend) -> None:
    """The execute caller helps only with runs its claims may take."""
    _blocked(backend, "old", "v1")
    run = backend.get_run("old")
    assert run is not None
    assert not joining._claimable(engine_on(backend, "v2", only=True), run, top=True)
    assert joining._claimable(engine_on(backend, "v1", only=True), run, top=True)
    assert joining._claimable(engine_on(backend, "v2"), run, top=True)


@pytest.mark.parametrize(
    ("version", "says"),
    [
        ("", "must not be empty"),
        (42, "must be a string"),
        ("v" * 513, "at most 512 bytes"),
        ("v1\x00", "NUL"),
        ("v1\udcff", "lone surrogate"),
    ],
)
def test_a_version_that_cannot_be_stored_is_refused(
    backend: MemoryBackend, version: object, says: str
) -> None:
    """configure(version=) takes a non-empty string a database can store, like a run id."""
    with pytest.raises(ConfigurationError, match=says) as raised:
        Engine(backend=backend, version=version)  # type: ignore[arg-type]
    assert "version=" in str(raised.value)


def test_only_version_needs_a_version(backend: MemoryBackend) -> None:
    """only_version without a version says what to add."""
    with pytest.raises(ConfigurationError, match=r"give version= \(or set \$DURABLE_VERSION\)"):
        Engine(backend=backend, only_version=True)


def test_the_version_defaults_to_the_environment(
    backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$DURABLE_VERSION is the version where the code gives none; a bad one is named."""
    monkeypatch.setenv("DURABLE_VERSION", "from-env")
    assert Engine(backend=backend).version == "from-env"
    assert Engine(backend=backend, version="given").version == "given"
    assert Engine(backend=backend, only_version=True).only_version
    monkeypatch.setenv("DURABLE_VERSION", "x" * 600)
    with pytest.raises(ConfigurationError, match=r"\$DURABLE_VERSION"):
        Engine(backend=backend)
    monkeypatch.setenv("DURABLE_VERSION", "")
    assert Engine(backend=backend).version is None


@workflow
def v_tick(at: object) -> str:
    return "ticked"


def test_schedule_ticks_carry_the_firing_processs_version() -> None:
    """The run of a schedule's tick is stamped with the version of the process that
    fired it, like any run it creates."""
    with DurableEnv() as env:
        env.engine.version = "tick-v"  # as configure(version=) would have set it
        durable.schedule(v_tick, id="every-minute", every=timedelta(minutes=1))
        env.advance(timedelta(minutes=3))
        ticks = env.backend.list_runs(RunQuery(workflow=v_tick.name), limit=10)
    assert len(ticks) == 3
    assert {run.version for run in ticks} == {"tick-v"}
    assert {run.status for run in ticks} == {RunStatus.COMPLETED}


def test_a_chains_next_link_carries_no_version() -> None:
    """A link hands over to a successor of no version, which an only-version worker of
    any deploy may start (and stamp): a chain that never ends moves to new code."""
    from durable.core.records import Run
    from durable.runtime import continuing
    from durable.runtime.stops import ContinueAsNew

    link = Run(
        id="chain", workflow="app.poll", status=RunStatus.RUNNING, input=b"j[]",
        call_hash="v1:00", output=None, error=None, epoch=1, lease_owner="o",
        lease_until=None, recoveries=0, parent_id=None, created_at=0.0, updated_at=0.0,
        finished_at=None, queue="q", priority=3, version="v1",
    )  # fmt: skip
    nxt = continuing.successor(link, ContinueAsNew(b"j[1]", "v1:11"))
    assert (nxt.id, nxt.queue, nxt.priority, nxt.version) == ("chain~1", "q", 3, None)


def test_a_fork_is_stamped_with_the_forking_processs_version(backend: MemoryBackend) -> None:
    engine = engine_on(backend, "v1")
    assert engine.execute_call(v_child.bind(1), run_id="original") == 2
    previous = swap(engine_on(backend, "v3"))
    try:
        forked = durable.fork("original", 1, id="forked")
    finally:
        swap(previous)
    assert backend.get_run(forked.id).version == "v3"  # type: ignore[union-attr]
