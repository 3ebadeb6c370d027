"""Typed events at run time: which schema an event sent to a run must match, and the
payload a send stores once it does.

The schema is known three ways, tried in this order:

1. The code registered in this process says it when the run's workflow declares the
   event (``@workflow(events={name: schema})``): the payload is validated into the
   schema's instance, and the instance's JSON form is stored.
2. A sender without that code (the REST API, ``durable send``, `durable.Client` in
   another service) finds the JSON Schema the run's wait stored with its WAITING step
   (``{"timeout": ..., "schema": {...}}``): what the waiting code expects.
3. Else the JSON Schemas the run was created with (`Run.event_schemas`: its
   workflow's declared ``events=``, stored by the process that created it), so a run
   that has not reached its wait yet is checked too.

Cases 2 and 3 check the payload with jsonschema and store its JSON form. Only an event
neither declared nor waited for with a schema (or sent to a run created by a process
without its code: started by name) is stored unchecked; a wait with a schema still
validates it, and raises `EventInvalid` into the workflow if it does not fit.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

from durable.core import event_schemas, serde
from durable.core.records import Run, StepKind, StepStatus, awaited
from durable.errors import PayloadError, RunNotFound

from . import registry
from .host import Host

#: The key of the JSON Schema in an event wait's recorded input.
SCHEMA = "schema"


def declared(workflow: str, event: str) -> type | None:
    """The schema class the code registered here declares for *event* of *workflow*."""
    target = registry.find(workflow)
    return None if target is None else target.events.get(event)


def waiting_schema(host: Host, run: Run, event: str) -> dict[str, Any] | None:
    """The JSON Schema *run*'s wait for *event* stored, if that is what it waits for."""
    named, _ = awaited(run.waiting_on)
    if named != f"event:{event}":
        return None
    return stored_schema(host, run, event)


def stored_schema(host: Host, run: Run, event: str) -> dict[str, Any] | None:
    """The JSON Schema stored by *run*'s unfinished wait for *event* (the latest), if
    it has one and the wait recorded a schema."""
    for step in reversed(host.backend.load_history(run.id)):
        if step.kind is not StepKind.EVENT or step.status is not StepStatus.WAITING:
            continue
        if step.name != event or step.input is None:
            return None
        try:
            recorded = serde.loads(step.input, allow_pickle=False, run_id=run.id)
        except PayloadError:
            return None
        schema = recorded.get(SCHEMA) if isinstance(recorded, dict) else None
        return schema if isinstance(schema, dict) else None
    return None


def created_schema(run: Run, event: str) -> dict[str, Any] | None:
    """The JSON Schema of *event* among those *run* was created with, if its workflow
    declared the event then (`Run.event_schemas`)."""
    if run.event_schemas is None:
        return None
    schema = _parsed(run.event_schemas).get(event)
    return schema if isinstance(schema, dict) else None


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> dict[str, Any]:
    """`Run.event_schemas` read once per text (every run of a declaration shares it);
    text that is not a JSON object (never written so) declares nothing."""
    try:
        loaded = json.loads(text)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def plain(payload: Any) -> Any:
    """A Pydantic model or dataclass instance as its JSON form; anything else as is."""
    if isinstance(payload, type):
        return payload
    if dataclasses.is_dataclass(payload) or hasattr(type(payload), "model_dump"):
        return event_schemas.to_json(type(payload), payload)
    return payload


def checked(host: Host, run_id: str, event: str, payload: Any) -> Any:
    """What to store as the payload of *event* sent to run *run_id* (the module's
    docstring says which schema applies): the validated instance's JSON form where the
    code is here, the payload's JSON form where it is checked against a stored JSON
    Schema, *payload* itself for an untyped event (or for a run that is unknown or
    finished: the send says so).

    Raises:
        EventInvalid: the payload does not match the schema; nothing was stored.
    """
    run = host.backend.get_run(run_id)
    if run is None:
        return payload  # the send says RunNotFound
    try:
        run = host.follow(run)
    except RunNotFound:
        return payload
    if run.status.finished:
        return payload  # the send says RunFinished
    schema = declared(run.workflow, event)
    if schema is not None:
        instance = event_schemas.validate(schema, payload, run_id=run_id, event=event)
        return event_schemas.to_json(schema, instance)
    stored = waiting_schema(host, run, event)
    if stored is None:
        stored = created_schema(run, event)
    if stored is None:
        return payload
    data = plain(payload)
    event_schemas.validate_json(stored, data, run_id=run_id, event=event)
    return data
