"""The SQL of waiting: suspending runs, waking them, and their inboxes.

The one rule that makes wake-ups impossible to lose is **lock, then check**: every
decision "is this run's wait over?" is taken by a statement that starts after the
run's row is locked, and everything that can end a wait (an event sent, a child
finishing) changes that same row, or waits for its lock, in the same transaction. On
PostgreSQL (READ COMMITTED) a statement sees what committed before it started, so:

* `suspend_run` locks the run (``lock_run``), then ``suspend`` checks the inbox and
  the awaited run and sets WAITING or QUEUED;
* `send_event` locks the run, then stores the event and wakes the run if it waits
  for that name;
* a finishing child wakes its parent in the same statement, through an UPDATE of the
  parent's row that waits for the parent's lock and then re-reads the row
  (`RunStatements._waking_parents`, in runs.py).

SQLite serializes all writers, so the locks are no-ops there (SQLAlchemy omits
``FOR UPDATE``) and the same statements are correct.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from durable.backends._schema import events, runs
from durable.core.records import ANY_EVENT

from .base import FINISHED, QUEUED, RUNNING, WAITING, Compiler


class WaitStatements(Compiler):
    """The statements of `WaitStore`, compiled for one dialect (`_define_waits`)."""

    def _define_waits(self) -> None:
        r, e, now = runs.c, events.c, self._now

        def param(name: str, type_: Any) -> sa.ColumnElement[Any]:
            # PostgreSQL cannot type a bare parameter compared with NULL: cast it.
            bound = sa.bindparam(name, type_=type_)
            return sa.cast(bound, type_) if self.postgres else bound

        run_id = param("id", sa.Text)
        lock = sa.select(r.status, r.waiting_on).where(r.id == run_id)
        self.lock_run = self.compile(lock.with_for_update() if self.postgres else lock)

        # -- suspending -------------------------------------------------------------
        wake_at = param("wake_at", sa.Double)
        inbox_holds = sa.exists().where(
            e.run_id == run_id,
            e.name == param("event", sa.Text),
            e.consumed_position.is_(None),
        )
        # A workflow class with on_event: any unconsumed event ends its wait.
        inbox_any = sa.and_(
            param("any_event", sa.Boolean),
            sa.exists().where(e.run_id == run_id, e.consumed_position.is_(None)),
        )
        awaited = runs.alias("awaited")
        awaited_finished = sa.exists().where(
            awaited.c.id == param("child", sa.Text), awaited.c.status.in_(FINISHED)
        )
        # One clock for the whole decision: PostgreSQL's clock_timestamp() moves between
        # the CASEs below, which once left a run WAITING with no wake time, forever.
        # (SQLite's 'now' is the same for a whole statement.)
        timer_over = sa.and_(wake_at.is_not(None), wake_at <= self._statement_now)
        over = sa.or_(timer_over, inbox_holds, inbox_any, awaited_finished)
        self.suspend = self.compile(
            self._waking(
                sa.update(runs)
                .where(r.id == run_id, r.epoch == param("epoch", sa.Integer), r.status == RUNNING)
                .values(
                    status=sa.case((over, QUEUED), else_=WAITING),
                    wake_at=sa.case((over, sa.null()), else_=wake_at),
                    waiting_on=sa.case((over, sa.null()), else_=param("waiting_on", sa.Text)),
                    lease_owner=sa.null(),
                    lease_until=sa.null(),
                    updated_at=now,
                ),
                r.status,
            )
        )

        # -- waking ---------------------------------------------------------------
        awoken = {"status": QUEUED, "wake_at": sa.null(), "waiting_on": sa.null()}
        # Only after lock_run (or on SQLite): queue a run waiting on exactly this (or on
        # this and any event).
        waiting_on = param("waiting_on", sa.Text)
        self.wake = self.compile(
            self._waking(
                sa.update(runs)
                .where(
                    r.id == run_id,
                    r.status == WAITING,
                    r.waiting_on.in_([waiting_on, sa.literal(ANY_EVENT, sa.Text) + waiting_on]),
                )
                .values(updated_at=now, **awoken)
            )
        )
        # The index on wake_at serves this only if "now" is fixed for the statement: with
        # clock_timestamp() PostgreSQL read every sleeping run (120 ms at 100,000).
        due = (
            sa.select(r.id)
            .where(r.status == WAITING, r.wake_at <= self._statement_now)
            .order_by(r.wake_at)
            .limit(sa.bindparam("limit", type_=sa.Integer))
        )
        if self.postgres:
            due = due.with_for_update(skip_locked=True)  # another worker is waking those
        # The rows are found by primary key: they are locked (PostgreSQL) or no one else
        # writes (SQLite), so their status cannot change before the update.
        self.wake_due = self.compile(
            self._waking(
                sa.update(runs)
                .where(r.id.in_(due.scalar_subquery()))
                .values(updated_at=now, **awoken)
            )
        )
        earliest = (
            sa.select(r.wake_at)
            .where(r.status == WAITING, r.wake_at.is_not(None))
            .order_by(r.wake_at)
            .limit(1)
            .scalar_subquery()
        )
        self.next_wake = self.compile(sa.select(earliest - now))
        if not self.postgres:
            # Without statistics SQLite reads sleeping runs through the (status,
            # lease_until) index and sorts them all: 40 ms at 15,000 sleeping runs, and
            # linear in them. Through the partial index it reads one entry.
            self.wake_due.pin_index("durable_runs", "durable_runs_due")
            self.next_wake.pin_index("durable_runs", "durable_runs_due")

        # -- the inbox ------------------------------------------------------------
        self.find_key = self.compile(
            sa.select(*events.c).where(e.run_id == run_id, e.key == param("key", sa.Text))
        )
        self.insert_event = self.compile(
            sa.insert(events)
            .values(
                run_id=run_id,
                name=param("name", sa.Text),
                payload=param("payload", sa.LargeBinary),
                sent_at=now,
                sender=param("sender", sa.Text),
                key=param("key", sa.Text),
            )
            .returning(e.id, e.sent_at)
        )
        oldest = (
            sa.select(e.id)
            .where(
                e.run_id == run_id, e.name == param("name", sa.Text), e.consumed_position.is_(None)
            )
            .order_by(e.id)
            .limit(1)
            .scalar_subquery()
        )
        self.take_event = self.compile(
            sa.update(events)
            .where(e.id == oldest, e.consumed_position.is_(None))
            .values(consumed_position=param("position", sa.Integer), consumed_at=now)
            .returning(e.id, e.payload)
        )
        any_oldest = (
            sa.select(e.id)
            .where(
                e.run_id == run_id,
                e.consumed_position.is_(None),
                sa.or_(param("exclude", sa.Text).is_(None), e.name != param("exclude", sa.Text)),
            )
            .order_by(e.id)
            .limit(1)
        )
        self.take_any_event = self.compile(
            sa.update(events)
            .where(e.id == any_oldest.scalar_subquery(), e.consumed_position.is_(None))
            .values(consumed_position=param("position", sa.Integer), consumed_at=now)
            .returning(e.id, e.payload, e.name)
        )
        self.has_events = self.compile(sa.select(any_oldest.exists()))
        self.list_events = self.compile(
            sa.select(*events.c).where(e.run_id == run_id).order_by(e.id)
        )
