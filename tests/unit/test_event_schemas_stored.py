"""Declared event schemas stored with each run (`Run.event_schemas`): every way a run is
created stores its workflow's, and a sender without the code checks a payload against
them before the run has reached its wait (refused with the field errors, nothing
stored); a valid payload reaches the wait as the schema's instance."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

import durable
from durable import EventInvalid, continue_as_new, send, wait, workflow
from durable.core import event_schemas
from durable.core.records import RunQuery
from durable.runtime import named, registry, typed_events
from durable.testing import DurableEnv


class Approval(BaseModel):
    approved: bool
    amount: float = Field(ge=0)


@dataclasses.dataclass
class Note:
    text: str


DECLARED = {"approval": Approval, "note": Note}


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as environment:
        yield environment


@pytest.fixture
def codeless(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Hide a workflow from this process's registry, as a sender without the code
    (the REST API of a dashboard, `durable.Client` in another service) sees it."""

    def hide(target: Any) -> None:
        monkeypatch.delitem(registry._by_name, target.name)

    hide.undo = monkeypatch.undo  # type: ignore[attr-defined]
    return hide


@workflow(events=DECLARED)
def later_flow() -> str:
    wait(dt.timedelta(hours=1))  # not at its event wait for an hour
    approval = wait("approval")
    assert isinstance(approval, Approval)
    return f"{approval.approved}:{approval.amount}"


@workflow(events=DECLARED)
def chained(times: int) -> str:
    if times:
        continue_as_new(times - 1)
    return "done"


@workflow(events={"note": Note})
def child_flow() -> str:
    return "child"


@workflow
def parent_flow() -> str:
    return str(child_flow())


@workflow
def undeclared() -> str:
    return "plain"


def test_a_run_stores_the_json_schemas_its_workflow_declares(env: DurableEnv) -> None:
    handle = env.dispatch(later_flow)
    stored = env.run(handle.id).event_schemas
    assert stored is not None
    assert json.loads(stored) == {
        "approval": event_schemas.json_schema(Approval),
        "note": event_schemas.json_schema(Note),
    }
    assert env.run(env.dispatch(undeclared).id).event_schemas is None
    assert stored == event_schemas.declared_json(later_flow.events)
    assert event_schemas.declared_json(later_flow.events) is event_schemas.declared_json(
        dict(DECLARED)
    ), "made once per declaration, not per run"


def test_every_way_to_create_a_run_stores_the_schemas(env: DurableEnv) -> None:
    expected = event_schemas.declared_json(DECLARED)
    first = env.dispatch(chained, 1)
    assert first.result() == "done"
    successor = env.run(f"{first.id}~1")
    assert successor.event_schemas == expected, "continue-as-new: the code's"
    fork = first.fork(0)
    assert env.run(fork.id).event_schemas == expected, "a fork: today's code's"
    parent = env.dispatch(parent_flow)
    child = env.run(f"{parent.id}/0")
    assert child.parent_id == parent.id and child.event_schemas == event_schemas.declared_json(
        {"note": Note}
    ), "a child"
    by_name, _ = named.start(env.engine, later_flow.name)
    assert by_name.event_schemas == expected, "started by name where the code is"
    debounced = env.dispatch(later_flow, key="k", debounce=dt.timedelta(seconds=30))
    assert env.run(debounced.id).event_schemas == expected, "a debounced run"
    durable.schedule(later_flow, id="every", every=dt.timedelta(minutes=15))
    env.advance(dt.timedelta(minutes=15))
    everything = env.backend.list_runs(RunQuery(workflow=later_flow.name), limit=100)
    [tick] = [run for run in everything if run.id.startswith("every@")]
    assert tick.event_schemas == expected, "a schedule's tick (create_runs)"


def test_a_sender_without_the_code_is_checked_before_the_run_reaches_its_wait(
    env: DurableEnv, codeless: Any
) -> None:
    handle = env.dispatch(later_flow)
    assert env.run(handle.id).waiting_on is None, "asleep: not at its event wait yet"
    codeless(later_flow)
    assert typed_events.declared(later_flow.name, "approval") is None
    with pytest.raises(EventInvalid) as refused:
        send(handle, "approval", {"approved": "perhaps", "amount": -1})
    assert sorted(e["loc"] for e in refused.value.errors) == [["amount"], ["approved"]]
    assert "does not match Approval; nothing was sent" in str(refused.value)
    assert env.backend.events(handle.id) == [], "nothing stored"
    with pytest.raises(EventInvalid, match="'text' is a required property"):
        send(handle, "note", {})
    send(handle, "approval", Approval(approved=True, amount=2.5))  # its JSON form is checked
    codeless.undo()
    env.advance(dt.timedelta(hours=1))
    assert handle.result() == "True:2.5"


def test_a_run_without_stored_schemas_is_not_checked_by_a_codeless_sender(
    env: DurableEnv, codeless: Any
) -> None:
    handle = env.dispatch(later_flow)
    run = env.run(handle.id)
    for text in (None, "not json", "[1]", '{"approval": 3}'):
        assert (
            typed_events.created_schema(dataclasses.replace(run, event_schemas=text), "x") is None
        )
        assert (
            typed_events.created_schema(dataclasses.replace(run, event_schemas=text), "approval")
            is None
        )
    codeless(later_flow)
    send(handle, "other", {"anything": 1})  # not declared: stored as sent
    assert [event.name for event in env.backend.events(handle.id)] == ["other"]


class Opaque:
    """No JSON Schema describes it."""


class WithOpaque(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    thing: Opaque | None = None


def test_a_declared_schema_without_a_json_schema_is_refused_where_it_is_declared() -> None:
    with pytest.raises(TypeError) as refused:
        workflow(events={"odd": WithOpaque})
    assert str(refused.value).startswith(
        "@workflow(events=...): events['odd'] (WithOpaque) has no JSON Schema, which each "
        "run stores for senders without the code: Cannot generate a JsonSchema for "
    )
    assert "Give its fields JSON types" in str(refused.value)
