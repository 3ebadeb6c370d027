"""Reading runs through the REST API, on SQLite and PostgreSQL: the list with its
filters, cursor and refused parameters, one run in full, its history and graph, the
statistics, and unknown runs; every answer checked against the OpenAPI document."""

from __future__ import annotations

import pytest

from tests.web.api_world import World, _ids_of, breaker, double, doubler, explode


def test_listing_filters_runs(world: World) -> None:
    """Workflow, status (repeated or comma list), search, parent, since/until filters."""
    api = world.api
    everything = _ids_of(api.get("/api/v1/runs", "limit=500"))
    assert {"done", "broken", "family", "approved", "waiting", "parked"} <= everything
    finished = _ids_of(api.get("/api/v1/runs", "status=failed,cancelled&limit=500"))
    assert finished == _ids_of(api.get("/api/v1/runs", "status=failed&status=cancelled"))
    assert {"broken", "parked"} <= finished and "done" not in finished
    assert _ids_of(api.get("/api/v1/runs", f"workflow={breaker.name}")) >= {"broken"}
    assert _ids_of(api.get("/api/v1/runs", "search=rok")) == {"broken"}
    children = _ids_of(api.get("/api/v1/runs", "parent=family"))
    assert len(children) == 1 and children == set(api.get("/api/v1/runs/family").json()["children"])
    assert _ids_of(api.get("/api/v1/runs", "since=1h&limit=500")) == everything
    assert _ids_of(api.get("/api/v1/runs", "until=1h")) == set()
    assert (
        _ids_of(api.get("/api/v1/runs", "since=2000-01-01T00:00:00 00:00&limit=500")) == everything
    )
    assert _ids_of(api.get("/api/v1/runs", "since=2999-01-01T00:00:00Z")) == set()


def test_child_run_ids_hold_a_slash(world: World) -> None:
    """A child run's id (parent/position) works in every run URL, raw or %2F-encoded."""
    [child] = world.api.get("/api/v1/runs/family").json()["children"]
    assert "/" in child
    assert world.api.get(f"/api/v1/runs/{child}").json()["parent_id"] == "family"
    assert world.api.get(f"/api/v1/runs/{child}/history").json()["items"][0]["output"] == 2
    assert world.api.get(f"/api/v1/runs/{child}/graph").json()["run_id"] == child


def test_listing_pages_with_a_cursor(world: World) -> None:
    """limit and next_cursor walk every run once, newest first."""
    seen: list[str] = []
    cursor = ""
    while True:
        page = world.api.get("/api/v1/runs", f"limit=2&cursor={cursor}").json()
        seen += [item["id"] for item in page["items"]]
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    assert len(seen) == len(set(seen)) == len(_ids_of(world.api.get("/api/v1/runs", "limit=500")))


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=ten", "limit"),
        ("limit=%C2%B2", "limit"),
        ("status=bogus", "bogus"),
        ("since=yesterday", "since"),
        ("until=12", "until"),
        ("cursor=zzz", "cursor"),
    ],
)
def test_bad_list_parameters_are_400(world: World, query: str, named: str) -> None:
    """A bad parameter is a 400 problem whose detail names it."""
    reply = world.api.get("/api/v1/runs", query)
    assert reply.status == 400 and named in reply.json()["detail"]


def test_a_completed_run_in_full(world: World) -> None:
    """GET /runs/{id}: output, history, actions and events; ETag and 304."""
    reply = world.api.get("/api/v1/runs/done")
    run = reply.json()
    assert (run["status"], run["output"], run["error"], run["waiting"]) == (
        "completed",
        41,
        None,
        None,
    )
    assert run["input"] == {"args": [20], "kwargs": {}}
    assert [(s["kind"], s["name"], s["output"]) for s in run["history"]] == [
        ("task", double.name, 40)
    ]
    assert run["actions"] == [] and run["events"] == []
    tag = reply.header("ETag")
    assert tag
    again = world.api.get("/api/v1/runs/done", headers={"If-None-Match": tag})
    assert again.status == 304 and again.body == b"" and again.header("ETag") == tag
    other = world.api.get("/api/v1/runs/done", headers={"If-None-Match": '"stale"'})
    assert other.status == 200


def test_failed_waiting_and_cancelled_runs(world: World) -> None:
    """The error of a failed run, what a waiting run waits for, a cancelled run, and the
    event a completed run consumed."""
    broken = world.api.get("/api/v1/runs/broken").json()
    assert broken["status"] == "failed" and broken["error"]["message"] == "boom"
    assert broken["history"][-1]["status"] == "failed"
    waiting = world.api.get("/api/v1/runs/waiting").json()
    assert waiting["status"] == "waiting"
    assert waiting["waiting"]["kind"] == "event" and waiting["waiting"]["event"] == "approved"
    assert world.api.get("/api/v1/runs/parked").json()["status"] == "cancelled"
    approved = world.api.get("/api/v1/runs/approved").json()
    assert approved["output"] == {"order": "o-1", "answer": {"by": "ann"}}
    [event] = approved["events"]
    assert event["name"] == "approved" and event["consumed_position"] == 1


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/api/v1/runs/nope"),
        ("GET", "/api/v1/runs/nope/history"),
        ("GET", "/api/v1/runs/nope/graph"),
        ("POST", "/api/v1/runs/nope/cancel"),
        ("POST", "/api/v1/runs/nope/retry"),
        ("POST", "/api/v1/runs/nope/events"),
    ],
)
def test_unknown_runs_are_404(world: World, method: str, path: str) -> None:
    """Every run endpoint answers 404 problem+json for an unknown id."""
    body = {"name": "x"} if path.endswith("events") else {}
    reply = world.api.request(method, path, json_body=body)
    assert reply.status == 404 and "nope" in reply.json()["detail"]


def test_history(world: World) -> None:
    """GET /runs/{id}/history lists the steps in position order."""
    steps = world.api.get("/api/v1/runs/approved/history").json()["items"]
    assert [(s["position"], s["kind"]) for s in steps] == [(0, "task"), (1, "event"), (2, "task")]


def test_graph_with_ghosts_and_etag(world: World) -> None:
    """The graph of a waiting run shows the steps a completed run of the same workflow
    reached beyond it as not reached; ETag and 304 as for the run."""
    reply = world.api.get("/api/v1/runs/waiting/graph")
    graph = reply.json()
    assert graph["run_id"] == "waiting"
    by_position = {node["position"]: node["state"] for node in graph["nodes"]}
    assert by_position[0] == "finished" and by_position[2] == "not-reached"
    tag = reply.header("ETag")
    assert tag
    assert world.api.get("/api/v1/runs/waiting/graph", headers={"If-None-Match": tag}).status == 304
    done = world.api.get("/api/v1/runs/done/graph").json()
    assert {node["state"] for node in done["nodes"] if node["position"] is not None} == {"finished"}


def test_stats(world: World) -> None:
    """Per-workflow and per-task statistics, and one task's."""
    stats = world.api.get("/api/v1/stats", "since=1d").json()
    workflows = {stat["name"]: stat for stat in stats["workflows"]}
    assert workflows[breaker.name]["failed"] >= 1
    only = world.api.get("/api/v1/stats", f"workflow={doubler.name}").json()
    assert [stat["name"] for stat in only["workflows"]] == [doubler.name]
    one = world.api.get(f"/api/v1/tasks/{explode.name}/stats").json()
    assert one["name"] == explode.name and one["failed"] >= 1
