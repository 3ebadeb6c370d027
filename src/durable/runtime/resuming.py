"""Pausing a run (seed 004's halt), and resuming a paused or a cancelled one.

A pause halts a run at its next durable call, with everything below it: it holds no
thread until resumed (`ControlStore.pause_run`, `RunContext.allocate`). Resuming a
paused run queues it again: it replays to where it stopped, and waits again for what
is not over yet.

A **cancelled** run can be resumed too (as DBOS's ``resume_workflow``): it goes on
from where the cancellation reached its code, as if it never had. Its history from
that point on (the ``cancel`` marker, or the first call whose recorded outcome is
`Cancelled`, and the calls its ``finally`` blocks made after it) is dropped, the
events consumed there go back to its inbox, and it is queued. Its children that were
cancelled with it are resumed first, the same way, so that it finds them running;
a cancelled child whose outcome it had already recorded before that point (it caught
their `Cancelled` and went on) stays cancelled: resuming it would change nothing the
run can see.
"""

from __future__ import annotations

from collections.abc import Sequence

from durable.core.records import RunQuery, RunStatus, Step, StepKind, StepStatus
from durable.errors import Cancelled, PayloadError, RunNotFound

from .host import Host

#: Cancelled children resumed with their parent: at most this many per run.
_CHILDREN = 10_000


def pause(host: Host, run_id: str) -> bool:
    """Pause a run and every unfinished run below it.

    Returns:
        True if it is paused, or will pause at its next durable call; False if it
        could not be (finished, blocked, or being cancelled): nothing changed.
    """
    before = host.reread(run_id)
    if before.status.finished or before.status is RunStatus.BLOCKED or before.cancel_requested:
        return False  # nothing below it is touched either
    run = host.backend.pause_run(run_id)
    if run is None:
        raise RunNotFound(f"No run has the id {run_id!r}.", run_id=run_id)
    return run.status is RunStatus.PAUSED or run.pause_requested


def resume(host: Host, run_id: str) -> bool:
    """Resume a paused run (and the paused runs below it), or a cancelled one.

    Returns:
        True if it goes on; False if it was neither paused nor cancelled (nothing to
        resume: a finished, timed-out or running run is left as it is), or is a
        cancelled run whose deadline has passed (it would time out at once).
    """
    run = host.reread(run_id)
    if run.status is RunStatus.CANCELLED:
        deadline = run.deadline_at
        if deadline is not None and host.backend.now() >= deadline:
            return False  # it would only time out at once: start a new run instead
        history = host.backend.load_history(run_id)
        point = delivery_point(host, history)
        seen = _outcomes_seen(host, history, point)
        query = RunQuery(parent_id=run_id, statuses=(RunStatus.CANCELLED,))
        for child in host.backend.list_runs(query, limit=_CHILDREN):
            if child.id not in seen:
                resume(host, child.id)
        reopened = host.backend.resume_run(run_id, drop_from=point)
        return reopened is not None and reopened.status is RunStatus.QUEUED
    if run.status is not RunStatus.PAUSED and not run.pause_requested:
        return False  # nothing below it is touched either
    host.backend.resume_run(run_id)
    return True


def delivery_point(host: Host, history: Sequence[Step]) -> int:
    """Where a cancelled run's cancellation reached its code: the position of its
    ``cancel`` marker, or of the first call whose outcome is `Cancelled` (a task its
    heartbeat stopped, a cancelled child it waited for); else its history's end."""
    for step in history:
        if step.kind is StepKind.CANCEL:
            return step.position
        if step.status is StepStatus.FAILED and step.error is not None:
            try:
                error = host.load_error(step.error, step.run_id, step.position)
            except PayloadError:
                continue
            if isinstance(error, Cancelled):
                return step.position
    return history[-1].position + 1 if history else 0


def _outcomes_seen(host: Host, history: Sequence[Step], point: int) -> set[str]:
    """The child runs whose outcome the history before *point* holds."""
    seen: set[str] = set()
    for step in history:
        if step.position >= point or not step.status.finished:
            continue
        if step.kind is StepKind.WORKFLOW:
            seen.add(f"{step.run_id}/{step.position}")
        elif step.kind is StepKind.JOIN and step.input is not None:
            try:
                joined = host.load(step.input, step.run_id, step.position)
            except PayloadError:
                continue
            if isinstance(joined, dict):
                seen.add(str(joined.get("run")))
    return seen
