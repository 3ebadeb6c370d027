"""What the REST API tests share: workflows, a database holding runs in every state
(the module-scoped `world` fixture in conftest.py builds it on SQLite and PostgreSQL),
the app serving it and a client checking every answer against the OpenAPI document."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import durable
from durable import RunStatus, task, wait, workflow
from durable.web import WebApp
from tests.web.openapi_check import CheckedClient

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


def _ids_of(reply: Any) -> set[str]:
    assert reply.status == 200, reply.body
    return {item["id"] for item in reply.json()["items"]}
