"""@workflow and @task: plain functions that become durable inside a workflow.

The wrappers keep the function's signature for type checkers (ParamSpec), register
it under a stable name so a stored run can find its code again, and route calls: a
call made inside a running workflow goes to the run (recorded or replayed); any other
call is a plain Python call, which is what makes tasks unit-testable as they are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, overload

from typing_extensions import ParamSpec

from durable.core import event_schemas
from durable.core.functions import ON_DIVERGENCE, Durable
from durable.core.limits import TaskLimits
from durable.core.records import StepKind
from durable.core.retry import RetryPolicy
from durable.runtime import calls, registry, schedules
from durable.runtime.context import RunContext, current

from . import classes

#: The schedule options of ``@workflow`` besides ``schedule=`` and ``every=``.
SCHEDULE_OPTIONS = frozenset(
    {"timezone", "catch_up", "max_catch_up", "overlap", "queue", "priority", "jitter"}
)

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class _Handles(Protocol[R_co]):
    """A workflow class: its ``handle()`` is the body, its result the run's."""

    def handle(self) -> R_co: ...


class Routed(Durable[P, R_co]):
    """A registered durable function whose calls inside a workflow go to the run."""

    def __init__(
        self,
        fn: Callable[P, R_co],
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        limits: TaskLimits | None = None,
    ) -> None:
        super().__init__(fn, name=name, retry=retry, limits=limits)
        functools.update_wrapper(self, fn)  # looks like fn: name, docstring, module
        registry.register(self)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co:
        context = current.get()
        if isinstance(context, RunContext):
            result: R_co = calls.call(context, self, args, kwargs)
            return result
        return self.fn(*args, **kwargs)


class Workflow(Routed[P, R_co]):
    """A function whose durable calls are recorded, so it can resume after a crash."""

    kind = StepKind.WORKFLOW
    #: the class, for a workflow class (its instance lives for the run); else None.
    cls: type | None = None


class Task(Routed[P, R_co]):
    """A unit of work recorded once per call inside a workflow; retried per its policy."""

    kind = StepKind.TASK


@overload
def workflow(fn: type[_Handles[R]], /) -> Workflow[..., R]: ...
@overload
def workflow(fn: Callable[P, R], /) -> Workflow[P, R]: ...
@overload
def workflow(
    *,
    name: str | None = None,
    timeout: timedelta | float | None = None,
    on_divergence: str = "block",
    schedule: str | None = None,
    every: timedelta | float | None = None,
    events: Mapping[str, type] | None = None,
    **schedule_options: Any,
) -> Callable[[Callable[P, R]], Workflow[P, R]]: ...
def workflow(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    timeout: timedelta | float | None = None,
    on_divergence: str = "block",
    schedule: str | None = None,
    every: timedelta | float | None = None,
    events: Mapping[str, type] | None = None,
    **schedule_options: Any,
) -> Workflow[P, R] | Callable[[Callable[P, R]], Workflow[P, R]]:
    """Make *fn* a durable workflow.

    Inside it, calls to tasks, child workflows and `durable.now()`-style helpers are
    recorded by position; run it with `durable.execute`. Called directly, it is a plain
    function call and nothing is recorded.

    *fn* may be a class (a workflow class): its ``__init__`` takes the run's input, its
    ``handle(self)`` is the body and returns the run's result, and its instance's
    attributes (but ``_private`` ones) are the run's properties, which callers read
    with `Handle.state()` (docs/concepts/handlers.md). The class stays reachable as
    the workflow's ``cls``.

    Args:
        fn: the function or class (when used bare, as ``@workflow``).
        name: the stored name; defaults to ``module.qualname``. Stored runs find their
            code by this name, so keep it stable across deploys.
        timeout: how long each run may take from its creation (a timedelta or
            seconds), across restarts and waits; ``timeout=`` given to `dispatch` or
            `execute` overrides it per run. At the deadline the workflow sees
            `Cancelled` (``timed_out``) at its next durable call (a wait in progress
            ends then), its ``finally`` blocks run, its unfinished children are
            cancelled, and the run ends ``timed_out``: ``result()`` raises
            `WorkflowTimeout`.
        on_divergence: what a run does when its code no longer matches its history
            (docs/concepts/replay.md, "Shipping a change"): ``"block"`` (the default)
            stops it BLOCKED, with nothing lost, to resume once the code matches again;
            ``"fail"`` ends it FAILED with the `NondeterminismError`, for runs that are
            better retried from scratch (or forked) than held.
        schedule, every: run it on this cron expression (``"0 3 * * *"``), or at this
            interval, from every worker that has the code (stored as the schedule
            named after the workflow; a tick fires once however many workers run).
            With ``timezone=`` (default UTC), ``catch_up=``, ``max_catch_up=``,
            ``overlap=``, ``queue=``, ``priority=``, ``jitter=``: see docs/howto/schedules.md.
        events: the typed events its runs wait for, by name: ``{"approval": Approval}``
            (a Pydantic model or a dataclass; ``durable[pydantic]``). A `send` of one
            is validated before anything is stored, even before the run reaches its
            wait; ``wait("approval")`` returns an ``Approval`` (docs/howto/human-tasks.md).

    Raises:
        ConfigurationError: *timeout* is not a positive duration.
        ValueError: a bad *on_divergence*, cron expression, zone, interval or schedule
            option (named).
        TypeError: a class without ``handle(self)``, or with a handler whose parameters
            are not the expected ones; an *events* schema that is neither a Pydantic
            model nor a dataclass, or that has no JSON Schema (an arbitrary class as a
            field's type).
        ConfigurationError: *events* given without Pydantic installed.
    """
    limits = TaskLimits.of(timeout, None, None, decorator="workflow")
    if on_divergence not in ON_DIVERGENCE:
        raise ValueError(
            f"@workflow(on_divergence={on_divergence!r}): choose 'block' (stop the run "
            "until the code matches its history again) or 'fail' (end it failed)."
        )
    declared = event_schemas.check_events(events, "@workflow(events=...)")
    spec = None
    if schedule is not None or every is not None or schedule_options:
        unknown = set(schedule_options) - SCHEDULE_OPTIONS
        if unknown:
            raise TypeError(f"workflow() got unexpected keyword arguments: {sorted(unknown)}.")
        spec = schedules.Spec.make(cron=schedule, every=every, **schedule_options)

    def make(f: Any) -> Workflow[Any, Any]:
        made = _workflow(f, name, limits)
        made.on_divergence = on_divergence
        if declared:
            made.events = MappingProxyType(declared)
        if spec is not None:
            schedules.DECLARED[made.name] = spec
        return made

    return make(fn) if fn is not None else make


def _workflow(fn: Any, name: str | None, limits: TaskLimits) -> Workflow[Any, Any]:
    """A workflow from a function, or from a class (see `durable.api.classes`)."""
    if not isinstance(fn, type):
        return Workflow(fn, name=name, limits=limits)
    made: Workflow[Any, Any] = Workflow(classes.runner(fn), name=name, limits=limits)
    made.cls = fn
    return made


@overload
def task(fn: Callable[P, R], /) -> Task[P, R]: ...
@overload
def task(
    *,
    name: str | None = None,
    retry: RetryPolicy | Mapping[str, Any] | int | None = None,
    timeout: timedelta | float | None = None,
    heartbeat: timedelta | float | None = None,
    deadline: timedelta | float | None = None,
) -> Callable[[Callable[P, R]], Task[P, R]]: ...
def task(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    retry: RetryPolicy | Mapping[str, Any] | int | None = None,
    timeout: timedelta | float | None = None,
    heartbeat: timedelta | float | None = None,
    deadline: timedelta | float | None = None,
) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
    """Make *fn* a durable task.

    Called inside a workflow, its outcome is recorded once and replayed afterwards;
    called anywhere else, it is a plain function call.

    Args:
        fn: the function (when used bare, as ``@task``).
        name: the stored name; defaults to ``module.qualname``.
        retry: a `RetryPolicy`, a dict of its fields, or a number of attempts.
        timeout: how long one attempt may run (a timedelta or seconds). A late attempt
            fails with `TaskTimeout` and is retried by *retry*; an async body is
            cancelled at the deadline, a sync one cannot be stopped: its late result
            is not recorded, and its next `durable.heartbeat()` raises.
        heartbeat: the longest an attempt may go without calling `durable.heartbeat()`
            (at most *timeout*); its start counts as the first heartbeat.
        deadline: how long all attempts together may take, from the first's start.

    Raises:
        ConfigurationError: a limit that is not a positive duration, or a heartbeat
            longer than the timeout.
    """
    policy = RetryPolicy.coerce(retry)
    limits = TaskLimits.of(timeout, heartbeat, deadline)
    if fn is not None:
        return Task(fn, name=name, retry=policy, limits=limits)
    return lambda f: Task(f, name=name, retry=policy, limits=limits)
