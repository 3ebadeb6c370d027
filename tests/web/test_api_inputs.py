"""Malformed but parseable input to the REST API is a 400 problem naming the parameter,
on SQLite and on PostgreSQL: never a 500 with a traceback in the log, and never a 503
"database not available" for a value the database refuses (a NUL in text, an integer
over int4) while the database is up."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import durable
from durable import dispatch, workflow
from durable.runtime.defaults import swap
from durable.web import WebApp, make_app
from tests.conftest import PostgresSchemas, _need_postgres
from tests.web.client import Reply
from tests.web.openapi_check import CheckedClient

TOKEN = "inputs-test-token"
_ids = itertools.count()


@workflow
def echo(value: Any) -> Any:
    return value


@dataclass
class World:
    engine: durable.Engine
    app: WebApp
    api: CheckedClient

    def new_run(self) -> str:
        """A queued run (no worker runs it), for sending events to."""
        run_id = f"target-{next(_ids)}"
        reply = self.api.post("/api/v1/runs", {"workflow": echo.name, "args": [1], "id": run_id})
        assert reply.status == 201, reply.body
        return run_id


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    schemas = PostgresSchemas(_need_postgres()) if request.param == "postgres" else None
    path = tmp_path_factory.mktemp("inputs") / "d.db"
    url = schemas.new_url() if schemas else f"sqlite:///{path}"
    engine = durable.Engine(url, lease=5.0)
    try:
        app = make_app(engine, token=TOKEN)
        yield World(engine, app, CheckedClient(app, token=TOKEN))
    finally:
        engine.close()
        if schemas is not None:
            schemas.drop_all()


def _refused(reply: Reply, *named: str) -> dict[str, Any]:
    assert reply.status == 400, (reply.status, reply.body[:300])
    assert reply.content_type == "application/problem+json"
    problem: dict[str, Any] = reply.json()
    for word in named:
        assert word in problem["detail"], problem["detail"]
    return problem


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


# -- bodies ---------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 500, 200_000])
def test_a_body_nested_too_deep_is_400(world: World, depth: int) -> None:
    """Nesting past 64 levels is refused whether or not the parser would recurse that
    far; the detail says how deep is allowed."""
    raw = f'{{"workflow": "{echo.name}", "args": [{_nested(depth)}]}}'.encode()
    reply = world.api.request("POST", "/api/v1/runs", body=raw, content_type="application/json")
    _refused(reply, "nested", "64")
    event = f'{{"name": "go", "data": {_nested(depth)}}}'.encode()
    run_id = world.new_run()
    reply = world.api.request(
        "POST", f"/api/v1/runs/{run_id}/events", body=event, content_type="application/json"
    )
    _refused(reply, "nested", "64")


def test_a_body_nested_within_the_limit_is_accepted(world: World) -> None:
    """The cap is not stricter than it says: 60 levels of arguments start a run."""
    raw = f'{{"workflow": "{echo.name}", "args": [{_nested(60)}]}}'.encode()
    reply = world.api.request("POST", "/api/v1/runs", body=raw, content_type="application/json")
    assert reply.status == 201, reply.body


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("id", "a\ud800b"),
        ("id", "a\x00b"),
        ("id", "x" * 501),
        ("workflow", "app\x00flow"),
        ("queue", "q\x00"),
        ("queue", "\udfff"),
        ("actor", "ann\x00"),
        ("actor", "y" * 501),
    ],
)
def test_bad_text_in_a_start_is_400(world: World, field: str, value: str) -> None:
    """NUL, a lone surrogate or over 500 characters in a text field: 400 naming it."""
    body: dict[str, Any] = {"workflow": echo.name, "args": [1], field: value}
    _refused(world.api.post("/api/v1/runs", body), repr(field))


@pytest.mark.parametrize("priority", [2**70, -(2**70), 2**31, -(2**31) - 1, 1.5, "high"])
def test_a_priority_outside_int4_is_400(world: World, priority: Any) -> None:
    """Priorities are 32-bit integers on every backend: anything else names 'priority'."""
    body = {"workflow": echo.name, "args": [1], "priority": priority}
    _refused(world.api.post("/api/v1/runs", body), "'priority'")


@pytest.mark.parametrize("priority", [2**31 - 1, -(2**31)])
def test_the_int4_bounds_are_accepted(world: World, priority: int) -> None:
    body = {"workflow": echo.name, "args": [1], "priority": priority}
    reply = world.api.post("/api/v1/runs", body)
    assert reply.status == 201, reply.body
    assert reply.json()["priority"] == priority


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "go\x00"),
        ("name", "\ud83d"),
        ("name", "n" * 501),
        ("sender", "bob\x00"),
        ("actor", "bob\x00"),
        ("key", "k\x00"),
        ("key", "\udc00"),
    ],
)
def test_bad_text_in_an_event_is_400(world: World, field: str, value: str) -> None:
    """On PostgreSQL these were 503 "database not available"; now 400 naming the field,
    and the event is not stored."""
    run_id = world.new_run()
    body = {"name": "go", field: value}
    _refused(world.api.post(f"/api/v1/runs/{run_id}/events", body), repr(field))
    assert world.api.get(f"/api/v1/runs/{run_id}").json()["events"] == []


@pytest.mark.parametrize("path", ["cancel", "retry"])
def test_bad_text_in_an_actor_of_an_action_is_400(world: World, path: str) -> None:
    run_id = world.new_run()
    reply = world.api.post(f"/api/v1/runs/{run_id}/{path}", {"actor": "eve\x00"})
    _refused(reply, "'actor'")


# -- query parameters and paths -------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "query", "named"),
    [
        ("/api/v1/runs", "since=99999999999d", "since"),
        ("/api/v1/runs", "until=99999999999999999999w", "until"),
        ("/api/v1/runs", "since=1" + "0" * 400 + "s", "since"),
        ("/api/v1/stats", "since=99999999999d", "since"),
        ("/api/v1/tasks/t/stats", "since=99999999999d", "since"),
        ("/api/v1/runs", "workflow=a%00b", "workflow"),
        ("/api/v1/runs", "queue=%00", "queue"),
        ("/api/v1/runs", "parent=p%00", "parent"),
        ("/api/v1/runs", "search=%00", "search"),
        ("/api/v1/stats", "workflow=a%00", "workflow"),
        ("/api/v1/stats", "task=a%00", "task"),
        ("/api/v1/runs", "cursor=" + _cursor(_nested(50_000)), "cursor"),
        ("/api/v1/runs", "cursor=" + _cursor(_nested(100)), "cursor"),
        ("/api/v1/runs", "cursor=" + _cursor('[0, "a\\u0000b"]'), "cursor"),
        ("/api/v1/runs", "cursor=" + _cursor('[0, "\\ud800"]'), "cursor"),
        ("/api/v1/runs", "cursor=" + _cursor('[NaN, "x"]'), "cursor"),
        ("/api/v1/runs", "cursor=" + _cursor('[1e999, "x"]'), "cursor"),
        ("/api/v1/runs", "cursor=" + _cursor('{"a": 1}'), "cursor"),
    ],
)
def test_bad_query_parameters_are_400(world: World, path: str, query: str, named: str) -> None:
    _refused(world.api.get(path, query), named)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/runs/a\x00b",
        "/api/v1/runs/a\x00b/history",
        "/api/v1/runs/a\x00b/graph",
        "/api/v1/tasks/a\x00b/stats",
    ],
)
def test_a_nul_in_a_path_is_400(world: World, path: str) -> None:
    _refused(world.api.get(path), "NUL")


def test_a_nul_in_a_posted_path_is_400(world: World) -> None:
    _refused(world.api.post("/api/v1/runs/a\x00b/events", {"name": "go"}), "NUL")
    _refused(world.api.post("/api/v1/runs/a\x00b/cancel"), "NUL")


def test_good_values_still_work(world: World) -> None:
    """The checks refuse only what they say: unicode text, ages and cursors pass."""
    world.new_run()  # two runs of its own: paging needs a second page whatever ran before
    run_id = world.new_run()
    body = {"name": "größe ✓", "sender": "ünïcode", "key": "k" * 500, "data": {"a": [1]}}
    assert world.api.post(f"/api/v1/runs/{run_id}/events", body).status == 201
    for query in ("since=3650d", "since=52w", "until=1.5h", "search=target", "limit=1"):
        reply = world.api.get("/api/v1/runs", query)
        assert reply.status == 200, (query, reply.body)
    first = world.api.get("/api/v1/runs", "limit=1").json()
    assert first["next_cursor"] is not None
    reply = world.api.get("/api/v1/runs", f"limit=1&cursor={first['next_cursor']}")
    assert reply.status == 200 and reply.json()["items"]
    assert json.loads(world.api.get("/api/v1/stats", "since=7d").body)


def test_a_lone_surrogate_stored_from_python_is_shown_escaped(world: World) -> None:
    """The API refuses lone surrogates, but a Python caller may store one in an
    argument: the run's views answer 200 with it as a JSON escape, not a 500."""
    previous = swap(world.engine)
    try:
        handle = dispatch(echo, "a\ud800b", id=f"surrogate-{next(_ids)}")
    finally:
        swap(previous)
    reply = world.api.get(f"/api/v1/runs/{handle.id}")
    assert reply.status == 200, reply.body
    assert reply.json()["input"]["args"] == ["a\\ud800b"]  # shown escaped, as in the CLI
    assert world.api.get("/api/v1/runs", "search=surrogate").status == 200
