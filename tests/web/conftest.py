"""The REST API tests' `world` (tests/web/api_world.py): built once per test module
and backend, shared by that module's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import durable
from durable import RunStatus, Worker, dispatch, send
from durable.runtime.defaults import swap
from durable.web import make_app
from tests.conftest import PostgresSchemas, _need_postgres
from tests.web.api_world import (
    TOKEN,
    World,
    _status,
    _until,
    approval,
    breaker,
    doubler,
    family,
)
from tests.web.openapi_check import CheckedClient


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
