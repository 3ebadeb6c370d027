"""The flow workflow (``durable.flow``): one run per flow instance.

It keeps a `Board` of its tasks and loops: start what is ready (a child node run per
command launch, a child flow run per nested flow, a notification per human task that
becomes ready), publish the board as the run's state, then wait for the next message,
sent as event ``durable.flow``: a launch ended (from the node or nested flow), a human
task's answer, or a restart (from `control`). Every decision is workflow code over
recorded events, so a crash replays it to the same board, and nothing is started twice
(each launch is a recorded dispatch).

The run ends ``completed`` once every task has finished. A flow whose failed task
blocks the rest is *stuck*: it stays waiting, so a restart can go on from there (a
nested flow tells its parent task that it failed meanwhile).
"""

from __future__ import annotations

import contextlib
import functools
import json
from typing import Any

import durable
from durable.api.decorators import workflow
from durable.core.chains import split
from durable.errors import Cancelled, FlowRefused, RunFinished, RunNotFound

from .board import Board
from .nodes import node, notify
from .settings import EVENT, FLOW, ended, form_link
from .spec import FlowSpec, TaskSpec

#: messages a flow handles before it continues as a new run of its chain: a wake-up
#: replays the history of the current run only, so this bounds its cost.
CHAIN_AFTER = 200


@workflow(name=FLOW)
def flow(
    spec: str,
    parent: str | None = None,
    parent_task: str | None = None,
    board: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run the flow *spec* (`FlowSpec.to_dict` as JSON text: a run's input is decoded
    at each wake-up, and one string decodes far faster than a tree) to its end;
    *parent* and *parent_task*
    name the flow run and task this one is nested in; *board* is where the previous
    run of its chain left off (`Board.snapshot`)."""
    model = parse(spec)
    info = durable.info()
    assert info is not None
    me = info.run_id
    state = Board.restore(model, board or {}, split(me)[0])
    told_parent: str | None = None
    handled = 0
    try:
        while True:
            launches, asked = state.advance()
            for launch in launches:
                task = model.tasks[launch.task]
                if launch.kind == "flow":
                    assert task.flow is not None
                    handle = durable.dispatch(flow, encode(task.flow), me, task.name)
                else:
                    command = command_spec(model, task, state.inputs(task.name))
                    handle = durable.dispatch(node, me, model.name, task.name, command)
                state.started(task.name, handle.id)
            for name in asked:
                _notify(state, model, me, name)
            durable.set_state(**state.snapshot())
            if state.complete:
                break
            if parent is not None and parent_task is not None:
                if state.stuck and told_parent != "failed":
                    failed = [
                        n for n, status in state.status.items() if status in ("failed", "killed")
                    ]
                    _tell(
                        parent,
                        parent_task,
                        me,
                        {"status": "failed", "error": f"failed: {', '.join(failed)}"},
                    )
                    told_parent = "failed"
            elif handled >= CHAIN_AFTER:  # keep the history a replay reads short
                durable.continue_as_new(spec, None, None, state.snapshot())
            message = durable.wait(EVENT)
            apply(state, message)
            handled += 1
    except Cancelled:  # killed as its parent's task (or cancelled): the parent task ends
        if parent is not None and parent_task is not None:
            _tell(parent, parent_task, me, {"status": "killed", "error": "killed"})
        raise
    if parent is not None and parent_task is not None:
        _tell(parent, parent_task, me, {"status": "finished", "error": None})
    return {"name": model.name, "counts": state.counts()}


@functools.lru_cache(maxsize=32)
def parse(text: str) -> FlowSpec:
    """A flow's definition from its JSON text, parsed once per process (a flow reads
    its input at each wake-up; a `FlowSpec` never changes)."""
    return FlowSpec.from_dict(json.loads(text))


def encode(spec: FlowSpec) -> str:
    """A flow's definition as the flow workflow takes it."""
    return json.dumps(spec.to_dict(), separators=(",", ":"))


def apply(board: Board, message: Any) -> None:
    """Change *board* by one message sent to the flow; a message that does not apply
    (stale, or refused now though the verb checked it before) is noted, not raised."""
    if not isinstance(message, dict):
        return
    op, task = message.get("op"), message.get("task")
    if not isinstance(task, str) or task not in board.status:
        return
    try:
        if op == "ended":
            run = message.get("run")
            if isinstance(run, str):
                board.ended(task, run, message.get("outcome") or {})
        elif op == "done":
            status, data = str(message.get("status")), message.get("data")
            board.done(task, status, data, message.get("by"), float(message.get("at") or 0.0))
        elif op == "restart":
            board.restart(task)
    except FlowRefused as refused:
        board.notes[task] = str(refused)


def command_spec(model: FlowSpec, task: TaskSpec, inputs: dict[str, Any]) -> dict[str, Any]:
    """What a node needs to run command task *task* (JSON, stored as its input);
    *inputs* are the answers of the human tasks upstream of it, by task."""
    return {
        "argv": list(task.command),
        "shell": task.shell,
        "env": dict(task.env),
        "cwd": task.cwd,
        "timeout": task.timeout,
        "attempts": task.attempts,
        "retry_delay": task.retry_delay,
        "log_limit": model.log_limit,
        "input": inputs,
    }


def _notify(board: Board, model: FlowSpec, me: str, name: str) -> None:
    """Tell human task *name*'s assignee it waits for them (if the flow has a hook)."""
    if model.notify is None:
        return
    task = model.tasks[name]
    message = {
        "flow_id": me,
        "flow_name": model.name,
        "task": name,
        "assignee": task.assignee or "",
        "link": form_link(me, name),
        "form": ",".join(f"{field}:{kind}" for field, kind in task.form.items()),
    }
    hook = model.notify if isinstance(model.notify, str) else list(model.notify)
    try:
        notify(hook, message)
    except Exception as error:  # the task waits all the same; the failure is shown
        board.notes[name] = f"the notification failed: {error}"


def _tell(parent: str, parent_task: str, me: str, outcome: dict[str, Any]) -> None:
    with contextlib.suppress(RunFinished, RunNotFound):  # the flow ended: nobody listens
        durable.send(parent, EVENT, ended(parent_task, me, outcome))
