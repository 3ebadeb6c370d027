"""The operations layer shows what runs publish (their properties, or state): the run
view carries the latest snapshot, read on its own; a step's view carries the snapshot it
stored where the properties changed. Views never fail on a snapshot they cannot read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable import task, workflow
from durable.ops import Operations
from durable.ops._values import PREVIEW
from durable.testing import DurableEnv
from tests.conftest import BACKENDS
from tests.integration.test_bad_rows import overwrite


@task
def step(i: int) -> int:
    return i


@workflow
class Order:
    def __init__(self, order_id: str) -> None:
        self.order_id = order_id
        self.status = "new"
        self._secret = "never shown"

    def handle(self) -> str:
        step(1)
        self.status = "charged"
        step(2)
        self.status = "done"
        return self.status


@workflow
def approval(order: str) -> str:
    """A function workflow that publishes with set_state, then waits."""
    durable.set_state(order=order, stage="asked")
    step(1)  # the properties did not change since the last snapshot: none stored here
    answer = durable.wait("approved")
    durable.set_state(stage="approved" if answer else "refused")
    return "ok"


@workflow
def plain(n: int) -> int:
    """Publishes nothing."""
    return step(n)


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as environment:
        yield environment


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_run_and_step_views_of_a_workflow_class(engine: durable.Engine, url: str) -> None:
    """The run shows the snapshot its end stored; each step the one it stored; private
    attributes are never shown."""
    durable.execute(Order, "o-1", id="order-1")
    ops = Operations(engine)
    run = ops.get_run("order-1")
    assert run["state"] == {"order_id": "o-1", "status": "done"}
    assert [(s["position"], s["state"]) for s in ops.history("order-1")] == [
        (0, {"order_id": "o-1", "status": "new"}),
        (1, {"order_id": "o-1", "status": "charged"}),
    ]
    assert "_secret" not in json.dumps(run)
    # the view is plain JSON, as the CLI and the API print it
    assert json.loads(json.dumps(run))["state"] == run["state"]


def test_a_run_that_publishes_nothing_has_empty_state(env: DurableEnv) -> None:
    env.execute(plain, 3, id="plain-1")
    ops = Operations(env.engine)
    assert ops.get_run("plain-1")["state"] == {}
    assert [s["state"] for s in ops.history("plain-1")] == [None]


def test_a_waiting_run_shows_its_latest_step_snapshot(env: DurableEnv) -> None:
    """Unfinished, the run's own snapshot is not there yet: the view shows the latest
    one a step stored; a step where nothing changed shows null. Once it ends, the
    end's snapshot."""
    env.dispatch(approval, "o-2", id="approval-1")
    ops = Operations(env.engine)
    run = ops.get_run("approval-1")
    assert run["status"] == "waiting"
    assert run["state"] == {"order": "o-2", "stage": "asked"}
    assert [(s["kind"], s["state"]) for s in ops.history("approval-1")] == [
        ("task", {"order": "o-2", "stage": "asked"}),
        ("event", None),
    ]
    env.send("approval-1", "approved", True)
    assert ops.get_run("approval-1")["state"] == {"order": "o-2", "stage": "approved"}
    assert ops.get_run("approval-1")["status"] == "completed"


def test_the_run_view_reads_the_state_without_the_history(
    env: DurableEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """get_run asks the backend for the latest snapshot alone (backend.state)."""
    env.dispatch(approval, "o-3", id="approval-2")
    asked: list[str] = []
    real = env.backend.state

    def state(run_id: str) -> Any:
        asked.append(run_id)
        return real(run_id)

    def no_history(run_id: str) -> Any:
        raise AssertionError("get_run loaded the whole history")

    monkeypatch.setattr(env.backend, "state", state)
    monkeypatch.setattr(env.backend, "load_history", no_history)
    assert Operations(env.engine).get_run("approval-2")["state"]["stage"] == "asked"
    assert asked == ["approval-2"]


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        (b"j{not json", "the snapshot is corrupt"),
        (b"j[1, 2]", "the snapshot is not a JSON object"),
        (b"j" + b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"j\xff\xfe", "the snapshot is corrupt"),
        (b"j" + b"9" * 5000, "the snapshot is corrupt"),
    ],
)
@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_an_unreadable_snapshot_shows_as_unreadable(
    engine: durable.Engine, url: str, stored: bytes, reason: str
) -> None:
    """A corrupt run snapshot or step snapshot: the view says why, and still shows the
    rest of the run."""
    durable.execute(Order, "o-4", id="order-4")
    overwrite(engine, url, "order-4", "state", stored)
    overwrite(engine, url, "order-4", "state", b'j{"fine":true}', position=0)
    overwrite(engine, url, "order-4", "state", stored, position=1)
    ops = Operations(engine)
    run = ops.get_run("order-4")
    assert list(run["state"]) == ["unreadable"] and reason in run["state"]["unreadable"]
    assert run["output"] == "done"
    first, second = ops.history("order-4")
    assert first["state"] == {"fine": True}
    assert list(second["state"]) == ["unreadable"]
    assert reason in second["state"]["unreadable"]
    json.dumps(run, allow_nan=False)


@pytest.mark.parametrize("url", ["memory"], indirect=True)
def test_odd_snapshots_still_show_as_json(engine: durable.Engine, url: str) -> None:
    """Values no JSON client reads become text; a long value is cut like other values;
    nesting past the viewer's depth is cut off; the rest of the snapshot shows whole."""
    durable.execute(Order, "o-5", id="order-5")
    long = "x" * (PREVIEW + 10)
    deep = "[" * 60 + "]" * 60
    snapshot = (
        '{"nan": NaN, "lone": "\\udc80", "long": "' + long + '", "deep": ' + deep + ', "ok": 1}'
    )
    overwrite(engine, url, "order-5", "state", b"j" + snapshot.encode())
    state = Operations(engine).get_run("order-5")["state"]
    assert state["nan"] == "nan"
    assert state["lone"] == "\\udc80"
    assert state["long"] == {"truncated": json.dumps(long)[:PREVIEW]}
    assert "unreadable" in json.dumps(state["deep"])
    assert state["ok"] == 1
    json.dumps(state, allow_nan=False).encode("utf-8")
