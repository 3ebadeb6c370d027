"""The SQL of continue-as-new: a run handing its chain over to its successor.

`RunStore.continue_run` runs these in one transaction (`sql/_continuing.py`): the run
is locked (``lock_run``, waits.py), its last step recorded (history.py), and it ends
CONTINUED (``continue_run``, fenced: else all is rolled back), then its successor is
inserted (``create_queued_run``, runs.py), and its unconsumed events and unfinished
children move to the successor.
A `send_event` racing with it locks the run first, so it either commits before (its
event is moved with the others) or sees CONTINUED and follows the chain.
"""

from __future__ import annotations

import sqlalchemy as sa

from durable.backends._schema import events, runs
from durable.core.records import RunStatus

from .base import FINISHED, Compiler, bind, constant


class ContinuingStatements(Compiler):
    """The statements of `RunStore.continue_run`, compiled for one dialect."""

    def _define_continuing(self) -> None:
        r, e, now = runs.c, events.c, self._now
        successor = sa.bindparam("successor", type_=sa.Text)
        self.continue_run = self.compile(
            self._notifying(
                sa.update(runs)
                .where(
                    r.id == bind("id", r.id),
                    r.epoch == bind("epoch", r.epoch),
                    r.status.notin_(FINISHED),
                    r.parent_id.is_(None),
                )
                .values(
                    status=constant(RunStatus.CONTINUED),
                    output=sa.null(),
                    error=sa.null(),
                    lease_owner=sa.null(),
                    lease_until=sa.null(),
                    updated_at=now,
                    finished_at=now,
                    state=sa.func.coalesce(bind("state", r.state), r.state),
                ),
                self._run_topic(),
                r.cancel_requested,
            )
        )
        #: the cancel and pause requests the continued run had, on its successor.
        self.carry_requests = self.compile(
            sa.update(runs)
            .where(r.id == successor)
            .values(cancel_requested=bind("requests", r.cancel_requested))
        )
        self.move_events = self.compile(
            sa.update(events)
            .where(e.run_id == bind("id", r.id), e.consumed_position.is_(None))
            .values(run_id=successor)
        )
        self.adopt_children = self.compile(
            sa.update(runs)
            .where(r.parent_id == bind("id", r.id), r.status.notin_(FINISHED))
            .values(parent_id=successor)
        )
