"""The SQL backend's hand-over of a run to its successor (continue-as-new).

A mixin of `SQLBackend`; the statements are in `_statements/continuing.py`. One
transaction does it all, so a crash leaves either the run as it was (its replay hands
over again, to the same successor id) or the chain handed over, never half of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable.backends import _rows
from durable.backends._connections import Session
from durable.core.chains import successor_taken
from durable.core.records import NewRun, RunStatus, Step

from ._base import SQLBase


class _Refused(Exception):
    """Rolls back a hand-over whose successor's id is another run's."""


class _NotOurs(Exception):
    """Rolls back a hand-over the run refused (its last step with it)."""


class SQLContinuing(SQLBase):
    """`RunStore.continue_run` for `SQLBackend` (see there for the contract)."""

    _record_in: Callable[[Session, Step, int], tuple[Step, int] | None]
    #: from `SQLQueues`: a run with its own key limit gives its queue a row.
    _ensure_queue: Callable[[Any, str], None]
    _copy_attributes: Callable[[Any, str, str], None]

    def continue_run(
        self,
        run_id: str,
        epoch: int,
        successor: NewRun,
        *,
        last_step: Step | None = None,
        state: bytes | None = None,
    ) -> bool:
        """See `RunStore.continue_run`."""
        sql = self._sql
        new, _, _ = _rows.new_run_values(successor, queued=True)
        moving = {"id": run_id, "successor": successor.id}

        def body(session: Session, retried: bool) -> list[str] | None:
            try:
                return hand_over(session)
            except _NotOurs:
                return self._ours(session, run_id, epoch, retried)

        def hand_over(session: Session) -> list[str]:
            with self._db.transaction(session):
                self._execute(session, sql.lock_run, {"id": run_id})
                # The last step before the move, which counts the run's calls in the
                # tallies (SQLite's triggers are not deferred to the commit); as
                # finish_run, a finished position keeps its step. Rolled back if the
                # run does not hand over (finished, a child, or not at our epoch).
                if last_step is not None:
                    self._record_in(session, last_step, epoch)
                ended = self._execute(
                    session, sql.continue_run, {"id": run_id, "epoch": epoch, "state": state}
                ).fetchone()
                if ended is None:
                    raise _NotOurs
                created = self._execute(session, sql.create_queued_run, new).fetchone()
                if created is None:
                    raise _Refused
                if successor.key_limit is not None:  # its claims must take the locked way
                    self._ensure_queue(session, successor.queue)
                if ended[1]:
                    self._execute(session, sql.carry_requests, {**moving, "requests": ended[1]})
                self._execute(session, sql.move_events, moving)
                self._copy_attributes(session, run_id, successor.id)
                self._execute(session, sql.adopt_children, moving)
                return [ended[0], created[0]]

        try:
            topics = self._db.run(f"Continuing run {run_id!r} as {successor.id!r}", body)
        except _Refused:
            raise successor_taken(successor.id, run_id) from None
        if topics is None:
            return False
        for topic in topics:
            self._hub.notify(topic)
        return True

    def _ours(self, session: Session, run_id: str, epoch: int, retried: bool) -> list[str] | None:
        """A refused hand-over: [] if it is our own earlier attempt, committed unseen
        (the run is CONTINUED at our epoch), else None."""
        if retried:
            row = self._execute(session, self._sql.get_run, {"id": run_id}).fetchone()
            if row is not None and row[7] == epoch and row[2] == RunStatus.CONTINUED:
                return []
        return None
