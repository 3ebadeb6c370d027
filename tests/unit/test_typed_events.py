"""Typed events through Python: a schema (Pydantic model or dataclass) declared on the
workflow or given to the wait; payloads validated at `send`, refused with the field
errors and nothing stored; the workflow gets the schema's instance, on replay too."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, Field

from durable import EventInvalid, RunStatus, send, wait, workflow
from durable.core import event_schemas
from durable.errors import ConfigurationError, NondeterminismError
from durable.runtime import typed_events
from durable.runtime.dry_replay import dry_replay
from durable.testing import DurableEnv


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Approval(BaseModel):
    approved: bool
    amount: float = Field(ge=0, description="How much is approved")
    level: Level = Level.LOW
    due: dt.date | None = None


@dataclasses.dataclass
class Note:
    text: str
    stars: int


got: list[Any] = []


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    got.clear()
    with DurableEnv() as environment:
        yield environment


@workflow(events={"approval": Approval})
def declared_flow() -> str:
    approval = wait("approval")
    got.append(approval)
    return f"{approval.approved}:{approval.amount}"


@workflow
def typed_at_wait(first: bool) -> str:
    if first:
        wait(dt.timedelta(hours=1))  # not at its event wait for an hour
    note = wait("note", schema=Note)
    got.append(note)
    return f"{note.text}*{note.stars}"


@workflow
def catches_bad_payload() -> str:
    try:
        wait("note", schema=Note)
    except EventInvalid as error:
        return f"bad: {[e['loc'] for e in error.errors]}"
    return "good"


def test_a_declared_event_is_validated_before_the_run_reaches_its_wait(env: DurableEnv) -> None:
    handle = env.dispatch(declared_flow)
    with pytest.raises(EventInvalid) as refused:
        send(handle, "approval", {"approved": "perhaps", "amount": -1})
    assert sorted(tuple(e["loc"]) for e in refused.value.errors) == [("amount",), ("approved",)]
    assert "approved: Input should be a valid boolean" in str(refused.value)
    assert refused.value.run_id == handle.id and refused.value.event == "approval"
    assert env.backend.events(handle.id) == [], "nothing stored"
    env.send(handle, "approval", {"approved": True, "amount": "12.5", "level": "high"})
    assert handle.result() == "True:12.5"
    assert got == [Approval(approved=True, amount=12.5, level=Level.HIGH)]
    [event] = env.backend.events(handle.id)
    stored = env.engine.load(event.payload, handle.id, None)
    assert stored == {"approved": True, "amount": 12.5, "level": "high", "due": None}


def test_an_instance_is_sent_as_its_json_form_and_the_sender_is_recorded(
    env: DurableEnv,
) -> None:
    handle = env.dispatch(declared_flow)
    approval = Approval(approved=False, amount=3, due=dt.date(2026, 1, 2))
    send(handle, "approval", approval, sender="ann")
    env.drain()
    assert handle.result() == "False:3.0"
    [event] = env.backend.events(handle.id)
    assert event.sender == "ann"
    assert env.engine.load(event.payload, handle.id, None)["due"] == "2026-01-02"
    assert got[0].due == dt.date(2026, 1, 2), "the workflow gets a date, not the string"


def test_the_instance_is_built_again_on_replay(env: DurableEnv) -> None:
    handle = env.dispatch(declared_flow)
    env.send(handle, "approval", {"approved": True, "amount": 1})
    replayed = typed_events.declared(declared_flow.name, "approval")
    assert replayed is Approval
    got.clear()
    dry_replay(env.engine, declared_flow, env.run(handle.id), env.history(handle.id))
    assert got == [Approval(approved=True, amount=1)]


def test_a_wait_schema_is_stored_and_checked_by_senders_without_the_declaration(
    env: DurableEnv,
) -> None:
    handle = env.dispatch(typed_at_wait, False)
    assert env.run(handle.id).waiting_on == "event:note"
    stored = typed_events.waiting_schema(env.engine, env.run(handle.id), "note")
    assert stored == event_schemas.json_schema(Note)
    with pytest.raises(EventInvalid) as refused:
        send(handle, "note", {"text": "ok"})
    assert refused.value.errors == [
        {"loc": [], "msg": "'stars' is a required property", "type": "required"}
    ]
    with pytest.raises(EventInvalid):
        send(handle, "note", {"text": "ok", "stars": "many"})
    assert env.backend.events(handle.id) == []
    env.send(handle, "note", Note(text="fine", stars=4))
    assert handle.result() == "fine*4"
    assert got == [Note(text="fine", stars=4)]


def test_a_payload_no_sender_could_check_fails_at_the_wait_where_code_can_catch_it(
    env: DurableEnv,
) -> None:
    handle = env.dispatch(catches_bad_payload)
    assert env.run(handle.id).waiting_on == "event:note"
    # a payload stored behind send's back (an old client, a direct write)
    env.backend.send_event(handle.id, "note", env.engine.dump({"text": 1}, "test"))
    env.drain()
    assert handle.result() == "bad: [['text'], ['stars']]"


def test_a_send_before_an_undeclared_typed_wait_is_checked_at_the_wait(
    env: DurableEnv,
) -> None:
    handle = env.dispatch(typed_at_wait, True)
    send(handle, "note", {"text": "early", "stars": "3"})  # no schema known yet: stored
    env.advance(dt.timedelta(hours=1))
    assert handle.result() == "early*3"


def test_schemas_that_are_neither_models_nor_dataclasses_are_refused() -> None:
    with pytest.raises(TypeError, match=r"a Pydantic model .* or a dataclass, not dict"):
        workflow(events={"approval": dict})
    with pytest.raises(TypeError, match="not an instance of"):
        workflow(events={"approval": Approval(approved=True, amount=1)})
    with pytest.raises(TypeError, match="maps event names to schemas"):
        workflow(events=[Approval])  # type: ignore[arg-type]


@workflow
def odd_schema() -> None:
    wait("x", schema=int)


@workflow(events={"approval": Approval})
def two_schemas() -> None:
    wait("approval", schema=Note)


def test_a_bad_or_conflicting_wait_schema_fails_the_run_with_the_reason(
    env: DurableEnv,
) -> None:
    with pytest.raises(TypeError, match="a schema is a Pydantic model"):
        env.execute(odd_schema)
    with pytest.raises(TypeError, match=r"the workflow declares events=.*Approval"):
        env.execute(two_schemas)
    with pytest.raises(TypeError, match="schema= goes with wait"):
        wait(1.0, schema=Note)


@workflow
def relays(target: str, payload: Any) -> str:
    try:
        send(target, "approval", payload)
    except EventInvalid as error:
        return f"refused {error.errors[0]['loc']}"
    return "sent"


def test_a_workflow_sending_a_bad_typed_event_gets_the_error_recorded(env: DurableEnv) -> None:
    target = env.dispatch(declared_flow)
    assert env.execute(relays, target.id, {"approved": True}) == "refused ['amount']"
    assert env.backend.events(target.id) == []
    assert env.execute(relays, target.id, {"approved": True, "amount": 2}) == "sent"
    assert target.result() == "True:2.0"
    assert env.run(target.id).status is RunStatus.COMPLETED


def test_without_the_extra_a_schema_is_a_configuration_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pydantic", None)  # import pydantic fails
    with pytest.raises(ConfigurationError, match=r"durable\[pydantic\]"):
        workflow(events={"approval": Note})
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    with pytest.raises(ConfigurationError, match=r"needs jsonschema .*durable\[pydantic\]"):
        event_schemas.validate_json({"title": "Other", "type": "object"}, {}, run_id="r", event="e")


def test_an_untyped_event_keeps_any_payload_and_the_wait_returns_it(env: DurableEnv) -> None:
    @workflow(name="tests.untyped_echo")
    def echo() -> Any:
        return wait("anything")

    handle = env.dispatch(echo)
    env.send(handle, "anything", Note(text="kept", stars=1))
    assert handle.result() == Note(text="kept", stars=1), "no schema: the value as sent"


class ApprovalV2(BaseModel):
    approved: bool
    amount: float
    approver: str  # required: the payloads stored before it cannot build it


@workflow(events={"approval": Approval})
def approve_then_ship() -> str:
    approval = wait("approval")
    wait("shipped")
    return str(approval.amount)


def test_a_schema_change_that_cannot_read_a_received_payload_diverges(
    env: DurableEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instance is rebuilt at every replay: a new class that cannot read what was
    stored raises at the received wait, so the run would stop there (`durable check`
    says so before a deploy) instead of going on with a different value."""
    handle = env.dispatch(approve_then_ship)
    env.send(handle, "approval", {"approved": True, "amount": 4})
    run, history = env.run(handle.id), env.history(handle.id)
    assert run.waiting_on == "event:shipped"
    dry_replay(env.engine, approve_then_ship, run, history)  # today's code: fine
    monkeypatch.setattr(approve_then_ship, "events", {"approval": ApprovalV2})
    with pytest.raises(NondeterminismError):
        dry_replay(env.engine, approve_then_ship, run, history)
    env.send(handle, "shipped")  # resumed on the new code: blocked, nothing lost
    assert env.run(handle.id).status is RunStatus.BLOCKED
    assert len(env.history(handle.id)) == len(history)
