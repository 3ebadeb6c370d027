"""Arguments are identified whole, however deep (finding 6 of issue 23), on every
backend: a difference below the old depth limit of 64 is a different call."""

from __future__ import annotations

import time
from typing import Any

import pytest

import durable
from durable import RunStatus, execute, task, workflow
from durable.errors import IdempotencyConflict, NondeterminismError
from tests.conftest import BACKENDS

#: How the replay test's workflow nests its task's argument; flipped to play a change.
LEAF = ["a"]


def deep(leaf: Any, depth: int = 80) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@task
def measure(value: Any) -> int:
    return 1


@workflow
def keep(value: Any) -> str:
    return "kept"


@workflow
def pauses() -> int:
    measured = measure(deep(LEAF[0]))
    durable.wait("go")
    return measured


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_same_id_with_arguments_differing_only_deep_down_conflicts(engine: durable.Engine) -> None:
    """The second execute used to return the first run's stored result."""
    assert execute(keep, deep("a"), id="x") == "kept"
    assert execute(keep, deep("a"), id="x") == "kept"
    with pytest.raises(IdempotencyConflict, match="other arguments"):
        execute(keep, deep("b"), id="x")


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_replay_sees_a_change_deep_down(engine: durable.Engine) -> None:
    """A task argument changed below depth 64 between executions is a divergence."""
    LEAF[0] = "a"
    handle = durable.dispatch(pauses, id="p")
    with durable.Worker(engine, poll=0.02):
        _until(lambda: handle.status() is RunStatus.WAITING)
    LEAF[0] = "b"
    durable.send("p", "go")
    with durable.Worker(engine, poll=0.02):
        _until(lambda: handle.status() in (RunStatus.BLOCKED, RunStatus.COMPLETED))
    assert handle.status() is RunStatus.BLOCKED  # it used to replay on, and complete
    run = handle.run()
    error = engine.load_error(engine.error_of(run), run.id, None)
    assert isinstance(error, NondeterminismError) and error.position == 0


def _until(condition: Any) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
