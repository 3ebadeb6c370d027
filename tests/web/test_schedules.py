"""Schedules through the REST API (GET /schedules, /schedules/{id}; POST .../pause,
/resume, /trigger; DELETE /schedules/{id}) on SQLite and PostgreSQL, with the same
checks as the run actions: read-only, CSRF and Origin for cookie clients, 404 and 409.
Every documented answer is checked against the OpenAPI document."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import pytest

import durable
from durable.core.schedules import Schedule
from durable.ops import Operations
from durable.runtime import schedules
from durable.web import WebApp, make_app
from tests.conftest import PostgresSchemas, _need_postgres
from tests.integration import schedule_workflows as flows
from tests.web.client import ORIGIN, Client
from tests.web.openapi_check import CheckedClient

TOKEN = "schedules-test-token"
_ids = itertools.count()


@dataclass
class World:
    engine: durable.Engine
    app: WebApp
    api: CheckedClient

    def stored(self, schedule_id: str) -> Schedule | None:
        return self.engine.backend.get_schedule(schedule_id)

    def make(self, prefix: str, *, every: float = 900, queue: str = "nobody") -> str:
        """A new interval schedule of `sync_customer` ("c-<n>"); its id."""
        n = next(_ids)
        schedule_id = f"{prefix}-{n}"
        spec = schedules.Spec.make(every=every, queue=queue)
        schedules.store(
            self.engine, flows.sync_customer, spec, schedule_id=schedule_id, args=[f"c-{n}"]
        )
        return schedule_id

    def fire_now(self, schedule_id: str) -> None:
        """Make the schedule's next tick due now, and fire it (no worker runs its run)."""
        stored = self.stored(schedule_id)
        assert stored is not None
        due = dataclasses.replace(stored, next_fire_at=self.engine.backend.now() - 1)
        self.engine.backend.put_schedule(due)
        schedules.fire_due(self.engine)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    schemas = PostgresSchemas(_need_postgres()) if request.param == "postgres" else None
    path = tmp_path_factory.mktemp("schedules") / "d.db"
    url = schemas.new_url() if schemas else f"sqlite:///{path}"
    engine = durable.Engine(url, lease=5.0)
    try:
        app = make_app(engine, token=TOKEN)
        yield World(engine, app, CheckedClient(app, token=TOKEN))
    finally:
        engine.close()
        if schemas is not None:
            schemas.drop_all()


def _detail(reply: Any) -> str:
    assert reply.content_type == "application/problem+json", reply.body
    return str(reply.json()["detail"])


def test_list_and_get_answer_the_operations_views(world: World) -> None:
    """GET /schedules lists every schedule by id, as `Operations.list_schedules`; a cron
    schedule has cron and timezone, an interval one every; GET /schedules/{id} is one."""
    every = world.make("web-list", every=900)
    cron = f"web-list-cron-{next(_ids)}"
    spec = schedules.Spec.make(cron="0 3 * * *", timezone="Europe/Paris")
    schedules.store(world.engine, flows.nightly_report, spec, schedule_id=cron)

    reply = world.api.get("/api/v1/schedules")
    assert reply.status == 200
    items = reply.json()["items"]
    assert items == Operations(world.engine).list_schedules()
    assert [item["id"] for item in items] == sorted(item["id"] for item in items)
    listed = {item["id"]: item for item in items}
    assert (listed[every]["every"], "cron" in listed[every]) == (900.0, False)
    assert (listed[cron]["cron"], listed[cron]["timezone"]) == ("0 3 * * *", "Europe/Paris")
    assert "every" not in listed[cron]
    assert listed[cron]["workflow"] == flows.nightly_report.name
    assert listed[cron]["next_fire_at"].endswith(":00:00.000000Z")  # 03:00 in Paris

    one = world.api.get(f"/api/v1/schedules/{cron}")
    assert one.status == 200 and one.json() == listed[cron]


def test_unknown_schedules_are_404(world: World) -> None:
    for reply in (
        world.api.get("/api/v1/schedules/nope"),
        world.api.post("/api/v1/schedules/nope/pause"),
        world.api.post("/api/v1/schedules/nope/resume"),
        world.api.post("/api/v1/schedules/nope/trigger"),
        world.api.delete("/api/v1/schedules/nope"),
    ):
        assert reply.status == 404
        assert "No schedule has the id 'nope'" in _detail(reply)


def test_pause_then_resume(world: World) -> None:
    """Paused: no next tick, stored paused; pausing again changes nothing. Resumed: a
    next tick after now; resuming one that is not paused is 409."""
    schedule_id = world.make("web-pause")
    paused = world.api.post(f"/api/v1/schedules/{schedule_id}/pause", {})
    assert paused.status == 200
    assert (paused.json()["paused"], paused.json()["next_fire_at"]) == (True, None)
    stored = world.stored(schedule_id)
    assert stored is not None and stored.paused
    assert world.engine.backend.due_schedules(limit=100) == []
    again = world.api.post(f"/api/v1/schedules/{schedule_id}/pause")
    assert again.status == 200 and again.json()["paused"] is True

    resumed = world.api.post(f"/api/v1/schedules/{schedule_id}/resume")
    assert resumed.status == 200
    assert resumed.json()["paused"] is False and resumed.json()["next_fire_at"] is not None
    stored = world.stored(schedule_id)
    assert stored is not None and not stored.paused
    assert stored.next_fire_at > world.engine.backend.now()
    conflict = world.api.post(f"/api/v1/schedules/{schedule_id}/resume")
    assert conflict.status == 409 and "is not paused" in _detail(conflict)


def test_trigger_starts_a_run_now(world: World) -> None:
    """201, the run's id and its Location: a queued run of the schedule's workflow with
    its arguments, on its queue; it is not the schedule's last run (not a tick's)."""
    schedule_id = world.make("web-trigger", queue="sched-web")
    reply = world.api.post(f"/api/v1/schedules/{schedule_id}/trigger", {})
    assert reply.status == 201
    run_id = reply.json()["run"]
    assert run_id.startswith(f"{schedule_id}@") and run_id.endswith("-manual")
    assert reply.header("Location") == f"/api/v1/runs/{run_id}"
    run = world.api.get(f"/api/v1/runs/{run_id}").json()
    assert (run["workflow"], run["status"], run["queue"]) == (
        flows.sync_customer.name,
        "queued",
        "sched-web",
    )
    assert run["input"] == {"args": [schedule_id.replace("web-trigger", "c")], "kwargs": {}}
    assert world.api.get(f"/api/v1/schedules/{schedule_id}").json()["last_run"] is None


def test_trigger_of_a_workflow_not_registered_here_is_409(world: World) -> None:
    stored = world.stored(world.make("web-unknown"))
    assert stored is not None
    elsewhere = dataclasses.replace(stored, id=f"web-elsewhere-{next(_ids)}", workflow="gone.flow")
    world.engine.backend.put_schedule(elsewhere)
    reply = world.api.post(f"/api/v1/schedules/{elsewhere.id}/trigger")
    assert reply.status == 409 and "not registered" in _detail(reply)
    assert world.api.get(f"/api/v1/schedules/{elsewhere.id}").json()["workflow"] == "gone.flow"


def test_a_fired_tick_shows_as_the_last_run_with_its_status(world: World) -> None:
    """After a tick: last_fire_at and last_run {id, status}, the status read live (a
    cancelled run shows cancelled; a run no longer stored, null)."""
    schedule_id = world.make("web-tick")
    world.fire_now(schedule_id)
    shown = world.api.get(f"/api/v1/schedules/{schedule_id}").json()
    assert shown["last_fire_at"] is not None
    run_id = shown["last_run"]["id"]
    assert run_id.startswith(f"{schedule_id}@") and not run_id.endswith("-manual")
    assert shown["last_run"]["status"] == "queued"
    Operations(world.engine).cancel(run_id, actor="test")
    shown = world.api.get(f"/api/v1/schedules/{schedule_id}").json()
    assert shown["last_run"] == {"id": run_id, "status": "cancelled"}

    stored = world.stored(schedule_id)
    assert stored is not None
    moved = world.engine.backend.advance_schedule(
        schedule_id,
        expected=stored.next_fire_at,
        next_fire_at=stored.next_fire_at,
        last_fire_at=None,
        last_run_id="purged-long-ago",
    )
    assert moved
    shown = world.api.get(f"/api/v1/schedules/{schedule_id}").json()
    assert shown["last_run"] == {"id": "purged-long-ago", "status": None}


def test_an_orphaned_schedule_has_no_next_tick(world: World) -> None:
    stored = world.stored(world.make("web-orphan"))
    assert stored is not None
    world.engine.backend.put_schedule(dataclasses.replace(stored, declared=True, orphaned=True))
    shown = world.api.get(f"/api/v1/schedules/{stored.id}").json()
    assert (shown["declared"], shown["orphaned"], shown["next_fire_at"]) == (True, True, None)


def test_delete_removes_the_schedule_and_keeps_its_runs(world: World) -> None:
    schedule_id = world.make("web-delete")
    run_id = world.api.post(f"/api/v1/schedules/{schedule_id}/trigger").json()["run"]
    reply = world.api.delete(f"/api/v1/schedules/{schedule_id}")
    assert reply.status == 200 and reply.json() == {"deleted": schedule_id}
    assert world.stored(schedule_id) is None
    assert world.api.get(f"/api/v1/schedules/{schedule_id}").status == 404
    assert world.api.delete(f"/api/v1/schedules/{schedule_id}").status == 404
    assert schedule_id not in [s["id"] for s in world.api.get("/api/v1/schedules").json()["items"]]
    assert world.api.get(f"/api/v1/runs/{run_id}").status == 200


def raw(app: WebApp) -> CheckedClient:
    """A bearer client whose requests arrive as a WSGI server passes them on: the raw
    target in REQUEST_URI, PATH_INFO decoded (so "%2F" stays inside an id)."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        environ["REQUEST_URI"] = environ["PATH_INFO"]
        environ["PATH_INFO"] = unquote(environ["PATH_INFO"], "latin-1")
        return app(environ, start_response)

    return CheckedClient(wrapped, token=TOKEN)


def test_ids_with_a_slash_work_raw_and_encoded(world: World) -> None:
    """Like run ids, a schedule id may hold "/", even one ending in an action's name:
    sent raw or %2F-encoded (as the dashboard does), every schedule URL reaches it."""
    schedule_id = f"team/web-{next(_ids)}/pause"
    spec = schedules.Spec.make(every=60)
    schedules.store(world.engine, flows.sync_customer, spec, schedule_id=schedule_id, args=["x"])
    encoded = quote(schedule_id, safe="")
    api = raw(world.app)
    assert api.get(f"/api/v1/schedules/{encoded}").json()["id"] == schedule_id
    assert api.post(f"/api/v1/schedules/{encoded}/pause").json()["paused"] is True
    assert api.post(f"/api/v1/schedules/{encoded}/resume").json()["paused"] is False
    team = schedule_id.rpartition("/")[0]
    # raw, it reads as the bare route: pause is a POST (the checker would read it as one)
    plain = Client(world.app, token=TOKEN)
    assert plain.get(f"/api/v1/schedules/{team}/pause").json()["id"] == schedule_id
    assert api.delete(f"/api/v1/schedules/{encoded}").json() == {"deleted": schedule_id}


def test_bad_ids_and_methods(world: World) -> None:
    """A NUL in the id is a 400 naming the schedule id; other methods are 405."""
    reply = raw(world.app).get("/api/v1/schedules/a%00b")
    assert reply.status == 400 and "The schedule id in the path" in _detail(reply)
    plain = Client(world.app, token=TOKEN)
    wrong = plain.request("PUT", "/api/v1/schedules/x")
    assert wrong.status == 405 and wrong.header("Allow") == "GET, DELETE"
    assert plain.delete("/api/v1/schedules").status == 405
    listed = plain.request("POST", "/api/v1/schedules", json_body={})
    assert listed.status == 405 and listed.header("Allow") == "GET"


def test_posts_must_be_json_but_deletes_need_no_body(world: World) -> None:
    schedule_id = world.make("web-types")
    text = world.api.post(
        f"/api/v1/schedules/{schedule_id}/pause", body=b"x", content_type="text/plain"
    )
    assert text.status == 415
    stored = world.stored(schedule_id)
    assert stored is not None and not stored.paused
    assert world.api.request("DELETE", f"/api/v1/schedules/{schedule_id}").status == 200


def test_cookie_writes_need_the_csrf_token_and_origin(world: World) -> None:
    """The dashboard's session: POSTs and DELETEs without the CSRF token, or from
    another origin, are 403 and change nothing; with both they work."""
    schedule_id = world.make("web-csrf")
    browser = CheckedClient(world.app)
    browser.login(TOKEN)
    pause = f"/api/v1/schedules/{schedule_id}/pause"
    one = f"/api/v1/schedules/{schedule_id}"
    refused = [
        browser.post(pause, headers={"X-CSRF-Token": "forged"}),
        browser.post(pause, headers={"Origin": "http://evil.example"}),
        browser.post(f"{one}/trigger", headers={"Sec-Fetch-Site": "cross-site"}),
        browser.delete(one, headers={"X-CSRF-Token": "forged"}),
        browser.delete(one, headers={"Origin": "http://evil.example"}),
    ]
    assert [reply.status for reply in refused] == [403] * 5
    assert "DELETE" in _detail(refused[-1])
    stored = world.stored(schedule_id)
    assert stored is not None and not stored.paused
    assert runs_of(world, schedule_id) == []

    assert browser.post(pause).json()["paused"] is True
    started = browser.post(f"{one}/trigger")
    assert started.status == 201 and runs_of(world, schedule_id) == [started.json()["run"]]
    assert browser.delete(one, headers={"Origin": ORIGIN}).status == 200
    assert world.stored(schedule_id) is None


def runs_of(world: World, schedule_id: str) -> list[str]:
    items = world.api.get("/api/v1/runs", f"search={schedule_id}@").json()["items"]
    return [run["id"] for run in items]


def test_a_read_only_app_refuses_every_schedule_action(world: World) -> None:
    """403 for bearer and cookie clients alike, nothing changes; the reads work."""
    schedule_id = world.make("web-read-only")
    app = make_app(world.engine, token=TOKEN, read_only=True)
    browser = CheckedClient(app)
    browser.login(TOKEN)
    one = f"/api/v1/schedules/{schedule_id}"
    for client in (CheckedClient(app, token=TOKEN), browser):
        for reply in (
            client.post(f"{one}/pause"),
            client.post(f"{one}/resume"),
            client.post(f"{one}/trigger"),
            client.delete(one),
        ):
            assert reply.status == 403 and "read-only" in _detail(reply)
        assert client.get(one).json()["paused"] is False
        assert schedule_id in [s["id"] for s in client.get("/api/v1/schedules").json()["items"]]
    stored = world.stored(schedule_id)
    assert stored is not None and not stored.paused
    assert runs_of(world, schedule_id) == []
