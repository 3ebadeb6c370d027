"""Changing a run's course from outside: cancel, pause, resume and retry; fork.

`Operations` delegates here once it has read the run (so an unknown id is already a
`NotFound`). Each function checks that the action applies to the run as read, and
refuses with a `Conflict` that says why and what can be done instead; then it acts,
records what was done with who asked (*record*: ``(run_id, action, actor, detail)``),
and answers the run as it is now stored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable.core.chains import successor_id
from durable.core.records import Run, RunStatus
from durable.errors import ConfigurationError, IdempotencyConflict, RunNotFound
from durable.runtime import forking, resuming
from durable.runtime.engine import Engine

from . import _views
from ._errors import BadRequest, Conflict, NotFound, no_run
from ._retry import reopened
from ._values import error as error_of

#: Writes one entry of a run's actions log: run id, action, actor, detail (JSON-ready).
Record = Callable[[str, str, str | None, Any], None]

#: Not TIMED_OUT: its deadline has passed, so a retried run would time out at once.
RETRYABLE = (RunStatus.FAILED, RunStatus.DEAD)


def cancel(engine: Engine, run: Run, actor: str | None, record: Record) -> dict[str, Any]:
    """See `Operations.cancel`."""
    if run.status.finished:
        raise Conflict(_finished(run, "cancel"))
    engine.cancel(run.id)
    record(run.id, "cancel", actor, {"status_before": run.status.value})
    return _views.run_summary(_reread(engine, run.id))


def pause(engine: Engine, run: Run, actor: str | None, record: Record) -> dict[str, Any]:
    """See `Operations.pause`."""
    refusal = _unpausable(run)
    if refusal is not None:
        raise Conflict(refusal)
    try:
        paused = resuming.pause(engine, run.id)
    except RunNotFound:
        raise NotFound(no_run(run.id)) from None
    now = _reread(engine, run.id)
    if not paused:  # it finished, blocked or began to be cancelled meanwhile
        raise Conflict(_unpausable(now) or _changed(run.id, "paused"))
    record(run.id, "pause", actor, {"status_before": run.status.value})
    return _views.run_summary(now)


def resume(engine: Engine, run: Run, actor: str | None, record: Record) -> dict[str, Any]:
    """See `Operations.resume`."""
    refusal = _unresumable(run)
    if refusal is not None:
        raise Conflict(refusal)
    try:
        resumed = resuming.resume(engine, run.id)
    except RunNotFound:
        raise NotFound(no_run(run.id)) from None
    now = _reread(engine, run.id)
    if not resumed:  # resumed, finished or cancelled by someone else meanwhile
        late = now.status is RunStatus.CANCELLED and now.deadline_at is not None
        if late and engine.backend.now() >= (now.deadline_at or 0):
            raise Conflict(
                f"Run {run.id!r} is cancelled and its deadline has passed: resumed, it "
                "would time out at once. Start a new run instead."
            )
        raise Conflict(_unresumable(now) or _changed(run.id, "resumed"))
    record(run.id, "resume", actor, {"status_before": run.status.value})
    return _views.run_summary(now)


def retry(engine: Engine, run: Run, actor: str | None, record: Record) -> dict[str, Any]:
    """See `Operations.retry`."""
    backend = engine.backend
    if run.status not in RETRYABLE:
        late = run.status is RunStatus.TIMED_OUT
        raise Conflict(
            f"Run {run.id!r} is {run.status.value}; only failed or dead runs can be retried."
            + (" Its deadline has passed: start a new run instead." if late else "")
        )
    history = backend.load_history(run.id)
    positions, children = reopened(history)
    for child in children:
        found = backend.get_run(child)
        if found is not None and found.status in RETRYABLE:
            retry(engine, found, actor, record)
    retried = backend.retry_run(run.id, positions)
    if retried is None or retried.status is not RunStatus.QUEUED:
        raise Conflict(_changed(run.id, "retried"))
    steps = {step.position: step for step in history}
    detail = {
        "reopened": positions,
        "status_before": run.status.value,
        "errors": {str(p): error_of(steps[p].error) for p in positions},
        "error_before": error_of(run.error),
    }
    record(run.id, "retry", actor, detail)
    return {"run": _views.run_summary(retried), "reopened": positions}


def fork(
    engine: Engine, run: Run, from_position: int, *, new_id: str | None, actor: str | None,
    record: Record,
) -> dict[str, Any]:  # fmt: skip
    """See `Operations.fork`."""
    try:
        forked = forking.fork(engine, run.id, from_position, new_id=new_id)
    except RunNotFound:
        raise NotFound(no_run(run.id)) from None
    except ConfigurationError as error:  # its workflow is not registered here
        raise NotFound(str(error)) from None
    except IdempotencyConflict as error:
        raise Conflict(str(error)) from None
    except (TypeError, ValueError) as error:
        raise BadRequest(str(error)) from None
    record(run.id, "fork", actor, {"from": from_position, "fork": forked.id})
    record(forked.id, "fork", actor, {"from": from_position, "origin": run.id})
    return {"run": _views.run_summary(forked), "origin": run.id, "from": from_position}


# -- why not ------------------------------------------------------------------------------


def _unpausable(run: Run) -> str | None:
    """Why *run* cannot be paused, or None if it can (or already is)."""
    if run.status.finished:
        return _finished(run, "pause")
    if run.status is RunStatus.BLOCKED:
        return (
            f"Run {run.id!r} is blocked (its code no longer matches its history), so it "
            "runs nothing there is to pause; fix its code (see durable check), or cancel it."
        )
    if run.cancel_requested:
        return f"Run {run.id!r} is being cancelled ({run.status.value}); it cannot be paused."
    return None


def _unresumable(run: Run) -> str | None:
    """Why *run* cannot be resumed, or None if it can: it is paused (or asked to
    pause), or cancelled."""
    if run.status in (RunStatus.PAUSED, RunStatus.CANCELLED) or run.pause_requested:
        return None
    message = (
        f"Run {run.id!r} is {run.status.value}; only paused runs (and cancelled ones) can "
        "be resumed."
    )
    if run.status is RunStatus.TIMED_OUT:
        return message + " Its deadline has passed: start a new run instead."
    if run.status in RETRYABLE:
        return message + " Retry it instead, to run it again from its failure."
    if run.cancel_requested:
        return message + " It is being cancelled: resume it once it is cancelled."
    if run.status is RunStatus.COMPLETED:
        return message + " It has completed; there is nothing to resume."
    return message + " It is not paused: there is nothing to resume."


def _finished(run: Run, verb: str) -> str:
    if run.status is RunStatus.CONTINUED:  # an operator acts on one run: name the next
        return (
            f"Run {run.id!r} continued as new as run {successor_id(run.id)!r}; there is "
            f"nothing to {verb} here. {verb.capitalize()} the chain's current run instead."
        )
    return f"Run {run.id!r} has already finished ({run.status.value}); there is nothing to {verb}."


def _changed(run_id: str, done: str) -> str:
    return f"Run {run_id!r} changed while it was being {done}; look again."


def _reread(engine: Engine, run_id: str) -> Run:
    """The run as now stored (NotFound if it was deleted meanwhile: purged)."""
    run = engine.backend.get_run(run_id)
    if run is None:
        raise NotFound(no_run(run_id))
    return run
