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
from typing import Any

import durable
from durable.api.decorators import workflow
from durable.errors import FlowRefused, RunFinished, RunNotFound

from .board import Board
from .nodes import node, notify
from .settings import EVENT, FLOW, form_link
from .spec import FlowSpec, TaskSpec


@workflow(name=FLOW)
def flow(
    spec: dict[str, Any], parent: str | None = None, parent_task: str | None = None
) -> dict[str, Any]:
    """Run the flow *spec* (`FlowSpec.to_dict`) to its end; *parent* and *parent_task*
    name the flow run and task this one is nested in."""
    model = FlowSpec.from_dict(spec)
    board = Board(model)
    info = durable.info()
    assert info is not None
    me = info.run_id
    told_parent: str | None = None
    while True:
        launches, asked = board.advance()
        for launch in launches:
            task = model.tasks[launch.task]
            if launch.kind == "flow":
                assert task.flow is not None
                handle = durable.dispatch(flow, task.flow.to_dict(), me, task.name)
            else:
                spec_ = command_spec(model, task, board.inputs(task.name))
                handle = durable.dispatch(node, me, model.name, task.name, spec_)
            board.started(task.name, position_of(handle.id))
        for name in asked:
            _notify(board, model, me, name)
        durable.set_state(**board.snapshot())
        if board.complete:
            break
        if (
            parent is not None
            and parent_task is not None
            and board.stuck
            and told_parent != "failed"
        ):
            failed = [
                name for name, status in board.status.items() if status in ("failed", "killed")
            ]
            _tell(
                parent,
                parent_task,
                me,
                {"status": "failed", "error": f"failed: {', '.join(failed)}"},
            )
            told_parent = "failed"
        message = durable.wait(EVENT)
        apply(board, me, message, durable.now().timestamp())
    if parent is not None and parent_task is not None:
        _tell(parent, parent_task, me, {"status": "finished", "error": None})
    return {"name": model.name, "counts": board.counts()}


def apply(board: Board, me: str, message: Any, at: float) -> None:
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
            if isinstance(run, str) and run.startswith(me + "/"):
                board.ended(task, position_of(run), message.get("outcome") or {})
        elif op == "done":
            board.done(task, str(message.get("status")), message.get("data"), message.get("by"), at)
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


def position_of(run_id: str) -> int:
    """The position in its parent at which child run *run_id* was dispatched."""
    return int(run_id.rsplit("/", 1)[1])


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
        durable.send(
            parent, EVENT, {"op": "ended", "task": parent_task, "run": me, "outcome": outcome}
        )
