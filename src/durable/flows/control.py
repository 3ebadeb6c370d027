"""The verbs on flow instances: start one, read where it stands, read a task's log,
restart a task, kill one, answer a human task.

Each verb checks the request against the board the flow last published and refuses
what cannot apply (`FlowRefused`, `UnknownTask`, `BadAnswer`) before anything is
written; what it accepts reaches the flow as an event (the flow applies it in order,
and checks it again), or, for a kill, as a cancel of the launch's run. Restarts,
kills and answers are recorded in the flow run's actions log, with who asked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from durable.api.handles import Handle
from durable.core.records import RunStatus, StepKind
from durable.errors import FlowRefused, IdempotencyConflict, RunFinished
from durable.runtime.activity import decode_details
from durable.runtime.defaults import get_engine
from durable.runtime.engine import Engine

from . import processes
from .engine import encode, flow
from .settings import COMMAND, EVENT, ended, ended_key
from .spec import FlowSpec, load
from .views import Flow, read


def start(
    source: FlowSpec | str | os.PathLike[str],
    *,
    id: str | None = None,
    engine: Engine | None = None,
) -> Handle[dict[str, Any]]:
    """Start an instance of the flow *source* (a `FlowSpec`, or the path of its file),
    queued for a worker; with the *id* of an instance that exists, return it (started
    from the same definition) instead: ``start`` then resumes rather than duplicates.

    Raises:
        FlowFileError: the file cannot be used (names the file, line and key).
        IdempotencyConflict: *id* is an instance started from another definition.
    """
    spec = source if isinstance(source, FlowSpec) else load(source)
    if os.path.isfile(spec.source):  # `release.toml` and `./release.toml` are one flow
        spec = dataclasses.replace(spec, source=os.path.abspath(spec.source))
    engine = engine or get_engine()
    try:
        run = engine.dispatch_call(flow.bind(encode(spec)), run_id=id)
    except IdempotencyConflict:
        raise IdempotencyConflict(
            f"Run {id!r} exists and was started from another definition of the flow (the "
            f"file {spec.source} changed since, or names another flow). Start this one "
            "under a new id, or restart tasks of the existing one."
        ) from None
    return Handle(engine, run.id)


def restart(
    flow_id: str, task: str, *, actor: str | None = None, engine: Engine | None = None
) -> dict[str, Any]:
    """Run *task* again, then every task downstream of it, in dependency order; the
    results upstream of it are kept.

    Raises:
        RunNotFound: no such flow. UnknownTask: no such task in it.
        FlowRefused: the task, or one that would run again, is running (kill it first),
            or the flow has ended.
    """
    found = read(engine or get_engine(), flow_id)
    again = found.board.check_restart(task)
    _live(found, task)
    for name in again:  # a stuck nested flow of the old launch would wait forever
        launch = found.board.runs.get(name)
        if found.spec.tasks[name].kind == "flow" and launch is not None:
            Handle(found.engine, launch).cancel()
    _send(found, {"op": "restart", "task": task, "by": actor})
    _record(found, "restart", actor, {"task": task, "again": again})
    return {"flow": flow_id, "task": task, "restarted": again}


def kill(
    flow_id: str, task: str, *, actor: str | None = None, engine: Engine | None = None
) -> dict[str, Any]:
    """End *task*'s running command (SIGTERM, then SIGKILL after a grace), or its
    running nested flow; the task ends ``killed`` and its dependents wait.

    Raises:
        RunNotFound, UnknownTask; FlowRefused: the task is not running.
    """
    found = read(engine or get_engine(), flow_id)
    found.board.check_task(task)
    _live(found, task)
    launch = found.board.runs.get(task)
    if found.board.status[task] != "running" or launch is None:
        raise FlowRefused(
            f"task {task!r} of flow {flow_id!r} is {found.board.status[task]}, not running: "
            "there is nothing to kill.",
            flow_id=flow_id,
            task=task,
        )
    killed = Handle(found.engine, launch).cancel()
    run = found.engine.backend.get_run(launch)
    if run is not None and run.status is RunStatus.CANCELLED and run.started_at is None:
        # No worker had taken the launch yet (the flow marks a task running when it
        # dispatches it): cancelled at once, none of its code runs to tell the flow, so
        # the kill does, keyed as the command task would (a launch ends once).
        _tell_killed(found, task, launch, actor)
    _record(found, "kill", actor, {"task": task})
    return {"flow": flow_id, "task": task, "killed": killed}


def done(
    flow_id: str,
    task: str,
    data: Any = None,
    *,
    status: str = "finished",
    actor: str | None = None,
    engine: Engine | None = None,
) -> dict[str, Any]:
    """Answer human task *task*: ``finished`` (or ``failed``) with *data*, checked
    against its form; the tasks that depend on it receive the data (`view`).

    Raises:
        RunNotFound, UnknownTask; FlowRefused: the task is not waiting for its answer;
        BadAnswer: *data* does not match the task's form (every problem named).
    """
    found = read(engine or get_engine(), flow_id)
    checked = found.board.check_done(task, status, data)
    _live(found, task)
    message = {"op": "done", "task": task, "status": status, "data": checked, "by": actor}
    _send(found, {**message, "at": time.time()})
    _record(found, "done", actor, {"task": task, "status": status, "data": checked})
    return {"flow": flow_id, "task": task, "status": status}


def logs(flow_id: str, task: str, *, engine: Engine | None = None) -> dict[str, Any]:
    """The captured output of *task*'s latest launch: ``{"task", "run_id", "log",
    "log_bytes", "log_dropped", "running"}`` (a running command's log so far: read
    from its file on this machine, else the tail its last heartbeat carried)."""
    found = read(engine or get_engine(), flow_id)
    found.board.check_task(task)
    run_id = found.board.runs.get(task)
    empty = {
        "task": task,
        "run_id": None,
        "log": "",
        "log_bytes": 0,
        "log_dropped": 0,
        "running": False,
    }
    if run_id is None or found.spec.tasks[task].kind != "command":
        return empty
    engine_ = found.engine
    for step in reversed(engine_.backend.load_history(run_id)):
        if step.kind is not StepKind.TASK or step.name != COMMAND:
            continue
        if step.status.finished and step.output is not None:
            outcome = engine_.load(step.output, run_id, step.position)
            return {
                "task": task,
                "run_id": run_id,
                "log": outcome.get("log", ""),
                "log_bytes": outcome.get("log_bytes", 0),
                "log_dropped": outcome.get("log_dropped", 0),
                "running": False,
            }
        details = decode_details(step.details) if step.details else {}
        directory = Path(details.get("dir") or "/nonexistent")
        if directory.is_dir():
            text, before = processes.read_log(directory, found.spec.log_limit)
            return {
                **empty,
                "run_id": run_id,
                "log": text,
                "log_bytes": before + len(text.encode()),
                "log_dropped": before,
                "running": True,
            }
        tail = str(details.get("log") or "")
        return {
            **empty,
            "run_id": run_id,
            "log": tail,
            "log_bytes": len(tail.encode()),
            "running": True,
        }
    return {**empty, "run_id": run_id}


def _live(found: Flow, task: str) -> None:
    if found.run.status.finished:
        raise FlowRefused(
            f"flow {found.run.id!r} has ended ({found.run.status.value}): its tasks can no "
            f"longer change. Start a new instance (durable flow run FILE --id NEW-ID).",
            flow_id=found.run.id,
            task=task,
        )


def _send(found: Flow, message: dict[str, Any]) -> None:
    data = found.engine.dump(message, "a message to a flow")
    try:
        found.engine.backend.send_event(
            found.run.id, EVENT, data, key=None, sender=message.get("by")
        )
    except RunFinished:  # it ended since it was read
        raise FlowRefused(
            f"flow {found.run.id!r} has ended: its tasks can no longer change. Start a new "
            "instance (durable flow run FILE --id NEW-ID).",
            flow_id=found.run.id,
            task=str(message["task"]),
        ) from None


def _tell_killed(found: Flow, task: str, launch: str, actor: str | None) -> None:
    outcome = {"status": "killed", "error": "killed", "attempts": 0}
    data = found.engine.dump(ended(task, launch, outcome), "a message to a flow")
    with contextlib.suppress(RunFinished):  # the flow ended since it was read
        found.engine.backend.send_event(
            found.run.id, EVENT, data, key=ended_key(launch), sender=actor
        )


def _record(found: Flow, action: str, actor: str | None, detail: dict[str, Any]) -> None:
    found.engine.backend.record_action(
        found.run.id, f"flow.{action}", actor=actor, detail=json.dumps(detail)
    )
