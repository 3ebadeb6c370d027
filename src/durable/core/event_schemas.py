"""Typed events: the schema classes an event's payload is checked against.

A schema is a Pydantic model or a dataclass (``wait("approval", schema=Approval)``,
``@workflow(events={"approval": Approval})``). Both go through one
`pydantic.TypeAdapter`: it validates a payload into an instance, gives the JSON form
that is stored (what the REST API and the dashboard show), and the JSON Schema that
is stored with the wait, so a sender without the workflow's code (the REST API,
``durable send``, `durable.Client`) validates against it with `jsonschema`.

Pydantic and jsonschema are the ``durable[pydantic]`` extra, imported only when a
schema is used: an untyped event never needs them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable, Mapping
from typing import Any

from durable.errors import ConfigurationError, EventInvalid

from .text import check_text

#: What a schema may be, as errors say it.
ACCEPTED = "a Pydantic model (a subclass of pydantic.BaseModel) or a dataclass"
_EXTRA = "pip install 'durable[pydantic]'"


def _pydantic() -> Any:
    try:
        import pydantic
    except ImportError:
        raise ConfigurationError(
            f"Typed events need Pydantic ({_EXTRA}): it validates payloads against "
            "the schema and gives its JSON Schema."
        ) from None
    return pydantic


def check(schema: Any, where: str) -> type:
    """*schema* itself if it is a Pydantic model class or a dataclass; else TypeError
    (ConfigurationError if Pydantic is not installed), *where* naming the option."""
    pydantic = _pydantic()
    if isinstance(schema, type) and (
        issubclass(schema, pydantic.BaseModel) or dataclasses.is_dataclass(schema)
    ):
        return schema
    got = schema.__qualname__ if isinstance(schema, type) else f"an instance of {type(schema)}"
    raise TypeError(
        f"{where}: a schema is {ACCEPTED}, not {got} ({schema!r}). "
        "Declare the payload's fields on a class: class Approval(BaseModel): approved: "
        "bool, or @dataclass class Approval: approved: bool."
    )


def check_events(events: Mapping[str, Any] | None, where: str) -> dict[str, type]:
    """A workflow's declared typed events (``events={name: schema}``), checked: each
    a schema class with a JSON Schema (every run stores them, `declared_json`)."""
    if events is None:
        return {}
    if not isinstance(events, Mapping):
        raise TypeError(f"{where}: events= maps event names to schemas, not {events!r}.")
    checked = {}
    for name, schema in events.items():
        named: object = name  # the caller's mapping may hold any key
        if not isinstance(named, str) or not named:
            raise TypeError(f"{where}: an event name is a non-empty string, not {name!r}.")
        check_text(named, "an event name")
        checked[named] = check(schema, f"{where}: events[{named!r}]")
        try:
            json_schema(checked[named])
        except _pydantic().PydanticUserError as error:
            raise TypeError(
                f"{where}: events[{named!r}] ({schema.__qualname__}) has no JSON Schema, "
                f"which each run stores for senders without the code: {error.message.rstrip('.')}. "
                "Give its fields JSON types (str, int, float, bool, dates, lists, nested "
                "models), not arbitrary classes."
            ) from None
    return checked


@functools.lru_cache(maxsize=256)
def _adapter(schema: type) -> Any:
    return _pydantic().TypeAdapter(schema)


def json_schema(schema: type) -> dict[str, Any]:
    """The JSON Schema of *schema* (what forms are built from, stored with a wait)."""
    result: dict[str, Any] = _adapter(schema).json_schema()
    return result


def declared_json(events: Mapping[str, type]) -> str | None:
    """The JSON Schemas of a workflow's declared *events*, as each run it creates
    stores them (`Run.event_schemas`): JSON text ``{event: JSON Schema}``, keys sorted;
    None when it declares none. Made once per declaration (a declaration's schemas are
    classes: a tuple of them keys the cache), not once per run."""
    return _declared_json(tuple(events.items())) if events else None


@functools.lru_cache(maxsize=256)
def _declared_json(events: tuple[tuple[str, type], ...]) -> str:
    return json.dumps({name: json_schema(schema) for name, schema in events}, sort_keys=True)


def validate(schema: type, payload: Any, *, run_id: str, event: str) -> Any:
    """*payload* (a dict, or an instance already) as an instance of *schema*.

    Raises:
        EventInvalid: the payload does not fit; every field at fault is in ``errors``.
    """
    adapter = _adapter(schema)
    try:
        return adapter.validate_python(payload)
    except _pydantic().ValidationError as error:
        found = [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in error.errors()
        ]
        raise invalid(found, run_id=run_id, event=event, schema=schema.__qualname__) from None


def to_json(schema: type, instance: Any) -> Any:
    """The JSON form of a validated *instance*: what is stored and shown."""
    return _adapter(schema).dump_python(instance, mode="json")


def validate_json(stored: Mapping[str, Any], payload: Any, *, run_id: str, event: str) -> None:
    """Check *payload* against a stored JSON Schema (a sender without the code).

    Raises:
        EventInvalid: the payload does not fit.
        ConfigurationError: jsonschema is not installed.
    """
    try:
        validator = _validator(json.dumps(stored, sort_keys=True))
    except ImportError:
        raise ConfigurationError(
            f"Run {run_id!r} waits for the typed event {event!r}: checking its payload "
            f"without the workflow's code needs jsonschema ({_EXTRA})."
        ) from None
    found = [
        {"loc": list(e.absolute_path), "msg": e.message, "type": str(e.validator)}
        for e in sorted(validator.iter_errors(payload), key=lambda e: list(e.absolute_path))
    ]
    if found:
        title = stored.get("title")
        named = title if isinstance(title, str) else "its schema"
        raise invalid(found, run_id=run_id, event=event, schema=named)


@functools.lru_cache(maxsize=256)
def _validator(text: str) -> Any:
    """A validator of the JSON Schema *text*, made once (making one costs more than
    most validations)."""
    import jsonschema

    return jsonschema.Draft202012Validator(
        json.loads(text), format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def invalid(
    errors: Iterable[Mapping[str, Any]], *, run_id: str, event: str, schema: str
) -> EventInvalid:
    """The `EventInvalid` listing *errors*, one line each (``loc: msg``)."""
    found = [dict(e) for e in errors]
    lines = [f"  {'.'.join(map(str, e['loc'])) or '(the payload)'}: {e['msg']}" for e in found]
    return EventInvalid(
        f"The payload of event {event!r} for run {run_id!r} does not match {schema}; "
        "nothing was sent:\n" + "\n".join(lines),
        run_id=run_id,
        event=event,
        errors=found,
    )
