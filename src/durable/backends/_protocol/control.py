"""The storage seam's control role: stopping runs from outside, letting them go on, and
forking one (a new run that starts from a copy of its history's first positions).

Each call acts on a run and every run below it (children, grandchildren...), in one
transaction: the whole tree is changed, or none of it. A RUNNING run is only asked: a
bit in its requests (`CANCEL_REQUEST`, `PAUSE_REQUEST`) that its owner learns as its
next write returns (`HistoryStore.record`), and obeys there. A cancel request
outranks a pause request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from durable.core.records import NewRun, Run, RunStatus


class ControlStore(Protocol):
    """Cancelling, pausing and resuming runs."""

    def cancel_run(self, run_id: str) -> Run | None:
        """Cancel a run and every unfinished run below it.

        Runs that never started (QUEUED or PAUSED, no ``started_at``) and BLOCKED ones
        become CANCELLED at once. Every other unfinished run gets ``cancel_requested``
        (clearing a pause request), so that its code sees `Cancelled` and its
        ``finally`` blocks run: RUNNING ones from their owner; WAITING and PAUSED ones,
        and QUEUED ones that have started (woken, handed back), are queued to receive
        it. Finished runs are not touched. ``run:<id>`` is notified for each changed run.

        Returns:
            The run as now stored, or None if no run has this id.
        """
        ...

    def pause_run(self, run_id: str) -> Run | None:
        """Pause a run and every unfinished run below it.

        QUEUED and WAITING ones become PAUSED at once (a waiting one keeps its
        ``wake_at`` and ``waiting_on``: a timer that comes due, or an event that
        arrives, takes effect once it is resumed). RUNNING ones get
        ``pause_requested``: their owner stops them at their next durable call
        (`park_run`). Runs with a cancel request, and BLOCKED, PAUSED and finished
        ones, are not touched.

        Returns:
            The run as now stored, or None if no run has this id.
        """
        ...

    def resume_run(self, run_id: str, *, drop_from: int | None = None) -> Run | None:
        """Let a paused run, and every paused run below it, go on: PAUSED ones are
        QUEUED (their wait forgotten: replayed, each waits again for what is not over
        yet); RUNNING ones lose ``pause_requested``.

        With *drop_from*, a CANCELLED run is reopened too: its steps from that position
        on are deleted, the events they consumed go back to its inbox, and it is QUEUED
        with no outcome and no cancel request. (Runs below it are not reopened: the
        caller resumes those it chooses, one by one.)

        Returns:
            The run as now stored, or None if no run has this id.
        """
        ...

    def cancelling(self, owner: str) -> Sequence[str]:
        """The ids of the RUNNING runs leased to *owner* whose cancellation was requested
        (`cancel_run` found them running): a worker interrupts what they await."""
        ...

    def park_run(self, run_id: str, epoch: int) -> RunStatus | None:
        """Stop a RUNNING run at *epoch* that its owner found asked to pause: PAUSED,
        its lease released and the request cleared. If the request was withdrawn
        meanwhile (`resume_run`), it is QUEUED instead, to go on at once.

        Returns:
            The status it now has, or None if the run is no longer RUNNING at *epoch*
            (nothing changed).
        """
        ...

    def fork_run(self, original_id: str, new: NewRun, *, before: int) -> Run | None:
        """Create *new* as a fork of the run *original_id*, in one transaction: the run
        QUEUED (no owner, no ``start_at``; ``new.origin`` names the original), and a
        copy of each of the original's steps at a position below *before* whose status
        is finished (COMPLETED or FAILED), identical but for its ``run_id``. Unfinished
        steps (a RUNNING task, a WAITING wait, a RETRYING call) are not copied: the fork
        makes those calls again. The original's attributes are copied as they are now
        (steps that set them are copied, and replayed, not run). Nothing else is
        copied: not the original's events,
        actions, outcome or ``state``, nor its children. The original is not changed.
        ``queue:<name>`` is notified.

        The caller checks *before* against the history (see `durable.runtime.forking`);
        this only copies.

        Returns:
            The created run, or None if no run has *original_id* or a run already has
            ``new.id``: nothing was written then.
        """
        ...
