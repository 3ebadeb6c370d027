"""Values recorded once inside a workflow (`now`, `uuid4`, `random`), `task_key`, `info`.

Inside a workflow each value is made the first time and replayed afterwards, so the
workflow sees the same value on every replay; anywhere else they are plain calls.
"""

from __future__ import annotations

import datetime as dt
import random as _random
import uuid as _uuid
from collections.abc import Callable
from typing import Any, TypeVar

from durable.core.hashing import call_hash
from durable.core.info import RunInfo
from durable.core.properties import encode_state
from durable.core.records import Step, StepKind, StepStatus
from durable.errors import DurableError
from durable.runtime.activity import TaskScope
from durable.runtime.context import RunContext, current
from durable.runtime.defaults import configured_clock

T = TypeVar("T")


def _recorded(kind: StepKind, name: str, produce: Callable[[], T]) -> T:
    context = current.get()
    if isinstance(context, RunContext):
        result: T = _record_value(context, kind, name, produce)
        return result
    return produce()


def _record_value(context: RunContext, kind: StepKind, name: str, produce: Callable[[], T]) -> T:
    """Inside a workflow: the value is made once, recorded at its position, and
    replayed afterwards."""
    position = context.allocate()
    digest = call_hash(kind, name, {})
    recorded = context.decide(position, kind, name, digest)
    if recorded is not None:
        replayed: T = context.replayed(recorded)
        return replayed
    value = produce()
    now = context.host.clock.now()
    output = context.host.dump(value, f"the value of {name}() at position {position}")
    step = Step(
        run_id=context.run_id, position=position, kind=kind, name=name, call_hash=digest,
        status=StepStatus.COMPLETED, output=output, started_at=now, finished_at=now,
        epoch=context.epoch,
    )  # fmt: skip
    settled: T = context.settle(step, value)
    return settled


def now() -> dt.datetime:
    """The current time (UTC). Inside a workflow it is recorded, so replay sees the same.

    Time comes from the engine's clock: in a `durable.testing.DurableEnv`, virtual time,
    task bodies and test code included.
    """
    return _recorded(
        StepKind.NOW,
        "durable.now",
        lambda: dt.datetime.fromtimestamp(_clock_now(), tz=dt.UTC),
    )


def _clock_now() -> float:
    context = current.get()
    if isinstance(context, RunContext):
        return context.host.clock.now()
    return configured_clock().now()  # a task body or app code: the default engine's


def uuid4() -> _uuid.UUID:
    """A random UUID. Inside a workflow it is recorded, so replay sees the same."""
    return _recorded(StepKind.UUID, "durable.uuid4", _uuid.uuid4)


def random() -> float:
    """A random float in [0, 1). Inside a workflow it is recorded, so replay sees the same."""
    return _recorded(StepKind.RANDOM, "durable.random", _random.random)


def task_key() -> str:
    """A stable key for the task body running now: ``"run_id:position"``.

    It is the same on every attempt and every replay, which makes it an idempotency key
    for external side effects (a payment provider's idempotency header, a unique row).

    Raises:
        DurableError: called outside a task body running inside a workflow.
    """
    context = current.get()
    if isinstance(context, TaskScope):
        return f"{context.run_id}:{context.position}"
    raise DurableError(
        "task_key() names a task's position in a run; call it inside a task body that a "
        "workflow is running."
    )


def info() -> RunInfo | None:
    """Where this code runs: the run's id, workflow and parent; in a task body also the
    task, its position and the attempt. None in plain application code.

    A task can report back to its own run with it (``send(info.run_id, ...)``), or name
    the run in its logs, without parsing `task_key()`.
    """
    context = current.get()
    if isinstance(context, TaskScope):
        return RunInfo(
            run_id=context.run_id, workflow=context.workflow, parent_id=context.parent_id,
            task=context.task, position=context.position, attempt=context.attempt,
        )  # fmt: skip
    if isinstance(context, RunContext):
        return RunInfo(
            run_id=context.run_id, workflow=context.workflow, parent_id=context.parent_id
        )
    return None


def set_state(**values: Any) -> None:
    """Publish readable state from a function workflow: callers and operators read the
    values with `Handle.state()`, `durable show`, the API and the dashboard.

    Each call merges *values* into the run's state (JSON values). Nothing is written at
    once and no position is taken (adding or removing a call never makes a live run
    diverge): the state is stored with the run's next durable call (a task's start, a
    wait...) or with its end, if it changed. Replay calls it again with the same
    values. Outside a workflow (a plain call to the function) it does nothing.

    Raises:
        SerializationError: a value is not JSON (naming it); nothing was set.
        TypeError: called in a task body, or in a workflow class (whose attributes are
            its state: assign them instead).
    """
    context = current.get()
    if isinstance(context, TaskScope):
        raise TypeError(
            "set_state() publishes a workflow's state; a task body cannot set it (return "
            "what the workflow should publish, and call set_state() there)."
        )
    if not isinstance(context, RunContext):
        return
    properties = context.publish()
    if properties.values is not properties.source:
        raise TypeError(
            "set_state() is for function workflows: a workflow class publishes its own "
            "attributes, so assign them (self.status = ...) instead."
        )
    merged = {**properties.values, **values}
    encode_state(merged, owner=f"Run {context.run_id!r}")  # refuse before keeping any
    properties.values.update(values)
