"""The run graph layout: layers, shapes, states and geometry from hand-built histories."""

from __future__ import annotations

import itertools
from typing import Any

from durable.web._layout import LABEL_MAX, layout


def step(position: int, name: str = "", **fields: Any) -> dict[str, Any]:
    """A Step as `durable.ops` returns it; completed task by default, alone in its group."""
    return {
        "position": position,
        "kind": "task",
        "name": name or f"app.task{position}",
        "status": "completed",
        "attempts": 1,
        "started_at": "2026-11-21T10:00:00.000000Z",
        "finished_at": "2026-11-21T10:00:00.250000Z",
        "duration": 0.25,
        "wake_at": None,
        "input": None,
        "output": None,
        "error": None,
        "child_id": None,
        "group": position,
        **fields,
    }


def run(status: str = "completed") -> dict[str, Any]:
    return {"id": "r-1", "workflow": "app.flow", "status": status}


def nodes(graph: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["id"]: node for node in graph["nodes"]}


def edges(graph: dict[str, Any]) -> set[tuple[str, str]]:
    return {(edge["from"], edge["to"]) for edge in graph["edges"]}


def states(graph: dict[str, Any]) -> dict[str, str]:
    return {node["id"]: node["state"] for node in graph["nodes"]}


def test_sequential_run_is_one_column_from_start_to_end() -> None:
    """A finished run of three calls: start, three green boxes, end, chained top to bottom."""
    graph = layout(run(), [step(2), step(0), step(1)], [])
    assert [node["id"] for node in graph["nodes"]] == ["start", "p0", "p1", "p2", "end"]
    assert set(states(graph).values()) == {"finished"}
    assert edges(graph) == {("start", "p0"), ("p0", "p1"), ("p1", "p2"), ("p2", "end")}
    ys = [node["y"] for node in graph["nodes"]]
    assert ys == sorted(ys) and len(set(ys)) == len(ys)
    centres = {node["x"] + node["w"] / 2 for node in graph["nodes"]}
    assert len(centres) == 1
    assert graph["run_id"] == "r-1"
    box = nodes(graph)["p0"]
    assert box["label"] == "task0" and box["name"] == "app.task0" and box["shape"] == "box"
    assert box["detail"] == "250 ms"


def test_parallel_group_sits_side_by_side_in_one_layer() -> None:
    """Steps sharing a group share a layer; edges fan out to each member and back in."""
    history = [step(0), step(1, group=1), step(2, group=1), step(3, group=1), step(4)]
    graph = layout(run(), history, [])
    by_id = nodes(graph)
    members = [by_id["p1"], by_id["p2"], by_id["p3"]]
    assert len({node["y"] for node in members}) == 1
    xs = [node["x"] for node in members]
    assert xs == sorted(xs)
    assert all(a["x"] + a["w"] <= b["x"] for a, b in itertools.pairwise(members))
    assert by_id["p0"]["y"] < by_id["p1"]["y"] < by_id["p4"]["y"]
    assert {("p0", f"p{i}") for i in (1, 2, 3)} <= edges(graph)
    assert {(f"p{i}", "p4") for i in (1, 2, 3)} <= edges(graph)
    assert ("p1", "p2") not in edges(graph)


def test_waits_get_their_shapes_and_a_waiting_run_is_ready() -> None:
    """A sleep is a "wait", an event an "event"; an unfinished wait is ready (yellow)."""
    history = [
        step(0, kind="sleep", name="durable.sleep"),
        step(1, kind="event", name="approval", status="waiting", finished_at=None,
             duration=None, wake_at="2026-11-23T10:00:00.000000Z"),
    ]  # fmt: skip
    graph = layout(run("waiting"), history, [])
    by_id = nodes(graph)
    assert (by_id["p0"]["shape"], by_id["p0"]["state"], by_id["p0"]["label"]) == (
        "wait", "finished", "sleep",
    )  # fmt: skip
    assert (by_id["p1"]["shape"], by_id["p1"]["state"]) == ("event", "ready")
    assert by_id["p1"]["label"] == "event approval"
    assert by_id["p1"]["detail"] == "until 2026-11-23 10:00 UTC"
    assert by_id["end"]["state"] == "not-reached"
    assert list(by_id) == ["start", "p0", "p1", "end"]  # a waiting run has no extra box


def test_child_workflow_boxes_link_to_the_child_run() -> None:
    """Child workflows, dispatches and joins are "child" boxes carrying the child's id."""
    history = [
        step(0, kind="workflow", name="app.child", child_id="r-1.0"),
        step(1, kind="dispatch", name="app.child", child_id="r-1.1"),
        step(2, kind="join", name="durable.wait", child_id="r-1.1"),
    ]
    by_id = nodes(layout(run(), history, []))
    assert [by_id[f"p{i}"]["shape"] for i in range(3)] == ["child"] * 3
    assert by_id["p0"]["child_id"] == "r-1.0" and by_id["p0"]["label"] == "child"
    assert by_id["p2"]["label"] == "wait for child"
    assert "r-1.1" in by_id["p1"]["detail"]
    assert by_id["start"]["child_id"] is None


def test_running_run_gets_one_running_box_after_its_history() -> None:
    """After the last recorded step of a running run comes one blue "running…" box."""
    graph = layout(run("running"), [step(0), step(1)], [])
    by_id = nodes(graph)
    assert by_id["p2"]["state"] == "running" and by_id["p2"]["label"] == "running…"
    assert by_id["p2"]["position"] == 2
    assert [s for s in states(graph).values() if s == "running"] == ["running"]
    assert ("p1", "p2") in edges(graph) and ("p2", "end") in edges(graph)


def test_running_box_takes_the_expected_step_and_ghosts_follow() -> None:
    """The frontier borrows the ghost's kind and name; later ghosts stay not-reached."""
    ghosts = [step(0), step(1, name="app.ship"), step(2, kind="sleep", name="durable.sleep")]
    graph = layout(run("running"), [step(0)], ghosts)
    by_id = nodes(graph)
    assert list(by_id) == ["start", "p0", "p1", "p2", "end"]
    assert by_id["p1"]["state"] == "running" and by_id["p1"]["detail"] == "ship"
    assert (by_id["p2"]["state"], by_id["p2"]["shape"]) == ("not-reached", "wait")
    assert by_id["p2"]["detail"] == "expected"


def test_running_run_busy_with_a_retry_shows_that_step_running() -> None:
    """When the history ends in an unfinished step, that step is the running box."""
    history = [step(0), step(1, status="retrying", attempts=2, finished_at=None)]
    graph = layout(run("running"), history, [])
    assert states(graph) == {"start": "finished", "p0": "finished", "p1": "running",
                             "end": "not-reached"}  # fmt: skip
    assert nodes(graph)["p1"]["detail"] == "attempt 2 failed, retrying"


def test_retrying_step_of_a_waiting_run_is_ready() -> None:
    """A retry waiting for its delay is ready (yellow), not running."""
    history = [step(0, status="retrying", attempts=3)]
    assert states(layout(run("waiting"), history, []))["p0"] == "ready"


def test_queued_run_shows_a_ready_box() -> None:
    """A queued run that never started: start, a yellow "queued" box, end."""
    graph = layout(run("queued"), [], [])
    by_id = nodes(graph)
    assert list(by_id) == ["start", "p0", "end"]
    assert (by_id["p0"]["state"], by_id["p0"]["label"]) == ("ready", "queued")


def test_cancelled_run_marks_the_next_box_cancelled() -> None:
    """Cancelled before its next call: that box is grey, and so is the end."""
    graph = layout(run("cancelled"), [step(0)], [step(0), step(1), step(2)])
    assert states(graph) == {"start": "finished", "p0": "finished", "p1": "cancelled",
                             "p2": "not-reached", "end": "cancelled"}  # fmt: skip


def test_recorded_cancellation_is_the_cancelled_box() -> None:
    """A "cancel" step already marks where the run stopped: no extra box is added."""
    history = [step(0), step(1, kind="cancel", name="durable.cancel")]
    graph = layout(run("cancelled"), history, [])
    assert states(graph) == {"start": "finished", "p0": "finished", "p1": "cancelled",
                             "end": "cancelled"}  # fmt: skip
    assert nodes(graph)["p1"]["label"] == "cancelled"


def test_ghosts_are_dashed_boxes_past_the_history_only() -> None:
    """Ghosts at recorded positions are ignored; later ones are not-reached, grouped."""
    history = [step(0), step(1, kind="event", name="approval", status="waiting")]
    ghosts = [step(0, name="app.other"), step(1), step(2, group=2), step(3, group=2)]
    graph = layout(run("waiting"), history, ghosts)
    by_id = nodes(graph)
    assert by_id["p0"]["name"] == "app.task0"
    assert by_id["p1"]["state"] == "ready"
    assert by_id["p2"]["state"] == by_id["p3"]["state"] == "not-reached"
    assert by_id["p2"]["y"] == by_id["p3"]["y"]
    assert {("p1", "p2"), ("p1", "p3"), ("p2", "end"), ("p3", "end")} <= edges(graph)


def test_ghosts_join_only_the_parallel_group_in_progress() -> None:
    """A ghost continues the last recorded group; an equal number elsewhere is not a match."""
    history = [step(0, group=0), step(1, group=1)]
    ghosts = [step(2, group=1), step(3, group=0)]  # the other run numbered its groups oddly
    by_id = nodes(layout(run("waiting"), history, ghosts))
    assert by_id["p2"]["y"] == by_id["p1"]["y"]
    assert by_id["p3"]["y"] > by_id["p2"]["y"]


def test_ghost_boxes_never_link_to_the_other_runs_children() -> None:
    """A ghost of a child workflow has no child_id: that child belongs to another run."""
    ghosts = [step(0), step(1, kind="workflow", name="app.child", child_id="other/1")]
    box = nodes(layout(run("running"), [step(0)], ghosts))["p1"]
    assert (box["shape"], box["state"], box["child_id"]) == ("child", "running", None)


def test_failed_step_and_run_are_red() -> None:
    """A failed step shows the error type; the end of a failed or dead run is failed."""
    error = {"type": "builtins.ValueError", "message": "bad", "traceback": "..."}
    history = [step(0), step(1, status="failed", attempts=3, error=error)]
    for status in ("failed", "dead"):
        graph = layout(run(status), history, [])
        assert states(graph) == {"start": "finished", "p0": "finished", "p1": "failed",
                                 "end": "failed"}  # fmt: skip
        assert nodes(graph)["p1"]["detail"] == "ValueError · 3 attempts"


def test_long_names_are_cut_but_kept_whole_in_name() -> None:
    """Labels fit a box; the full name is still there for the tooltip and side panel."""
    name = "app." + "x" * 80
    box = nodes(layout(run(), [step(0, name=name)], []))["p0"]
    assert len(box["label"]) == LABEL_MAX and box["label"].endswith("…")
    assert box["name"] == name


def test_boxes_never_overlap_and_fit_the_picture() -> None:
    """Every box lies inside width x height and no two boxes intersect."""
    history = [step(0), *(step(i, group=1) for i in range(1, 6)), step(6, kind="sleep")]
    ghosts = [step(7, group=7), step(8, group=7), step(9)]
    graph = layout(run("running"), history, ghosts)
    boxes = graph["nodes"]
    for node in boxes:
        assert node["x"] >= 0 and node["x"] + node["w"] <= graph["width"]
        assert node["y"] >= 0 and node["y"] + node["h"] <= graph["height"]
    for a, b in itertools.combinations(boxes, 2):
        apart_x = a["x"] + a["w"] <= b["x"] or b["x"] + b["w"] <= a["x"]
        apart_y = a["y"] + a["h"] <= b["y"] or b["y"] + b["h"] <= a["y"]
        assert apart_x or apart_y, (a["id"], b["id"])
    assert nodes(graph)["p7"]["state"] == "running"
    assert nodes(graph)["p8"]["y"] == nodes(graph)["p7"]["y"]
