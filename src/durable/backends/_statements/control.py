"""The SQL of stopping runs from outside: cancelling, pausing, resuming; and of forking
one (copying its finished steps below a position to a new run).

Cancelling and pausing act on a run and everything below it (a recursive tree of
``parent_id``), each in one transaction of a few UPDATEs. A RUNNING run is only asked
(a bit in ``cancel_requested``, see `CANCEL_REQUEST` and `PAUSE_REQUEST`): its owner
learns of it as its next write returns, and stops there. A cancel request outranks a
pause: asking to cancel clears the pause bit, and a run asked to cancel is not paused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from durable.backends._schema import events, history, runs
from durable.core.records import CANCEL_REQUEST, PAUSE_REQUEST, StepStatus

from .base import (
    BLOCKED,
    CANCELLED,
    PAUSED,
    QUEUED,
    RUNNING,
    WAITING,
    Compiler,
    bind,
    constant,
)

_CANCEL: Any = sa.literal_column(str(CANCEL_REQUEST))
_PAUSE: Any = sa.literal_column(str(PAUSE_REQUEST))
_NONE: Any = sa.literal_column("0")


def _has(flags: Any, bit: Any) -> Any:
    return flags.op("&")(bit) != _NONE


def _lacks(flags: Any, bit: Any) -> Any:
    return flags.op("&")(bit) == _NONE


class ControlStatements(Compiler):
    """The statements of `ControlStore`, compiled for one dialect (`_define_control`)."""

    def _define_control(self) -> None:
        r = runs.c
        # A run and everything below it: children, grandchildren...
        tree = (
            sa.select(r.id.label("id")).where(r.id == bind("id", r.id)).cte("tree", recursive=True)
        )
        below = runs.alias("below")
        tree = tree.union(sa.select(below.c.id).where(below.c.parent_id == tree.c.id))
        member = runs.alias("member")

        def in_tree(
            test: Callable[[Any], sa.ColumnElement[bool]],
        ) -> list[sa.ColumnElement[bool]]:
            """Runs of the tree that pass *test* (given the runs table's columns).

            The subquery walks the tree and tests each member, so that the UPDATE finds
            its rows by primary key (SQLite would otherwise read every run of that status
            through its status index: 16 ms at 100,000 waiting runs, vs 0.1 ms).
            PostgreSQL re-checks a concurrently updated row against the outer WHERE
            only, so there the test is repeated.
            """
            ids = (
                sa.select(member.c.id)
                .select_from(tree.join(member, member.c.id == tree.c.id))
                .where(test(member.c))
            )
            where: list[sa.ColumnElement[bool]] = [r.id.in_(ids.scalar_subquery())]
            if self.postgres:
                where.append(test(r))
            return where

        self._define_cancellation(in_tree)
        self._define_pausing(in_tree)
        self._define_forking()

    def _define_cancellation(self, in_tree: Callable[..., list[Any]]) -> None:
        r = runs.c

        def never_started(c: Any) -> sa.ColumnElement[bool]:
            # Blocked runs too: their code diverged from their history, so they cannot
            # replay to a Cancelled; they end where they are.
            waiting_to_start = sa.and_(c.status.in_((QUEUED, PAUSED)), c.started_at.is_(None))
            return sa.or_(waiting_to_start, c.status == BLOCKED)

        def to_deliver(c: Any) -> sa.ColumnElement[bool]:
            # A run that has started must see Cancelled in its code, so that its finally
            # blocks run: a waiting or paused one, or a queued one (woken, handed back,
            # or asked before) that has not been asked yet.
            queued = sa.and_(
                c.status == QUEUED, c.started_at.is_not(None), _lacks(c.cancel_requested, _CANCEL)
            )
            return sa.or_(c.status.in_((WAITING, PAUSED)), queued)

        def running(c: Any) -> sa.ColumnElement[bool]:
            return sa.and_(c.status == RUNNING, _lacks(c.cancel_requested, _CANCEL))

        self.cancel_now = self.compile(
            self._notifying(
                sa.update(runs)
                .where(*in_tree(never_started))
                .values(
                    status=CANCELLED,
                    lease_owner=sa.null(),
                    lease_until=sa.null(),
                    updated_at=self._now,
                    finished_at=self._now,
                ),
                self._run_topic(),
                r.parent_id,
            )
        )
        # A started run is queued (again) with the request, to receive Cancelled in
        # its code: at the wait it sleeps in, or at its next durable call.
        self.cancel_waiting = self.compile(
            self._waking(
                sa.update(runs)
                .where(*in_tree(to_deliver))
                .values(
                    status=QUEUED, cancel_requested=_CANCEL, wake_at=sa.null(), waiting_on=sa.null()
                )
            )
        )
        self.cancel_request = self.compile(
            self._notifying(
                sa.update(runs).where(*in_tree(running)).values(cancel_requested=_CANCEL),
                self._run_topic(),
            )
        )

    def _define_pausing(self, in_tree: Callable[..., list[Any]]) -> None:
        r, h, e = runs.c, history.c, events.c

        def idle(c: Any) -> sa.ColumnElement[bool]:
            return sa.and_(c.status.in_((QUEUED, WAITING)), _lacks(c.cancel_requested, _CANCEL))

        def running(c: Any) -> sa.ColumnElement[bool]:
            return sa.and_(c.status == RUNNING, c.cancel_requested == _NONE)

        # Queued and waiting runs stop at once; what a waiting one waits for is kept.
        self.pause_idle = self.compile(
            self._notifying(
                sa.update(runs)
                .where(*in_tree(idle))
                .values(
                    status=PAUSED,
                    lease_owner=sa.null(),
                    lease_until=sa.null(),
                    updated_at=self._now,
                ),
                self._run_topic(),
            )
        )
        self.cancelling = self.compile(
            sa.select(r.id).where(
                r.lease_owner == bind("owner", r.lease_owner),
                r.status == RUNNING,
                _has(r.cancel_requested, _CANCEL),
            )
        )
        self.pause_request = self.compile(
            self._notifying(
                sa.update(runs).where(*in_tree(running)).values(cancel_requested=_PAUSE),
                self._run_topic(),
            )
        )

        def paused(c: Any) -> Any:
            return c.status == PAUSED

        def asked(c: Any) -> Any:
            return sa.and_(c.status != PAUSED, _has(c.cancel_requested, _PAUSE))

        # Resumed: queued, to replay to where it stopped and wait again for whatever is
        # not over yet (a timer that came due meanwhile fires then, not before).
        self.resume_paused = self.compile(
            self._waking(
                sa.update(runs)
                .where(*in_tree(paused))
                .values(
                    status=QUEUED, wake_at=sa.null(), waiting_on=sa.null(), updated_at=self._now
                )
            )
        )
        self.resume_request = self.compile(
            self._notifying(
                sa.update(runs)
                .where(*in_tree(asked))
                .values(cancel_requested=r.cancel_requested.op("&")(_CANCEL)),
                self._run_topic(),
            )
        )
        run_id = bind("id", r.id)
        # Its owner stops a run asked to pause; if the request was withdrawn meanwhile,
        # it is handed back to the queue instead (`park_run`).
        at_epoch = (r.id == run_id, r.epoch == bind("epoch", r.epoch), r.status == RUNNING)
        self.park = self.compile(
            self._waking(
                sa.update(runs)
                .where(*at_epoch)
                .values(
                    status=sa.case((_has(r.cancel_requested, _PAUSE), PAUSED), else_=QUEUED),
                    cancel_requested=r.cancel_requested.op("&")(_CANCEL),
                    lease_owner=sa.null(),
                    lease_until=sa.null(),
                    updated_at=self._now,
                ),
                r.status,
            )
        )
        # A cancelled run resumed: its history from the delivery point on is dropped,
        # the events consumed there go back to its inbox, and it is queued again.
        position = bind("position", h.position)
        self.drop_steps = self.compile(
            sa.delete(history).where(h.run_id == bind("id", h.run_id), h.position >= position)
        )
        self.unconsume = self.compile(
            sa.update(events)
            .where(e.run_id == bind("id", e.run_id), e.consumed_position >= position)
            .values(consumed_position=sa.null(), consumed_at=sa.null())
        )
        self.reopen = self.compile(
            self._notifying(
                sa.update(runs)
                .where(r.id == run_id, r.status == CANCELLED)
                .values(
                    status=QUEUED,
                    output=sa.null(),
                    error=sa.null(),
                    finished_at=sa.null(),
                    recoveries=_NONE,
                    cancel_requested=_NONE,
                    wake_at=sa.null(),
                    waiting_on=sa.null(),
                    state=sa.null(),
                    updated_at=self._now,
                ),
                self._queue_topic(),
            )
        )

    def _define_forking(self) -> None:
        h = history.c
        # A fork's history: the original's finished steps below a position, as they are
        # but for their run id (`ControlStore.fork_run`). An unfinished one is made again.
        copied = [c for c in history.c if c.name != "run_id"]
        finished = tuple(constant(status) for status in StepStatus if status.finished)
        self.fork_steps = self.compile(
            sa.insert(history).from_select(
                ["run_id", *(c.name for c in copied)],
                sa.select(bind("id", h.run_id), *copied).where(
                    h.run_id == bind("original", h.run_id),
                    h.position < bind("before", h.position),
                    h.status.in_(finished),
                ),
            )
        )
