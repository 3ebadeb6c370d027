"""Runs in the background: dispatch one, hold a Handle to it, wait for it, cancel it,
fork it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Generic, TypeVar, overload

from durable.core import durations, run_options
from durable.core.functions import Call, Durable
from durable.core.properties import decode_state
from durable.core.records import Run, RunStatus
from durable.core.streams import check_stream_name
from durable.errors import DurableError, NotDurableError, RunNotFound
from durable.runtime import children, forking, joining, resuming, waits
from durable.runtime.context import RunContext, current
from durable.runtime.defaults import get_engine
from durable.runtime.host import Host
from durable.runtime.streams import StreamReader

R = TypeVar("R")


class Handle(Generic[R]):
    """A run in the background: ask its status, wait for its result, cancel it.

    Made by `dispatch` or `durable.get(id)`. Cheap to create: it holds only the id.
    """

    __slots__ = ("_host", "id")

    def __init__(self, host: Host, run_id: str) -> None:
        self._host = host
        #: the run's id.
        self.id = run_id

    def run(self) -> Run:
        """The run as stored now (raises RunNotFound if it was deleted)."""
        return self._host.reread(self.id)

    def status(self) -> RunStatus:
        """The run's status now: queued, running, waiting, paused, blocked, completed,
        failed, cancelled, dead, timed_out or continued (its chain went on in a
        successor: `result` follows it)."""
        return self.run().status

    def result(self, timeout: float | dt.timedelta | None = None) -> R:
        """Wait for the run to finish and return its result, or raise its error. A run
        that continued as new is followed to the last run of its chain.

        Inside a workflow the wait is durable (see `durable.wait`); elsewhere it blocks.

        Raises:
            WaitTimeout: the run did not finish within *timeout*.
        """
        seconds = durations.seconds(timeout, "timeout")
        context = current.get()
        if isinstance(context, RunContext):
            result: R = waits.join(context, self.id, seconds)
            return result
        host = self._host
        return host.outcome(joining.wait_for_run(host, self.id, timeout=seconds))  # type: ignore[no-any-return]

    def cancel(self) -> bool:
        """Cancel the run and its children (see `cancel`)."""
        return self._host.cancel(self.id)

    def pause(self) -> bool:
        """Pause the run and its children (see `pause`)."""
        return resuming.pause(self._host, self.id)

    def resume(self) -> bool:
        """Resume the run, paused or cancelled (see `resume`)."""
        return resuming.resume(self._host, self.id)

    def fork(self, from_position: int, *, id: str | None = None) -> Handle[R]:
        """A new run of the same call that starts from this one's first positions (see
        `fork`); the handle is the new run's."""
        return Handle(self._host, forking.fork(self._host, self.id, from_position, new_id=id).id)

    def stream(self, name: str, *, offset: int = 0) -> StreamReader:
        """The run's stream *name*, read live from *offset*: iterate it (``for`` or
        ``async for``) for each value as soon as it is committed, until the stream is
        closed or the run has ended (after every value it wrote). A reader started before
        the run writes waits for the values.

        Raises:
            InvalidValue: a bad name or offset.
            DurableError: called in workflow code (reading is not deterministic: read
                in a task, or outside runs).
            RunNotFound: (when iterated) no run has this id.
        """
        if isinstance(current.get(), RunContext):
            raise DurableError(
                f"Reading stream {name!r} of run {self.id!r} in workflow code would not "
                "replay the same: read it in a task, or outside runs."
            )
        return StreamReader(self._host, self.id, check_stream_name(name), offset)

    def state(self) -> dict[str, Any]:
        """The properties the run published, as last stored: a workflow class's
        attributes, or what a function workflow gave `durable.set_state`. Read from the
        database, without running any code; ``{}`` if it published none yet.

        A snapshot is stored where a stretch of the run's code ends: at its next durable
        call (a task's start, a wait...), or as it ends.

        Raises:
            RunNotFound: no run has this id.
        """
        found = self._host.backend.state(self.id)
        if found is None:
            raise RunNotFound(f"No run has the id {self.id!r}.", run_id=self.id)
        return decode_state(found[0])

    def attributes(self) -> dict[str, str | int | float | bool]:
        """The run's attributes (what it is searched by), with their types; ``{}`` if
        it has none."""
        found = self._host.backend.run_attributes([self.id])
        return dict(found.get(self.id, {}))

    def __repr__(self) -> str:
        return f"<Handle {self.id}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Handle) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)


@overload
def dispatch(
    target: Call[R],
    /,
    *,
    id: str | None = None,
    queue: str = "default",
    priority: int = 0,
    timeout: dt.timedelta | float | None = None,
    key: str | None = None,
    key_concurrency: int | None = None,
    debounce: dt.timedelta | float | None = None,
    connection: Any = None,
    attributes: Mapping[str, str | int | float | bool] | None = None,
) -> Handle[R]: ...
@overload
def dispatch(
    target: Durable[..., R],
    /,
    *args: Any,
    id: str | None = None,
    queue: str = "default",
    priority: int = 0,
    timeout: dt.timedelta | float | None = None,
    key: str | None = None,
    key_concurrency: int | None = None,
    debounce: dt.timedelta | float | None = None,
    connection: Any = None,
    attributes: Mapping[str, str | int | float | bool] | None = None,
    **kwargs: Any,
) -> Handle[R]: ...
def dispatch(target: Any, /, *args: Any, **kwargs: Any) -> Handle[Any]:
    """Start a workflow or task in the background and return a `Handle` to it.

    ``dispatch(fn, *args, id=None, queue="default", priority=0, timeout=None, **kwargs)``,
    or ``dispatch(fn.bind(*args, **kwargs), id=..., queue=..., priority=..., timeout=...)``.

    In application code the run is stored QUEUED (committed before this returns) for a
    worker serving *queue*; workers take higher *priority* first, then older runs.
    Dispatching again with the same *id* and the same call returns the existing run's
    handle. Inside a workflow the dispatch is recorded at its position, and the child's
    id is derived from the parent's, so replay finds the same child.

    *timeout* (a timedelta or seconds) is the run's deadline from now, instead of its
    workflow's ``@workflow(timeout=...)``: at the deadline the run is stopped (its code
    sees `Cancelled` with ``timed_out``, its ``finally`` blocks run, its children are
    cancelled) and ends ``timed_out``; ``result()`` raises `WorkflowTimeout`.

    *key* and *key_concurrency* are flow control: at most *key_concurrency* runs of one
    *key* in *queue* run at once, across all workers (without *key_concurrency*, the
    queue's ``key_concurrency``, see `durable.queue`). Runs a limit holds back stay
    queued, holding no thread, and the runs behind them go ahead.

    *debounce* (a timedelta or seconds; needs *key*, no *id*, application code only)
    coalesces a burst: the first dispatch of a workflow and key makes a run that starts
    *debounce* after it; each later dispatch before it starts gives it its arguments
    (the last ones win) and moves its start to *debounce* after itself, but never more
    than ten windows after the first. Every caller's handle is that run's.

    *connection* (a SQLAlchemy ``Connection`` or ORM ``Session`` on durable's own
    database, its transaction open; application code only) inserts the run in that
    transaction, the outbox pattern: the run exists if and only if the caller commits,
    and workers hear of it at the commit. Not with *key_concurrency* or *debounce*;
    with *id*, a run of that id already stored (or inserted earlier in the same
    transaction) is returned as usual. See docs/howto/outbox-and-client.md.

    *attributes* (``{"customer": "c-42"}``: str, int, float or bool values, at most
    the engine's ``max_attributes``) are what the run is searched by (``durable ls
    --attr customer=c-42``); written with the run, in its transaction. Its workflow may
    set more with `durable.set_attributes`.

    *id*, *queue*, *priority*, *timeout*, *key*, *key_concurrency*, *debounce*,
    *connection* and *attributes* are the run's options; every other keyword goes to
    *fn*. If *fn* has a parameter named like an option, the flat form cannot say which
    is meant and raises TypeError: bind the arguments, ``dispatch(fn.bind(id=...),
    id="run-1")``.

    Raises:
        TypeError: the arguments do not fit the signature, a keyword is both a
            parameter of *fn* and a run option, or an attribute's value is not a str,
            int, float or bool; nothing was written.
        ValueError: *timeout* is not a positive duration, or *attributes* are too
            many or too long; nothing was written.
        IdempotencyConflict: *id* belongs to a run of another call.
        SerializationError: an argument cannot be stored; nothing was written.
        InvalidValue: *id* or *queue* holds a NUL character or a lone surrogate.
        ConfigurationError: *connection* is on another database than durable's, or
            durable runs on the memory backend; nothing was written.
    """
    call, id, options = dispatch_parts(target, args, kwargs)
    context = current.get()
    if isinstance(context, RunContext):
        if id is not None or options.get("connection") is not None:
            raise TypeError(
                "id= and connection= are for application code; inside a workflow, child "
                "ids are derived and the dispatch is recorded in the run's history."
            )
        options.pop("connection", None)
        child = children.dispatch(context, call, **options)
        return Handle(context.host, child)
    engine = get_engine()
    run = engine.dispatch_call(call, run_id=id, **options)
    return Handle(engine, run.id)


def dispatch_parts(
    target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], called: str = "dispatch"
) -> tuple[Call[Any], str | None, dict[str, Any]]:
    """Split dispatch's arguments (consumes *kwargs*) into the call, the run's id, and
    its other options as keywords of `Engine.dispatch_call` (`run_options.take`
    refuses a keyword that could be either)."""
    options = run_options.take("dispatch", target, kwargs, called=called)
    call = _one_call(target, args, kwargs)
    return call, options.pop("id", None), options


def _one_call(target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call[Any]:
    if isinstance(target, Durable):
        return target.bind(*args, **kwargs)
    if isinstance(target, Call) and not args and not kwargs:
        return target
    raise NotDurableError(
        f"{getattr(target, '__qualname__', repr(target))} is not a workflow or task (or one "
        "bound call). Decorate it with @durable.workflow or @durable.task."
    )


def get(run_id: str) -> Handle[Any]:
    """A handle to the run with this id, on the default database.

    Raises:
        RunNotFound: no run has this id.
    """
    engine = get_engine()
    engine.reread(run_id)
    return Handle(engine, run_id)


def cancel(run_id: str) -> bool:
    """Cancel a run and every unfinished run below it (its children, theirs...).

    A run that never started is cancelled at once. One that has started (running,
    waiting, or queued again) sees `Cancelled` raised in its code, so its ``finally``
    blocks run (and may call tasks); it ends CANCELLED.

    Returns:
        True if the run is cancelled or will stop at its next durable call; False if it
        had already finished, in which case nothing changes.

    Raises:
        RunNotFound: no run has this id.
    """
    return get_engine().cancel(run_id)


def pause(run_id: str) -> bool:
    """Pause a run and every unfinished run below it (seed 004's halt).

    A queued or waiting run is PAUSED at once; a running one at its next durable call
    (a task body already running finishes first, and its result is kept). A paused run
    holds no thread and is never claimed. Timers that come due and events that arrive
    meanwhile are kept, and take effect once it is resumed. Cancelling a paused run
    works (it resumes to receive `Cancelled`).

    Returns:
        True if it is paused or will pause; False if it had finished, is blocked or
        is being cancelled: nothing changes then.

    Raises:
        RunNotFound: no run has this id.
    """
    return resuming.pause(get_engine(), run_id)


def resume(run_id: str) -> bool:
    """Let a paused run (and the paused runs below it) go on; or resume a cancelled
    run from where its cancellation reached its code, its cancelled children with it
    (see docs/concepts/handlers.md).

    Returns:
        True if it goes on; False if it was neither paused nor cancelled.

    Raises:
        RunNotFound: no run has this id.
    """
    return resuming.resume(get_engine(), run_id)


def fork(run_id: str, from_position: int, *, id: str | None = None) -> Handle[Any]:
    """Start a new run of the same call as run *run_id*, from its position
    *from_position*: its history begins as a copy of the original's finished steps
    below that position (outputs and errors, so those bodies do not run again), and it
    runs on from there with today's code, on a worker serving its queue. The original
    is not changed; the new run's ``origin`` is its id. Forking a running run copies
    what it has finished; a fork can be forked. See docs/concepts/fork.md.

    The run's workflow must be registered in this process: today's code replays the
    steps to be copied first, executing nothing, to find the run's parallel groups
    (a fork cannot start inside one) and to check that it agrees with them.

    Args:
        run_id: the run to fork.
        from_position: the first position the new run runs again: 0 (everything) to
            the position after the history's last step.
        id: the new run's id; None generates one.

    Returns:
        A handle to the new run, QUEUED.

    Raises:
        RunNotFound: no run has the id *run_id*.
        ValueError: *from_position* is out of the history, inside a parallel group, past
            the point where the run's cancellation reached its code, or past where
            today's code stops agreeing with the history (the message names where to
            fork from instead); or *id* is not an id a user may choose.
        IdempotencyConflict: a run already has the id *id*.
        ConfigurationError: the run's workflow is not registered in this process.
    """
    engine = get_engine()
    return Handle(engine, forking.fork(engine, run_id, from_position, new_id=id).id)
