"""A workflow class's task hooks (issue 15): ``on_start``, ``on_success``,
``on_failure``, ``on_timeout``, on memory with a virtual clock.

Hooks are workflow code: called per task call in the workflow's thread, in position
order (a parallel group's too), again on every replay, so the properties they change
come back the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import durable
from durable import RunStatus, TaskInfo, TaskTimeout, task, wait, workflow
from durable.testing import DurableEnv


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as world:
        yield world


bodies: list[str] = []
flaky_failures: dict[str, int] = {}


@pytest.fixture(autouse=True)
def _fresh() -> None:
    bodies.clear()
    flaky_failures.clear()


@task
def work(name: str) -> str:
    bodies.append(name)
    return name.upper()


@task(retry=dict(attempts=3, backoff="constant", initial=1))
def flaky(name: str) -> str:
    """Fails the first two attempts."""
    flaky_failures[name] = flaky_failures.get(name, 0) + 1
    if flaky_failures[name] < 3:
        raise ConnectionError(f"{name} attempt {flaky_failures[name]}")
    return name


@task
def broken(name: str) -> str:
    raise ValueError(f"{name} is broken")


@workflow
class Seed:
    """Seed 000's example: three tasks in parallel, then a fourth, with onStart and
    onSuccess branches; the hooks keep a log in a property."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.results: dict[str, str] = {}

    def handle(self) -> list[str]:
        durable.execute(work.bind("task1"), work.bind("task2"), work.bind("task3"))
        self.log.append("handle: after the three")
        wait(timedelta(minutes=5))  # the run suspends here, and is replayed after it
        work("task4")
        return sorted(self.results)

    def on_start(self, task: TaskInfo) -> None:
        self.log.append(f"start {task.arguments['name']}@{task.position}")

    def on_success(self, task: TaskInfo, output: object) -> None:
        self.log.append(f"success {task.arguments['name']}")
        self.results[str(task.arguments["name"])] = str(output)


SEED_LOG = [
    "start task1@0",
    "start task2@1",
    "start task3@2",
    "success task1",
    "success task2",
    "success task3",
    "handle: after the three",
    "start task4@4",
    "success task4",
]


def test_the_seed_example_calls_hooks_in_position_order(env: DurableEnv) -> None:
    handle = env.dispatch(Seed)
    env.drain()
    assert handle.status() is RunStatus.WAITING
    assert handle.state()["log"] == SEED_LOG[:7]
    env.advance(timedelta(minutes=5))
    assert handle.result() == ["task1", "task2", "task3", "task4"]
    state = handle.state()
    # The replay after the wait rebuilt the log by calling the hooks again, from the
    # history: no hook ran twice in the final instance, no task body ran twice.
    assert state["log"] == SEED_LOG
    assert state["results"] == {f"task{i}": f"TASK{i}" for i in range(1, 5)}
    assert sorted(bodies) == ["task1", "task2", "task3", "task4"]


@workflow
class Retrying:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def handle(self) -> str:
        return flaky("f")

    def on_start(self, task: TaskInfo) -> None:
        self.seen.append(["start", task.name, task.attempts])

    def on_success(self, task: TaskInfo, output: object) -> None:
        self.seen.append(["success", output, task.attempts])


def test_hooks_see_calls_not_attempts(env: DurableEnv) -> None:
    handle = env.dispatch(Retrying)
    env.run_until_idle()
    assert handle.result() == "f"
    assert handle.state()["seen"] == [["start", flaky.name, 0], ["success", "f", 3]]


@workflow
class Failing:
    def __init__(self) -> None:
        self.failures: list[str] = []
        self.timeouts: list[str] = []

    def handle(self) -> str:
        try:
            broken("b")
        except ValueError as error:
            return f"caught {error}"
        return "not reached"

    def on_failure(self, task: TaskInfo, error: BaseException) -> None:
        self.failures.append(f"{task.name}: {type(error).__name__}: {error}")


def test_on_failure_sees_the_error_and_the_workflow_still_catches_it(env: DurableEnv) -> None:
    handle = env.dispatch(Failing)
    env.run_until_idle()
    assert handle.result() == "caught b is broken"
    assert handle.state()["failures"] == [f"{broken.name}: ValueError: b is broken"]


@workflow
class TimingOut:
    def __init__(self) -> None:
        self.events: list[str] = []

    def handle(self) -> str:
        try:
            stalled("s")
        except TaskTimeout:
            return "timed out"
        return "not reached"

    def on_timeout(self, task: TaskInfo) -> None:
        self.events.append(f"timeout {task.arguments['name']}")

    def on_failure(self, task: TaskInfo, error: BaseException) -> None:
        self.events.append(f"failure {type(error).__name__}")


@task(timeout=timedelta(seconds=1))
def stalled(name: str) -> str:
    durable.get_engine().clock.sleep(30)  # the virtual clock: the body overran
    return name


def test_on_timeout_comes_before_on_failure(env: DurableEnv) -> None:
    handle = env.dispatch(TimingOut)
    env.run_until_idle()
    assert handle.result() == "timed out"
    assert handle.state()["events"] == ["timeout s", "failure TaskTimeout"]


@workflow
class RaisingHook:
    def __init__(self) -> None:
        self.started = 0

    def handle(self) -> str:
        work("x")
        return "not reached"

    def on_success(self, task: TaskInfo, output: object) -> None:
        raise RuntimeError(f"the hook refused {output}")


def test_a_hook_that_raises_fails_the_call_like_the_task_would(env: DurableEnv) -> None:
    handle = env.dispatch(RaisingHook)
    env.run_until_idle()
    assert handle.status() is RunStatus.FAILED
    with pytest.raises(RuntimeError, match="the hook refused X"):
        handle.result()
    assert bodies == ["x"], "the task ran once; its result was recorded"
    assert [s.status.value for s in env.backend.load_history(handle.id)] == ["completed"]


@workflow
class CallingFromHooks:
    """A hook may make durable calls: they take positions like any other call."""

    def __init__(self) -> None:
        self.audit: list[str] = []

    def handle(self) -> str:
        work("main")
        wait(timedelta(minutes=1))
        return ",".join(self.audit)

    def on_success(self, task: TaskInfo, output: object) -> None:
        if task.arguments["name"] == "main":
            self.audit.append(work("audit"))


def test_durable_calls_in_hooks_are_recorded_and_replayed(env: DurableEnv) -> None:
    handle = env.dispatch(CallingFromHooks)
    env.run_until_idle()
    assert handle.result() == "AUDIT"
    names = [s.input for s in env.backend.load_history(handle.id)]
    assert len(names) == 3  # main, audit (from the hook), the wait
    assert bodies == ["main", "audit"], "replayed after the wait, not run again"


@workflow
class AsyncHooks:
    def __init__(self) -> None:
        self.log: list[str] = []

    async def handle(self) -> int:
        import asyncio

        values = await asyncio.gather(quick("a"), quick("b"))
        return len(values)

    def on_start(self, task: TaskInfo) -> None:
        self.log.append(f"start {task.position}")

    def on_success(self, task: TaskInfo, output: object) -> None:
        self.log.append(f"success {task.position}")


@task
async def quick(name: str) -> str:
    return name


def test_hooks_in_an_async_class(env: DurableEnv) -> None:
    handle = env.dispatch(AsyncHooks)
    env.run_until_idle()
    assert handle.result() == 2
    assert handle.state()["log"] == ["start 0", "start 1", "success 0", "success 1"]


def test_an_async_handler_is_refused_at_decoration() -> None:
    with pytest.raises(TypeError, match=r"Listening.on_event must be a plain `def`"):

        @workflow
        class Listening:
            def handle(self) -> None: ...

            async def on_event(self, name: str, payload: object) -> None: ...
