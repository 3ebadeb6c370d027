"""`patched` and `deprecate_patch`: shipping a change to a workflow under live runs.

A run that reaches ``if durable.patched("fraud-check"):`` on code that has the patch
records a ``patch`` marker there and takes the new branch; every replay finds the
marker and takes it again. A run whose history already went past that point without a
marker (it ran there on the old code) takes the old branch, and no position is taken,
so its recorded calls line up with the old branch's. Once no live run is on the old
side (`durable check` counts them), ``deprecate_patch`` replaces ``patched``: the old
branch is deleted, new runs record nothing, and runs that recorded the marker still
replay (the marker is skipped).

The decision costs one lookup in the replayed history, the first time an id is met in
an execution; after that it is remembered (a ``patched`` in a loop answers the same).
"""

from __future__ import annotations

import sys

from durable.core.hashing import call_hash
from durable.core.records import Step, StepKind, StepStatus
from durable.core.text import check_text
from durable.runtime.activity import TaskScope
from durable.runtime.context import RunContext, current


def patched(patch_id: str) -> bool:
    """Whether this run takes the new branch of the change named *patch_id*.

    True for a run that reaches this point on code that has the patch (a marker is
    recorded, so it stays True on every replay), False for a run whose history went
    past this point before the patch existed. Outside a workflow (a plain call of the
    function) it is True: that is today's code.

    Raises:
        TypeError: *patch_id* is not a string, or this is a task body (whose code is
            not replayed: a task changes freely between attempts).
        ValueError: *patch_id* is empty, or already used at another place of this
            workflow (each change needs its own id).
    """
    return _decide(patch_id, "patched", deprecated=False, caller=sys._getframe(1))


def deprecate_patch(patch_id: str) -> None:
    """Mark the change *patch_id* as the only code: its old branch is gone.

    Put it where ``patched(patch_id)`` was, once no unfinished run took the old branch
    (`durable check` reports the runs on each side). New runs record nothing; runs that
    recorded the patch's marker skip it and replay on. A run still on the old side would
    diverge (and block, or fail: ``on_divergence``), so check first.

    Raises:
        TypeError, ValueError: as `patched`.
    """
    _decide(patch_id, "deprecate_patch", deprecated=True, caller=sys._getframe(1))


def marker_hash(patch_id: str) -> str:
    """The ``call_hash`` of the marker of *patch_id*."""
    return call_hash(StepKind.PATCH, patch_id, {})


def _decide(patch_id: str, verb: str, *, deprecated: bool, caller: object) -> bool:
    context = current.get()
    if isinstance(context, TaskScope):
        raise TypeError(
            f"{verb}() chooses a workflow's branch; a task body is not replayed, so call "
            "it in the workflow code (and pass the choice to the task if it needs it)."
        )
    _check_id(patch_id, verb)
    if not isinstance(context, RunContext):
        return True  # a plain call runs today's code
    code = getattr(caller, "f_code", None)
    site = f"{getattr(code, 'co_filename', '?')}:{getattr(caller, 'f_lineno', '?')}"
    seen = context.patches.get(patch_id)
    if seen is not None:
        if seen[0] != site:
            raise ValueError(
                f"Patch id {patch_id!r} is used at two places in workflow "
                f"{context.workflow!r}: {seen[0]} and {site}. Each change needs an id of "
                "its own; give this one another name."
            )
        return seen[1]
    taken = _branch(context, patch_id, site, deprecated=deprecated)
    context.patches[patch_id] = (site, taken)
    return taken


def _branch(context: RunContext, patch_id: str, site: str, *, deprecated: bool) -> bool:
    """The branch this run takes: see the module's docstring."""
    context.check()
    if context.events is not None:
        context.events.at_boundary()  # an on_event handler due here runs first, as at a call
    at = context.replay.next_position
    recorded = context.replay.recorded(at)  # the one lookup of the decision
    marked = recorded is not None and recorded.kind is StepKind.PATCH
    if recorded is not None and recorded.kind is not StepKind.CANCEL:
        if not marked or recorded.name != patch_id:
            return False  # the history went on without the marker: the old branch
    elif recorded is None and deprecated:
        return True  # the new code is the only code: nothing to record
    # `durable check` stops at the frontier: it counts this run on the new side.
    context.patches[patch_id] = (site, True)
    position = context.allocate()  # a cancellation due (or recorded) here is raised here
    if marked and position == at:
        return True  # the marker of this id, found above
    digest = marker_hash(patch_id)
    if context.decide(position, StepKind.PATCH, patch_id, digest) is not None:
        return True
    now = context.host.clock.now()
    marker = Step(
        run_id=context.run_id, position=position, kind=StepKind.PATCH, name=patch_id,
        call_hash=digest, status=StepStatus.COMPLETED,
        output=context.host.dump(True, f"the marker of patch {patch_id!r}"), started_at=now,
        finished_at=now, epoch=context.epoch,
    )  # fmt: skip
    context.defer(marker)  # written with the run's next write: no commit of its own
    return True


def _check_id(patch_id: object, verb: str) -> None:
    if not isinstance(patch_id, str):
        raise TypeError(
            f"{verb}() takes the change's id as a string, like 'fraud-check', not {patch_id!r}."
        )
    if not patch_id:
        raise ValueError(f"{verb}() needs a non-empty id naming the change, like 'fraud-check'.")
    check_text(patch_id, "a patch id")
