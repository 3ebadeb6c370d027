"""Actions through the REST API that change the database, on SQLite and PostgreSQL:
starting a run (and the starts and bodies refused), cancelling, retrying, sending an
event, and who is recorded as having done it; every answer checked against the OpenAPI
document."""

from __future__ import annotations

from typing import Any

import pytest

import durable
from durable import RunStatus, Worker, dispatch
from durable.web._http import MAX_BODY
from tests.web.api_world import (
    TOKEN,
    World,
    _ids_of,
    _status,
    _until,
    approval,
    breaker,
    doubler,
)
from tests.web.openapi_check import CheckedClient


def test_starting_a_run_queues_it_and_records_who(world: World) -> None:
    """POST /runs stores a queued run (201, Location) and a start action by the actor."""
    run_id = world.new_id("started")
    body = {
        "workflow": doubler.name,
        "args": [3],
        "id": run_id,
        "queue": "parked",
        "priority": 5,
        "actor": "alice",
        "attributes": {"customer": "c-42", "vip": True},
    }
    reply = world.api.post("/api/v1/runs", body)
    assert reply.status == 201 and reply.json()["id"] == run_id
    found = world.api.get("/api/v1/runs", "attr.customer=c-42&attr.vip=true").json()
    assert [run["id"] for run in found["items"]] == [run_id]
    assert found["items"][0]["attributes"] == {"customer": "c-42", "vip": True}
    assert reply.header("Location") == f"/api/v1/runs/{run_id}"
    stored = world.engine.backend.get_run(run_id)
    assert stored is not None and stored.status is RunStatus.QUEUED and stored.priority == 5
    [action] = world.api.get(f"/api/v1/runs/{run_id}").json()["actions"]
    assert (action["action"], action["actor"]) == ("start", "alice")
    again = world.api.post("/api/v1/runs", {**body, "args": [4]})
    assert again.status == 409


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"workflow": "no.such.flow"}, 404),
        ({"args": [1]}, 400),
        ({"workflow": doubler.name, "args": [1, 2, 3]}, 400),
        ({"workflow": doubler.name, "args": "1"}, 400),
        ({"workflow": doubler.name, "priority": True}, 400),
        ({"workflow": doubler.name, "kwargs": []}, 400),
        ({"workflow": doubler.name, "args": [1], "attributes": {"customer": None}}, 400),
        ({"workflow": doubler.name, "args": [1], "attributes": {"k": [1]}}, 400),
        ({"workflow": doubler.name, "args": [1], "attributes": {"": "x"}}, 400),
        ({"workflow": doubler.name, "args": [1], "attributes": ["k"]}, 400),
    ],
)
def test_bad_starts_are_refused(world: World, body: dict[str, Any], status: int) -> None:
    """Unknown workflows are 404; missing or mistyped fields and arguments that do not
    fit the workflow are 400; nothing is stored."""
    before = _ids_of(world.api.get("/api/v1/runs", "limit=500"))
    reply = world.api.post("/api/v1/runs", body)
    assert reply.status == status, reply.json()
    assert _ids_of(world.api.get("/api/v1/runs", "limit=500")) == before


@pytest.mark.parametrize("raw", [b"{", b"[1]", b"\xff"])
def test_malformed_bodies_are_400(world: World, raw: bytes) -> None:
    """A body that is not a JSON object is a 400 problem."""
    reply = world.api.request("POST", "/api/v1/runs", body=raw, content_type="application/json")
    assert reply.status == 400 and reply.content_type == "application/problem+json"


def test_oversized_bodies_are_413(world: World) -> None:
    """A body over 1 MiB is refused before it is read."""
    reply = world.api.request(
        "POST", "/api/v1/runs", body=b" " * (MAX_BODY + 1), content_type="application/json"
    )
    assert reply.status == 413


def test_cancelling_through_the_api(world: World) -> None:
    """POST cancel cancels a queued run in the database, records who; a finished run is
    a 409."""
    run_id = world.new_id("to-cancel")
    dispatch(doubler, 1, id=run_id, queue="parked")
    reply = world.api.post(f"/api/v1/runs/{run_id}/cancel", {"actor": "bob"})
    assert reply.status == 200 and reply.json()["status"] == "cancelled"
    assert _status(world.engine, run_id) is RunStatus.CANCELLED
    [action] = world.api.get(f"/api/v1/runs/{run_id}").json()["actions"]
    assert (action["action"], action["actor"]) == ("cancel", "bob")
    assert world.api.post(f"/api/v1/runs/{run_id}/cancel").status == 409


def test_retrying_through_the_api(world: World) -> None:
    """POST retry queues a failed run again with the failed position reopened; a run
    that did not fail is a 409."""
    run_id = world.new_id("to-retry")
    with pytest.raises(ValueError, match="again"):
        durable.execute(breaker, "again", id=run_id)
    reply = world.api.post(f"/api/v1/runs/{run_id}/retry")
    assert reply.status == 200
    assert reply.json()["reopened"] == [1] and reply.json()["run"]["status"] == "queued"
    assert _status(world.engine, run_id) is RunStatus.QUEUED
    [action] = world.api.get(f"/api/v1/runs/{run_id}").json()["actions"]
    assert (action["action"], action["actor"]) == ("retry", "api")
    assert world.api.post("/api/v1/runs/done/retry").status == 409


def test_sending_an_event_completes_a_waiting_run(world: World) -> None:
    """A run started through the API waits for an event; the event sent through the API
    reaches it and it completes with the data; both acts are recorded."""
    run_id = world.new_id("live")
    start = {"workflow": approval.name, "args": ["o-3"], "id": run_id, "queue": "live"}
    assert world.api.post("/api/v1/runs", start).status == 201
    worker = Worker(world.engine, queues=["live"], poll=0.05).start()
    try:
        _until(lambda: _status(world.engine, run_id) is RunStatus.WAITING, "the wait")
        event = {"name": "approved", "data": {"ok": 1}, "sender": "carol", "key": "k1"}
        reply = world.api.post(f"/api/v1/runs/{run_id}/events", event)
        assert reply.status == 201
        assert (reply.json()["event"]["sender"], reply.json()["event"]["key"]) == ("carol", "k1")
        _until(lambda: _status(world.engine, run_id) is RunStatus.COMPLETED, "completion")
    finally:
        worker.stop(grace=1)
    run = world.api.get(f"/api/v1/runs/{run_id}").json()
    assert run["output"] == {"order": "o-3", "answer": {"ok": 1}}
    assert [(a["action"], a["actor"]) for a in run["actions"]] == [
        ("start", "api"),
        ("send", "carol"),
    ]
    assert world.api.post(f"/api/v1/runs/{run_id}/events", {"name": "late"}).status == 409


def test_a_browser_session_acts_as_the_dashboard(world: World) -> None:
    """Actions from a cookie session are recorded as "dashboard" unless named."""
    browser = CheckedClient(world.app)
    browser.login(TOKEN)
    run_id = world.new_id("browser")
    dispatch(doubler, 1, id=run_id, queue="parked")
    assert browser.post(f"/api/v1/runs/{run_id}/events", {"name": "hello"}).status == 201
    assert browser.post(f"/api/v1/runs/{run_id}/cancel").status == 200
    actions = browser.get(f"/api/v1/runs/{run_id}").json()["actions"]
    assert [(a["action"], a["actor"]) for a in actions] == [
        ("send", "dashboard"),
        ("cancel", "dashboard"),
    ]
