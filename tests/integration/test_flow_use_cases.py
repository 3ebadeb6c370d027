"""Seed 001's use cases as process flows of real shell commands that write to a
ledger (tests/e2e/flow_ledger.py), on SQLite and PostgreSQL, run by an in-process
worker (nothing is killed or timed, so they run beside other tests): a release of five
suites, two more, a package and a notification; a release with a human step completed
through the REST API; a 1,000-task DAG; and a restart of a failed task in the middle,
which runs exactly it and what depends on it again."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
import durable.flows
from durable.runtime.defaults import swap
from durable.web import make_app
from tests.e2e.flow_ledger import TICK, Ledger, random_dag, until
from tests.web.client import Client

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
TOKEN = "flows-e2e"


@pytest.fixture
def world(url: str, tmp_path: Path) -> Iterator[tuple[durable.Engine, Ledger]]:
    """An engine on the test's database, a worker running flows, a ledger."""
    before = os.environ.get("DURABLE_FLOW_DIR")
    os.environ["DURABLE_FLOW_DIR"] = str(tmp_path / "state")
    engine = durable.Engine(url, lease=10.0)
    previous = swap(engine)
    worker = durable.Worker(engine, concurrency=24, poll=0.05).start()
    try:
        yield engine, Ledger(tmp_path)
    finally:
        worker.stop(grace=5)
        swap(previous)
        engine.close()
        if before is None:
            del os.environ["DURABLE_FLOW_DIR"]
        else:
            os.environ["DURABLE_FLOW_DIR"] = before


def statuses(engine: durable.Engine, flow_id: str) -> dict[str, str]:
    view = durable.flows.view(flow_id, engine=engine)
    return {task["name"]: task["status"] for task in view["tasks"]}


def settled(engine: durable.Engine, flow_id: str) -> dict[str, Any] | None:
    """The flow's view once every task's launch has recorded its exit code, else None."""
    view = durable.flows.view(flow_id, engine=engine)
    return view if all(t["exit_code"] is not None for t in view["tasks"]) else None


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_five_suites_then_two_then_a_package_and_a_mail(
    world: tuple[durable.Engine, Ledger],
) -> None:
    """Use case 1: two suites start once all five succeeded, the package after both,
    the notification last; at most three commands at once."""
    engine, ledger = world
    dag: dict[str, tuple[str, ...]] = {f"suite{i}": () for i in range(1, 6)}
    dag |= {"more1": tuple(dag), "more2": tuple(dag)}
    dag |= {"package": ("more1", "more2"), "mail": ("package",)}
    path = ledger.flow("suites", [ledger.task(n, 0.2, deps) for n, deps in dag.items()], 3)
    handle = durable.flows.start(path, id="suites-1", engine=engine)
    assert handle.result(timeout=120) == {"name": "suites", "counts": {"finished": 9}}
    ledger.check_order(dag)
    assert ledger.starts() == dict.fromkeys(dag, 1)
    assert 2 <= ledger.most_at_once() <= 3
    # The flow goes on once a launch's last attempt has told it (from the task body),
    # while the launch's own run records the exit code: the view may lag it briefly.
    view = until(lambda: settled(engine, "suites-1"), "every launch's exit code recorded")
    # A launch's finish time may read up to a kernel tick early (TICK).
    wrong = {
        t["name"]: (t["exit_code"], t["duration"])
        for t in view["tasks"]
        if t["exit_code"] != 0 or t["duration"] < 0.2 - TICK
    }
    assert not wrong, wrong


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_release_waits_for_a_human_answer_given_through_the_api(
    world: tuple[durable.Engine, Ledger], tmp_path: Path
) -> None:
    """Use case 2: build, then tests and a manual UI check in parallel; upload runs
    only once the check is answered through the REST API, and gets the answer."""
    engine, ledger = world
    upload = tmp_path / "upload.json"
    path = ledger.flow(
        "release",
        [
            ledger.task("build", 0.1),
            ledger.task("unit", 0.1, ("build",)),
            '[task.ui_check]\nkind = "human"\nassignee = "qa@example.com"\n'
            'form = { approved = "bool", notes = "str?" }\ndepends_on = ["build"]\n',
            f'[task.upload]\ncommand = ["sh", "-c", "echo $DURABLE_INPUT > {upload}"]\n'
            'depends_on = ["unit", "ui_check"]\n',
        ],
    )
    durable.flows.start(path, id="rel-42", engine=engine)
    until(lambda: statuses(engine, "rel-42")["ui_check"] == "waiting", "the human task")
    until(lambda: statuses(engine, "rel-42")["unit"] == "finished", "the unit tests")
    time.sleep(0.5)
    assert statuses(engine, "rel-42")["upload"] == "not_ready"  # it waits for the answer
    api = Client(make_app(engine, token=TOKEN), token=TOKEN)
    base = "/api/v1/flows/rel-42/tasks/ui_check/done"
    refused = api.post(base, {"data": {"approved": "yes"}})
    assert refused.status == 400 and "approved" in refused.json()["detail"]
    answered = api.post(base, {"data": {"approved": True, "notes": "looks fine"}})
    assert answered.status == 200, answered.body
    assert durable.get("rel-42").result(timeout=60)["counts"] == {"finished": 4}
    received = json.loads(upload.read_text())
    assert received == {"ui_check": {"approved": True, "notes": "looks fine"}}
    view = durable.flows.view("rel-42", engine=engine)
    check = next(t for t in view["tasks"] if t["name"] == "ui_check")
    assert check["data"] == {"approved": True, "notes": "looks fine"} and check["by"]
    done = [a for a in engine.backend.actions("rel-42") if a.action == "flow.done"]
    assert len(done) == 1


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_a_dag_of_a_thousand_tasks(world: tuple[durable.Engine, Ledger]) -> None:
    """Use case 3: 1,000 interdependent commands; each starts only after all it
    depends on ended, each once, never more than max_running at once."""
    engine, ledger = world
    dag = random_dag(1000, seed=18)
    path = ledger.flow("etl", [ledger.task(n, 0, deps) for n, deps in dag.items()], 8)
    handle = durable.flows.start(path, id="etl-1", engine=engine)
    assert handle.result(timeout=280)["counts"] == {"finished": 1000}
    ledger.check_order(dag)
    assert ledger.starts() == dict.fromkeys(dag, 1)
    assert ledger.most_at_once() <= 8


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_restarting_a_failed_middle_task_runs_it_and_its_descendants(
    world: tuple[durable.Engine, Ledger],
) -> None:
    """a -> b -> c -> d and a -> e: b fails, so c and d wait and e goes on; once b
    is fixed and restarted, b, c and d run again, exactly once each; a and e do not."""
    engine, ledger = world
    dag = {"a": (), "b": ("a",), "c": ("b",), "d": ("c",), "e": ("a",)}
    path = ledger.flow("chain", [ledger.task(n, 0, deps) for n, deps in dag.items()])
    ledger.fail("b")
    durable.flows.start(path, id="chain-1", engine=engine)
    until(lambda: durable.flows.view("chain-1", engine=engine)["stuck"], "b to fail")
    assert statuses(engine, "chain-1") == {
        "a": "finished", "b": "failed", "c": "not_ready", "d": "not_ready", "e": "finished",
    }  # fmt: skip
    assert "exit code 7" in (durable.flows.view("chain-1", engine=engine)["tasks"][1]["error"])
    ledger.fail("b", failing=False)
    answer = durable.flows.restart("chain-1", "b", actor="test", engine=engine)
    assert answer["restarted"] == ["b", "c", "d"]
    assert durable.get("chain-1").result(timeout=60)["counts"] == {"finished": 5}
    assert ledger.starts() == {"a": 1, "b": 2, "c": 1, "d": 1, "e": 1}
    ledger.check_order(dag)
    view = durable.flows.view("chain-1", engine=engine)
    assert {t["name"]: t["launches"] for t in view["tasks"]} == {
        "a": 1, "b": 2, "c": 1, "d": 1, "e": 1,
    }  # fmt: skip
    restarts = [a for a in engine.backend.actions("chain-1") if a.action == "flow.restart"]
    assert [json.loads(a.detail)["again"] for a in restarts] == [["b", "c", "d"]]
