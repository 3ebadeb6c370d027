"""A run's streams through the web app, on SQLite and PostgreSQL: the listing (checked
against the OpenAPI document), and Server-Sent Events through `durable ui`'s server
(`serve`) received live, while the run still waits, then to the ``end`` event;
resuming after ``Last-Event-ID``; bad input; the cap on streams followed at once; and
the same events through the ASGI adapter."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

import durable
from durable import RunStatus, workflow
from durable.runtime.defaults import swap
from durable.web import WebApp, _streams, asgi_app, make_app, serve
from tests.conftest import PostgresSchemas, _need_postgres
from tests.web.openapi_check import CheckedClient, _strict
from tests.web.test_asgi import TOKEN as ASGI_TOKEN
from tests.web.test_asgi import scope

TOKEN = "streams-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@workflow
def narrate(count: int) -> str:
    """Writes "first", waits for "go", writes 1..count-1 and closes the stream."""
    lines = durable.stream("lines")
    lines.write("first")
    durable.wait("go")
    for n in range(1, count):
        lines.write({"n": n})
    lines.close()
    return "told"


@dataclass
class World:
    engine: durable.Engine
    app: WebApp
    port: int


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[World]:
    schemas = PostgresSchemas(_need_postgres()) if request.param == "postgres" else None
    url = schemas.new_url() if schemas else f"sqlite:///{tmp_path / 'd.db'}"
    engine = durable.Engine(url, lease=5.0)
    previous = swap(engine)
    app = make_app(engine, token=TOKEN)
    server = serve(app, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield World(engine, app, server.server_port)
    finally:
        server.shutdown()
        server.server_close()
        swap(previous)
        engine.close()
        if schemas is not None:
            schemas.drop_all()


class Events:
    """An SSE connection to the served app, read event by event."""

    def __init__(self, port: int, path: str, **headers: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.connection.request("GET", path, headers={**AUTH, **headers})
        self.response = self.connection.getresponse()

    def next(self) -> dict[str, str]:
        """The next event's fields (comments skipped; ``retry`` is an event of its own)."""
        fields: dict[str, str] = {}
        while True:
            line = self.response.fp.readline().decode()
            assert line, f"the stream ended early, after {fields}"
            line = line.rstrip("\n")
            if line == "":
                if fields:
                    return fields
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")

    def close(self) -> None:
        self.connection.close()


def _item(event: dict[str, str]) -> dict[str, Any]:
    """An event's data, checked against the document's StreamItem."""
    data = json.loads(event["data"])
    schema = {"$ref": "#/components/schemas/StreamItem", "components": _strict()["components"]}
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    errors = [error.message for error in validator.iter_errors(data)]
    assert not errors, errors
    assert event["id"] == str(data["offset"])
    return data


def _wait_for(world: World, run_id: str, status: RunStatus) -> None:
    deadline = time.monotonic() + 30
    while world.engine.reread(run_id).status is not status:
        assert time.monotonic() < deadline, f"{run_id} did not reach {status}"
        time.sleep(0.02)


def test_an_sse_client_through_the_server_receives_values_live(world: World) -> None:
    handle = durable.dispatch(narrate, 4, id="told-1")
    events = Events(world.port, "/api/v1/runs/told-1/streams/lines")  # before any worker
    try:
        assert events.response.status == 200
        assert events.response.getheader("Content-Type") == "text/event-stream; charset=utf-8"
        assert events.next() == {"retry": "1000"}
        with durable.Worker(world.engine, poll=0.02):
            first = _item(events.next())
            assert (first["offset"], first["value"]) == (0, "first")
            _wait_for(world, "told-1", RunStatus.WAITING)  # the value came while it ran
            durable.send("told-1", "go", None)
            rest = [_item(events.next()) for _ in range(3)]
            assert [(i["offset"], i["value"]) for i in rest] == [(n, {"n": n}) for n in (1, 2, 3)]
            end = events.next()
            assert end == {"event": "end", "data": '{"ended":true}'}
            assert handle.result(timeout=30) == "told"
    finally:
        events.close()


def test_listing_resuming_and_bad_input(world: World) -> None:
    durable.dispatch(narrate, 3, id="told-2")
    durable.send("told-2", "go", None)
    with durable.Worker(world.engine, poll=0.02):
        durable.get("told-2").result(timeout=30)
    api = CheckedClient(world.app, token=TOKEN)
    listing = api.get("/api/v1/runs/told-2/streams").json()
    assert listing == {"items": [{"name": "lines", "length": 3, "closed": True}]}
    resumed = Events(world.port, "/api/v1/runs/told-2/streams/lines", **{"Last-Event-ID": "0"})
    try:
        assert resumed.next() == {"retry": "1000"}
        assert [_item(resumed.next())["offset"] for _ in range(2)] == [1, 2]
        assert resumed.next()["event"] == "end"
    finally:
        resumed.close()
    assert api.get("/api/v1/runs/nobody/streams").status == 404
    assert api.get("/api/v1/runs/nobody/streams/lines").status == 404
    bad = api.get("/api/v1/runs/told-2/streams/lines", query="offset=-1")
    assert bad.status == 400 and "offset" in bad.json()["detail"]


def test_streams_followed_at_once_are_capped(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_streams, "MAX_STREAMS", 1)
    app = make_app(world.engine, token=TOKEN)  # its one slot
    durable.dispatch(narrate, 2, id="told-3")
    api = CheckedClient(app, token=TOKEN)
    chunks = app(_environ("/api/v1/runs/told-3/streams/lines"), lambda *_: None)
    busy = api.get("/api/v1/runs/told-3/streams/lines")
    assert busy.status == 503 and busy.header("Retry-After") == "2"
    chunks.close()  # type: ignore[attr-defined]  # the client left: the slot is free
    again = app(_environ("/api/v1/runs/told-3/streams/lines"), lambda *_: None)
    assert not isinstance(again, list), "an event stream again, not a 503"
    again.close()  # type: ignore[attr-defined]


def _environ(path: str, token: str = TOKEN) -> dict[str, Any]:
    from wsgiref.util import setup_testing_defaults

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "HTTP_HOST": "127.0.0.1"}
    environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    setup_testing_defaults(environ)
    return environ


def test_the_asgi_adapter_streams_events(world: World) -> None:
    durable.dispatch(narrate, 2, id="told-4")
    durable.send("told-4", "go", None)
    with durable.Worker(world.engine, poll=0.02):
        durable.get("told-4").result(timeout=30)
    app = asgi_app(make_app(world.engine, token=ASGI_TOKEN))
    sent: list[dict[str, Any]] = []
    inbox = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if not inbox:  # the client stays
            await asyncio.sleep(3600)
        return inbox.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope("GET", "/api/v1/runs/told-4/streams/lines"), receive, send))
    assert sent[0]["status"] == 200
    pieces = [message["body"] for message in sent[1:]]
    assert all(message.get("more_body") for message in sent[1:-1]), "sent piece by piece"
    text = b"".join(pieces).decode()
    assert text.startswith("retry: 1000\n\n")
    assert text.endswith('event: end\ndata: {"ended":true}\n\n')
    assert "id: 0\n" in text and "id: 1\n" in text


def test_the_asgi_adapter_stops_when_the_client_leaves(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live stream (the run waits) ends once the client disconnects: at the next
    keep-alive, and its slot is freed."""
    monkeypatch.setattr(_streams, "KEEP_ALIVE", 0.1)
    monkeypatch.setattr(_streams, "MAX_STREAMS", 1)
    durable.dispatch(narrate, 2, id="told-5")
    with durable.Worker(world.engine, poll=0.02):
        _wait_for(world, "told-5", RunStatus.WAITING)
    dashboard = make_app(world.engine, token=ASGI_TOKEN)
    app = asgi_app(dashboard)
    sent: list[dict[str, Any]] = []
    inbox = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        while len(sent) < 3:  # the start, the retry line, the first value
            await asyncio.sleep(0.01)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope("GET", "/api/v1/runs/told-5/streams/lines"), receive, send))
    assert b"id: 0\n" in sent[2]["body"]
    assert all(message.get("more_body") for message in sent[1:]), "no end: the client left"
    again = CheckedClient(dashboard, token=ASGI_TOKEN)
    chunks = dashboard(_environ("/api/v1/runs/told-5/streams/lines", ASGI_TOKEN), lambda *_: None)
    assert not isinstance(chunks, list), "the slot was freed"
    chunks.close()  # type: ignore[attr-defined]
    assert again.get("/api/v1/runs/told-5/streams").status == 200
