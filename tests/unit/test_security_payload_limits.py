"""Security: size limits. A payload over max_payload fails at once with
PayloadTooLarge, before anything is stored, and is never retried."""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable import RunStatus, StepStatus, execute, task, workflow
from durable.errors import PayloadTooLarge, SerializationError
from tests.unit._security_helpers import (
    _no_key_from_the_environment,  # noqa: F401 (autouse fixture)
    echo,
)
from tests.unit.helpers import history, run


class Huge(Exception):
    """An error too large to record whole."""


# -- size limit ------------------------------------------------------------------------------


@pytest.fixture
def small() -> Any:
    """The default engine on memory, with a 4 KiB payload limit."""
    engine = durable.configure("memory://", lease=5.0, max_payload=4096)
    try:
        yield engine
    finally:
        engine.close()


def test_too_large_arguments_raise_before_anything_is_stored(small: durable.Engine) -> None:
    """execute and dispatch refuse arguments over max_payload, naming the argument."""
    with pytest.raises(PayloadTooLarge) as caught:
        execute(echo, "x" * 5000, id="big")
    error = caught.value
    assert isinstance(error, SerializationError)
    assert (error.size, error.limit) == (5003, 4096)
    message = str(error)
    assert "argument 'value' of workflow" in message and "5,003 bytes" in message
    assert "4,096" in message and "reference" in message and "max_payload" in message
    with pytest.raises(PayloadTooLarge):
        durable.dispatch(echo, ["y" * 100] * 50, id="big2")
    assert small.backend.get_run("big") is None and small.backend.get_run("big2") is None


def test_too_large_task_result_fails_that_task_without_retries(small: durable.Engine) -> None:
    """A task result over the limit is recorded as PayloadTooLarge at once, never retried."""
    bodies: list[int] = []

    @task(retry={"attempts": 3, "initial": 0})
    def produce() -> str:
        bodies.append(1)
        return "z" * 10_000

    @workflow
    def flow() -> str:
        try:
            produce()
        except PayloadTooLarge as error:
            return f"too large: {error.size}"
        return "stored?"

    assert execute(flow, id="big-result") == "too large: 10003"
    (step,) = history("big-result")
    assert step.status is StepStatus.FAILED and step.attempts == 1
    assert bodies == [1]
    assert execute(flow, id="big-result") == "too large: 10003", "replayed, not re-run"
    assert bodies == [1]


def test_too_large_workflow_result_fails_the_run(small: durable.Engine) -> None:
    """A workflow result over the limit fails the run, naming the result."""
    with pytest.raises(PayloadTooLarge, match="result of run 'big-out'"):
        execute(_grow, 10_000, id="big-out")
    assert run("big-out").status is RunStatus.FAILED


@workflow
def _grow(n: int) -> str:
    return "w" * n


def test_too_large_event_payload_is_refused_before_sending(small: durable.Engine) -> None:
    """send() with a payload over the limit raises and stores no event."""
    handle = durable.dispatch(_grow, 1, id="target")
    with pytest.raises(PayloadTooLarge, match="payload of event 'go'"):
        durable.send(handle, "go", "e" * 5000)
    assert list(small.backend.events("target")) == []


def test_a_huge_error_is_cut_down_not_lost(small: durable.Engine) -> None:
    """An error too large to store is recorded with its type and a cut message."""
    error = Huge("m" * 50_000)
    error.blob = "b" * 50_000  # type: ignore[attr-defined]
    data = small.dump_error(error)
    assert len(data) < 30_000
    loaded = small.load_error(data, "r", None)
    assert type(loaded) is Huge and "over the payload limit" in str(loaded)
    assert not hasattr(loaded, "blob")


def test_default_limit_is_64_mib() -> None:
    """The default max_payload is 64 MiB."""
    with durable.Engine("memory://") as engine:
        assert engine.max_payload == 64 * 1024 * 1024
