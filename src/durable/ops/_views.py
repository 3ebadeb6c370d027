"""Records as the JSON shapes every front end shows: runs, steps, events, actions."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from durable.core.chains import predecessor_id, successor_id
from durable.core.events import Event
from durable.core.records import (
    Action,
    Run,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
    awaited,
)

from ._values import duration, error, iso, state, value

_CHILD_KINDS = (StepKind.WORKFLOW, StepKind.DISPATCH)


def run_summary(run: Run, attributes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a list of runs shows for each; with its *attributes*, when given."""
    shown: dict[str, Any] = {
        "id": run.id,
        "workflow": run.workflow,
        "status": run.status.value,
        "queue": run.queue,
        "priority": run.priority,
        "parent_id": run.parent_id,
        "origin": run.origin,
        "created_at": iso(run.created_at),
        "started_at": iso(run.started_at),
        "finished_at": iso(run.finished_at),
        "duration": duration(run.started_at, run.finished_at),
        "deadline_at": iso(run.deadline_at),
        "wake_at": iso(run.wake_at),
        "waiting_on": run.waiting_on,
        "cancel_requested": run.cancel_requested,
        "pause_requested": run.pause_requested,
        "recoveries": run.recoveries,
        "version": run.version,
    }
    if attributes is not None:
        shown["attributes"] = dict(attributes)
    return shown


def run_detail(
    run: Run,
    children: Sequence[str],
    snapshot: bytes | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One run in full: its summary, input, outcome, what it waits on, its children,
    its links in a continue-as-new chain (the successor of a continued run; the run a
    successor continues, from its id), its properties (*snapshot*, the latest it
    published: `InspectionStore.state`) and its *attributes*."""
    return {
        **run_summary(run, attributes or {}),
        "input": value(run.input),
        "output": value(run.output),
        "error": error(run.error),
        "waiting": waiting(run),
        "children": list(children),
        "continued_as": successor_id(run.id) if run.status is RunStatus.CONTINUED else None,
        "continues": predecessor_id(run.id) if run.parent_id is None else None,
        "state": state(snapshot) or {},
    }


def waiting(run: Run) -> dict[str, Any] | None:
    """What a WAITING run waits for: a time, an event (maybe with a deadline), a run."""
    if run.waiting_on is None and run.wake_at is None:
        return None
    named, any_event = awaited(run.waiting_on)
    kind, _, name = (named or "timer:").partition(":")
    return {
        "kind": kind if kind in ("event", "run") else "timer",
        "until": iso(run.wake_at),
        "event": name if kind == "event" else None,
        "run": name if kind == "run" else None,
        "any_event": any_event,
    }


def steps(history: Sequence[Step]) -> list[dict[str, Any]]:
    """A history as Step shapes, with parallel groups: a step that started before the
    one before it finished ran alongside it (``execute(a.bind(), b.bind())``)."""
    shown: list[dict[str, Any]] = []
    group = -1
    previous: Step | None = None
    for step in history:
        if not _alongside(previous, step):
            group += 1
        shown.append(_step(step, group))
        previous = step
    return shown


def _alongside(previous: Step | None, step: Step) -> bool:
    return (
        previous is not None
        and previous.position == step.position - 1
        and previous.kind is StepKind.TASK
        and step.kind is StepKind.TASK
        and step.started_at is not None
        and previous.started_at is not None
        and (previous.finished_at is None or step.started_at < previous.finished_at)
    )


def _progress(details: Any) -> float | None:
    """How far a task got, from its heartbeat details: a ``progress`` in 0-1, or
    ``done`` / ``of``; None when they say neither."""
    if not isinstance(details, dict):
        return None
    number = (int, float)
    given = details.get("progress")
    if isinstance(given, number) and not isinstance(given, bool) and 0 <= given <= 1:
        return float(given)
    done, of = details.get("done"), details.get("of")
    if isinstance(done, number) and isinstance(of, number) and of > 0:
        return min(max(float(done) / float(of), 0.0), 1.0)
    return None


def _step(step: Step, group: int) -> dict[str, Any]:
    finished = step.status in (StepStatus.COMPLETED, StepStatus.FAILED)
    failure = error(step.error)
    details = value(step.details)
    child = f"{step.run_id}/{step.position}" if step.kind in _CHILD_KINDS else None
    shown_input = value(step.input)
    if step.kind is StepKind.JOIN and isinstance(shown_input, dict):
        child = shown_input.get("run") if isinstance(shown_input.get("run"), str) else None
    return {
        "position": step.position,
        "kind": step.kind.value,
        "name": step.name,
        "status": step.status.value,
        "attempts": step.attempts,
        "started_at": iso(step.started_at),
        "finished_at": iso(step.finished_at),
        "duration": duration(step.started_at, step.finished_at) if finished else None,
        "wake_at": iso(step.wake_at),
        "heartbeat_at": iso(step.heartbeat_at),
        "details": details,
        "progress": _progress(details),
        "timed_out": failure is not None and failure["type"] == "durable.errors.TaskTimeout",
        "input": shown_input,
        "output": value(step.output),
        "error": failure,
        "child_id": child,
        "group": group,
        "state": state(step.state),
    }


def event(sent: Event) -> dict[str, Any]:
    return {
        "id": sent.id,
        "run_id": sent.run_id,
        "name": sent.name,
        "sent_at": iso(sent.sent_at),
        "sender": sent.sender,
        "key": sent.key,
        "consumed_position": sent.consumed_position,
    }


def action(done: Action) -> dict[str, Any]:
    try:
        detail = json.loads(done.detail)
    except (ValueError, RecursionError):
        detail = {"unreadable": done.detail}
    return {
        "id": done.id,
        "run_id": done.run_id,
        "action": done.action,
        "actor": done.actor,
        "at": iso(done.at),
        "detail": detail,
    }
