"""A workflow class's ``on_event`` (issue 15), on memory with a virtual clock.

Events that no wait takes reach ``on_event``: before the main branch's next durable
call, or while it waits (the run wakes, handles them, and waits again). Each is
consumed once, oldest first, and where its handler ran is recorded (a ``handler``
step), so replay runs it at the same point.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import durable
from durable import RunStatus, StepKind, WaitTimeout, task, wait, workflow
from durable.testing import DurableEnv, export_history, replay


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
    return "ok"


@task
def update_address(order_id: str, address: object) -> None:
    calls.append(f"address {order_id} {address}")


@task
def poke(run_id: str, name: str, payload: object) -> None:
    """Sends an event to a run while this task runs (as another service would)."""
    durable.send(run_id, name, payload)


@workflow
class Order:
    def __init__(self, order_id: str) -> None:
        self.order_id = order_id
        self.status = "new"
        self.address_changes = 0
        self.seen: list[str] = []

    def handle(self) -> str:
        charge(self.order_id)
        self.status = "charged"
        try:
            wait("shipped", timeout=timedelta(days=7))
            self.status = "shipped"
        except WaitTimeout:
            self.status = "lost"
        return self.status

    def on_event(self, name: str, payload: object) -> None:
        self.seen.append(f"{name}:{payload} while {self.status}")
        if name == "address_changed":
            self.address_changes += 1
            update_address(self.order_id, payload)


def _handlers(env: DurableEnv, run_id: str) -> list[tuple[int, str]]:
    return [(s.position, s.name) for s in env.history(run_id) if s.kind is StepKind.HANDLER]


def test_the_issue_example_handles_an_event_while_the_main_branch_waits(env: DurableEnv) -> None:
    h = env.dispatch(Order, "o-1")
    assert env.run(h.id).status is RunStatus.WAITING
    env.send(h.id, "address_changed", {"street": "Main"})
    run = env.run(h.id)
    assert run.status is RunStatus.WAITING  # it handled the event and waits again
    assert h.state()["address_changes"] == 1
    assert calls == ["charge o-1", "address o-1 {'street': 'Main'}"]
    env.send(h.id, "shipped")
    assert h.result() == "shipped"
    assert h.state() == {
        "order_id": "o-1",
        "status": "shipped",
        "address_changes": 1,
        "seen": ["address_changed:{'street': 'Main'} while charged"],
    }
    # charge 0, the wait 1, the handler 2, its task 3
    assert _handlers(env, h.id) == [(2, "address_changed")]


def test_an_event_taken_by_a_wait_never_reaches_on_event(env: DurableEnv) -> None:
    h = env.dispatch(Order, "o-2")
    env.send(h.id, "shipped", "box-1")
    assert h.result() == "shipped"
    assert h.state()["seen"] == []
    assert _handlers(env, h.id) == []


def test_events_sent_before_the_run_starts_are_handled_at_its_first_durable_call(
    env: DurableEnv,
) -> None:
    h = durable.dispatch(Order, "o-3")  # queued, not run yet
    durable.send(h.id, "note", 1)
    durable.send(h.id, "note", 2)
    env.drain()
    state = h.state()
    assert state["seen"] == ["note:1 while new", "note:2 while new"]  # in order, before charge
    assert _handlers(env, h.id) == [(0, "note"), (1, "note")]
    assert calls == ["charge o-3"]


def test_an_event_sent_during_a_task_is_handled_once_it_returns(env: DurableEnv) -> None:
    @workflow
    class Poked:
        def __init__(self) -> None:
            self.log: list[str] = []

        def handle(self) -> list[str]:
            self.log.append("before")
            poke(durable.info().run_id, "ping", 1)
            self.log.append("after the task")
            charge("x")
            return self.log

        def on_event(self, name: str, payload: Any) -> None:
            self.log.append(f"{name} {payload}")

    assert env.execute(Poked) == ["before", "after the task", "ping 1"]


def test_an_event_sent_during_a_handler_is_handled_after_it(env: DurableEnv) -> None:
    @workflow
    class Chain:
        def __init__(self) -> None:
            self.log: list[str] = []

        def handle(self) -> list[str]:
            wait("done")
            return self.log

        def on_event(self, name: str, payload: Any) -> None:
            self.log.append(f"start {name}")
            if name == "first":
                poke(durable.info().run_id, "second", None)  # arrives while this runs
            self.log.append(f"end {name}")

    h = env.dispatch(Chain)
    env.send(h.id, "first")
    env.send(h.id, "done")
    assert h.result() == ["start first", "end first", "start second", "end second"]


def test_a_replay_runs_each_handler_at_the_same_point(env: DurableEnv) -> None:
    h = env.dispatch(Order, "o-4")
    env.send(h.id, "address_changed", "A")
    env.send(h.id, "address_changed", "B")
    # The code replays against the recorded history, handlers included, without
    # running anything or raising a divergence...
    replay(Order, export_history(h.id))
    # ... and a handler that no longer makes the durable call it made is caught.
    assert _handlers(env, h.id) == [(2, "address_changed"), (4, "address_changed")]
    env.send(h.id, "shipped")
    assert h.result() == "shipped"
    assert h.state()["seen"] == [
        "address_changed:A while charged",
        "address_changed:B while charged",
    ]
    assert calls.count("charge o-4") == 1  # never charged twice by replays


def test_a_handler_that_raises_fails_the_main_branch_at_that_point(env: DurableEnv) -> None:
    @workflow
    class Fragile:
        def handle(self) -> str:
            wait("never", timeout=timedelta(hours=1))
            return "unreachable"

        def on_event(self, name: str, payload: Any) -> None:
            raise ValueError(f"cannot handle {name}")

    h = env.dispatch(Fragile)
    env.send(h.id, "boom")
    assert env.run(h.id).status is RunStatus.FAILED
    with pytest.raises(ValueError, match="cannot handle boom"):
        h.result()


def test_events_left_when_the_main_branch_returns_stay_in_the_inbox(env: DurableEnv) -> None:
    @workflow
    class Quick:
        def handle(self) -> str:
            return "done"

        def on_event(self, name: str, payload: Any) -> None:
            raise AssertionError("never called: no durable call, no boundary")

    h = durable.dispatch(Quick)
    durable.send(h.id, "late")
    env.drain()
    assert h.result() == "done"
    assert [e.consumed_position for e in env.backend.events(h.id)] == [None]


@task
async def fetch(n: int) -> int:
    return n * 2


def test_an_async_class_takes_events_in_a_plain_handler(env: DurableEnv) -> None:
    """``handle`` may be ``async def``; ``on_event`` stays a plain ``def``, and its
    durable calls are plain calls."""

    @workflow
    class Collector:
        def __init__(self) -> None:
            self.got: list[object] = []

        async def handle(self) -> list[object]:
            first = await fetch(1)
            wait("done")
            return [first, *self.got]

        def on_event(self, name: str, payload: Any) -> None:
            self.got.append((name, payload, update_address("c", payload)))

    h = env.dispatch(Collector)
    env.send(h.id, "item", 5)
    env.send(h.id, "done")
    assert h.result() == [2, ("item", 5, None)]
    assert calls == ["address c 5"]
