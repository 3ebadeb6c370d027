"""The REST API against real runs on SQLite and PostgreSQL: every endpoint, every
answer checked against the OpenAPI document, and actions that change the database."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import durable
from durable import RunStatus, Worker, dispatch, send, task, wait, workflow
from durable.runtime.defaults import swap
from durable.web import WebApp, make_app
from durable.web._http import MAX_BODY
from durable.web._routes import route
from tests.conftest import PostgresSchemas, _need_postgres
from tests.web.client import Client
from tests.web.openapi_check import CheckedClient, document

TOKEN = "api-test-token"
_ids = itertools.count()


@task
def double(x: int) -> int:
    return x * 2


@task
def explode(message: str) -> None:
    raise ValueError(message)


@workflow
def doubler(x: int) -> int:
    return double(x) + 1


@workflow
def breaker(message: str) -> int:
    double(1)
    explode(message)
    return 0


@workflow
def approval(order: str) -> dict[str, Any]:
    double(2)
    answer = wait("approved", timeout=600)
    double(3)
    return {"order": order, "answer": answer}


@workflow
def family(x: int) -> int:
    return doubler(x) + 1


def _until(condition: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _status(engine: durable.Engine, run_id: str) -> RunStatus | None:
    run = engine.backend.get_run(run_id)
    return None if run is None else run.status


@dataclass
class World:
    """A database holding runs in every state, and the app serving it."""

    engine: durable.Engine
    app: WebApp
    api: CheckedClient

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(_ids)}"


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """Completed, failed, waiting (on an event), cancelled and parent/child runs."""
    schemas = PostgresSchemas(_need_postgres()) if request.param == "postgres" else None
    url = schemas.new_url() if schemas else f"sqlite:///{tmp_path_factory.mktemp('web')}/d.db"
    engine = durable.Engine(url, lease=5.0)
    previous = swap(engine)
    try:
        durable.execute(doubler, 20, id="done")
        with pytest.raises(ValueError, match="boom"):
            durable.execute(breaker, "boom", id="broken")
        durable.execute(family, 1, id="family")
        dispatch(approval, "o-1", id="approved")
        send("approved", "approved", {"by": "ann"})
        dispatch(approval, "o-2", id="waiting")
        dispatch(doubler, 5, id="parked", queue="parked")
        durable.cancel("parked")
        worker = Worker(engine, poll=0.05).start()
        _until(
            lambda: (
                _status(engine, "approved") is RunStatus.COMPLETED
                and _status(engine, "waiting") is RunStatus.WAITING
            ),
            "the approval runs",
        )
        worker.stop(grace=1)
        app = make_app(engine, token=TOKEN)
        yield World(engine, app, CheckedClient(app, token=TOKEN))
    finally:
        swap(previous)
        engine.close()
        if schemas is not None:
            schemas.drop_all()


def _ids_of(reply: Any) -> set[str]:
    assert reply.status == 200, reply.body
    return {item["id"] for item in reply.json()["items"]}


def test_the_document_covers_exactly_the_routes(world: World) -> None:
    """Every route the app serves is in openapi.json, and nothing else is."""
    served = {(r.method, r.pattern.pattern) for r in world.app._routes}
    any_handler = world.app._routes[0].handler
    documented = {
        (method.upper(), route(method.upper(), f"/api/v1{path}", any_handler).pattern.pattern)
        for path, item in document()["paths"].items()
        for method in item
    }
    assert served == documented
    assert world.api.get("/api/v1/openapi.json").json() == document()


def test_health_and_session(world: World) -> None:
    """Health answers ok; a bearer session needs no CSRF token."""
    assert world.api.get("/api/v1/health").json() == {"ok": True}
    assert world.api.get("/api/v1/session").json() == {"csrf": "", "read_only": False}


def test_listing_filters_runs(world: World) -> None:
    """Workflow, status (repeated or comma list), search, parent, since/until filters."""
    api = world.api
    everything = _ids_of(api.get("/api/v1/runs", "limit=500"))
    assert {"done", "broken", "family", "approved", "waiting", "parked"} <= everything
    finished = _ids_of(api.get("/api/v1/runs", "status=failed,cancelled&limit=500"))
    assert finished == _ids_of(api.get("/api/v1/runs", "status=failed&status=cancelled"))
    assert {"broken", "parked"} <= finished and "done" not in finished
    assert _ids_of(api.get("/api/v1/runs", f"workflow={breaker.name}")) >= {"broken"}
    assert _ids_of(api.get("/api/v1/runs", "search=rok")) == {"broken"}
    children = _ids_of(api.get("/api/v1/runs", "parent=family"))
    assert len(children) == 1 and children == set(api.get("/api/v1/runs/family").json()["children"])
    assert _ids_of(api.get("/api/v1/runs", "since=1h&limit=500")) == everything
    assert _ids_of(api.get("/api/v1/runs", "until=1h")) == set()
    assert (
        _ids_of(api.get("/api/v1/runs", "since=2000-01-01T00:00:00 00:00&limit=500")) == everything
    )
    assert _ids_of(api.get("/api/v1/runs", "since=2999-01-01T00:00:00Z")) == set()


def test_child_run_ids_hold_a_slash(world: World) -> None:
    """A child run's id (parent/position) works in every run URL, raw or %2F-encoded."""
    [child] = world.api.get("/api/v1/runs/family").json()["children"]
    assert "/" in child
    assert world.api.get(f"/api/v1/runs/{child}").json()["parent_id"] == "family"
    assert world.api.get(f"/api/v1/runs/{child}/history").json()["items"][0]["output"] == 2
    assert world.api.get(f"/api/v1/runs/{child}/graph").json()["run_id"] == child


def test_listing_pages_with_a_cursor(world: World) -> None:
    """limit and next_cursor walk every run once, newest first."""
    seen: list[str] = []
    cursor = ""
    while True:
        page = world.api.get("/api/v1/runs", f"limit=2&cursor={cursor}").json()
        seen += [item["id"] for item in page["items"]]
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    assert len(seen) == len(set(seen)) == len(_ids_of(world.api.get("/api/v1/runs", "limit=500")))


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=ten", "limit"),
        ("limit=%C2%B2", "limit"),
        ("status=bogus", "bogus"),
        ("since=yesterday", "since"),
        ("until=12", "until"),
        ("cursor=zzz", "cursor"),
    ],
)
def test_bad_list_parameters_are_400(world: World, query: str, named: str) -> None:
    """A bad parameter is a 400 problem whose detail names it."""
    reply = world.api.get("/api/v1/runs", query)
    assert reply.status == 400 and named in reply.json()["detail"]


def test_a_completed_run_in_full(world: World) -> None:
    """GET /runs/{id}: output, history, actions and events; ETag and 304."""
    reply = world.api.get("/api/v1/runs/done")
    run = reply.json()
    assert (run["status"], run["output"], run["error"], run["waiting"]) == (
        "completed",
        41,
        None,
        None,
    )
    assert run["input"] == {"args": [20], "kwargs": {}}
    assert [(s["kind"], s["name"], s["output"]) for s in run["history"]] == [
        ("task", double.name, 40)
    ]
    assert run["actions"] == [] and run["events"] == []
    tag = reply.header("ETag")
    assert tag
    again = world.api.get("/api/v1/runs/done", headers={"If-None-Match": tag})
    assert again.status == 304 and again.body == b"" and again.header("ETag") == tag
    other = world.api.get("/api/v1/runs/done", headers={"If-None-Match": '"stale"'})
    assert other.status == 200


def test_failed_waiting_and_cancelled_runs(world: World) -> None:
    """The error of a failed run, what a waiting run waits for, a cancelled run, and the
    event a completed run consumed."""
    broken = world.api.get("/api/v1/runs/broken").json()
    assert broken["status"] == "failed" and broken["error"]["message"] == "boom"
    assert broken["history"][-1]["status"] == "failed"
    waiting = world.api.get("/api/v1/runs/waiting").json()
    assert waiting["status"] == "waiting"
    assert waiting["waiting"]["kind"] == "event" and waiting["waiting"]["event"] == "approved"
    assert world.api.get("/api/v1/runs/parked").json()["status"] == "cancelled"
    approved = world.api.get("/api/v1/runs/approved").json()
    assert approved["output"] == {"order": "o-1", "answer": {"by": "ann"}}
    [event] = approved["events"]
    assert event["name"] == "approved" and event["consumed_position"] == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/runs/nope"),
        ("GET", "/api/v1/runs/nope/history"),
        ("GET", "/api/v1/runs/nope/graph"),
        ("POST", "/api/v1/runs/nope/cancel"),
        ("POST", "/api/v1/runs/nope/retry"),
        ("POST", "/api/v1/runs/nope/events"),
    ],
)
def test_unknown_runs_are_404(world: World, method: str, path: str) -> None:
    """Every run endpoint answers 404 problem+json for an unknown id."""
    body = {"name": "x"} if path.endswith("events") else {}
    reply = world.api.request(method, path, json_body=body)
    assert reply.status == 404 and "nope" in reply.json()["detail"]


def test_history(world: World) -> None:
    """GET /runs/{id}/history lists the steps in position order."""
    steps = world.api.get("/api/v1/runs/approved/history").json()["items"]
    assert [(s["position"], s["kind"]) for s in steps] == [(0, "task"), (1, "event"), (2, "task")]


def test_graph_with_ghosts_and_etag(world: World) -> None:
    """The graph of a waiting run shows the steps a completed run of the same workflow
    reached beyond it as not reached; ETag and 304 as for the run."""
    reply = world.api.get("/api/v1/runs/waiting/graph")
    graph = reply.json()
    assert graph["run_id"] == "waiting"
    by_position = {node["position"]: node["state"] for node in graph["nodes"]}
    assert by_position[0] == "finished" and by_position[2] == "not-reached"
    tag = reply.header("ETag")
    assert tag
    assert world.api.get("/api/v1/runs/waiting/graph", headers={"If-None-Match": tag}).status == 304
    done = world.api.get("/api/v1/runs/done/graph").json()
    assert {node["state"] for node in done["nodes"] if node["position"] is not None} == {"finished"}


def test_stats(world: World) -> None:
    """Per-workflow and per-task statistics, and one task's."""
    stats = world.api.get("/api/v1/stats", "since=1d").json()
    workflows = {stat["name"]: stat for stat in stats["workflows"]}
    assert workflows[breaker.name]["failed"] >= 1
    only = world.api.get("/api/v1/stats", f"workflow={doubler.name}").json()
    assert [stat["name"] for stat in only["workflows"]] == [doubler.name]
    one = world.api.get(f"/api/v1/tasks/{explode.name}/stats").json()
    assert one["name"] == explode.name and one["failed"] >= 1


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


def test_static_files_are_served(world: World) -> None:
    """The page and its files, with content types, ETags and 304s; no path tricks."""
    client = Client(world.app, token=TOKEN)
    page = client.get("/")
    assert page.status == 200 and page.content_type == "text/html"
    tag = page.header("ETag")
    assert tag and client.get("/", headers={"If-None-Match": tag}).status == 304
    for trick in ["/static/../openapi.json", "/static/.hidden", "/static/", "/nope"]:
        assert client.get(trick).status == 404, trick
