"""Typed events over the REST API and ``durable send``, on SQLite and PostgreSQL:
``GET .../waiting`` gives the event and its JSON Schema; an invalid payload is a 400
(a non-zero exit) naming each field and stores nothing; a valid one resumes the run
with the schema's instance, and who sent it is recorded. Senders without the code are
checked against the waiting step's schema, or, before the run reaches its wait, the
declared schemas stored with the run."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import itertools
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel, Field

import durable
from durable import RunStatus, Worker, dispatch, wait, workflow
from durable.cli.main import main
from durable.core import event_schemas
from durable.runtime import registry
from durable.runtime.defaults import swap
from durable.web import make_app
from tests.conftest import PostgresSchemas, _need_postgres
from tests.web.openapi_check import CheckedClient

TOKEN = "typed-events-token"
_ids = itertools.count()


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Refund(BaseModel):
    approved: bool
    amount: float = Field(gt=0, description="In euros")
    colour: Colour
    when: dt.date


@dataclasses.dataclass
class Comment:
    text: str
    stars: int


@workflow(events={"refund": Refund})
def refund_flow(order: str) -> dict[str, Any]:
    refund = wait("refund")
    assert isinstance(refund, Refund)
    return {"order": order, "amount": refund.amount, "when": refund.when.isoformat()}


@workflow
def comment_flow() -> str:
    comment = wait("comment", schema=Comment)  # not declared: senders use the stored schema
    assert isinstance(comment, Comment)
    return f"{comment.text}/{comment.stars}"


@workflow
def untyped_flow() -> Any:
    return wait("anything")


@dataclass
class World:
    engine: durable.Engine
    api: CheckedClient
    url: str

    def until(self, condition: Callable[[], bool]) -> None:
        """Run a worker until *condition* holds (a condition, not a sleep)."""
        worker = Worker(self.engine, poll=0.02).start()
        try:
            deadline = dt.datetime.now() + dt.timedelta(seconds=15)
            while not condition():
                assert dt.datetime.now() < deadline, "timed out"
                self.engine.backend.watch(["timers"]).wait(0.02)
        finally:
            worker.stop(grace=1)

    def finished(self, run_id: str) -> bool:
        run = self.engine.backend.get_run(run_id)
        return run is not None and run.status.finished

    def waiting(self, run_id: str) -> bool:
        run = self.engine.backend.get_run(run_id)
        return run is not None and run.status is RunStatus.WAITING


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    schemas = PostgresSchemas(_need_postgres()) if request.param == "postgres" else None
    url = schemas.new_url() if schemas else f"sqlite:///{tmp_path_factory.mktemp('ev')}/d.db"
    engine = durable.Engine(url, lease=5.0)
    previous = swap(engine)
    try:
        yield World(engine, CheckedClient(make_app(engine, token=TOKEN), token=TOKEN), url)
    finally:
        swap(previous)
        engine.close()
        if schemas is not None:
            schemas.drop_all()


def _start(world: World, target: Any, *args: Any) -> str:
    run_id = f"{target.__name__}-{next(_ids)}"
    dispatch(target, *args, id=run_id)
    world.until(lambda: world.waiting(run_id))
    return run_id


def _queued(world: World, target: Any, *args: Any) -> str:
    """A run no worker has taken yet: it has not reached its wait."""
    run_id = f"{target.__name__}-{next(_ids)}"
    dispatch(target, *args, id=run_id)
    run = world.engine.backend.get_run(run_id)
    assert run is not None and run.status is RunStatus.QUEUED
    return run_id


def _durable_send(url: str, run_id: str, event: str, data: str) -> subprocess.CompletedProcess[str]:
    """``durable send`` in a fresh process, which imports none of these workflows."""
    return subprocess.run(
        [sys.executable, "-m", "durable", "send", run_id, event, "--data", data,
         "--user", "erin", "--db", url],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


#: A Refund with every field at fault, and what jsonschema says of each.
_BAD_REFUND = {"approved": "maybe", "amount": 0, "colour": "green"}
_BAD_REFUND_ERRORS = [
    ([], "'when' is a required property"),
    (["amount"], "0 is less than or equal to the minimum of 0"),
    (["approved"], "'maybe' is not of type 'boolean'"),
    (["colour"], "'green' is not one of ['red', 'blue']"),
]
_GOOD_REFUND = {"approved": True, "amount": 7.25, "colour": "blue", "when": "2026-05-04"}


def test_waiting_gives_the_event_and_its_json_schema(world: World) -> None:
    refund, comment, untyped = (
        _start(world, refund_flow, "o-1"),
        _start(world, comment_flow),
        _start(world, untyped_flow),
    )
    shown = world.api.get(f"/api/v1/runs/{refund}/waiting").json()
    assert shown["kind"] == "event" and shown["event"] == "refund"
    assert shown["schema"] == event_schemas.json_schema(Refund)
    assert shown["schema"]["properties"]["amount"]["description"] == "In euros"
    stored = world.api.get(f"/api/v1/runs/{comment}/waiting").json()
    assert stored["schema"] == event_schemas.json_schema(Comment), "from the wait's step"
    plain = world.api.get(f"/api/v1/runs/{untyped}/waiting").json()
    assert (plain["event"], plain["schema"]) == ("anything", None)
    assert world.api.get("/api/v1/runs/nope/waiting").status == 404


def test_an_invalid_payload_is_a_400_with_the_field_errors_and_stores_nothing(
    world: World,
) -> None:
    run_id = _start(world, refund_flow, "o-2")
    bad = {"approved": "maybe", "amount": 0, "colour": "green", "when": "soon"}
    reply = world.api.post(f"/api/v1/runs/{run_id}/events", {"name": "refund", "data": bad})
    assert reply.status == 400, reply.body
    problem = reply.json()
    assert sorted(e["loc"][0] for e in problem["errors"]) == [
        "amount",
        "approved",
        "colour",
        "when",
    ]
    assert "nothing was sent" in problem["detail"]
    assert world.api.get(f"/api/v1/runs/{run_id}").json()["events"] == []
    good = {"approved": True, "amount": 9.5, "colour": "red", "when": "2026-03-01"}
    sent = world.api.post(
        f"/api/v1/runs/{run_id}/events", {"name": "refund", "data": good, "sender": "bob"}
    )
    assert sent.status == 201, sent.body
    world.until(lambda: world.finished(run_id))
    detail = world.api.get(f"/api/v1/runs/{run_id}").json()
    assert detail["output"] == {"order": "o-2", "amount": 9.5, "when": "2026-03-01"}
    assert [(e["name"], e["sender"]) for e in detail["events"]] == [("refund", "bob")]


def test_the_stored_schema_checks_senders_without_the_declaration(world: World) -> None:
    run_id = _start(world, comment_flow)
    path = f"/api/v1/runs/{run_id}/events"
    reply = world.api.post(path, {"name": "comment", "data": {"text": 3, "stars": 2}})
    assert reply.status == 400
    assert reply.json()["errors"] == [
        {"loc": ["text"], "msg": "3 is not of type 'string'", "type": "type"}
    ]
    assert (
        world.api.post(path, {"name": "comment", "data": {"text": "ok", "stars": 2}}).status == 201
    )
    world.until(lambda: world.finished(run_id))
    assert world.api.get(f"/api/v1/runs/{run_id}").json()["output"] == "ok/2"


def test_durable_send_exits_non_zero_printing_the_errors(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = _start(world, refund_flow, "o-3")
    code = main(["send", run_id, "refund", "--data", '{"approved": true}', "--db", world.url])
    err = capsys.readouterr().err
    assert code == 2
    assert "amount: Field required" in err and "colour: Field required" in err
    assert world.engine.backend.events(run_id) == []
    good = '{"approved": true, "amount": 1, "colour": "blue", "when": "2026-01-01"}'
    args = ["send", run_id, "refund", "--data", good, "--user", "carol", "--db", world.url]
    assert main(args) == 0
    [event] = world.engine.backend.events(run_id)
    assert event.sender == "cli:carol"
    world.until(lambda: world.finished(run_id))
    assert durable.get(run_id).result(timeout=5)["amount"] == 1.0


class RefundV2(BaseModel):
    approved: bool
    amount: float
    reason: str


def test_durable_check_reports_a_wait_whose_schema_the_code_changed(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    refund, comment = _start(world, refund_flow, "o-4"), _start(world, comment_flow)
    check = ["check", __name__, "-o", "json", "--db", world.url]
    capsys.readouterr()
    assert main(check) == 0
    before = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["items"]}
    assert before[refund]["schema_changed"] is None and before[comment]["schema_changed"] is None
    monkeypatch.setattr(refund_flow, "events", {"refund": RefundV2})  # the code to deploy
    assert main(check) == 0, "it replays: a changed schema is reported, not a divergence"
    after = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["items"]}
    assert (
        "waits for event 'refund' with a schema this code changed (now RefundV2)"
        in (after[refund]["schema_changed"])
    )
    assert after[refund]["ok"] and after[comment]["schema_changed"] is None
    assert main(["check", __name__, "--db", world.url]) == 0
    table = capsys.readouterr().out
    assert "1 wait(s) for a typed event whose schema this code changed" in table


def test_a_client_without_the_code_is_checked_against_the_stored_schema(world: World) -> None:
    run_id = _start(world, comment_flow)
    client = durable.Client(world.url)
    try:
        with pytest.raises(durable.EventInvalid) as refused:
            client.send(run_id, "comment", {"text": "hi"}, sender="svc")
        assert refused.value.errors[0]["msg"] == "'stars' is a required property"
        assert world.engine.backend.events(run_id) == []
        client.send(run_id, "comment", {"text": "hi", "stars": 5}, sender="svc")
    finally:
        client.close()
    [event] = world.engine.backend.events(run_id)
    assert event.sender == "svc"
    world.until(lambda: world.finished(run_id))
    assert durable.get(run_id).result(timeout=5) == "hi/5"


def test_durable_send_in_a_process_without_the_code_checks_the_stored_schema(
    world: World,
) -> None:
    """A fresh `durable send` process imports none of these workflows: the schemas it
    checks are the ones the waits stored (the declared Refund's too)."""
    refund, comment = _start(world, refund_flow, "o-5"), _start(world, comment_flow)

    def send(run_id: str, event: str, data: str) -> subprocess.CompletedProcess[str]:
        return _durable_send(world.url, run_id, event, data)

    refused = send(refund, "refund", '{"approved": true, "amount": 0, "colour": "green"}')
    assert refused.returncode == 2, refused.stderr
    assert "amount: 0 is less than or equal to the minimum of 0" in refused.stderr
    assert "'when' is a required property" in refused.stderr
    assert "colour: 'green' is not one of ['red', 'blue']" in refused.stderr
    assert send(comment, "comment", '{"text": "x", "stars": 1.5}').returncode == 2
    assert world.engine.backend.events(refund) == world.engine.backend.events(comment) == []
    sent = send(comment, "comment", '{"text": "x", "stars": 1}')
    assert sent.returncode == 0, sent.stderr
    world.until(lambda: world.finished(comment))
    assert durable.get(comment).result(timeout=5) == "x/1"


def test_the_api_without_the_code_checks_a_run_not_at_its_wait_against_its_declared_schemas(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _queued(world, refund_flow, "o-6")
    monkeypatch.delitem(registry._by_name, refund_flow.name)  # the API: without the code
    path = f"/api/v1/runs/{run_id}/events"
    reply = world.api.post(path, {"name": "refund", "data": _BAD_REFUND})
    assert reply.status == 400, reply.body
    problem = reply.json()
    assert [(e["loc"], e["msg"]) for e in problem["errors"]] == _BAD_REFUND_ERRORS
    assert "does not match Refund; nothing was sent" in problem["detail"]
    assert world.engine.backend.events(run_id) == []
    sent = world.api.post(path, {"name": "refund", "data": _GOOD_REFUND, "sender": "dan"})
    assert sent.status == 201, sent.body
    monkeypatch.undo()  # the worker has the code
    world.until(lambda: world.finished(run_id))
    detail = world.api.get(f"/api/v1/runs/{run_id}").json()
    assert detail["output"] == {"order": "o-6", "amount": 7.25, "when": "2026-05-04"}
    assert [(e["name"], e["sender"]) for e in detail["events"]] == [("refund", "dan")]


def test_a_client_without_the_code_checks_a_run_not_at_its_wait_against_its_declared_schemas(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _queued(world, refund_flow, "o-7")
    monkeypatch.delitem(registry._by_name, refund_flow.name)  # the client: without the code
    client = durable.Client(world.url)
    try:
        with pytest.raises(durable.EventInvalid) as refused:
            client.send(run_id, "refund", _BAD_REFUND, sender="svc")
        assert [(e["loc"], e["msg"]) for e in refused.value.errors] == _BAD_REFUND_ERRORS
        assert world.engine.backend.events(run_id) == []
        client.send(run_id, "refund", _GOOD_REFUND, sender="svc")
    finally:
        client.close()
    monkeypatch.undo()
    world.until(lambda: world.finished(run_id))
    assert durable.get(run_id).result(timeout=5)["amount"] == 7.25


def test_durable_send_without_the_code_checks_a_run_not_at_its_wait_against_its_declared_schemas(
    world: World,
) -> None:
    run_id = _queued(world, refund_flow, "o-8")
    refused = _durable_send(world.url, run_id, "refund", json.dumps(_BAD_REFUND))
    assert refused.returncode == 2, refused.stderr
    for loc, msg in _BAD_REFUND_ERRORS:
        assert f"{'.'.join(loc) or '(the payload)'}: {msg}" in refused.stderr
    assert world.engine.backend.events(run_id) == []
    sent = _durable_send(world.url, run_id, "refund", json.dumps(_GOOD_REFUND))
    assert sent.returncode == 0, sent.stderr
    [event] = world.engine.backend.events(run_id)
    assert event.sender == "cli:erin"
    world.until(lambda: world.finished(run_id))
    assert durable.get(run_id).result(timeout=5) == {
        "order": "o-8",
        "amount": 7.25,
        "when": "2026-05-04",
    }
