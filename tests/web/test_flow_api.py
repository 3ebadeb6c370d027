"""The flows' REST endpoints against real flows on SQLite and PostgreSQL: real commands
run by an in-process worker, every answer checked against the OpenAPI document;
restart, kill and answering a human task change the flow; the 400, 404 and 409
answers; and POSTs refused without CSRF or on a read-only dashboard."""

from __future__ import annotations

import itertools
import os
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

import durable
import durable.flows
from durable.web import WebApp, make_app
from tests.e2e.flow_ledger import until
from tests.web.client import Client
from tests.web.installed import installed
from tests.web.openapi_check import CheckedClient

TOKEN = "flow-api-token"
_ids = itertools.count()


@dataclass
class World:
    """A database, a worker running flows, and the app serving them."""

    engine: durable.Engine
    app: WebApp
    api: CheckedClient
    files: Path

    def start(self, text: str, prefix: str) -> str:
        """Start the flow file *text* under a new id; return the id."""
        flow_id = f"{prefix}-{next(_ids)}"
        path = self.files / f"{flow_id}.toml"
        path.write_text(text)
        durable.flows.start(path, id=flow_id, engine=self.engine)
        return flow_id

    def tasks(self, flow_id: str) -> dict[str, dict[str, Any]]:
        reply = self.api.get(f"/api/v1/flows/{quote(flow_id, safe='')}")
        assert reply.status == 200, reply.body
        return {task["name"]: task for task in reply.json()["tasks"]}

    def wait_status(self, flow_id: str, **wanted: str) -> dict[str, dict[str, Any]]:
        """Poll the flow until each named task has the status given."""

        def reached() -> dict[str, dict[str, Any]] | None:
            tasks = self.tasks(flow_id)
            ok = all(tasks[name]["status"] == status for name, status in wanted.items())
            return tasks if ok else None

        return until(reached, f"{flow_id}: {wanted}")  # type: ignore[no-any-return]


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    files = tmp_path_factory.mktemp("flows")
    # launches keep their files by flow id: a directory of this module's own, so no
    # launch of an earlier test run is taken for one of these
    state = os.environ.get("DURABLE_FLOW_DIR")
    os.environ["DURABLE_FLOW_DIR"] = str(files / "state")
    try:
        with installed(request.param, files) as engine:
            worker = durable.Worker(engine, poll=0.05, concurrency=8).start()
            try:
                app = make_app(engine, token=TOKEN)
                yield World(engine, app, CheckedClient(app, token=TOKEN), files)
            finally:
                worker.stop(grace=5)
    finally:
        if state is None:
            del os.environ["DURABLE_FLOW_DIR"]
        else:
            os.environ["DURABLE_FLOW_DIR"] = state


def release(marker: Path) -> str:
    """The issue's release flow: build; unit (fails until *marker* exists); a human
    ui_check; upload after both."""
    check = shlex.quote(str(marker))
    return f"""
[flow]
name = "release"
max_running = 4

[task.build]
command = ["sh", "-c", "echo built the dist; echo warning >&2"]

[task.unit]
command = ["sh", "-c", "test -f {check} || (echo no marker; exit 3)"]
depends_on = ["build"]

[task.ui_check]
kind = "human"
assignee = "qa@example.com"
form = {{ approved = "bool", notes = "str?" }}
depends_on = ["build"]

[task.upload]
command = ["true"]
depends_on = ["unit", "ui_check"]
"""


@pytest.fixture
def stuck(world: World, tmp_path: Path) -> tuple[str, Path]:
    """A release flow whose unit failed and whose ui_check waits for its answer."""
    marker = tmp_path / "tests-pass"
    flow_id = world.start(release(marker), "rel")
    world.wait_status(flow_id, build="finished", unit="failed", ui_check="waiting")
    return flow_id, marker


def test_list_flows_pages_newest_first(world: World) -> None:
    """The list holds each flow with its tasks counted by status; a limit pages it by
    cursor; a bad limit or cursor is a 400."""
    text = '[flow]\nname = "tiny"\n[task.only]\ncommand = ["true"]\n'
    first, second = world.start(text, "tiny"), world.start(text, "tiny")
    world.wait_status(second, only="finished")
    world.wait_status(first, only="finished")
    page = world.api.get("/api/v1/flows", "limit=1").json()
    assert [item["id"] for item in page["items"]] == [second]
    assert page["items"][0]["name"] == "tiny"
    assert page["items"][0]["counts"]["finished"] == 1
    after = world.api.get("/api/v1/flows", f"limit=1&cursor={page['next_cursor']}").json()
    assert [item["id"] for item in after["items"]] == [first]
    for query in ("limit=0", "limit=x", "cursor=nonsense"):
        reply = world.api.get("/api/v1/flows", query)
        assert reply.status == 400, query
        assert reply.json()["detail"]


def _still(world: World, flow_id: str) -> bool:
    before = world.api.get(f"/api/v1/flows/{flow_id}").header("ETag")
    time.sleep(0.2)
    return before == world.api.get(f"/api/v1/flows/{flow_id}").header("ETag")


def test_a_flow_with_its_layout_and_etag(world: World, stuck: tuple[str, Path]) -> None:
    """GET a flow: its tasks in file order with their details, and a layout with one
    box per task and one arrow per dependency; its ETag gives a 304 while nothing moves."""
    flow_id, _ = stuck
    # The tasks' statuses can read as stuck a moment before the flow has published
    # everything: wait until its view holds still (the same ETag twice, 0.2 s apart).
    until(lambda: _still(world, flow_id), "the flow's view to hold still")
    reply = world.api.get(f"/api/v1/flows/{flow_id}")
    assert reply.status == 200
    flow = reply.json()
    assert flow["id"] == flow_id and flow["name"] == "release" and flow["max_running"] == 4
    assert flow["stuck"] is False  # ui_check is waiting for its answer: not stuck yet
    names = [task["name"] for task in flow["tasks"]]
    assert names == ["build", "unit", "ui_check", "upload"]
    tasks = {task["name"]: task for task in flow["tasks"]}
    assert tasks["unit"]["exit_code"] == 3 and tasks["unit"]["kind"] == "command"
    assert tasks["ui_check"]["form"] == {"approved": "bool", "notes": "str?"}
    assert tasks["ui_check"]["assignee"] == "qa@example.com"
    assert tasks["upload"]["status"] == "not_ready"
    layout = flow["layout"]
    assert [node["name"] for node in layout["nodes"]] == names
    arrows = {(edge["from"], edge["to"]) for edge in layout["edges"]}
    assert arrows == {("build", "unit"), ("build", "ui_check"), ("unit", "upload"),
                      ("ui_check", "upload")}  # fmt: skip
    tag = reply.header("ETag")
    assert tag is not None
    again = world.api.get(f"/api/v1/flows/{flow_id}", headers={"If-None-Match": tag})
    assert again.status == 304 and again.body == b""


def test_unknown_flows_and_tasks_are_404(world: World, stuck: tuple[str, Path]) -> None:
    """An unknown flow, a run that is not a flow, and an unknown task: 404 that says so."""
    flow_id, _ = stuck
    assert world.api.get("/api/v1/flows/no-such-flow").status == 404
    durable.execute(_plain, id=f"plain-{flow_id}")
    reply = world.api.get(f"/api/v1/flows/plain-{flow_id}")
    assert reply.status == 404 and "not a flow" in reply.json()["detail"]
    for path in (
        f"/api/v1/flows/{flow_id}/tasks/nope/log",
        "/api/v1/flows/no-such-flow/tasks/build/log",
    ):
        reply = world.api.get(path)
        assert reply.status == 404, path
        assert reply.json()["detail"]
    for verb in ("restart", "kill", "done"):
        reply = world.api.post(f"/api/v1/flows/{flow_id}/tasks/nope/{verb}", {})
        assert reply.status == 404, verb
        reply = world.api.post(f"/api/v1/flows/no-such-flow/tasks/unit/{verb}", {})
        assert reply.status == 404, verb


@durable.workflow
def _plain() -> int:
    return 1


def test_a_task_log(world: World, stuck: tuple[str, Path]) -> None:
    """A command's captured stdout and stderr; a human task has none."""
    flow_id, _ = stuck
    log = world.api.get(f"/api/v1/flows/{flow_id}/tasks/build/log").json()
    assert log["task"] == "build" and log["running"] is False
    assert "built the dist" in log["log"] and "warning" in log["log"]
    assert log["log_bytes"] >= len("built the dist\nwarning\n") and log["log_dropped"] == 0
    assert log["run_id"].startswith(flow_id + "/")
    assert "no marker" in world.api.get(f"/api/v1/flows/{flow_id}/tasks/unit/log").json()["log"]
    human = world.api.get(f"/api/v1/flows/{flow_id}/tasks/ui_check/log").json()
    assert human["log"] == "" and human["run_id"] is None


def test_restart_a_failed_task_runs_it_and_its_dependents(
    world: World, stuck: tuple[str, Path]
) -> None:
    """Restarting a task that cannot be restarted is a 409; restarting the failed unit
    runs it again (it now passes) and records who asked."""
    flow_id, marker = stuck
    refused = world.api.post(f"/api/v1/flows/{flow_id}/tasks/upload/restart", {})
    assert refused.status == 409 and "not_ready" in refused.json()["detail"]
    marker.write_text("ok")
    reply = world.api.post(f"/api/v1/flows/{flow_id}/tasks/unit/restart", {"actor": "ann"})
    assert reply.status == 200, reply.body
    assert reply.json() == {"flow": flow_id, "task": "unit", "restarted": ["unit", "upload"]}
    tasks = world.wait_status(flow_id, unit="finished")
    assert tasks["unit"]["launches"] == 2 and tasks["unit"]["exit_code"] == 0
    assert tasks["upload"]["status"] == "not_ready"  # still waits for ui_check
    actions = world.api.get(f"/api/v1/runs/{flow_id}").json()["actions"]
    assert [(a["action"], a["actor"]) for a in actions] == [("flow.restart", "ann")]


def test_answer_a_human_task(world: World, stuck: tuple[str, Path]) -> None:
    """done checks its body (status, data) and the form (400), refuses a task that is
    not a waiting human task (409); a good answer finishes the task, recorded with the
    principal, and its dependents run."""
    flow_id, marker = stuck
    done = f"/api/v1/flows/{flow_id}/tasks/ui_check/done"
    bad = [
        ({"data": {"approved": True}, "status": "maybe"}, "'status'"),
        ({"data": [True]}, "'data'"),
        ({"data": {"approved": "yes"}}, "approved"),
        ({"data": {"notes": "x"}}, "approved"),
        ({"data": {"approved": True, "extra": 1}}, "extra"),
    ]
    for body, named in bad:
        reply = world.api.post(done, body)
        assert reply.status == 400, body
        assert named in reply.json()["detail"], reply.json()
    refused = world.api.post(f"/api/v1/flows/{flow_id}/tasks/unit/done", {"data": {}})
    assert refused.status == 409 and "human" in refused.json()["detail"]
    marker.write_text("ok")
    world.api.post(f"/api/v1/flows/{flow_id}/tasks/unit/restart", {})
    reply = world.api.post(done, {"data": {"approved": True, "notes": "looks fine"}})
    assert reply.status == 200, reply.body
    assert reply.json() == {"flow": flow_id, "task": "ui_check", "status": "finished"}
    tasks = world.wait_status(flow_id, ui_check="finished", unit="finished", upload="finished")
    assert tasks["ui_check"]["data"] == {"approved": True, "notes": "looks fine"}
    assert tasks["ui_check"]["by"] == "api"
    again = world.api.post(done, {"data": {"approved": True}})
    assert again.status == 409
    until(lambda: world.api.get(f"/api/v1/flows/{flow_id}").json()["status"] == "completed",
          "the flow to complete")  # fmt: skip


def test_a_human_task_can_fail(world: World, stuck: tuple[str, Path]) -> None:
    """status "failed" fails the task; what depends on it stays not ready."""
    flow_id, _ = stuck
    reply = world.api.post(
        f"/api/v1/flows/{flow_id}/tasks/ui_check/done",
        {"data": {"approved": False}, "status": "failed", "actor": "qa"},
    )
    assert reply.status == 200 and reply.json()["status"] == "failed"
    tasks = world.wait_status(flow_id, ui_check="failed")
    assert tasks["ui_check"]["by"] == "qa" and tasks["upload"]["status"] == "not_ready"
    until(lambda: world.api.get(f"/api/v1/flows/{flow_id}").json()["stuck"], "stuck")


def test_kill_a_running_task(world: World) -> None:
    """Kill ends a running command (the task ends killed); killing it again, or a task
    that is not running, is a 409."""
    text = """
[flow]
name = "slow"
[task.nap]
command = ["sleep", "60"]
[task.after]
command = ["true"]
depends_on = ["nap"]
"""
    flow_id = world.start(text, "slow")
    world.wait_status(flow_id, nap="running")
    not_running = world.api.post(f"/api/v1/flows/{flow_id}/tasks/after/kill", {})
    assert not_running.status == 409 and "not running" in not_running.json()["detail"]
    reply = world.api.post(f"/api/v1/flows/{flow_id}/tasks/nap/kill", {})
    assert reply.status == 200, reply.body
    assert reply.json() == {"flow": flow_id, "task": "nap", "killed": True}
    tasks = world.wait_status(flow_id, nap="killed")
    assert tasks["after"]["status"] == "not_ready"
    assert world.api.post(f"/api/v1/flows/{flow_id}/tasks/nap/kill", {}).status == 409


def test_posts_need_csrf_and_a_writable_dashboard(world: World, stuck: tuple[str, Path]) -> None:
    """A browser session's POST without the CSRF token is refused (403), as is every
    POST on a read-only dashboard; neither reaches the flow."""
    flow_id, _ = stuck
    browser = Client(world.app)
    browser.login(TOKEN)
    csrf, browser.csrf = browser.csrf, None
    read_only = make_app(world.engine, token=TOKEN, read_only=True)
    viewer = Client(read_only, token=TOKEN)
    for verb, body in (("restart", {}), ("kill", {}), ("done", {"data": {"approved": True}})):
        task = "ui_check" if verb == "done" else "unit"
        path = f"/api/v1/flows/{flow_id}/tasks/{task}/{verb}"
        refused = browser.post(path, body, headers={"Origin": "http://127.0.0.1:8765"})
        assert refused.status == 403, verb
        assert "CSRF" in refused.json()["detail"]
        assert viewer.post(path, body).status == 403, verb
        assert viewer.get(f"/api/v1/flows/{flow_id}").status == 200
    assert world.tasks(flow_id)["ui_check"]["status"] == "waiting"
    assert world.tasks(flow_id)["unit"]["launches"] == 1
    browser.csrf = csrf
    reply = browser.post(f"/api/v1/flows/{flow_id}/tasks/ui_check/done",
                         {"data": {"approved": True}})  # fmt: skip
    assert reply.status == 200, reply.body
    assert world.wait_status(flow_id, ui_check="finished")["ui_check"]["by"] == "dashboard"


def test_a_nested_flow_is_reached_by_its_id(world: World) -> None:
    """A nested flow's task gives its flow id (it holds a slash); the API serves that
    flow and its tasks' logs."""
    (world.files / "inner.toml").write_text(
        '[flow]\nname = "inner"\n[task.a]\ncommand = ["true"]\n'
    )
    outer = world.start('[flow]\nname = "outer"\n[task.sub]\nflow = "inner.toml"\n', "outer")
    tasks = world.wait_status(outer, sub="finished")
    nested = tasks["sub"]["run_id"]
    assert nested.startswith(outer + "/") and tasks["sub"]["kind"] == "flow"
    inner = world.api.get(f"/api/v1/flows/{nested}").json()
    assert inner["id"] == nested and inner["parent"] == outer and inner["name"] == "inner"
    assert [task["status"] for task in inner["tasks"]] == ["finished"]
    log = world.api.get(f"/api/v1/flows/{nested}/tasks/a/log").json()
    assert log["task"] == "a" and log["run_id"].startswith(nested + "/")
