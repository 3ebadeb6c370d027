"""Forking a run: a new run whose history starts as a copy of another's first positions.

``fork(host, "order-17", 7)`` creates a run of the same call (workflow, input, call
hash, queue, priority, key, timeout) whose history holds copies of the original's
finished steps at positions 0 to 6, and queues it: a worker replays those (no body runs
again) and runs position 7 on with today's code. The original is not touched; the new
run names it as its ``origin``. Storage does the creating and copying in one
transaction (`ControlStore.fork_run`); this module decides whether the position makes
sense first:

* it is a position of the history, 0 to its end (the position after its last step);
* no ``cancel`` marker lies below it (the run's cancellation, or its deadline, was
  delivered there: a fork would be cancelled again at once); from the marker or before
  is fine;
* it is not inside a parallel group. The history does not record which positions were
  allocated together, so the original's workflow is replayed against the steps to be
  copied with today's code, executing nothing (`dry_replay`), and its groups noted. That
  needs the workflow registered in this process, and today's code to agree with the
  copied steps: the fork would block at once otherwise, so that is refused too.

What a copy means for special steps: a child ``workflow`` or ``join`` step keeps the
child's outcome (the child does not run again); a ``dispatch`` step keeps the original's
child id, so a later join in the fork joins that child; an ``event`` or ``handler`` step
keeps its payload, while the events themselves stay in the original's inbox. An
unfinished step (a task running, a wait not over) is not copied: the fork makes that
call again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from durable.core import event_schemas, ids
from durable.core.records import NewRun, Run, RunStatus, Step, StepKind
from durable.core.run_options import check_run_id
from durable.errors import (
    ConfigurationError,
    IdempotencyConflict,
    NondeterminismError,
    RunNotFound,
)

from . import registry
from .dry_replay import dry_replay
from .host import Host


def fork(host: Host, run_id: str, from_position: int, *, new_id: str | None = None) -> Run:
    """Fork run *run_id* at *from_position* (see the module's docstring).

    Returns:
        The new run, QUEUED.

    Raises:
        TypeError: *from_position* is not an int, or *new_id* not a string.
        ValueError: *from_position* is not a valid place to fork from (the message
            names the valid ones), or *new_id* is not an id a user may choose.
        RunNotFound: no run has the id *run_id*.
        IdempotencyConflict: a run already has the id *new_id*.
        ConfigurationError: the run's workflow is not registered in this process.
    """
    if isinstance(from_position, bool) or not isinstance(from_position, int):
        raise TypeError(f"from_position must be an int, not {type(from_position).__name__}.")
    if new_id is not None:
        check_run_id(new_id)
    run = host.reread(run_id)
    history = host.backend.load_history(run_id)
    check_position(host, run, history, from_position)
    deadline = run.deadline_at
    target = registry.find(run.workflow)  # registered: check_position made sure
    schemas = run.event_schemas if target is None else event_schemas.declared_json(target.events)
    new = NewRun(
        id=new_id if new_id is not None else ids.new_run_id(),
        workflow=run.workflow,
        input=run.input,
        call_hash=run.call_hash,
        owner=None,
        lease=0.0,
        queue=run.queue,
        priority=run.priority,
        timeout=None if deadline is None else deadline - run.created_at,
        key=run.key,
        key_limit=run.key_limit,
        version=host.version,  # today's code, as checked here: the forking process's
        origin=run.id,
        event_schemas=schemas,  # today's code's, as its version
    )
    forked = host.backend.fork_run(run.id, new, before=from_position)
    if forked is not None:
        return forked
    if host.backend.get_run(run.id) is None:
        raise RunNotFound(f"No run has the id {run.id!r}.", run_id=run.id)
    raise IdempotencyConflict(
        f"A run with the id {new.id!r} already exists; give the fork another id, or none "
        "to have one generated.",
        run_id=new.id,
    )


def check_position(host: Host, run: Run, history: Sequence[Step], position: int) -> None:
    """Refuse a fork of *run* at *position* that makes no sense, naming what does.

    Raises:
        ValueError, ConfigurationError: see `fork`.
    """
    end = max((step.position for step in history), default=-1) + 1
    if not 0 <= position <= end:
        raise ValueError(
            f"Cannot fork run {run.id!r} from position {position}: its history has "
            f"positions 0 to {end - 1}, so a fork starts from 0 to {end} ({end}: after "
            "its last step)."
            if end
            else f"Cannot fork run {run.id!r} from position {position}: its history is "
            "empty, so a fork can only start from 0."
        )
    for step in history:
        if step.kind is StepKind.CANCEL and step.position < position:
            raise ValueError(
                f"Cannot fork run {run.id!r} from position {position}: position "
                f"{step.position} is where its cancellation ({step.name}) reached its code, "
                f"and a fork would be stopped there again. Fork from {step.position} or "
                "before."
            )
    for first, count in groups(host, run, history, position):
        if first < position < first + count:
            raise ValueError(
                f"Cannot fork run {run.id!r} from position {position}: positions {first} "
                f"to {first + count - 1} are one parallel group, started together. Fork "
                f"from {first} (the group runs again) or {first + count} (after it)."
            )


def groups(host: Host, run: Run, history: Sequence[Step], position: int) -> list[tuple[int, int]]:
    """The parallel groups (first position, count) today's code allocates while it
    replays the steps a fork at *position* copies."""
    target = registry.find(run.workflow)
    if target is None:
        raise ConfigurationError(
            f"No workflow named {run.workflow!r} is registered in this process, so run "
            f"{run.id!r} cannot be checked against today's code before it is forked (the "
            "history does not say which positions form a parallel group). Import the "
            "module that defines it (durable fork --import MODULE)."
        )
    if target.kind is not StepKind.WORKFLOW:
        return []  # a task run on its own: one call, no groups
    copied = [s for s in history if s.position < position and s.status.finished]
    found: list[tuple[int, int]] = []
    # As the fork will be first claimed: unfinished, whatever the original is now.
    replayed = dataclasses.replace(run, status=RunStatus.QUEUED)
    try:
        dry_replay(host, target, replayed, copied, groups=found)
    except NondeterminismError as error:
        at = getattr(error, "position", None) or 0
        raise ValueError(
            f"Cannot fork run {run.id!r} from position {position}: today's code does not "
            f"replay the steps before it (it would block at once). {error} Fork from {at} "
            "or before to run that part again with today's code."
        ) from error
    return found
