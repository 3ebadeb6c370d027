"""The public verbs of time and events: `wait` and `send`.

Inside a workflow both are durable calls (see `runtime/waits.py` for what they record);
outside one, `wait` simply blocks the calling thread and `send` stores an event.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any, TypeVar, overload

from durable.core import event_schemas
from durable.core.durations import seconds as _seconds
from durable.core.durations import within_horizon
from durable.core.text import check_text
from durable.errors import DurableError
from durable.runtime import typed_events, waits
from durable.runtime.activity import TaskScope
from durable.runtime.context import RunContext, current
from durable.runtime.defaults import get_engine

from .handles import Handle

R = TypeVar("R")
T = TypeVar("T")


@overload
def wait(handle: Handle[R], /, *, timeout: float | dt.timedelta | None = None) -> R: ...
@overload
def wait(duration: float | dt.timedelta, /) -> None: ...
@overload
def wait(*, until: dt.datetime) -> None: ...
@overload
def wait(event: str, /, *, timeout: float | dt.timedelta | None = None, schema: type[T]) -> T: ...
@overload
def wait(event: str, /, *, timeout: float | dt.timedelta | None = None) -> Any: ...
def wait(
    what: Handle[Any] | float | dt.timedelta | str | None = None,
    /,
    *,
    until: dt.datetime | None = None,
    timeout: float | dt.timedelta | None = None,
    schema: type | None = None,
) -> Any:
    """Wait for a run, for a while, until a moment, or for an event.

    * ``wait(handle, timeout=None)``: the run's result (or its exception raised).
    * ``wait(timedelta(hours=12))`` or ``wait(3600)``: a durable sleep.
    * ``wait(until=aware_datetime)``: sleep until that moment.
    * ``wait("reviewed", timeout=timedelta(days=3))``: the payload of the next event
      named ``"reviewed"`` sent to this run (see `send`), whatever it is (``None``
      included); `WaitTimeout` if *timeout* passes first. Events sent before the wait
      is reached wait in the run's inbox; each is consumed by one wait, oldest first.
    * ``wait("approval", schema=Approval)``: a typed event (``Approval`` a Pydantic
      model or a dataclass; ``durable[pydantic]``): the payload comes back as an
      ``Approval``, and `send` refuses a payload that does not match it. Declaring it
      on the workflow (``@workflow(events={"approval": Approval})``) does the same for
      ``wait("approval")`` and lets `send` check payloads before the run gets here.

    Inside a workflow each wait is recorded: its deadline the first time it runs, and
    how it ended, so replay takes the same branch. A wait that is not over suspends
    the run, which then holds no thread or worker slot until it is due (waits of at
    most `Engine.max_inline_wait` seconds just sleep). Outside a workflow, a sleep
    blocks the calling thread and ``wait(handle)`` blocks until the run finishes.

    Raises:
        WaitTimeout: waiting for a run that did not finish, or for an event that did
            not arrive, within *timeout* (recorded: replay raises it again).
        TypeError, ValueError: the arguments do not name one kind of wait; a *schema*
            that is neither a Pydantic model nor a dataclass, or that differs from the
            one the workflow declares for the event.
        EventInvalid: a typed event's stored payload does not build its schema (a
            payload sent by code that could not check it); the event is consumed.
        InvalidValue: the event name holds a NUL character or a lone surrogate (a
            ValueError; in a workflow, raised by this call: catch it, or the run fails).
        DurableError: an event wait outside a workflow (only runs have inboxes).
    """
    if isinstance(what, list | tuple | set | frozenset):
        raise TypeError(
            f"wait() takes one event name, not several ({sorted(map(str, what))!r}): "
            "waiting for the first of several events is not supported. Wait for one name "
            "and tell the cases apart by the payload, e.g. send(run, 'decision', "
            "{'kind': 'approved'}) with wait('decision', timeout=...)."
        )
    seconds = _seconds(timeout, "timeout")
    context = current.get()
    if schema is not None and not isinstance(what, str):
        raise TypeError("schema= goes with wait(event_name): it is the event's payload type.")
    if isinstance(what, Handle):
        _only(until=until)
        return what.result(seconds)
    if isinstance(what, str):
        _only(until=until)
        if not what:
            raise ValueError("An event name must not be empty.")
        check_text(what, "an event name")
        if not isinstance(context, RunContext):
            raise DurableError(
                f"wait({what!r}) waits for an event sent to a run, so it works inside a "
                "workflow only. From application code, wait for the run instead: "
                "wait(handle)."
            )
        try:
            payload = waits.receive(context, what, seconds, _schema(context, what, schema))
        except Exception:
            context.returned()
            raise
        context.returned()
        return payload
    if timeout is not None:
        raise TypeError("timeout= goes with wait(handle) or wait(event_name), not sleeps.")
    if (what is None) == (until is None):
        raise TypeError(
            "wait() takes one of: a Handle, a duration (timedelta or seconds), until=a "
            "datetime, or an event name."
        )
    now = context.host.clock.now() if isinstance(context, RunContext) else time.time()
    if until is not None:
        if until.tzinfo is None or until.utcoffset() is None:
            raise ValueError(
                f"wait(until={until!r}) needs a timezone-aware datetime: a naive one is "
                "ambiguous. Use durable.now() + timedelta(...), or datetime.now(UTC)."
            )
        deadline = within_horizon(until.timestamp(), now, "wait(until=...)")
    else:
        deadline = now + (_seconds(what, "duration") or 0.0)
    if isinstance(context, RunContext):
        waits.sleep_until(context, deadline)
        context.returned()
        return None
    if deadline > now:
        time.sleep(deadline - now)  # plain code (a task body, or the application)
    return None


def _schema(context: RunContext, event: str, schema: type | None) -> type | None:
    """The schema of *event* in this run: *schema*, or the one its workflow declares
    (the two must agree)."""
    declared = typed_events.declared(context.workflow, event)
    if schema is None:
        return declared
    schema = event_schemas.check(schema, f"wait({event!r}, schema=...)")
    if declared is not None and declared is not schema:
        raise TypeError(
            f"wait({event!r}, schema={schema.__qualname__}): the workflow declares "
            f"events={{{event!r}: {declared.__qualname__}}}. Use one schema for the event "
            "(or leave schema= out: the declared one applies)."
        )
    return schema


def _only(*, until: dt.datetime | None) -> None:
    if until is not None:
        raise TypeError("until= is for sleeps: wait(until=datetime) alone.")


def send(
    run: str | Handle[Any],
    event: str,
    payload: Any = None,
    *,
    key: str | None = None,
    sender: str | None = None,
) -> None:
    """Send event *event*, carrying *payload*, to a run: its next ``wait(event)`` gets it.

    The event is stored durably before this returns and waits in the run's inbox if
    the run has not reached its wait yet; events of one name are consumed in the order
    they were sent. Inside a workflow the send is recorded, so replay never sends it
    twice. From a task body it goes to the database of the engine running the task
    (a worker's, whatever the default engine is). From application code or a task
    body, pass a *key* (a webhook's delivery id, say) to make retried sends deliver
    once: a key the run has seen before is ignored. *sender* names who sent it (a
    user, a service): stored with the event, shown in the run's events.

    A typed event (``wait(event, schema=...)``, or declared with
    ``@workflow(events=...)``) is validated before anything is stored: the payload may
    be the schema's instance or a dict of its fields; the JSON form of the validated
    instance is stored. Without the workflow's code in this process, the payload is
    checked against the JSON Schema its waiting run stored.

    Raises:
        EventInvalid: the payload does not match the event's schema (its ``errors``
            name each field); nothing was sent.
        RunNotFound: no run has this id.
        RunFinished: the run has finished; it would never consume the event.
        SerializationError: the payload cannot be stored; nothing was sent.
        InvalidValue: the event name, run id or key holds a NUL character or a lone
            surrogate (a ValueError); nothing was sent.
    """
    run_id = run.id if isinstance(run, Handle) else run
    if not event:
        raise ValueError(f"An event name must be a non-empty string, got {event!r}.")
    check_text(event, "an event name")
    check_text(run_id, "a run id")
    if key is not None:
        check_text(key, "an event key")
    if sender is not None:
        check_text(sender, "a sender")
    context = current.get()
    if isinstance(context, RunContext):
        if key is not None or sender is not None:
            raise TypeError(
                "key= and sender= are for application code; inside a workflow, sends are "
                "keyed by their position and the sender is the run."
            )
        waits.send(context, run_id, event, payload)
        return
    if isinstance(run, Handle):
        host = run._host
    elif isinstance(context, TaskScope) and context.host is not None:
        host = context.host  # a task body: the database of the engine running it
    else:
        host = get_engine()
    payload = typed_events.checked(host, run_id, event, payload)
    data = host.dump(payload, f"the payload of event {event!r}")
    host.backend.send_event(run_id, event, data, key=key, sender=sender)
