"""The SQL of waiting: suspending runs, waking them, and their inboxes.

Compiled once per dialect, like everything in `_queries.py`, which builds this as
``Queries.waits``. The one rule that makes wake-ups impossible to lose is
**lock, then check**: every decision "is this run's wait over?" is taken by a
statement that starts after the run's row is locked, and everything that can end a
wait (an event sent, a child finishing) changes that same row, or waits for its
lock, in the same transaction. On PostgreSQL (READ COMMITTED) a statement sees what
committed before it started, so:

* `suspend_run` locks the run (``lock_run``), then ``suspend`` checks the inbox and
  the awaited run and sets WAITING or QUEUED;
* `send_event` locks the run, then stores the event and wakes the run if it waits
  for that name;
* a finishing child wakes its parent in the same statement, through an UPDATE of the
  parent's row that waits for the parent's lock and then re-reads the row
  (``waking_parents``).

SQLite serializes all writers, so the locks are no-ops there (SQLAlchemy omits
``FOR UPDATE``) and the same statements are correct.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from durable.core.records import RunStatus

from ._protocol.waits import TIMERS
from ._schema import events, runs

if TYPE_CHECKING:
    from ._queries import Queries, Statement


def _constant(value: str) -> sa.ColumnClause[str]:
    return sa.literal_column(f"'{value}'", sa.Text)


_FINISHED = tuple(_constant(status) for status in RunStatus if status.finished)
_RUNNING = _constant(RunStatus.RUNNING)
_QUEUED = _constant(RunStatus.QUEUED)
_WAITING = _constant(RunStatus.WAITING)


class WaitQueries:
    """The statements of waiting, compiled with the helpers of *q*."""

    def __init__(self, q: Queries) -> None:
        self._q = q
        r, e, now = runs.c, events.c, q.now_expression

        def param(name: str, type_: Any) -> sa.ColumnElement[Any]:
            # PostgreSQL cannot type a bare parameter compared with NULL: cast it.
            bound = sa.bindparam(name, type_=type_)
            return sa.cast(bound, type_) if q.postgres else bound

        run_id = param("id", sa.Text)
        lock = sa.select(r.status, r.waiting_on).where(r.id == run_id)
        self.lock_run = q.compile(lock.with_for_update() if q.postgres else lock)

        # -- suspending -------------------------------------------------------------
        wake_at = param("wake_at", sa.Double)
        inbox_holds = sa.exists().where(
            e.run_id == run_id,
            e.name == param("event", sa.Text),
            e.consumed_position.is_(None),
        )
        awaited = runs.alias("awaited")
        awaited_finished = sa.exists().where(
            awaited.c.id == param("child", sa.Text), awaited.c.status.in_(_FINISHED)
        )
        over = sa.or_(sa.and_(wake_at.is_not(None), wake_at <= now), inbox_holds, awaited_finished)
        self.suspend = q.compile(
            self.waking(
                sa.update(runs)
                .where(r.id == run_id, r.epoch == param("epoch", sa.Integer), r.status == _RUNNING)
                .values(
                    status=sa.case((over, _QUEUED), else_=_WAITING),
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
        awoken = {"status": _QUEUED, "wake_at": sa.null(), "waiting_on": sa.null()}
        # Only after lock_run (or on SQLite): queue a run waiting on exactly this.
        self.wake = q.compile(
            self.waking(
                sa.update(runs)
                .where(
                    r.id == run_id,
                    r.status == _WAITING,
                    r.waiting_on == param("waiting_on", sa.Text),
                )
                .values(updated_at=now, **awoken)
            )
        )
        # The index on wake_at serves this only if "now" is fixed for the statement: with
        # clock_timestamp() PostgreSQL read every sleeping run (120 ms at 100,000).
        due = (
            sa.select(r.id)
            .where(r.status == _WAITING, r.wake_at <= q.statement_now)
            .order_by(r.wake_at)
            .limit(sa.bindparam("limit", type_=sa.Integer))
        )
        if q.postgres:
            due = due.with_for_update(skip_locked=True)  # another worker is waking those
        # The rows are found by primary key: they are locked (PostgreSQL) or no one else
        # writes (SQLite), so their status cannot change before the update.
        self.wake_due = q.compile(
            self.waking(
                sa.update(runs)
                .where(r.id.in_(due.scalar_subquery()))
                .values(updated_at=now, **awoken)
            )
        )
        earliest = (
            sa.select(r.wake_at)
            .where(r.status == _WAITING, r.wake_at.is_not(None))
            .order_by(r.wake_at)
            .limit(1)
            .scalar_subquery()
        )
        self.next_wake = q.compile(sa.select(earliest - now))
        if not q.postgres:
            # Without statistics SQLite reads sleeping runs through the (status,
            # lease_until) index and sorts them all: 40 ms at 15,000 sleeping runs, and
            # linear in them. Through the partial index it reads one entry.
            self.wake_due.pin_index("durable_runs", "durable_runs_due")
            self.next_wake.pin_index("durable_runs", "durable_runs_due")

        # -- the inbox ------------------------------------------------------------
        self.find_key = q.compile(
            sa.select(*events.c).where(e.run_id == run_id, e.key == param("key", sa.Text))
        )
        self.insert_event = q.compile(
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
        self.take_event = q.compile(
            sa.update(events)
            .where(e.id == oldest, e.consumed_position.is_(None))
            .values(consumed_position=param("position", sa.Integer), consumed_at=now)
            .returning(e.id, e.payload)
        )
        self.list_events = q.compile(sa.select(*events.c).where(e.run_id == run_id).order_by(e.id))

    def waking(self, dml: Any, *more: Any) -> Any:
        """*dml* returning (``run:<id>``, a second topic, *more*), both notified on
        PostgreSQL in the same statement. The second topic is ``queue:<name>`` for a
        run now QUEUED, `TIMERS` for one now sleeping, else ``run:<id>`` again."""
        r = runs.c
        run_topic = sa.literal_column("'run:'", sa.Text) + r.id
        also = sa.case(
            (r.status == _QUEUED, sa.literal_column("'queue:'", sa.Text) + r.queue),
            (r.wake_at.is_not(None), sa.literal_column(f"'{TIMERS}'", sa.Text)),
            else_=run_topic,
        )
        returning = dml.returning(run_topic.label("topic"), also.label("also"), *more)
        if not self._q.postgres:
            return returning
        changed = returning.cte("changed")
        channel: sa.ColumnClause[Any] = sa.literal_column(f"'{self._q.channel}'")
        return sa.select(
            *changed.c,
            sa.func.pg_notify(channel, changed.c.topic),
            sa.func.pg_notify(channel, changed.c.also),
        )

    def waking_parents(self, finished: Any) -> Statement:
        """PostgreSQL: *finished* (an UPDATE finishing runs, returning their ``id`` and
        ``parent_id``) and, in the same statement, each parent waiting on one of them
        queued again. Returns (topic,) rows: ``run:<id>`` per finished run, and
        ``run:<parent>`` and ``queue:<name>`` per woken parent; all are notified.

        The parents' UPDATE matches them by id whatever their status, so it waits for
        the lock of a parent that is suspending right now and then re-reads its row
        (READ COMMITTED re-evaluates an updated row): a parent that commits WAITING on
        a finishing child is woken by it."""
        q, r = self._q, runs.c
        done = finished.cte("finished")
        done_topics = sa.select(sa.literal_column("'run:'", sa.Text) + done.c.id)
        waits_on_one = sa.and_(r.status == _WAITING, r.waiting_on.in_(done_topics))
        woken = (
            sa.update(runs)
            .where(
                r.id.in_(sa.select(done.c.parent_id)),
                r.id.not_in(sa.select(done.c.id)),  # never update one row twice
                r.status.in_((_RUNNING, _WAITING)),
            )
            .values(
                status=sa.case((waits_on_one, _QUEUED), else_=r.status),
                wake_at=sa.case((waits_on_one, sa.null()), else_=r.wake_at),
                waiting_on=sa.case((waits_on_one, sa.null()), else_=r.waiting_on),
            )
            .returning(r.id, r.status, r.queue)
            .cte("woken")
        )
        queued = sa.select(woken).where(woken.c.status == _QUEUED).subquery()
        topics = sa.union_all(
            sa.select(sa.literal_column("'run:'", sa.Text) + done.c.id),
            sa.select(sa.literal_column("'run:'", sa.Text) + queued.c.id),
            sa.select(sa.literal_column("'queue:'", sa.Text) + queued.c.queue),
        ).subquery()
        topic = topics.c[0]
        channel: sa.ColumnClause[Any] = sa.literal_column(f"'{q.channel}'")
        return q.compile(sa.select(topic, sa.func.pg_notify(channel, topic)))
