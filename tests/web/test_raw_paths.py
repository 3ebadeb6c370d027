"""Run ids that end in a route's suffix (``x/graph``, ``y/history``) sent as ``%2F``:
the app routes on the raw path, so they can be read over the API and the dashboard
(which percent-encodes ids), both in-process and through `serve` over a socket."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import pytest

import durable
from durable import dispatch, workflow
from durable.runtime.defaults import swap
from durable.web import WebApp, make_app, serve
from tests.web.client import Client, Reply

TOKEN = "raw-paths-token"
IDS = ["x/graph", "y/history", "z/cancel", "a%2Fb", "w/graph/history", "ünï/graph"]


@workflow
def echo(value: Any) -> Any:
    return value


@dataclass
class World:
    engine: durable.Engine
    app: WebApp


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url = f"sqlite:///{tmp_path_factory.mktemp('raw') / 'd.db'}"
    engine = durable.Engine(url)
    previous = swap(engine)
    try:
        for run_id in IDS:
            dispatch(echo, run_id, id=run_id)
        dispatch(echo, "plain", id="x")  # what a decoded path would wrongly read
        yield World(engine, make_app(engine, token=TOKEN))
    finally:
        swap(previous)
        engine.close()


def _raw_get(app: WebApp, raw: str, script_name: str = "", path_info: str | None = None) -> Reply:
    """A GET as a WSGI server passes it on: REQUEST_URI raw (with a query), SCRIPT_NAME
    and PATH_INFO decoded, as latin-1 text of their bytes."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        environ["REQUEST_URI"] = f"{script_name}{raw}?q=1"
        environ["SCRIPT_NAME"] = unquote(script_name, "latin-1")
        environ["PATH_INFO"] = unquote(raw, "latin-1") if path_info is None else path_info
        return app(environ, start_response)

    return Client(wrapped, token=TOKEN).get("/")


def _quoted(run_id: str) -> str:
    return quote(run_id, safe="")


@pytest.mark.parametrize("run_id", IDS)
@pytest.mark.parametrize("script_name", ["", "/durable", "/my%20tools"])
def test_an_encoded_id_reaches_its_run(world: World, run_id: str, script_name: str) -> None:
    base = f"/api/v1/runs/{_quoted(run_id)}"
    run = _raw_get(world.app, base, script_name)
    assert run.status == 200, run.body
    assert run.json()["id"] == run_id
    history = _raw_get(world.app, base + "/history", script_name)
    assert history.status == 200 and history.json()["items"] == []
    graph = _raw_get(world.app, base + "/graph", script_name)
    assert graph.status == 200 and graph.json()["run_id"] == run_id


def test_a_raw_slash_still_separates(world: World) -> None:
    """``/api/v1/runs/x/graph`` sent raw is the graph of run x, as before."""
    reply = _raw_get(world.app, "/api/v1/runs/x/graph")
    assert reply.status == 200 and reply.json()["run_id"] == "x"


def test_without_a_raw_uri_the_decoded_path_is_used(world: World) -> None:
    """A server that passes no REQUEST_URI / RAW_URI: routing falls back to PATH_INFO."""
    reply = Client(world.app, token=TOKEN).get("/api/v1/runs/x/graph")
    assert reply.status == 200 and reply.json()["run_id"] == "x"


def test_a_raw_uri_that_disagrees_with_path_info_is_ignored(world: World) -> None:
    """A middleware rewrote PATH_INFO but not REQUEST_URI: PATH_INFO wins."""
    reply = _raw_get(world.app, "/elsewhere/x%2Fgraph", path_info="/api/v1/runs/x")
    assert reply.status == 200 and reply.json()["id"] == "x"


def test_served_over_a_socket(world: World) -> None:
    """`serve` hands the raw request target to the app, as the dashboard sends it."""
    server = serve(world.app, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        for run_id in IDS:
            for suffix, key in (("", "id"), ("/graph", "run_id")):
                connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
                try:
                    connection.request(
                        "GET",
                        f"/api/v1/runs/{_quoted(run_id)}{suffix}?x=1",
                        headers={"Authorization": f"Bearer {TOKEN}"},
                    )
                    response = connection.getresponse()
                    body = response.read()
                finally:
                    connection.close()
                assert response.status == 200, body
                assert json.loads(body)[key] == run_id
    finally:
        server.shutdown()
        server.server_close()


def test_the_static_files_are_not_reachable_through_an_encoded_slash(world: World) -> None:
    reply = _raw_get(world.app, "/static/..%2Fopenapi.json")
    assert reply.status == 404
