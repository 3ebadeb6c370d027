"""Workflow classes and published properties (issue 15): ``@workflow`` on a class,
``durable.set_state``, ``Handle.state()``, on memory with a virtual clock.

A snapshot is stored with the step that ends a stretch of workflow code that changed
the properties (no write of its own), or with the run's end; readers get the latest.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import durable
from durable import RunStatus, StepKind, task, wait, workflow
from durable.errors import RunNotFound, SerializationError, WaitTimeout
from durable.testing import DurableEnv


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as world:
        yield world


calls: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> None:
    calls.clear()


@task
def charge(order_id: str) -> str:
    calls.append(f"charge {order_id}")
    return f"receipt-{order_id}"


@workflow
class Order:
    """The issue's example, with a wait for the shipment."""

    def __init__(self, order_id: str) -> None:
        self.order_id = order_id
        self.status = "new"
        self.receipt: str | None = None
        self._scratch = object()  # private: never stored (and not JSON)

    def handle(self) -> str:
        self.receipt = charge(self.order_id)
        self.status = "charged"
        try:
            wait("shipped", timeout=timedelta(days=7))
        except WaitTimeout:
            self.status = "lost"
        else:
            self.status = "shipped"
        return self.status


def snapshots(env: DurableEnv, run_id: str) -> list[tuple[int, StepKind, dict[str, Any]]]:
    """Where the properties changed: (position, kind, snapshot) of steps carrying one."""
    return [
        (step.position, step.kind, json.loads(step.state[1:]))
        for step in env.backend.load_history(run_id)
        if step.state is not None
    ]


def test_a_class_runs_its_handle_and_publishes_its_attributes(env: DurableEnv) -> None:
    handle = env.dispatch(Order, "o-1")
    env.drain()
    assert handle.status() is RunStatus.WAITING
    assert handle.state() == {"order_id": "o-1", "status": "charged", "receipt": "receipt-o-1"}
    env.send(handle.id, "shipped", {"carrier": "x"})
    env.drain()
    assert handle.result() == "shipped"
    assert handle.state()["status"] == "shipped"
    # The first snapshot rode on the task's start, the second on the wait, the last
    # on the run's end: no write of their own.
    assert snapshots(env, handle.id) == [
        (0, StepKind.TASK, {"order_id": "o-1", "status": "new", "receipt": None}),
        (1, StepKind.EVENT, {"order_id": "o-1", "status": "charged", "receipt": "receipt-o-1"}),
    ]
    assert json.loads(env.run(handle.id).state[1:])["status"] == "shipped"  # type: ignore[index]
    assert calls == ["charge o-1"]


def test_a_wait_that_times_out_is_seen_in_the_state(env: DurableEnv) -> None:
    handle = env.dispatch(Order, "o-2")
    env.drain()
    env.advance(timedelta(days=8))
    assert handle.result() == "lost"
    assert handle.state()["status"] == "lost"


def test_replay_rebuilds_the_instance_and_writes_no_snapshot_again(env: DurableEnv) -> None:
    """The run suspends at its wait and is replayed from the start when the event comes:
    the replayed code reaches the same properties, so nothing is written twice."""
    handle = env.dispatch(Order, "o-3")
    env.drain()
    before = snapshots(env, handle.id)
    env.send(handle.id, "shipped", None)
    env.drain()
    assert handle.result() == "shipped"
    assert snapshots(env, handle.id) == before
    assert calls == ["charge o-3"], "the task was replayed, not run again"


def test_execute_returns_handles_result_and_direct_calls_are_plain(env: DurableEnv) -> None:
    @workflow(name="tests.unit.counting")
    class Counting:
        def __init__(self, n: int) -> None:
            self.n = n
            self.seen = 0

        def handle(self) -> int:
            for i in range(self.n):
                charge(str(i))
                self.seen += 1
            return self.seen

    assert env.execute(Counting, 3) == 3
    assert Counting.cls is not None and Counting.cls.__name__ == "Counting"
    calls.clear()
    assert Counting(2) == 2, "called outside a run it is a plain call of handle()"
    assert calls == ["charge 0", "charge 1"]


def test_async_handle(env: DurableEnv) -> None:
    @workflow(name="tests.unit.async_class")
    class Later:
        def __init__(self) -> None:
            self.step = "start"

        async def handle(self) -> str:
            self.step = "middle"
            await durable.execute_async(pinged)
            self.step = "end"
            return self.step

    handle = env.dispatch(Later)
    env.run_until_idle()
    assert handle.result() == "end"
    assert handle.state() == {"step": "end"}


@workflow
def pinged() -> str:
    return "pong"


@workflow
def progress(n: int) -> int:
    for i in range(n):
        durable.set_state(done=i, of=n)
        charge(str(i))
    durable.set_state(done=n)
    return n


def test_set_state_in_a_function_workflow(env: DurableEnv) -> None:
    handle = env.dispatch(progress, 3)
    env.run_until_idle()
    assert handle.result() == 3
    assert handle.state() == {"done": 3, "of": 3}
    assert [snapshot for _, _, snapshot in snapshots(env, handle.id)] == [
        {"done": 0, "of": 3},
        {"done": 1, "of": 3},
        {"done": 2, "of": 3},
    ]
    # set_state takes no position: the history is the tasks alone.
    assert [s.kind for s in env.backend.load_history(handle.id)] == [StepKind.TASK] * 3


def test_state_of_a_run_that_published_nothing_and_of_no_run(env: DurableEnv) -> None:
    handle = env.dispatch(pinged)
    assert handle.state() == {}
    env.run_until_idle()
    assert handle.state() == {}
    with pytest.raises(RunNotFound):
        durable.Handle(env.engine, "nope").state()


def test_set_state_outside_a_workflow_does_nothing_and_in_a_task_is_refused(
    env: DurableEnv,
) -> None:
    durable.set_state(anything=object())  # a plain call: nothing to publish to

    @task(name="tests.unit.publishing_task")
    def publishing() -> None:
        durable.set_state(x=1)

    @workflow(name="tests.unit.calls_publishing_task")
    def outer() -> None:
        publishing()

    handle = env.dispatch(outer)
    env.run_until_idle()
    with pytest.raises(TypeError, match="a task body cannot set it"):
        handle.result()


def test_set_state_refuses_what_is_not_json_naming_it(env: DurableEnv) -> None:
    @workflow(name="tests.unit.bad_set_state")
    def bad() -> str:
        durable.set_state(ok=1)
        try:
            durable.set_state(when=object())
        except SerializationError as error:
            return str(error)
        return "accepted"

    message = env.execute(bad)
    assert "'when'" in message and "object" in message


def test_a_property_that_cannot_be_stored_fails_the_run_naming_it(env: DurableEnv) -> None:
    @workflow(name="tests.unit.bad_property")
    class Bad:
        def __init__(self) -> None:
            self.fine = 1

        def handle(self) -> None:
            charge("a")
            self.when = {1, 2}  # a set is not JSON
            charge("b")

    handle = env.dispatch(Bad)
    env.run_until_idle()
    assert handle.status() is RunStatus.FAILED
    with pytest.raises(SerializationError, match=r"property 'when' \(set\)"):
        handle.result()
    # The first task's result was recorded; the second never started.
    assert calls == ["charge a"]
    assert handle.state() == {"fine": 1}


def test_properties_too_large_are_refused(env: DurableEnv) -> None:
    @workflow(name="tests.unit.large_property")
    class Large:
        def __init__(self) -> None:
            self.blob = "x" * 70_000

        def handle(self) -> None:
            charge("a")

    handle = env.dispatch(Large)
    env.run_until_idle()
    with pytest.raises(SerializationError, match="more than the 65536 allowed"):
        handle.result()


def test_set_state_in_a_class_is_refused(env: DurableEnv) -> None:
    @workflow(name="tests.unit.class_set_state")
    class Mixed:
        def __init__(self) -> None:
            self.a = 1

        def handle(self) -> None:
            durable.set_state(b=2)

    handle = env.dispatch(Mixed)
    env.run_until_idle()
    with pytest.raises(TypeError, match="assign them"):
        handle.result()


def test_a_failed_run_keeps_the_properties_it_ended_with(env: DurableEnv) -> None:
    @workflow(name="tests.unit.failing_class")
    class Failing:
        def __init__(self) -> None:
            self.stage = "start"

        def handle(self) -> None:
            charge("a")
            self.stage = "about to fail"
            raise ValueError("boom")

    handle = env.dispatch(Failing)
    env.run_until_idle()
    assert handle.status() is RunStatus.FAILED
    assert handle.state() == {"stage": "about to fail"}


# -- refused at decoration time ---------------------------------------------------------


def test_a_class_without_handle_is_refused() -> None:
    with pytest.raises(TypeError, match=r"needs a method `def handle\(self\)`"):

        @workflow
        class NoHandle:
            def run(self) -> None: ...


def test_handle_with_parameters_is_refused() -> None:
    with pytest.raises(
        TypeError, match=r"must be `def handle\(self\)`; it is `def handle\(self, x"
    ):

        @workflow
        class Wrong:
            def handle(self, x: int) -> None: ...


def test_a_handler_with_the_wrong_signature_is_refused() -> None:
    with pytest.raises(TypeError, match=r"on_event must be `def on_event\(self, name, payload\)`"):

        @workflow
        class Wrong:
            def handle(self) -> None: ...

            def on_event(self, name: str) -> None: ...


def test_a_class_with_slots_and_no_dict_is_refused() -> None:
    with pytest.raises(TypeError, match="uses __slots__"):

        @workflow
        class Slotted:
            __slots__ = ("a",)

            def handle(self) -> None: ...
