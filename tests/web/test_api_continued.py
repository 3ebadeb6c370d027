"""The REST API on a continue-as-new chain (SQLite and PostgreSQL): the `continued`
status filters, RunDetail names the links, the graph ends finished; every answer is
checked against the OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import durable
from durable.runtime.defaults import swap
from durable.web import make_app
from tests.conftest import PostgresSchemas, _need_postgres
from tests.unit import continuing_app as app
from tests.web.openapi_check import CheckedClient

TOKEN = "api-test-token"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[CheckedClient]:
    """A database holding one three-run chain (`web`, `web~1`, `web~2`), and its API."""
    schemas = PostgresSchemas(_need_postgres()) if request.param == "postgres" else None
    url = schemas.new_url() if schemas else f"sqlite:///{tmp_path}/d.db"
    engine = durable.Engine(url, lease=5.0)
    previous = swap(engine)
    try:
        assert durable.execute(app.counter, 0, 3, id="web") == 3
        yield CheckedClient(make_app(engine, token=TOKEN), token=TOKEN)
    finally:
        swap(previous)
        engine.close()
        if schemas is not None:
            schemas.drop_all()


def test_the_api_shows_a_chain(api: CheckedClient) -> None:
    """status=continued lists the handed-over runs; a run names its successor and
    the run it continues; the continued run's graph ends finished."""
    listed = api.get("/api/v1/runs", "status=continued")
    assert listed.status == 200
    assert {item["id"] for item in listed.json()["items"]} == {"web", "web~1"}
    base = api.get("/api/v1/runs/web").json()
    assert (base["status"], base["continued_as"], base["continues"]) == ("continued", "web~1", None)
    middle = api.get("/api/v1/runs/web~1").json()
    assert (middle["continued_as"], middle["continues"]) == ("web~2", "web")
    last = api.get("/api/v1/runs/web~2").json()
    assert (last["status"], last["output"], last["continued_as"]) == ("completed", 3, None)
    graph = api.get("/api/v1/runs/web/graph").json()
    end = next(node for node in graph["nodes"] if node["id"] == "end")
    assert end["state"] == "finished"
