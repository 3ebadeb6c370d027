"""What a run waits for, with the schema of a typed event: the form a front end builds
(``GET /api/v1/runs/{id}/waiting``); and, for ``durable check``, the waits whose
stored schema differs from the one today's code declares.

The schema shown is the one a send is validated against (`typed_events.checked`):
the schema class the code registered in this process declares for the event, else
the JSON Schema the run's wait stored, else the one the run was created with.
"""

from __future__ import annotations

from typing import Any

from durable.core import event_schemas
from durable.core.records import Run, awaited
from durable.runtime import typed_events
from durable.runtime.engine import Engine

from ._views import waiting


def awaited_event(run: Run) -> str | None:
    """The event name *run* waits for, if it waits for one."""
    named, _ = awaited(run.waiting_on)
    kind, _, name = (named or "").partition(":")
    return name if kind == "event" else None


def view(engine: Engine, run: Run) -> dict[str, Any]:
    """A Waiting: ``{"run_id", "status", "kind", "event", "schema", "until",
    "any_event"}``; ``event`` and ``schema`` None unless it waits for an event, and
    for a typed one."""
    shown = waiting(run) or {"kind": None, "until": None, "any_event": False}
    event = awaited_event(run)
    schema = None
    if event is not None:
        declared = typed_events.declared(run.workflow, event)
        if declared is not None:
            schema = event_schemas.json_schema(declared)
        else:
            schema = typed_events.stored_schema(engine, run, event)
        if schema is None:
            schema = typed_events.created_schema(run, event)
    return {
        "run_id": run.id,
        "status": run.status.value,
        "kind": shown["kind"],
        "event": event,
        "schema": schema,
        "until": shown["until"],
        "any_event": shown["any_event"],
    }


def schema_change(engine: Engine, run: Run) -> str | None:
    """Why *run*'s wait for a typed event stands on a schema today's code changed (its
    stored JSON Schema differs from the declared one), or None."""
    event = awaited_event(run)
    if event is None:
        return None
    declared = typed_events.declared(run.workflow, event)
    stored = typed_events.stored_schema(engine, run, event)
    if declared is None or stored is None or stored == event_schemas.json_schema(declared):
        return None
    return (
        f"waits for event {event!r} with a schema this code changed (now "
        f"{declared.__qualname__}): senders with this code validate against the new one, "
        "senders without it against the stored one; its payload must build the new one"
    )
