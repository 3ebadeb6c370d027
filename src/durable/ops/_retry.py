"""Which positions a retry reopens: the failed calls that ended the run.

A failed step that the workflow caught and went on from is part of the story the
run told (``except`` took a branch on it); reopening it could change that branch and
make the rest of the history diverge. So a retry reopens only the failed steps that
nothing started after: each FAILED step with no later position started after it
finished. In sequential code that is the last call; in a parallel group
(``execute(a.bind(), b.bind())``) it is every member that failed, while members that
completed keep their results.
"""

from __future__ import annotations

from collections.abc import Sequence

from durable.core.records import Step, StepKind, StepStatus


def reopened(history: Sequence[Step]) -> tuple[list[int], list[str]]:
    """The positions to reopen, and the child runs behind those of them that were
    child workflows (a retry must retry those children first, or replay would read
    their failure again)."""
    positions: list[int] = []
    children: list[str] = []
    for step in history:
        if step.status is not StepStatus.FAILED or _handled(step, history):
            continue
        positions.append(step.position)
        if step.kind is StepKind.WORKFLOW:
            children.append(f"{step.run_id}/{step.position}")
    return positions, children


def _handled(failed: Step, history: Sequence[Step]) -> bool:
    """True if a later position started once *failed* had finished: the workflow
    went on after the failure, so it handled it."""
    if failed.finished_at is None:
        return False
    return any(
        later.position > failed.position
        and later.started_at is not None
        and later.started_at >= failed.finished_at
        for later in history
    )
