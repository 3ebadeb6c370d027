"""The observer seam: what traces, metrics and logs are told of executions and attempts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import durable
from durable import task, workflow
from durable.core.records import Run
from durable.runtime.observers import NOTHING, Attempt, Execution, Observers
from durable.testing import DurableEnv

flaky_left: list[int] = []


class Recorder:
    """An observer that notes what it is told, in order."""

    def __init__(self) -> None:
        self.made: list[str] = []
        self.events: list[tuple[Any, ...]] = []

    def created(self, run: Run) -> None:
        self.made.append(run.workflow)

    @contextmanager
    def execution(self, seen: Execution) -> Iterator[None]:
        self.events.append(("run", seen.run.workflow, seen.resumed))
        try:
            yield
        finally:
            self.events.append(("run-end", seen.run.workflow, seen.outcome))

    @contextmanager
    def attempt(self, seen: Attempt) -> Iterator[None]:
        self.events.append(("task", seen.task.rsplit(".", 1)[-1], seen.position, seen.attempt))
        try:
            yield
        finally:
            self.events.append(("task-end", seen.outcome, type(seen.error).__name__))


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[DurableEnv, Recorder]]:
    monkeypatch.setenv("DURABLE_TRACING", "0")  # the recorder alone: no span observer
    with DurableEnv() as environment:
        recorder = Recorder()
        environment.engine.observers.add(recorder)
        yield environment, recorder


@task(retry=dict(attempts=3, initial=0))
def flaky(x: int) -> int:
    if flaky_left and flaky_left.pop():
        raise RuntimeError("not yet")
    return x + 1


@workflow
def sleepy(x: int) -> int:
    first = flaky(x)
    durable.wait(dt.timedelta(hours=1))
    return flaky(first)


@workflow
def doomed() -> None:
    raise ValueError("no")


def test_attempts_and_executions_are_observed_with_their_outcomes(env: Any) -> None:
    environment, recorder = env
    flaky_left[:] = [1]  # the first attempt fails, then all succeed
    handle = environment.dispatch(sleepy, 1)
    environment.run_until_idle()
    assert handle.result() == 3
    assert recorder.made == [sleepy.name]
    assert recorder.events == [
        ("run", sleepy.name, False),
        ("task", "flaky", 0, 1),
        ("task-end", "failed", "RuntimeError"),
        ("task", "flaky", 0, 2),
        ("task-end", "completed", "NoneType"),
        ("run-end", sleepy.name, "released"),  # it waits an hour, holding no thread
        # resumed: position 0 is replayed, so it is not an attempt; position 2 is
        ("run", sleepy.name, True),
        ("task", "flaky", 2, 1),
        ("task-end", "completed", "NoneType"),
        ("run-end", sleepy.name, "completed"),
    ]


def test_a_failing_run_ends_failed_and_observers_can_be_removed(env: Any) -> None:
    environment, recorder = env
    with pytest.raises(ValueError, match="no"):
        environment.execute(doomed)
    assert recorder.events[-1] == ("run-end", doomed.name, "failed")
    environment.engine.observers.remove(recorder)
    assert not environment.engine.observers
    with pytest.raises(ValueError, match="no"):
        environment.execute(doomed.bind(), id="again")
    assert len(recorder.events) == 2


@workflow
def counts_down(n: int) -> int:
    if n > 0:
        durable.continue_as_new(n - 1)
    return n


def test_a_run_that_continues_as_new_ends_continued_and_its_successor_is_observed(
    env: Any,
) -> None:
    environment, recorder = env
    handle = environment.dispatch(counts_down, 1)
    environment.run_until_idle()
    assert handle.result() == 0
    ends = [event for event in recorder.events if event[0] == "run-end"]
    assert ends == [
        ("run-end", counts_down.name, "continued"),
        ("run-end", counts_down.name, "completed"),
    ]


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (None, "completed"),
        (ValueError("x"), "failed"),
        (durable.errors.Cancelled(), "cancelled"),
        (durable.errors.Cancelled(timed_out=True), "timed_out"),
        (durable.errors.TaskTimeout("late"), "timed_out"),
        (durable.errors.NondeterminismError("moved"), "blocked"),
        (KeyboardInterrupt(), "interrupted"),
    ],
)
def test_outcome_of_names_what_ended_a_stretch(error: BaseException | None, outcome: str) -> None:
    from durable.runtime.observers import OUTCOMES, outcome_of

    assert outcome_of(error) == outcome
    assert outcome in OUTCOMES


clocks: list[Any] = []


@task(timeout=dt.timedelta(seconds=5))
def overruns() -> None:
    clocks[0].advance(6)  # the body runs past its limit, then fails on its own
    raise ValueError("too late to matter")


@workflow
def impatient() -> str:
    try:
        overruns()
    except durable.errors.TaskTimeout:
        return "timed out"
    return "no"


def test_an_attempt_that_fails_past_its_limit_is_seen_timed_out(env: Any) -> None:
    environment, recorder = env
    clocks[:] = [environment.clock]
    assert environment.execute(impatient) == "timed out"
    assert ("task-end", "timed_out", "TaskTimeout") in recorder.events


class Carrying(Recorder):
    """A recorder that also propagates a trace context."""

    def carrier(self) -> str | None:
        return '{"traceparent": "00-ab-cd-01"}'


def test_a_carrier_is_stored_with_each_run_created_and_its_successor(env: Any) -> None:
    """An observer with ``carrier()`` gives each run created here its trace context (a
    chain's next run keeps it); without one, runs have none."""
    environment, recorder = env
    plain = environment.dispatch(counts_down, 0)
    environment.engine.observers.remove(recorder)
    environment.engine.observers.add(Carrying())
    carried = environment.dispatch(counts_down, 1)
    environment.run_until_idle()
    assert plain.run().trace_context is None
    assert carried.run().trace_context == '{"traceparent": "00-ab-cd-01"}'
    successor = durable.get(f"{carried.id}~1").run()
    assert successor.trace_context == '{"traceparent": "00-ab-cd-01"}'


def test_observers_with_nothing_to_do_add_no_wrapper_and_busy_ones_see_outcomes() -> None:
    """An observer that returns NOTHING around a stretch (tracing without a provider)
    costs no wrapper when it is the only one, and does not keep another observer from
    seeing the stretch's outcome."""

    class Idle:
        def created(self, run: Run) -> None: ...

        def execution(self, seen: Execution) -> Any:
            return NOTHING

        def attempt(self, seen: Attempt) -> Any:
            return NOTHING

    observers = Observers()
    observers.add(Idle())
    assert observers.attempt("r-1", "wf", 0, "t", 1) is NOTHING
    outcomes: list[str | None] = []

    class Busy(Idle):
        @contextmanager
        def _watch(self, seen: Attempt) -> Iterator[None]:
            try:
                yield
            finally:
                outcomes.append(seen.outcome)

        def attempt(self, seen: Attempt) -> Any:
            return self._watch(seen)

    observers.add(Busy())
    with pytest.raises(ValueError, match="boom"), observers.attempt("r-1", "wf", 0, "t", 1) as seen:
        raise ValueError("boom")
    assert isinstance(seen, Attempt) and outcomes == ["failed"]
