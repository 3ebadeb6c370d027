"""The run graph: where each box of a run's history goes, and in which state.

`layout` is a pure function from the JSON shapes of `durable.ops` (a RunDetail, its
Steps, and "ghost" Steps borrowed from an earlier completed run of the same workflow)
to the Graph the dashboard draws as SVG. The browser only paints what it gets: all the
decisions (layers, shapes, states, coordinates) live here, so they are unit-tested
without a browser, and the server can send an ETag for the whole picture.

Flow runs top to bottom: a start node, one layer per durable call (steps that ran in
parallel share a layer, side by side), the frontier (what the run is doing next), the
ghosts (what it is expected to do after that), and an end node.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from durable.runtime import interrupts

__all__ = ["layout"]

Node = dict[str, Any]

#: sizes in px; the browser scales the whole picture through the SVG viewBox.
BOX_W, BOX_H = 184, 52
TERMINAL_W, TERMINAL_H = 96, 32
GAP_X, GAP_Y, MARGIN = 24, 36, 24
#: longest label drawn in a box; the full name stays in the node's "name".
LABEL_MAX = 24

_SHAPES = {
    "sleep": "wait",
    "event": "event",
    "workflow": "child",
    "join": "child",
    "dispatch": "child",
}
_STEP_STATES = {
    "completed": "finished",
    "failed": "failed",
    "retrying": "ready",
    "waiting": "ready",
}
_END_STATES = {
    "completed": "finished",
    "failed": "failed",
    "dead": "failed",
    "cancelled": "cancelled",
    # stopped at its deadline, with a WorkflowTimeout: an error, like a failure
    "timed_out": "failed",
    # handed over to its successor (continue_as_new): this run ended as it should
    "continued": "finished",
}
#: The run statuses that stop a run from outside: what it had not finished never will.
_STOPPED = ("cancelled", "timed_out")
#: The names of the marker a run's deadline leaves where it was delivered.
_TIMEOUT_MARKERS = (interrupts.TIMEOUT, interrupts.TIMEOUT_RETURN)


def layout(
    run: Mapping[str, Any],
    steps: Sequence[Mapping[str, Any]],
    ghosts: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Lay out the graph of *run*.

    Args:
        run: the run (a RunDetail; only "id" and "status" are read).
        steps: its recorded history (Steps), in any order.
        ghosts: Steps of the latest completed run of the same workflow; those at
            positions past this run's history become dashed "not-reached" boxes.

    Returns:
        The Graph: ``{"run_id", "width", "height", "nodes", "edges"}``. Node ids are
        "start", "end" and "p<position>", stable across polls so the browser can update
        boxes in place.
    """
    status = str(run["status"])
    recorded = sorted(steps, key=lambda step: int(step["position"]))
    nodes = [_step_node(step, status) for step in recorded]
    frontier = recorded[-1]["position"] + 1 if recorded else 0
    upcoming = sorted(
        (ghost for ghost in ghosts if int(ghost["position"]) >= frontier),
        key=lambda ghost: int(ghost["position"]),
    )
    nodes += _frontier(status, recorded, upcoming, frontier)
    layers = [[_terminal("start", "finished")]]
    layers += _layers(nodes, _groups(recorded, upcoming))
    layers.append([_terminal("end", _END_STATES.get(status, "not-reached"))])
    width, height = _place(layers)
    edges = [
        {"from": a["id"], "to": b["id"]}
        for upper, lower in itertools.pairwise(layers)
        for a in upper
        for b in lower
    ]
    return {
        "run_id": run["id"],
        "width": width,
        "height": height,
        "nodes": [node for layer in layers for node in layer],
        "edges": edges,
    }


# -- nodes ------------------------------------------------------------------------------


def _step_node(step: Mapping[str, Any], run_status: str) -> Node:
    """The box of one recorded step."""
    kind, status = str(step["kind"]), str(step["status"])
    state = _STEP_STATES.get(status, "ready")
    if kind == "cancel":
        state = "cancelled"
    elif state == "ready" and run_status == "running":
        # A running run whose history ends in an unfinished step is busy with that
        # step (a task that has started, a retry in progress, an event being taken):
        # that box is the frontier.
        state = "running"
    elif state == "ready" and run_status in _STOPPED:
        state = "cancelled"
    return _box(step, state, _label(step), _detail(step), child_id=step.get("child_id"))


def _frontier(
    status: str, recorded: list[Mapping[str, Any]], ghosts: list[Mapping[str, Any]], position: int
) -> list[Node]:
    """The box for what the run does next (if anything), then the ghosts after it."""
    expected = ghosts[0] if ghosts and ghosts[0]["position"] == position else None
    busy = any(not _finished(step) for step in recorded)
    cancel_seen = any(step["kind"] == "cancel" for step in recorded)
    if status == "running" and not busy:
        state, label = "running", "running…"
    elif status == "queued" and not busy:
        state, label = "ready", "queued"
    elif status == "paused" and not busy:
        state, label = "ready", "paused"  # parked between calls: what it does next waits
    elif status in _STOPPED and not cancel_seen:
        state, label = "cancelled", "timed out" if status == "timed_out" else "cancelled"
    else:
        return [_ghost(ghost) for ghost in ghosts]
    template: Mapping[str, Any] = expected or {"position": position, "kind": "task", "name": ""}
    node = _box(template, state, label, _label(expected) if expected else "")
    rest = ghosts[1:] if expected is not None else ghosts
    return [node, *(_ghost(ghost) for ghost in rest)]


def _ghost(step: Mapping[str, Any]) -> Node:
    return _box(step, "not-reached", _label(step), "expected")


def _box(
    step: Mapping[str, Any], state: str, label: str, detail: str, *, child_id: object = None
) -> Node:
    """A box at *step*'s position. Only recorded steps pass *child_id*: a ghost's child
    belongs to the other run."""
    kind = str(step["kind"])
    position = int(step["position"])
    return {
        "id": f"p{position}",
        "position": position,
        "kind": kind,
        "name": str(step["name"]),
        "shape": _SHAPES.get(kind, "box"),
        "state": state,
        "label": label,
        "detail": detail,
        "x": 0,
        "y": 0,
        "w": BOX_W,
        "h": BOX_H,
        "child_id": child_id,
    }


def _terminal(name: str, state: str) -> Node:
    return {
        "id": name,
        "position": None,
        "kind": name,
        "name": name,
        "shape": name,
        "state": state,
        "label": name,
        "detail": "",
        "x": 0,
        "y": 0,
        "w": TERMINAL_W,
        "h": TERMINAL_H,
        "child_id": None,
    }


def _finished(step: Mapping[str, Any]) -> bool:
    return step["status"] in ("completed", "failed")


# -- text -------------------------------------------------------------------------------


def _label(step: Mapping[str, Any]) -> str:
    kind, name = str(step["kind"]), str(step["name"])
    if kind == "sleep":
        return "sleep"
    if kind == "join":
        return "wait for child"
    if kind == "cancel":
        return "timed out" if name in _TIMEOUT_MARKERS else "cancelled"
    if kind in ("now", "uuid4", "random"):
        return kind
    if kind == "send":
        return _short(f"send {name}")
    if kind == "event":
        return _short(f"event {name}")
    return _short(name.rsplit(".", 1)[-1] or name)


def _detail(step: Mapping[str, Any]) -> str:
    """One line under the label: how the step went, in a few words."""
    status = str(step["status"])
    attempts = int(step.get("attempts") or 1)
    tries = f" · {attempts} attempts" if attempts > 1 else ""
    if status == "failed":
        error = step.get("error") or {}
        kind = str(error.get("type") or "error").rsplit(".", 1)[-1]
        return _short(kind + tries)
    if status == "retrying":
        return f"attempt {attempts} failed, retrying"
    progress = step.get("progress")
    if status == "running" and isinstance(progress, int | float):
        # the browser draws the bar from the step's "progress"; this is its number
        attempt = f" · attempt {attempts}" if attempts > 1 else ""
        return f"{progress * 100:.0f}%{attempt}"
    if status == "waiting":
        until = _clock(step.get("wake_at"))
        return f"until {until}" if until else "waiting"
    if step.get("child_id"):
        return _short(f"{_duration(step.get('duration'))} · {step['child_id']}".lstrip(" ·"))
    return _duration(step.get("duration")) + tries


def _short(text: str) -> str:
    return text if len(text) <= LABEL_MAX else text[: LABEL_MAX - 1] + "…"


def _clock(moment: object) -> str:
    """An ISO 8601 UTC time ("2026-11-21T10:00:00.123Z") as "2026-11-21 10:00 UTC", or
    "". Waits often end days later, so the date stays; seconds do not matter here."""
    if not isinstance(moment, str) or len(moment) < 16:
        return ""
    return f"{moment[:10]} {moment[11:16]} UTC"


def _duration(seconds: object) -> str:
    if not isinstance(seconds, int | float):
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {rest:02d}s"
    return f"{minutes // 60}h {minutes % 60:02d}m"


# -- geometry -----------------------------------------------------------------------------


def _groups(
    recorded: Sequence[Mapping[str, Any]], upcoming: Sequence[Mapping[str, Any]]
) -> dict[int, object]:
    """The parallel group of each position. Ghost groups are numbered by the other run:
    one joins a recorded group only when it continues the last one (a parallel call
    partly recorded here); otherwise it gets a layer of its own even if its number
    matches an earlier group of this run."""
    groups: dict[int, object] = {int(step["position"]): step.get("group") for step in recorded}
    last = recorded[-1].get("group") if recorded else None
    for ghost in upcoming:
        group = ghost.get("group")
        if group is not None and group != last:
            group = ("expected", group)
        groups[int(ghost["position"])] = group
    return groups


def _layers(nodes: Iterable[Node], groups: Mapping[int, object]) -> list[list[Node]]:
    """Group boxes into layers, one per parallel group, ordered by first position.

    *groups* maps a position to its step's "group"; a box without one (the frontier
    when no ghost tells what comes next) gets a layer of its own.
    """
    layers: dict[object, list[Node]] = {}
    for node in sorted(nodes, key=lambda node: int(node["position"])):
        position = node["position"]
        group = groups.get(position)
        layers.setdefault(("alone", position) if group is None else group, []).append(node)
    return list(layers.values())


def _place(layers: list[list[Node]]) -> tuple[int, int]:
    """Set x/y of every node (layers centred); return the picture's width and height."""
    widths = [sum(node["w"] for node in layer) + GAP_X * (len(layer) - 1) for layer in layers]
    width = max(widths) + 2 * MARGIN
    y = MARGIN
    for layer, layer_width in zip(layers, widths, strict=True):
        tallest = max(node["h"] for node in layer)
        x = (width - layer_width) // 2
        for node in layer:
            node["x"], node["y"] = x, y + (tallest - node["h"]) // 2
            x += node["w"] + GAP_X
        y += tallest + GAP_Y
    return width, y - GAP_Y + MARGIN
