"""Reading flow instances: one flow as it stands (`read`, `view`), the list of flows,
and each task's history across the instances of a flow (seed 001's historical
execution information: runs, success %, average time).

Nothing here runs workflow code: a flow's statuses come from the board it published
(its run's state), the details of each launch from the launch's own run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from durable.api.handles import Handle
from durable.core.chains import is_chain_form, predecessor_id, successor_id
from durable.core.records import Run, RunQuery, RunStatus, StepKind
from durable.errors import RunNotFound
from durable.runtime.activity import decode_details
from durable.runtime.defaults import get_engine
from durable.runtime.engine import Engine

from .board import Board
from .engine import flow, parse
from .settings import COMMAND, FLOW, NODE
from .spec import FlowSpec

#: node runs read for a flow's task statistics, newest first.
HISTORY_RUNS = 5000
#: the children of one flow read in one page.
PAGE = 1000


@dataclass(slots=True)
class Flow:
    """One flow instance, as last published."""

    engine: Engine
    run: Run
    spec: FlowSpec
    board: Board
    parent: str | None
    parent_task: str | None


def read(engine: Engine, flow_id: str) -> Flow:
    """The flow run *flow_id*: its definition and its board.

    Raises:
        RunNotFound: no run has this id, or it is not a flow.
    """
    run = engine.backend.get_run(flow_id)
    if run is None:
        raise RunNotFound(
            f"No flow has the id {flow_id!r}; `durable flow ls` lists the flows there are.",
            run_id=flow_id,
        )
    while run.status is RunStatus.CONTINUED:  # the chain's current run holds the board
        following = engine.backend.get_run(successor_id(run.id))
        if following is None:
            break
        run = following
    if run.workflow != FLOW:
        raise RunNotFound(
            f"Run {flow_id!r} is not a flow (it runs {run.workflow}); `durable flow ls` lists "
            "the flows there are.",
            run_id=flow_id,
        )
    stored = engine.load(run.input, run.id, None)
    arguments = flow.bind_arguments(tuple(stored["args"]), stored["kwargs"])
    spec = parse(arguments["spec"])
    board = Board.restore(spec, Handle(engine, run.id).state(), flow_id)
    return Flow(engine, run, spec, board, arguments.get("parent"), arguments.get("parent_task"))


def view(flow_id: str, *, engine: Engine | None = None) -> dict[str, Any]:
    """Where flow *flow_id* stands, task by task (the shape the CLI, the API and the
    dashboard show; docs/concepts/flows.md).

    Raises:
        RunNotFound: no such flow.
    """
    engine = engine or get_engine()
    found = read(engine, flow_id)
    board, spec = found.board, found.spec
    children = _children(engine, found.run.id)
    stats = task_history(spec.name, engine=engine)
    tasks = []
    for name in board.names:
        task = spec.tasks[name]
        run_id = board.runs.get(name)
        entry: dict[str, Any] = {
            "name": name,
            "kind": task.kind,
            "depends_on": list(task.depends_on),
            "status": board.status[name],
            "attempts": board.attempts[name],
            "launches": board.launches[name],
            "exit_code": None,
            "started_at": None,
            "finished_at": None,
            "duration": None,
            "command": list(task.command) if task.kind == "command" else None,
            "host": None,
            "pid": None,
            "run_id": run_id,
            "assignee": task.assignee,
            "form": dict(task.form),
            "data": None,
            "by": None,
            "error": board.notes.get(name),
            "expected": (stats.get(name) or {}).get("average"),
            "history": stats.get(name) or {"runs": 0, "success": None, "average": None},
        }
        child = None if run_id is None else children.get(run_id) or engine.backend.get_run(run_id)
        if child is not None:
            _launch_details(engine, entry, child)
        answer = board.human.get(name)
        if answer is not None:
            entry.update(data=answer.get("data"), by=answer.get("by"), finished_at=answer.get("at"))
        tasks.append(entry)
    return {
        "id": flow_id,
        "name": spec.name,
        "status": found.run.status.value,
        "stuck": board.stuck and not found.run.status.finished,
        "source": spec.source,
        "max_running": spec.max_running,
        "parent": found.parent,
        "counts": board.counts(),
        "tasks": tasks,
    }


def _children(engine: Engine, last: str) -> dict[str, Run]:
    """The flow's launches (the child runs of each run of its chain, up to *last*), a
    page's worth of each run's, newest first."""
    found: dict[str, Run] = {}
    link: str | None = last
    while link is not None:
        for run in engine.backend.list_runs(RunQuery(parent_id=link), limit=PAGE):
            found.setdefault(run.id, run)
        link = predecessor_id(link)
    return found


def _launch_details(engine: Engine, entry: dict[str, Any], child: Run) -> None:
    """Fill *entry* from its current launch's run: times, and for a command its exit
    code and error, or while it runs, its pid and host (from its last heartbeat)."""
    entry["started_at"] = child.started_at or child.created_at
    if child.status.finished:
        entry["finished_at"] = child.finished_at
    if entry["kind"] != "command":
        return
    if child.output is not None:
        outcome = engine.load(child.output, child.id, None)
        if isinstance(outcome, dict):
            for key in ("exit_code", "host", "pid", "started_at", "finished_at"):
                if outcome.get(key) is not None:
                    entry[key] = outcome[key]
            entry["error"] = outcome.get("error") or entry["error"]
    elif child.status is RunStatus.RUNNING or not child.status.finished:
        for step in reversed(engine.backend.load_history(child.id)):
            if step.kind is StepKind.TASK and step.name == COMMAND and step.details:
                details = decode_details(step.details)
                entry.update(pid=details.get("pid"), host=details.get("host"))
                break
    if entry["started_at"] is not None and entry["finished_at"] is not None:
        entry["duration"] = max(0.0, entry["finished_at"] - entry["started_at"])


def flows(
    *, limit: int = 50, after: tuple[float, str] | None = None, engine: Engine | None = None
) -> list[dict[str, Any]]:
    """The flow instances, newest first (after the run *after* names: ``(created_at,
    id)``): id, name, status, counts by task status."""
    engine = engine or get_engine()
    items: list[dict[str, Any]] = []
    query = RunQuery(workflow=FLOW, after=after)
    while len(items) < limit:
        page = engine.backend.list_runs(query, limit=limit)
        for run in page:
            if is_chain_form(run.id):
                continue  # a later run of a flow's chain: shown as its first run's id
            found = read(engine, run.id)
            items.append(
                {
                    "id": run.id,
                    "name": found.spec.name,
                    "status": found.run.status.value,
                    "stuck": found.board.stuck and not found.run.status.finished,
                    "parent": found.parent,
                    "created_at": run.created_at,
                    "finished_at": found.run.finished_at,
                    "counts": found.board.counts(),
                }
            )
        if len(page) < limit:
            break
        query = dataclasses.replace(query, after=(page[-1].created_at, page[-1].id))
    return items[:limit]


def task_history(flow_name: str, *, engine: Engine | None = None) -> dict[str, dict[str, Any]]:
    """Each command task of flow *flow_name*: its launches that ended across instances
    (``runs``), the share that finished (``success``, percent) and their average time
    (``average``, seconds, finished launches only). Read from the newest
    `HISTORY_RUNS` launches of any flow."""
    engine = engine or get_engine()
    done = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
    totals: dict[str, list[float]] = {}  # task -> [runs, finished, seconds finished]
    for run in engine.backend.list_runs(RunQuery(workflow=NODE, statuses=done), limit=HISTORY_RUNS):
        try:
            stored = engine.load(run.input, run.id, None)
            name, task = stored["args"][1], stored["args"][2]
        except Exception:  # a launch this version cannot read counts for nothing
            continue
        if name != flow_name:
            continue
        row = totals.setdefault(task, [0, 0, 0.0])
        row[0] += 1
        output = run.output if run.status is RunStatus.COMPLETED else None
        if (
            output is not None
            and (engine.load(output, run.id, None) or {}).get("status") == "finished"
        ):
            row[1] += 1
            row[2] += (run.finished_at or run.created_at) - (run.started_at or run.created_at)
    return {
        task: {
            "runs": int(runs),
            "success": round(100.0 * ok / runs, 1) if runs else None,
            "average": round(seconds / ok, 3) if ok else None,
        }
        for task, (runs, ok, seconds) in totals.items()
    }
