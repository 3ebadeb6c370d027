"""execute(a.bind(), b.bind()) with async calls: they overlap, on the event loop.

Each pair is a leader and a follower that can only finish together: the leader
announces that it started and then waits for the follower to finish; the follower
waits for the leader to start. Run one after the other, the first of them waits in
vain and fails after `WAIT` seconds. The follower finishes first, so results that
come back in argument order are not simply in the order the calls finished.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from durable import StepKind, StepStatus, execute, execute_async, task, workflow
from durable.core.functions import Durable
from tests.unit.helpers import history

pytestmark = pytest.mark.usefixtures("memory_engine")

#: How long a call waits for its partner; only a broken implementation waits this long.
WAIT = 5.0
#: How long the leader lingers after the follower finished, so that the follower's result
#: is in (recorded, its future done) well before the leader's: results that came back in
#: the order the calls finished would then be out of order. No check relies on it.
LINGER = 0.05


class Gate:
    """Named flags that sync and async code, on any thread or event loop, set and await."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set: set[str] = set()
        self._waiters: dict[str, list[Callable[[], object]]] = {}
        #: where each body ran: (thread id, its running loop or None).
        self.where: dict[str, tuple[int, asyncio.AbstractEventLoop | None]] = {}

    def reset(self) -> None:
        """Forget every flag (between tests)."""
        with self._lock:
            self._set.clear()
            self._waiters.clear()
            self.where.clear()

    def note(self, who: str) -> None:
        """Remember the thread and event loop *who* runs on."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self.where[who] = (threading.get_ident(), loop)

    def set(self, name: str) -> None:
        """Raise flag *name*, waking everyone waiting for it."""
        with self._lock:
            self._set.add(name)
            waiters = self._waiters.pop(name, [])
        for wake in waiters:
            wake()

    def _register(self, name: str, wake: Callable[[], object]) -> bool:
        with self._lock:
            if name in self._set:
                return True
            self._waiters.setdefault(name, []).append(wake)
            return False

    def wait(self, name: str) -> None:
        """Block this thread until flag *name* is raised."""
        event = threading.Event()
        if not self._register(name, event.set) and not event.wait(WAIT):
            raise AssertionError(f"{name!r} never happened: the calls did not overlap")

    async def wait_async(self, name: str) -> None:
        """Await flag *name* without blocking the event loop."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        if self._register(name, lambda: loop.call_soon_threadsafe(event.set)):
            return
        try:
            await asyncio.wait_for(event.wait(), WAIT)
        except TimeoutError:
            raise AssertionError(f"{name!r} never happened: the calls did not overlap") from None


GATE = Gate()


@pytest.fixture(autouse=True)
def fresh_gate() -> Iterator[Gate]:
    """Every test starts with no flags raised."""
    GATE.reset()
    yield GATE
    GATE.reset()


@task
async def leader(tag: str) -> str:
    GATE.note("leader")
    GATE.set("leader started")
    await GATE.wait_async("follower finished")
    await asyncio.sleep(LINGER)
    return f"leader:{tag}"


@task
async def follower(tag: str) -> str:
    GATE.note("follower")
    await GATE.wait_async("leader started")
    GATE.set("follower finished")
    return f"follower:{tag}"


@task
def sync_leader(tag: str) -> str:
    GATE.note("leader")
    GATE.set("leader started")
    GATE.wait("follower finished")
    time.sleep(LINGER)
    return f"leader:{tag}"


@task
def sync_follower(tag: str) -> str:
    GATE.note("follower")
    GATE.wait("leader started")
    GATE.set("follower finished")
    return f"follower:{tag}"


LEADERS: dict[str, Durable[[str], Any]] = {"async": leader, "sync": sync_leader}
FOLLOWERS: dict[str, Durable[[str], Any]] = {"async": follower, "sync": sync_follower}
#: (leader kind, follower kind): both async, and the two mixed pairs.
PAIRS = [("async", "async"), ("sync", "async"), ("async", "sync")]


@task
async def mark(label: str) -> str:
    return label


@task
def sync_mark(label: str) -> str:
    return label


@workflow
async def async_pair(lead: str, follow: str, verb: str) -> list[str]:
    GATE.note("workflow")
    before = await mark("before")
    calls = (LEADERS[lead].bind("x"), FOLLOWERS[follow].bind("y"))
    if verb == "execute_async":
        both = await execute_async(*calls)
    else:
        both = execute(*calls)  # the sync verb inside an async workflow
    after = await mark("after")
    return [before, *both, after]


@workflow
def sync_pair(lead: str, follow: str) -> list[str]:
    before = sync_mark("before")
    both = execute(LEADERS[lead].bind("x"), FOLLOWERS[follow].bind("y"))
    after = sync_mark("after")
    return [before, *both, after]


def assert_recorded_in_order(run_id: str, lead: str, follow: str, mark_name: str) -> None:
    """The pair took positions 1 and 2, in argument order, between the two marks."""
    steps = history(run_id)
    assert [(s.position, s.kind, s.name, s.status) for s in steps] == [
        (0, StepKind.TASK, mark_name, StepStatus.COMPLETED),
        (1, StepKind.TASK, LEADERS[lead].name, StepStatus.COMPLETED),
        (2, StepKind.TASK, FOLLOWERS[follow].name, StepStatus.COMPLETED),
        (3, StepKind.TASK, mark_name, StepStatus.COMPLETED),
    ]
    assert [s.output for s in steps] == [
        b'j"before"',
        b'j"leader:x"',
        b'j"follower:y"',
        b'j"after"',
    ]


@pytest.mark.parametrize(("lead", "follow"), PAIRS)
def test_execute_async_overlaps_async_calls_on_the_workflows_loop(lead: str, follow: str) -> None:
    """In an async workflow, execute_async runs the pair at once: async calls on the
    workflow's own event loop, sync ones beside it; results and positions in order."""
    result = execute(async_pair, lead, follow, "execute_async", id="on-loop")

    assert result == ["before", "leader:x", "follower:y", "after"]
    assert_recorded_in_order("on-loop", lead, follow, mark.name)
    workflow_thread, workflow_loop = GATE.where["workflow"]
    assert workflow_loop is not None
    for who, kind in (("leader", lead), ("follower", follow)):
        thread, loop = GATE.where[who]
        if kind == "async":
            assert (thread, loop) == (workflow_thread, workflow_loop), (
                f"the async {who} must run on the workflow's event loop, not in a thread"
            )
        else:
            assert thread != workflow_thread and loop is None, (
                f"the sync {who} must run in a thread, not block the event loop"
            )


@pytest.mark.parametrize(("lead", "follow"), PAIRS)
def test_execute_in_an_async_workflow_overlaps_the_calls(lead: str, follow: str) -> None:
    """The sync verb execute(a.bind(), b.bind()) inside an async workflow runs the pair at
    once too, each async call awaited on an event loop; results and positions in order."""
    result = execute(async_pair, lead, follow, "execute", id="sync-verb")

    assert result == ["before", "leader:x", "follower:y", "after"]
    assert_recorded_in_order("sync-verb", lead, follow, mark.name)
    for who, kind in (("leader", lead), ("follower", follow)):
        assert (GATE.where[who][1] is not None) == (kind == "async")


@pytest.mark.parametrize(("lead", "follow"), PAIRS)
def test_execute_in_a_sync_workflow_overlaps_async_calls(lead: str, follow: str) -> None:
    """A sync workflow's execute(a.bind(), b.bind()) awaits async calls on event loops,
    concurrently; results in argument order at consecutive positions."""
    assert execute(sync_pair, lead, follow, id="sync-flow") == [
        "before",
        "leader:x",
        "follower:y",
        "after",
    ]
    assert_recorded_in_order("sync-flow", lead, follow, sync_mark.name)
    for who, kind in (("leader", lead), ("follower", follow)):
        assert (GATE.where[who][1] is not None) == (kind == "async")


@pytest.mark.parametrize(("lead", "follow"), PAIRS)
def test_top_level_execute_overlaps_async_calls(lead: str, follow: str) -> None:
    """From application code, execute(a.bind(), b.bind()) of async tasks runs both runs
    at once and returns their results in argument order."""
    assert execute(LEADERS[lead].bind("x"), FOLLOWERS[follow].bind("y")) == (
        "leader:x",
        "follower:y",
    )


@pytest.mark.parametrize(("lead", "follow"), PAIRS)
def test_top_level_execute_async_overlaps_async_calls(lead: str, follow: str) -> None:
    """From async application code, execute_async of two calls runs them at once, async
    ones on the caller's loop; results in argument order."""

    async def main() -> tuple[Any, ...]:
        GATE.note("caller")
        both = await execute_async(LEADERS[lead].bind("x"), FOLLOWERS[follow].bind("y"))
        return tuple(both)

    assert asyncio.run(main()) == ("leader:x", "follower:y")
    caller = GATE.where["caller"]
    for who, kind in (("leader", lead), ("follower", follow)):
        if kind == "async":
            assert GATE.where[who] == caller, f"the async {who} must run on the caller's loop"
