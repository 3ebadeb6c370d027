"""Taking over runs of dead owners, and giving up on runs that keep killing them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

import durable
from durable import RunStatus, execute, task, workflow
from durable.backends.memory import MemoryBackend
from durable.core.hashing import call_hash
from durable.core.records import NewRun
from durable.errors import RunDead
from durable.runtime.owners import place

DEAD_OWNER = f"{place()}:999999:1:gone"  # a pid that does not exist in this place

bodies: list[str] = []


@task
def work(name: str) -> str:
    bodies.append(name)
    return name.upper()


@workflow
def flow(name: str) -> list[str]:
    return [work(name), work(name + "!")]


@pytest.fixture
def engine() -> Iterator[durable.Engine]:
    """The default engine on memory, with a small max_recoveries."""
    bodies.clear()
    engine = durable.configure("memory://", max_recoveries=3)
    try:
        yield engine
    finally:
        engine.close()


def orphan(engine: durable.Engine, run_id: str, *, recoveries: int = 0) -> None:
    """A run whose owner died while running it, taken over *recoveries* times before."""
    call = flow.bind("x")
    payload = engine.dump({"args": ["x"], "kwargs": {}}, "input")
    digest = call_hash(flow.kind, flow.name, call.arguments)
    backend = engine.backend
    backend.create_run(
        NewRun(
            id=run_id,
            workflow=flow.name,
            input=payload,
            call_hash=digest,
            owner=DEAD_OWNER,
            lease=60,
        )
    )
    assert isinstance(backend, MemoryBackend)
    backend._runs[run_id] = dataclasses.replace(backend._runs[run_id], recoveries=recoveries)


def test_dead_owner_on_this_host_is_taken_over_at_once(engine: durable.Engine) -> None:
    """A run whose owning process is gone is resumed without waiting for its lease."""
    orphan(engine, "orphan")
    assert durable.recover() == ["orphan"]
    run = engine.reread("orphan")
    assert run.status is RunStatus.COMPLETED and run.epoch == 2
    assert run.recoveries == 0, "recording a step proves the run harmless: the count resets"


def test_a_run_at_the_limit_is_given_up_as_dead(engine: durable.Engine) -> None:
    """Taken over for the max_recoveries-th time without progress, a run goes DEAD, unrun."""
    orphan(engine, "poison", recoveries=2)
    assert durable.recover() == []
    run = engine.reread("poison")
    assert run.status is RunStatus.DEAD
    with pytest.raises(RunDead, match="died 3 times") as caught:
        engine.outcome(run)
    assert caught.value.run_id == "poison" and caught.value.recoveries == 3
    assert bodies == [], "a dead run is not executed again"
    with pytest.raises(RunDead):
        execute(flow, "x", id="poison")


def test_max_recoveries_must_be_positive() -> None:
    """A max_recoveries below 1 is refused."""
    with pytest.raises(durable.errors.ConfigurationError, match="max_recoveries"):
        durable.Engine("memory://", max_recoveries=0)
