"""Waits inside a workflow: for a time, an event, or another run; and sending events.

Each takes one position. The first time a wait runs it records its deadline (a
WAITING step with ``wake_at``); replay uses that recorded deadline, never the clock
of the replaying process. A wait that is not over suspends the run (`Suspend`): no
thread waits. Once the deadline passes, the event arrives or the run finishes, the
run is queued, claimed and replayed up to the wait, which then records how it ended:

* a sleep: COMPLETED at its deadline;
* an event wait: the event it consumed (its id as input, its payload as output), or
  that it timed out (input ``{"timed_out": true}``, raised as `WaitTimeout`, so that no
  payload, ``None`` included, reads as a timeout). Replay takes the same branch even if
  an event arrives after the timeout was recorded: that event stays in the inbox;
* a wait for a run: that run's outcome, or `WaitTimeout`.

A send from a workflow is keyed by its position (``<run>:<position>``), so replaying
it after a crash never delivers the event twice.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from durable.core import event_schemas, faults
from durable.core.clock import SystemClock
from durable.core.hashing import call_hash
from durable.core.records import RunStatus, Step, StepKind, StepStatus
from durable.errors import (
    EventInvalid,
    LeaseLost,
    RunFinished,
    RunNotFound,
    StorageError,
    WaitTimeout,
)

from . import typed_events
from .context import RunContext
from .loops import in_event_loop

SLEEP = "durable.sleep"
JOIN = "durable.wait"
_SLEEP_HASH = call_hash(StepKind.SLEEP, SLEEP, {})
_NULL = b"jnull"
_TIMED_OUT = b'j{"timed_out":true}'


def _waiting(context: RunContext, position: int, kind: StepKind, name: str, digest: str) -> Step:
    now = context.host.clock.now()
    return Step(
        run_id=context.run_id,
        position=position,
        kind=kind,
        name=name,
        call_hash=digest,
        status=StepStatus.WAITING,
        started_at=now,
        epoch=context.epoch,
    )


def _ended(context: RunContext, started: Step, **outcome: Any) -> Step:
    """The finished form of the wait step *started* (COMPLETED unless told)."""
    return Step(
        run_id=started.run_id,
        position=started.position,
        kind=started.kind,
        name=started.name,
        call_hash=started.call_hash,
        status=outcome.pop("status", StepStatus.COMPLETED),
        input=outcome.pop("input", started.input),
        started_at=started.started_at,
        finished_at=context.host.clock.now(),
        epoch=context.epoch,
        wake_at=started.wake_at,
        **outcome,
    )


def hold(context: RunContext, wake_at: float, position: int) -> float | None:
    """Return None once *wake_at* (engine clock) has come: at once if it has; after
    sleeping here if it is at most `Engine.max_inline_wait` away. Otherwise return
    the time to suspend the run until (it replays up to this point once it is due).
    If the run's deadline comes first, it is delivered here, at the waiting
    *position*."""
    clock = context.host.clock
    until = context.interrupts.until(wake_at)
    left = until - clock.now()
    if 0 < left <= context.host.max_inline_wait and not in_event_loop():
        clock.sleep(left)
        # A test clock may not have moved as far as asked: check again.
        left = 0 if isinstance(clock, SystemClock) else until - clock.now()
    if left > 0:
        return wake_at
    if until < wake_at:
        raise context.stop_at(position)
    return None


def _handled(context: RunContext, *, live: bool, exclude: str | None = None) -> None:
    """The ``on_event`` handlers of a workflow class in this wait (`handlers.py`)."""
    if context.events is not None:
        context.events.in_wait(live=live, exclude=exclude)


def _suspend(context: RunContext, wake_at: float | None, waiting_on: str | None) -> BaseException:
    """Suspend in a wait: any event wakes a workflow class with ``on_event``."""
    events = context.events
    return context.suspend(wake_at, waiting_on if events is None else events.waiting_on(waiting_on))


def sleep_until(context: RunContext, deadline: float) -> None:
    """Sleep durably until *deadline* (engine clock), recorded the first time."""
    position = context.allocate()
    recorded = context.decide(position, StepKind.SLEEP, SLEEP, _SLEEP_HASH)
    if recorded is not None and recorded.status.finished:
        context.replayed(recorded)
        _handled(context, live=False)
        return
    if recorded is None or recorded.wake_at is None:
        started = _waiting(context, position, StepKind.SLEEP, SLEEP, _SLEEP_HASH)
        recorded = dataclasses.replace(started, wake_at=deadline)
        if deadline > context.host.clock.now():
            recorded = context.record(recorded)
            if recorded.status.finished:  # another writer got there first
                context.replayed(recorded)
                _handled(context, live=False)
                return
    until = hold(context, recorded.wake_at or deadline, position)
    if until is not None:
        _handled(context, live=True)
        raise _suspend(context, until, None)
    context.record(_ended(context, recorded, output=_NULL))
    _handled(context, live=False)


def receive(
    context: RunContext, name: str, timeout: float | None, schema: type | None = None
) -> Any:
    """Wait for the next event *name* sent to this run; its payload, or `WaitTimeout`.

    With a *schema* (a typed event), its JSON Schema is recorded with the wait (for
    senders without this code) and the payload comes back as the schema's instance,
    built from the stored payload each time (replay too); `EventInvalid` if it does
    not fit (a payload no sender could check)."""
    position = context.allocate()
    digest = call_hash(StepKind.EVENT, name, {})  # the schema is not part of the call
    recorded = context.decide(position, StepKind.EVENT, name, digest)
    if recorded is None or not recorded.status.finished:
        recorded = _receiving(
            context, position, name, digest, recorded, timeout=timeout, schema=schema
        )
    _handled(context, live=False)
    payload = _received(context, recorded)
    if schema is None:
        return payload
    return event_schemas.validate(schema, payload, run_id=context.run_id, event=name)


def _receiving(
    context: RunContext,
    position: int,
    name: str,
    digest: str,
    recorded: Step | None,
    *,
    timeout: float | None,
    schema: type | None,
) -> Step:
    """The event wait at *position*, not finished: the event it takes now, or its
    timeout recorded; else suspend the run (after handling other events)."""
    host = context.host
    started = recorded or _waiting(context, position, StepKind.EVENT, name, digest)
    taken = consume(context, _ended(context, started), name)
    if taken is not None:
        return taken
    now = host.clock.now()
    deadline = started.wake_at if recorded else None if timeout is None else now + timeout
    if deadline is not None and deadline <= now:
        return context.record(_ended(context, started, output=_NULL, input=_TIMED_OUT))
    if recorded is None:
        shown: dict[str, Any] = {"timeout": timeout}
        if schema is not None:
            shown[typed_events.SCHEMA] = event_schemas.json_schema(schema)
        preview = host.preview(shown)
        context.record(dataclasses.replace(started, wake_at=deadline, input=preview))
    _handled(context, live=True, exclude=name)
    raise _suspend(context, deadline, f"event:{name}")


def _received(context: RunContext, step: Step) -> Any:
    """The payload an event wait got, or `WaitTimeout` if it timed out (recorded so)."""
    if step.input == _TIMED_OUT and step.status is StepStatus.COMPLETED:
        began, deadline = step.started_at, step.wake_at
        when = "its timeout" if began is None or deadline is None else f"{deadline - began:g} s"
        raise WaitTimeout(
            f"Run {context.run_id!r}: no event {step.name!r} arrived within {when}.",
            run_id=context.run_id,
            event=step.name,
        )
    return context.replayed(step)


def consume(
    context: RunContext, step: Step, name: str | None, *, exclude: str | None = None
) -> Step | None:
    """Take the oldest event *name* (None: of any name but *exclude*) from the inbox
    and record *step* with it, in one transaction; the step stored, or None."""
    faults.hit("before_checkpoint", f"{step.kind.value}:{name or '*'}")
    properties = context.properties
    if properties is not None:
        step = properties.stamp(step)  # the wait ends the code before it
    try:
        taken = context.host.backend.consume_event(step, context.epoch, name, exclude=exclude)
    except (LeaseLost, StorageError) as error:
        raise context.poison(error) from None
    if taken is None:
        return None
    stored, requests = taken
    if requests:
        context.interrupts.learn(requests)
    if properties is not None:
        properties.stored(step)
    context.replay.remember(stored)
    context.progressed()
    return stored


def join(context: RunContext, run_id: str, timeout: float | None) -> Any:
    """Wait for run *run_id* to finish; record its outcome here and return (or raise) it."""
    position = context.allocate()
    digest = call_hash(StepKind.JOIN, JOIN, {"run": run_id})
    recorded = context.decide(position, StepKind.JOIN, JOIN, digest)
    if recorded is None or not recorded.status.finished:
        recorded = _joining(context, position, run_id, digest, recorded, timeout=timeout)
    _handled(context, live=False)
    return context.replayed(recorded)


def _joining(
    context: RunContext,
    position: int,
    run_id: str,
    digest: str,
    recorded: Step | None,
    *,
    timeout: float | None,
) -> Step:
    """The wait for run *run_id* at *position*, not finished: its outcome or timeout
    recorded now; else suspend the run (after handling events)."""
    host = context.host
    started = recorded or _waiting(context, position, StepKind.JOIN, JOIN, digest)
    started = dataclasses.replace(started, input=host.preview({"run": run_id}))
    try:
        run = host.follow(host.reread(run_id))  # a chain's outcome is its last run's
    except StorageError as error:
        raise context.poison(error) from None
    if run.status.finished:
        completed = run.status is RunStatus.COMPLETED
        outcome = _ended(
            context,
            started,
            status=StepStatus.COMPLETED if completed else StepStatus.FAILED,
            output=run.output if completed else None,
            error=None if completed else host.error_of(run),
        )
        return context.record(outcome)
    now = host.clock.now()
    deadline = started.wake_at if recorded else None if timeout is None else now + timeout
    if deadline is not None and deadline <= now:
        late = WaitTimeout(
            f"Run {run_id!r} did not finish within {timeout} s (it is {run.status}).",
            run_id=run_id,
        )
        failed = _ended(context, started, status=StepStatus.FAILED, error=host.dump_error(late))
        return context.record(failed)
    if recorded is None:
        context.record(dataclasses.replace(started, wake_at=deadline))
    _handled(context, live=True)
    wake = deadline
    if run.parent_id != context.run_id:
        wake = _look_again(now, started.started_at or now, deadline)
    raise _suspend(context, wake, f"run:{run.id}")


def _look_again(now: float, since: float, deadline: float | None) -> float:
    """When a run waiting for a run that is not its child looks again. A finishing run
    wakes its parent in the statement that finishes it; nobody else waiting for it
    hears of it, so such a wait is a timer too: a tenth of the time waited so far,
    from 1 s to 60 s (never past *deadline*)."""
    again = now + min(max((now - since) / 10, LOOK_AGAIN[0]), LOOK_AGAIN[1])
    return again if deadline is None else min(again, deadline)


#: The shortest and longest interval at which a wait for another run's outcome (not a
#: child's) looks again (`_look_again`).
LOOK_AGAIN = (1.0, 60.0)


def send(context: RunContext, run_id: str, name: str, payload: Any) -> None:
    """Send event *name* to run *run_id* from this workflow, once, however often replayed."""
    position = context.allocate()
    digest = call_hash(StepKind.SEND, name, {"run": run_id})
    recorded = context.decide(position, StepKind.SEND, name, digest)
    if recorded is not None and recorded.status.finished:
        context.replayed(recorded)
        return
    host = context.host
    started = _waiting(context, position, StepKind.SEND, name, digest)
    faults.hit("before_checkpoint", f"send:{name}")
    try:
        payload = typed_events.checked(host, run_id, name, payload)
        data = host.dump(payload, f"the payload of event {name!r} sent at position {position}")
        event = host.backend.send_event(
            run_id, name, data, key=f"{context.run_id}:{position}", sender=context.run_id
        )
    except (RunNotFound, RunFinished, EventInvalid) as error:
        failed = _ended(context, started, status=StepStatus.FAILED, error=host.dump_error(error))
        context.replayed(context.record(failed))
        return
    except StorageError as error:
        raise context.poison(error) from None
    preview = host.preview({"run": run_id, "event": event.id})
    context.replayed(context.record(_ended(context, started, input=preview, output=_NULL)))
