"""The operations layer behind the CLI, the REST API and the dashboard."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import threading
import time
from collections.abc import Iterator

import pytest

import durable
from durable import execute, task, wait, workflow
from durable.ops import BadRequest, Conflict, NotFound, Operations
from durable.testing import DurableEnv

calls: list[str] = []
broken = {"charge": True, "ship": False}


@pytest.fixture(autouse=True)
def _clean() -> None:
    calls.clear()
    broken.update(charge=True, ship=False)


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv() as environment:
        yield environment


@pytest.fixture
def ops(env: DurableEnv) -> Operations:
    return Operations(env.engine)


@dataclasses.dataclass
class Order:
    id: str
    total: float


@task
def reserve(order: Order) -> str:
    calls.append("reserve")
    return f"held {order.id}"


@task
def charge(order: Order) -> float:
    calls.append("charge")
    if broken["charge"]:
        raise ValueError(f"card declined for {order.id}")
    return order.total


@task
def pack(n: int) -> int:
    calls.append(f"pack {n}")
    return n


@workflow
def checkout(order: Order) -> float:
    reserve(order)
    return charge(order)


@workflow
def careful(order: Order) -> str:
    try:
        charge(order)
    except ValueError:
        reserve(order)  # the fallback: a handled failure
    if broken["ship"]:
        raise RuntimeError("cannot ship")
    return "done"


@workflow
def parallel(n: int) -> list[int]:
    return list(execute(pack.bind(n), pack.bind(n + 1)))


@workflow
def approval(doc: str) -> object:
    return wait("reviewed", timeout=dt.timedelta(days=3))


@workflow
def quiet_approval() -> str:
    try:
        return f"reviewed with {wait('reviewed', timeout=dt.timedelta(days=3))}"
    except durable.WaitTimeout:
        return "timed out"


@workflow
def parent_of_checkout(order: Order) -> float:
    return execute(checkout, order)


def test_lists_runs_with_filters_and_pages(env: DurableEnv, ops: Operations) -> None:
    for i in range(5):
        env.dispatch(parallel, i, id=f"p-{i}")
    env.run_until_idle()
    env.dispatch(approval, "doc", id="waiting-1")
    env.drain()
    page = ops.list_runs(limit=4)
    assert [run["id"] for run in page["items"]] == ["waiting-1", "p-4", "p-3", "p-2"]
    rest = ops.list_runs(limit=4, cursor=page["next_cursor"])
    assert [run["id"] for run in rest["items"]] == ["p-1", "p-0"]
    assert rest["next_cursor"] is None
    waiting = ops.list_runs(status=["waiting"])["items"]
    assert [(r["id"], r["status"], r["waiting_on"]) for r in waiting] == [
        ("waiting-1", "waiting", "event:reviewed")
    ]
    assert ops.count_runs(workflow=parallel.name) == 5
    assert ops.count_runs(search="p-", status=["completed"]) == 5
    with pytest.raises(BadRequest, match="Unknown status 'done'"):
        ops.list_runs(status=["done"])
    with pytest.raises(BadRequest, match="cursor"):
        ops.list_runs(cursor="not-a-cursor")
    with pytest.raises(BadRequest, match="limit"):
        ops.list_runs(limit=0)


def test_a_run_in_full_with_its_history(env: DurableEnv, ops: Operations) -> None:
    env.dispatch(checkout, Order("o-1", 12.5), id="o-1")
    env.run_until_idle()
    run = ops.get_run("o-1")
    assert run["status"] == "failed"
    assert run["input"] == {"args": [{"type": "Order", "id": "o-1", "total": 12.5}], "kwargs": {}}
    assert run["output"] is None
    assert run["error"]["type"] == "ValueError"
    assert run["error"]["message"] == "card declined for o-1"
    assert "raise ValueError" in run["error"]["traceback"]
    assert run["created_at"].endswith("Z") and run["duration"] >= 0
    history = ops.history("o-1")
    assert [(s["position"], s["name"], s["status"]) for s in history] == [
        (0, reserve.name, "completed"),
        (1, charge.name, "failed"),
    ]
    assert history[0]["output"] == "held o-1"
    assert history[1]["error"]["message"] == "card declined for o-1"
    assert history[0]["group"] != history[1]["group"], "sequential calls are separate layers"
    with pytest.raises(NotFound, match="No run has the id 'nope'"):
        ops.get_run("nope")


@task
def slow(n: int) -> int:
    time.sleep(0.05)
    return n


@workflow
def fan(n: int) -> list[int]:
    first = slow(n)
    return [first, *execute(slow.bind(n + 1), slow.bind(n + 2)), slow(n + 3)]


def test_parallel_calls_share_a_group(memory_engine: durable.Engine) -> None:
    """Calls that ran at the same time (their times overlap) form one group."""
    ops = Operations(memory_engine)
    assert memory_engine.execute_call(fan.bind(1), run_id="par") == [1, 2, 3, 4]
    groups = [s["group"] for s in ops.history("par")]
    assert groups == [0, 1, 1, 2]


def test_waiting_runs_say_what_they_wait_for(env: DurableEnv, ops: Operations) -> None:
    env.dispatch(approval, "doc", id="w")
    env.drain()
    run = ops.get_run("w")
    assert run["waiting"]["kind"] == "event"
    assert run["waiting"]["event"] == "reviewed"
    assert run["waiting"]["until"] is not None, "the timeout is the deadline"


def test_history_tells_a_null_payload_from_a_timeout(env: DurableEnv, ops: Operations) -> None:
    """`durable history`: an event consumed with no payload shows null, not the wait's
    deadline; a timed-out wait says it timed out."""
    from durable.cli.runs import STEP_COLUMNS

    def result_of(run_id: str) -> str:
        (event,) = [s for s in ops.history(run_id) if s["kind"] == "event"]
        return STEP_COLUMNS[-1].show(event)

    answered = env.dispatch(quiet_approval, id="qa-1")
    env.send(answered.id, "reviewed")
    assert answered.result() == "reviewed with None"
    assert result_of("qa-1") == "null"
    ignored = env.dispatch(quiet_approval, id="qa-2")
    env.advance(dt.timedelta(days=3))
    assert ignored.result() == "timed out"
    assert result_of("qa-2") == "timed out (WaitTimeout)"


def test_send_resumes_a_waiting_run_and_records_who(env: DurableEnv, ops: Operations) -> None:
    env.dispatch(approval, "doc", id="w")
    env.drain()
    sent = ops.send("w", "reviewed", {"approved": True}, sender="alice")
    assert sent["event"]["sender"] == "alice"
    env.run_until_idle()
    assert ops.get_run("w")["output"] == {"approved": True}
    (action,) = ops.actions("w")
    assert (action["action"], action["actor"]) == ("send", "alice")
    assert action["detail"]["event"] == "reviewed" and action["at"].endswith("Z")
    assert ops.events("w")[0]["consumed_position"] == 0
    with pytest.raises(Conflict, match="finished"):
        ops.send("w", "reviewed", {})
    with pytest.raises(NotFound):
        ops.send("ghost", "reviewed", {})
    with pytest.raises(BadRequest, match="needs a name"):
        ops.send("w", "", {})


def test_retry_reruns_only_the_failed_call(env: DurableEnv, ops: Operations) -> None:
    env.dispatch(checkout, Order("o-2", 30.0), id="o-2")
    env.run_until_idle()
    assert calls == ["reserve", "charge"]
    broken["charge"] = False
    retried = ops.retry("o-2", actor="bob")
    assert retried["reopened"] == [1]
    assert retried["run"]["status"] == "queued"
    env.run_until_idle()
    assert calls == ["reserve", "charge", "charge"], "the finished reserve is not re-run"
    run = ops.get_run("o-2")
    assert (run["status"], run["output"], run["error"]) == ("completed", 30.0, None)
    (action,) = ops.actions("o-2")
    assert action["actor"] == "bob"
    assert action["detail"]["errors"]["1"]["message"] == "card declined for o-2"
    with pytest.raises(Conflict, match="only failed or dead runs"):
        ops.retry("o-2")


def test_retry_keeps_handled_failures(env: DurableEnv, ops: Operations) -> None:
    broken["ship"] = True
    env.dispatch(careful, Order("o-3", 1.0), id="o-3")
    env.run_until_idle()
    assert ops.get_run("o-3")["status"] == "failed"
    broken.update(ship=False, charge=False)
    assert ops.retry("o-3")["reopened"] == [], "the caught failure stays as it was"
    env.run_until_idle()
    assert ops.get_run("o-3")["output"] == "done"
    assert calls == ["charge", "reserve"], "nothing recorded ran again"


def test_retry_reaches_a_failed_child(env: DurableEnv, ops: Operations) -> None:
    env.dispatch(parent_of_checkout, Order("o-4", 4.0), id="o-4")
    env.run_until_idle()
    assert ops.get_run("o-4/0")["status"] == "failed"
    assert ops.get_run("o-4")["children"] == ["o-4/0"]
    broken["charge"] = False
    assert ops.retry("o-4")["reopened"] == [0]
    env.run_until_idle()
    assert ops.get_run("o-4/0")["status"] == "completed"
    assert ops.get_run("o-4")["output"] == 4.0


def test_start_and_cancel(env: DurableEnv, ops: Operations) -> None:
    started = ops.start(approval.name, ["d"], id="s-1", actor="carol")
    assert started["status"] == "queued"
    assert ops.start(approval.name, ["d"], id="s-1")["id"] == "s-1", "idempotent"
    with pytest.raises(Conflict, match="other arguments"):
        ops.start(approval.name, ["other"], id="s-1")
    with pytest.raises(NotFound, match=r"No workflow named 'nope\.flow'"):
        ops.start("nope.flow", [])
    with pytest.raises(BadRequest, match="arguments do not fit"):
        ops.start(approval.name, [1, 2, 3])
    with pytest.raises(BadRequest, match=r"cannot be stored|could not be|pickle"):
        ops.start(approval.name, [threading.Lock()])
    cancelled = ops.cancel("s-1", actor="dave")
    assert cancelled["status"] == "cancelled"
    assert [(a["action"], a["actor"]) for a in ops.actions("s-1")] == [
        ("start", "carol"),
        ("cancel", "dave"),
    ]
    with pytest.raises(Conflict, match="already finished"):
        ops.cancel("s-1")


def test_stats_per_workflow_and_task(env: DurableEnv, ops: Operations) -> None:
    for i in range(3):
        env.dispatch(parallel, i, id=f"p-{i}")
    env.dispatch(checkout, Order("o-5", 1.0), id="o-5")
    env.run_until_idle()
    found = ops.stats()
    by_name = {s["name"]: s for s in found["workflows"]}
    assert by_name[parallel.name]["runs"] == 3
    assert by_name[parallel.name]["success"] == 100.0
    assert by_name[checkout.name]["failed"] == 1
    assert by_name[checkout.name]["failures_24h"] == 1
    tasks = {s["name"]: s for s in found["tasks"]}
    assert tasks[pack.name]["runs"] == 6
    assert tasks[charge.name]["success"] == 0.0
    assert ops.task_stats(pack.name)["completed"] == 6
    assert ops.stats(workflow=checkout.name)["workflows"][0]["name"] == checkout.name


def test_values_are_shown_without_unpickling(env: DurableEnv, ops: Operations) -> None:
    env.dispatch(approval, "doc", id="w")
    env.drain()
    payload = env.engine.dump({"big": "x" * 5000}, "a test payload")
    env.backend.send_event("w", "reviewed", payload)
    env.run_until_idle()
    output = ops.get_run("w")["output"]
    assert set(output) == {"truncated"} and len(output["truncated"]) == 2000
    assert json.loads(json.dumps(ops.history("w")))


def test_check_finds_runs_that_would_diverge(env: DurableEnv, ops: Operations) -> None:
    env.dispatch(approval, "doc", id="w")
    env.dispatch(checkout, Order("o-6", 1.0), id="o-6")  # failed: finished, not checked
    env.drain()
    results = ops.check()
    assert [(r["run_id"], r["ok"]) for r in results] == [("w", True)]
    original = approval.fn

    def changed(doc: str) -> object:
        reserve(Order(doc, 0))  # a new first call
        return wait("reviewed")

    approval.fn = changed
    try:
        (result,) = ops.check()
    finally:
        approval.fn = original
    assert not result["ok"] and result["position"] == 0
    assert "diverge" in result["message"] or "position 0" in result["message"]
    assert ops.get_run("w")["status"] == "waiting", "checking changes nothing"
    assert calls == ["reserve", "charge"], "checking runs no task"


@pytest.mark.parametrize("url", ["memory", "sqlite", "postgres"], indirect=True)
def test_reading_on_every_backend(engine: durable.Engine) -> None:
    ops = Operations(engine)
    for i in range(3):
        engine.execute_call(pack.bind(i), run_id=f"t-{i}")
    listed = ops.list_runs(limit=2)
    assert [r["id"] for r in listed["items"]] == ["t-2", "t-1"]
    assert [r["id"] for r in ops.list_runs(cursor=listed["next_cursor"])["items"]] == ["t-0"]
    assert ops.count_runs(status=["completed"], search="t-") == 3
    assert ops.get_run("t-1")["output"] == 1
    stats = ops.stats()["workflows"]
    assert [(s["name"], s["runs"]) for s in stats] == [(pack.name, 3)]
