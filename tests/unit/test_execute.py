"""execute(): durable runs, positions, idempotent ids, children and recorded helpers."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

import durable
from durable import RunStatus, StepKind, StepStatus, execute, task, workflow
from durable.errors import DurableError, IdempotencyConflict, NotDurableError
from tests.unit.helpers import Crash, history, run

pytestmark = pytest.mark.usefixtures("memory_engine")


def test_task_outside_a_workflow_is_a_plain_call() -> None:
    """Calling a task from ordinary code runs it and records nothing."""

    @task
    def double(n: int) -> int:
        return n * 2

    assert double(21) == 42
    assert durable.get_engine().backend.recoverable(host="any") == []


def test_workflow_called_directly_is_a_plain_call() -> None:
    """Calling a workflow function directly runs it as plain Python, tasks included."""
    seen: list[int] = []

    @task
    def note(n: int) -> None:
        seen.append(n)

    @workflow
    def flow(n: int) -> int:
        note(n)
        return n + 1

    assert flow(1) == 2
    assert seen == [1]


def test_execute_records_each_call_by_position() -> None:
    """Sequential task calls take positions 0, 1, 2 with their outputs and a finished run."""

    @task
    def fetch(n: int) -> int:
        return n * 10

    @workflow
    def pipeline(n: int) -> list[int]:
        return [fetch(n), fetch(n + 1), fetch(n + 2)]

    assert execute(pipeline, 1, id="p-1") == [10, 20, 30]
    steps = history("p-1")
    assert [(s.position, s.kind, s.name, s.status) for s in steps] == [
        (i, StepKind.TASK, fetch.name, StepStatus.COMPLETED) for i in range(3)
    ]
    assert [s.output for s in steps] == [b"j10", b"j20", b"j30"]
    assert all(s.call_hash.startswith("v1:") for s in steps)
    assert len({s.call_hash for s in steps}) == 3, "different arguments hash differently"
    stored = run("p-1")
    assert stored.status is RunStatus.COMPLETED and stored.lease_owner is None


def test_names_default_to_module_and_qualname() -> None:
    """A workflow's stored name is module.qualname unless name= says otherwise."""

    @workflow
    def plain() -> None: ...

    @workflow(name="billing.charge-v1")
    def named() -> None: ...

    assert plain.name == f"{__name__}.test_names_default_to_module_and_qualname.<locals>.plain"
    assert named.name == "billing.charge-v1"


def test_parallel_calls_take_consecutive_positions_in_argument_order() -> None:
    """execute(a.bind(), b.bind()) runs both concurrently and records them in argument order."""
    barrier = threading.Barrier(2, timeout=5)

    @task
    def meet(tag: str) -> str:
        barrier.wait()  # both bodies must be running at once, or this times out
        return tag

    @task
    def first() -> str:
        return "first"

    @workflow
    def fan_out() -> tuple[str, str, str]:
        a = first()
        b, c = execute(meet.bind("left"), meet.bind("right"))
        return a, b, c

    assert execute(fan_out, id="fan") == ("first", "left", "right")
    assert [s.output for s in history("fan")] == [b'j"first"', b'j"left"', b'j"right"']


def test_parallel_failure_raises_the_first_failure_after_all_finish() -> None:
    """In a parallel group every call is recorded; the first failure by position is raised."""

    @task
    def ok(n: int) -> int:
        return n

    @task
    def bad(message: str) -> int:
        raise ValueError(message)

    @workflow
    def group() -> str:
        try:
            execute(ok.bind(1), bad.bind("one"), bad.bind("two"), ok.bind(4))
        except ValueError as error:
            return str(error)
        return "no error"

    assert execute(group, id="g") == "one"
    assert [s.status for s in history("g")] == [
        StepStatus.COMPLETED,
        StepStatus.FAILED,
        StepStatus.FAILED,
        StepStatus.COMPLETED,
    ]


def test_same_id_returns_the_stored_result_without_running_again() -> None:
    """Executing a finished run's id again returns its result; no task body runs."""
    bodies: list[int] = []

    @task
    def work(n: int) -> int:
        bodies.append(n)
        return n

    @workflow
    def job(n: int) -> int:
        return work(n) + 1

    assert execute(job, 5, id="job-1") == 6
    assert execute(job, 5, id="job-1") == 6
    assert bodies == [5]


def test_same_id_reraises_a_failed_runs_error() -> None:
    """Executing a failed run's id again raises its recorded error, of the same type."""

    @workflow
    def broken() -> None:
        raise LookupError("nope")

    with pytest.raises(LookupError, match="nope"):
        execute(broken, id="broken-1")
    with pytest.raises(LookupError, match="nope"):
        execute(broken, id="broken-1")
    assert run("broken-1").status is RunStatus.FAILED


def test_same_id_with_another_call_is_an_error() -> None:
    """Reusing an id for other arguments or another workflow raises IdempotencyConflict."""

    @workflow
    def one(n: int) -> int:
        return n

    @workflow
    def two(n: int) -> int:
        return n

    execute(one, 1, id="shared")
    with pytest.raises(IdempotencyConflict) as caught:
        execute(one, 2, id="shared")
    assert caught.value.run_id == "shared"
    with pytest.raises(IdempotencyConflict):
        execute(two, 1, id="shared")
    assert execute(one, 1, id="shared") == 1


def test_keyword_and_positional_spellings_are_the_same_call() -> None:
    """f(1, b=2) and f(1, 2) are one call: the same id joins the same run."""

    @workflow
    def add(a: int, b: int = 0) -> int:
        return a + b

    assert execute(add, 1, b=2, id="add") == 3
    assert execute(add, 1, 2, id="add") == 3
    assert execute(add, a=1, b=2, id="add") == 3


def test_an_interrupted_run_resumes_without_rerunning_finished_tasks() -> None:
    """A run that died after two tasks resumes under the same id and replays them."""
    bodies: list[str] = []
    crash = {"armed": True}

    @task
    def step_(name: str) -> str:
        if name == "third" and crash["armed"]:
            crash["armed"] = False
            raise Crash
        bodies.append(name)
        return name.upper()

    @workflow
    def three() -> list[str]:
        return [step_("first"), step_("second"), step_("third")]

    with pytest.raises(Crash):
        execute(three, id="resume-me")
    assert run("resume-me").status is RunStatus.QUEUED, "an interrupted run is handed back"
    assert execute(three, id="resume-me") == ["FIRST", "SECOND", "THIRD"]
    assert bodies == ["first", "second", "third"]
    assert run("resume-me").epoch == 2, "resuming claims the run under a new epoch"


def test_child_workflow_is_its_own_run_recorded_at_the_parent_position() -> None:
    """A workflow called inside a workflow runs as a child run with a derived id."""
    bodies: list[int] = []

    @task
    def leaf(n: int) -> int:
        bodies.append(n)
        return n * 3

    @workflow
    def child(n: int) -> int:
        return leaf(n) + 1

    @workflow
    def parent(n: int) -> list[int]:
        return [leaf(n), child(n), execute(child, n + 1)]

    assert execute(parent, 1, id="family") == [3, 4, 7]
    assert run("family/1").parent_id == "family"
    assert run("family/1").status is RunStatus.COMPLETED
    assert [s.kind for s in history("family")] == [
        StepKind.TASK,
        StepKind.WORKFLOW,
        StepKind.WORKFLOW,
    ]
    assert [s.output for s in history("family/2")] == [b"j6"]
    assert execute(parent, 1, id="family") == [3, 4, 7]
    assert bodies == [1, 1, 2]


def test_recorded_helpers_replay_their_values() -> None:
    """now(), uuid4() and random() are recorded once and replayed after a crash."""
    crash = {"armed": True}

    @task
    def maybe_crash() -> None:
        if crash["armed"]:
            crash["armed"] = False
            raise Crash

    @workflow
    def stamp() -> tuple[Any, ...]:
        values = (durable.now(), durable.uuid4(), durable.random())
        maybe_crash()
        return values

    with pytest.raises(Crash):
        execute(stamp, id="stamp")
    first = [
        durable.get_engine().load(s.output or b"", "stamp", s.position)
        for s in history("stamp")
        if s.status is StepStatus.COMPLETED  # not the task that crashed (started only)
    ]
    when, ident, number = execute(stamp, id="stamp")
    assert [when, ident, number] == first
    assert isinstance(ident, uuid.UUID) and 0 <= number < 1 and when.tzinfo is not None
    assert [s.kind for s in history("stamp")][:3] == [StepKind.NOW, StepKind.UUID, StepKind.RANDOM]


def test_task_key_is_stable_per_position() -> None:
    """task_key() is run_id:position inside a task body, the same on every attempt."""
    keys: list[str] = []

    @task(retry=dict(attempts=2, initial=0))
    def charge() -> str:
        keys.append(durable.task_key())
        if len(keys) == 1:
            raise ConnectionError("flaky")
        return keys[-1]

    @workflow
    def billing() -> str:
        durable.now()
        return charge()

    assert execute(billing, id="bill") == "bill:1"
    assert keys == ["bill:1", "bill:1"]
    with pytest.raises(DurableError, match="inside a task body"):
        durable.task_key()


def test_calls_inside_a_task_body_are_plain() -> None:
    """A task called from another task's body is a plain call, not a recorded position."""

    @task
    def inner(n: int) -> int:
        return n + 1

    @task
    def outer(n: int) -> int:
        return inner(n) * 2

    @workflow
    def flow() -> int:
        return outer(1)

    assert execute(flow, id="nested") == 4
    assert [s.name for s in history("nested")] == [outer.name]


def test_execute_a_task_directly_is_a_one_step_run() -> None:
    """execute(task, ...) makes a durable run of one recorded position."""

    @task
    def square(n: int) -> int:
        return n * n

    assert execute(square, 7, id="sq") == 49
    assert [s.output for s in history("sq")] == [b"j49"]
    assert run("sq").workflow == square.name


def test_several_calls_at_top_level_are_separate_runs() -> None:
    """execute(a.bind(...), b.bind(...)) from app code runs each as its own run."""

    @workflow
    def echo(n: int) -> int:
        return n

    assert execute(echo.bind(1), echo.bind(2), echo.bind(3)) == (1, 2, 3)


def test_execute_rejects_a_plain_function() -> None:
    """A function that is not decorated is refused with a pointer to the decorators."""

    def plain(n: int) -> int:
        return n

    with pytest.raises(NotDurableError, match=r"Decorate it with @durable\.workflow"):
        execute(plain, 1)  # type: ignore[call-overload]


def test_id_cannot_be_combined_with_several_calls() -> None:
    """id= names one run, so it is refused with several bound calls."""

    @workflow
    def echo(n: int) -> int:
        return n

    with pytest.raises(TypeError, match="id="):
        execute(echo.bind(1), echo.bind(2), id="x")  # type: ignore[call-overload]


def test_two_threads_executing_one_id_run_it_once() -> None:
    """Concurrent execute() calls with one id share one run: the body runs once."""
    bodies: list[int] = []
    started = threading.Event()
    release = threading.Event()

    @task
    def slow() -> int:
        bodies.append(1)
        started.set()
        assert release.wait(5)
        return 7

    @workflow
    def once() -> int:
        return slow()

    results: list[int] = []
    first = threading.Thread(target=lambda: results.append(execute(once, id="once")))
    first.start()
    assert started.wait(5)
    second = threading.Thread(target=lambda: results.append(execute(once, id="once")))
    second.start()
    release.set()
    first.join(5)
    second.join(5)
    assert results == [7, 7]
    assert bodies == [1]
