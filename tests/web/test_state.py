"""What runs publish (their properties, or state) through the REST API, on SQLite and
PostgreSQL, every answer checked against the OpenAPI document: the run's ``state``
object, and each step's ``state`` (an object where the properties changed, else null)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

import durable
from durable import RunStatus, task, workflow
from durable.web import WebApp, make_app
from tests.web.installed import installed
from tests.web.openapi_check import CheckedClient, document

TOKEN = "state-test-token"


@task
def step(i: int) -> int:
    return i


@workflow
class Order:
    def __init__(self, order_id: str) -> None:
        self.order_id = order_id
        self.status = "new"

    def handle(self) -> str:
        step(1)
        self.status = "charged"
        step(2)
        self.status = "done"
        return self.status


@workflow
def approval(order: str) -> str:
    """Publishes with set_state, then waits for an event."""
    durable.set_state(order=order, stage="asked", checks={"fraud": 0.25})
    step(1)
    durable.wait("approved")
    return "ok"


@workflow
def plain(n: int) -> int:
    return step(n)


@dataclass
class World:
    engine: durable.Engine
    app: WebApp
    api: CheckedClient


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    """order-1 completed (class), waits-1 waiting (set_state), plain-1 publishes nothing."""
    with installed(request.param, tmp_path_factory.mktemp("state")) as engine:
        durable.execute(Order, "o-1", id="order-1")
        durable.execute(plain, 2, id="plain-1")
        durable.dispatch(approval, "o-2", id="waits-1")
        with durable.Worker(engine, poll=0.02):
            limit = time.monotonic() + 30
            while (run := engine.backend.get_run("waits-1")) is None or (
                run.status is not RunStatus.WAITING
            ):
                assert time.monotonic() < limit, "the run did not come to wait"
                time.sleep(0.02)
        app = make_app(engine, token=TOKEN)
        yield World(engine, app, CheckedClient(app, token=TOKEN))


def test_the_run_carries_its_latest_state(world: World) -> None:
    run = world.api.get("/api/v1/runs/order-1").json()
    assert run["state"] == {"order_id": "o-1", "status": "done"}
    assert [step["state"] for step in run["history"]] == [
        {"order_id": "o-1", "status": "new"},
        {"order_id": "o-1", "status": "charged"},
    ]


def test_an_unfinished_run_carries_its_last_snapshot(world: World) -> None:
    """Waiting, it shows what its last stretch of code stored; the wait, where nothing
    changed, has a null state."""
    run = world.api.get("/api/v1/runs/waits-1").json()
    assert run["status"] == "waiting"
    state = {"checks": {"fraud": 0.25}, "order": "o-2", "stage": "asked"}
    assert run["state"] == state
    assert [(step["kind"], step["state"]) for step in run["history"]] == [
        ("task", state),
        ("event", None),
    ]


def test_the_history_endpoint_carries_each_step_state(world: World) -> None:
    items = world.api.get("/api/v1/runs/order-1/history").json()["items"]
    assert [item["state"]["status"] for item in items] == ["new", "charged"]
    plain_items = world.api.get("/api/v1/runs/plain-1/history").json()["items"]
    assert [item["state"] for item in plain_items] == [None]


def test_a_run_without_state_has_an_empty_object(world: World) -> None:
    assert world.api.get("/api/v1/runs/plain-1").json()["state"] == {}


def test_the_document_requires_state() -> None:
    """A client may rely on the field being there: the run's always an object, the
    step's an object or null."""
    schemas = document()["components"]["schemas"]
    for name in ("RunDetail", "RunView", "Step"):
        assert "state" in schemas[name]["required"], name
    assert schemas["RunView"]["properties"]["state"]["$ref"] == "#/components/schemas/State"
    assert schemas["State"]["type"] == "object"
