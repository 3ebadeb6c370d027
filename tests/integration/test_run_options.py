"""Run ids and priorities on every backend: children's ids cannot be squatted, and no
priority, given or stored, jams the queue."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

import durable
from durable import RunStatus, Worker, dispatch, execute, task, workflow
from durable.core.hashing import call_hash
from durable.core.records import NewRun
from durable.core.run_options import PRIORITY_MAX, PRIORITY_MIN
from durable.errors import IdempotencyConflict
from durable.ops import BadRequest, Operations
from durable.web import make_app
from tests.conftest import BACKENDS
from tests.integration.test_bad_rows import execute_sql
from tests.web.client import Client

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
TOKEN = "run-options-token"


@task
def double(n: int) -> int:
    return n * 2


@workflow
def child(n: int) -> int:
    return double(n)


@workflow
def parent(n: int) -> int:
    return child(n) + 1


@workflow
def dispatcher(n: int) -> str:
    return dispatch(child, n).id


@task
def note(tag: str) -> str:
    return tag


@workflow
def job(tag: str) -> str:
    return note(tag)


def _status(engine: durable.Engine, run_id: str) -> RunStatus:
    run = engine.backend.get_run(run_id)
    assert run is not None, run_id
    return run.status


def _squat(engine: durable.Engine, run_id: str, n: int) -> None:
    """A run of `child` with this id and no parent, as an older version let anyone make
    through dispatch(id=...), durable start --id or POST /api/v1/runs."""
    call = child.bind(n)
    engine.backend.create_run(
        NewRun(
            id=run_id,
            workflow=child.name,
            input=engine.dump({"args": [n], "kwargs": {}}, "input"),
            call_hash=call_hash(child.kind, child.name, call.arguments),
            owner=None,
            lease=engine.lease,
            parent_id=None,
        )
    )


# -- finding 3: a user-chosen id cannot take a child's place ---------------------------


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_child_ids_cannot_be_chosen_anywhere(engine: durable.Engine) -> None:
    """dispatch, execute, Operations.start (durable start, POST /api/v1/runs) refuse an
    id of the child form, naming the reason; nothing is stored."""
    with pytest.raises(ValueError, match="child"):
        dispatch(child, 1, id="p/0")
    with pytest.raises(ValueError, match="child"):
        execute(child, 1, id="p/0")
    with pytest.raises(BadRequest, match="child"):
        Operations(engine).start(child.name, [1], id="p/0")
    api = Client(make_app(engine, token=TOKEN), token=TOKEN)
    reply = api.request("POST", "/api/v1/runs", json_body={"workflow": child.name, "id": "p/0"})
    assert reply.status == 400 and b"child" in reply.body
    assert engine.backend.get_run("p/0") is None
    assert dispatch(child, 1, id="p/one").id == "p/one"  # other ids with a slash are fine


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
@pytest.mark.parametrize("same_call", [True, False])
def test_a_foreign_run_at_a_child_id_fails_the_call_clearly(
    engine: durable.Engine, same_call: bool
) -> None:
    """A run that holds P/0 but is not P's child (made before ids were checked) is not
    adopted: P's child call raises IdempotencyConflict saying a foreign run holds the
    id, and P fails (it used to block, blaming a code change nobody made, or silently
    take the foreign run's result)."""
    _squat(engine, "p/0", 3 if same_call else 4)
    with pytest.raises(IdempotencyConflict, match="not a child of") as raised:
        execute(parent, 3, id="p")
    assert raised.value.run_id == "p/0"
    assert _status(engine, "p") is RunStatus.FAILED
    foreign = engine.backend.get_run("p/0")
    assert foreign is not None and foreign.parent_id is None
    assert foreign.status is RunStatus.QUEUED  # untouched


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_a_foreign_run_at_a_dispatched_child_id_fails_the_dispatch(
    engine: durable.Engine,
) -> None:
    _squat(engine, "d/0", 5)
    with pytest.raises(IdempotencyConflict, match="not a child of"):
        execute(dispatcher, 5, id="d")
    assert _status(engine, "d") is RunStatus.FAILED


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_real_children_still_replay(engine: durable.Engine) -> None:
    """The parent check does not get in the way of a parent's own children."""
    assert execute(parent, 2, id="fam") == 5
    assert execute(parent, 2, id="fam") == 5
    assert execute(dispatcher, 2, id="dis") == "dis/0"
    assert execute(dispatcher, 2, id="dis") == "dis/0"


# -- finding 5: priorities ----------------------------------------------------------------


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
@pytest.mark.parametrize(
    ("priority", "error"),
    [("high", TypeError), (True, TypeError), (2**31, ValueError), (-(2**31) - 1, ValueError)],
)
def test_bad_priorities_are_refused_at_the_call(
    engine: durable.Engine, priority: Any, error: type[Exception]
) -> None:
    """Refused before anything is stored (PostgreSQL used to answer a priority past
    int4 with StorageError; SQLite stored text)."""
    with pytest.raises(error, match="priority"):
        dispatch(job, "x", id="bad", priority=priority)
    assert engine.backend.get_run("bad") is None
    with pytest.raises(BadRequest, match="priority"):
        Operations(engine).start(job.name, ["x"], id="bad", priority=priority)
    assert engine.backend.get_run("bad") is None


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_priorities_at_the_int4_limits_order_the_queue(engine: durable.Engine) -> None:
    for tag, priority in (("low", PRIORITY_MIN), ("mid", 0), ("top", PRIORITY_MAX)):
        dispatch(job, tag, id=tag, priority=priority)
    assert [r.id for r in engine.backend.claim_next(
        owner=engine.owner, queue="default", workflows=[job.name], limit=3, lease=60
    )] == ["top", "mid", "low"]  # fmt: skip


def _text_priority(engine: durable.Engine, url: str, run_id: str) -> None:
    if url.startswith("memory"):
        backend: Any = engine.backend
        with backend._lock:
            backend._runs[run_id] = dataclasses.replace(backend._runs[run_id], priority="high")
    else:
        execute_sql(url, "UPDATE durable_runs SET priority = 'high' WHERE id = ?", run_id)


@pytest.mark.parametrize("url", ["memory", "sqlite"], indirect=True)
def test_a_stored_text_priority_does_not_jam_the_queue(engine: durable.Engine, url: str) -> None:
    """What dispatch(priority="high") used to store on SQLite: the claim committed, then
    sorting the batch raised, and every run of the batch stayed RUNNING forever under
    the live worker. Now each run completes, the odd one included."""
    tags = [f"run-{n}" for n in range(4)]
    for tag in tags:
        dispatch(job, tag, id=tag)
    _text_priority(engine, url, "run-2")
    with Worker(engine, concurrency=4, poll=0.02):
        deadline = time.monotonic() + 20
        while any(_status(engine, tag) is not RunStatus.COMPLETED for tag in tags):
            assert time.monotonic() < deadline, {tag: _status(engine, tag) for tag in tags}
            time.sleep(0.02)
    assert [durable.get(tag).result(timeout=1) for tag in tags] == tags
