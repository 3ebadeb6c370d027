"""The SQL of schedules: stored, found due, and moved on by compare-and-set.

A schedule's tick fires once however many workers see it due: ``advance_schedule`` is
``UPDATE ... WHERE id = ? AND next_fire_at = ?`` (the value the worker read, compared
exactly), so one worker moves it on and the others update nothing. On PostgreSQL (READ
COMMITTED) the losers wait for the winner's row lock, then re-check the WHERE against
the row it left, and find it moved.

``put_schedule`` is an upsert that refuses another workflow's schedule: the ``ON
CONFLICT DO UPDATE`` is conditional on the stored workflow, so a conflicting put
changes nothing and returns no row (the backend then reads back why).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from durable.backends._schema import schedules

from .base import Compiler, bind

_NO: Any = sa.literal_column("0")
#: The database sets these; the rest of a row comes from the Schedule put (held_until
#: is the firing's: a put keeps it).
_STAMPS = ("created_at", "updated_at", "held_until")


class ScheduleStatements(Compiler):
    """The statements of `ScheduleStore`, compiled for one dialect (`_define_schedules`)."""

    def _define_schedules(self) -> None:
        s, now = schedules.c, self._now
        schedule_id = bind("id", s.id)
        # Ids sort by code point, as Python sorts them (and SQLite's BINARY collation),
        # whatever the PostgreSQL database's collation.
        by_id = sa.collate(s.id, "C") if self.postgres else s.id
        self.get_schedule = self.compile(sa.select(*schedules.c).where(s.id == schedule_id))
        self.list_schedules = self.compile(sa.select(*schedules.c).order_by(by_id))

        # One clock reading for both stamps: a new schedule's created_at == updated_at
        # (clock_timestamp() would move between the two on PostgreSQL).
        stamp = self._statement_now
        written = {c.name: bind(c.name, c) for c in schedules.c if c.name not in _STAMPS}
        insert = self._insert(schedules).values(**written, created_at=stamp, updated_at=stamp)
        replaced = {name: insert.excluded[name] for name in written if name != "id"}
        replaced["updated_at"] = insert.excluded.updated_at
        self.put_schedule = self.compile(
            insert.on_conflict_do_update(
                index_elements=[s.id],
                set_=replaced,
                where=s.workflow == insert.excluded.workflow,
            ).returning(*schedules.c)
        )
        self.delete_schedule = self.compile(
            sa.delete(schedules).where(s.id == schedule_id).returning(s.id)
        )
        self.pause_schedule = self.compile(
            sa.update(schedules)
            .where(s.id == schedule_id)
            .values(paused=bind("paused", s.paused), updated_at=now)
            .returning(*schedules.c)
        )

        def param(name: str, column: sa.Column[Any]) -> sa.ColumnElement[Any]:
            # PostgreSQL cannot type a bare NULL parameter in coalesce(): cast it.
            bound = bind(name, column)
            return sa.cast(bound, column.type) if self.postgres else bound

        self.advance_schedule = self.compile(
            sa.update(schedules)
            .where(s.id == schedule_id, s.next_fire_at == bind("expected", s.next_fire_at))
            .values(
                next_fire_at=bind("next_fire_at", s.next_fire_at),
                last_fire_at=sa.func.coalesce(
                    param("last_fire_at", s.last_fire_at), s.last_fire_at
                ),
                last_run_id=sa.func.coalesce(param("last_run_id", s.last_run_id), s.last_run_id),
                updated_at=now,
                held_until=sa.null(),
            )
            .returning(s.id)
        )
        if self.postgres:
            columns = [s.id, s.next_fire_at, s.next_fire_at, s.last_fire_at, s.last_run_id]
            names = ["id", "expected", "next_fire_at", "last_fire_at", "last_run_id"]
            v = self._unnest(columns, names)
            self.advance_schedules = self.compile(
                sa.update(schedules)
                .where(s.id == v.c.id, s.next_fire_at == v.c.expected)
                .values(
                    next_fire_at=v.c.next_fire_at,
                    last_fire_at=sa.func.coalesce(v.c.last_fire_at, s.last_fire_at),
                    last_run_id=sa.func.coalesce(v.c.last_run_id, s.last_run_id),
                    updated_at=now,
                    held_until=sa.null(),
                )
                .returning(s.id)
            )

        # Live schedules (neither paused nor orphaned), through the partial index
        # durable_schedules_due: its condition is written as the index's is.
        live = (s.paused == _NO, s.orphaned == _NO)
        # A clock fixed for the statement, so that the index serves the comparison (see
        # waits.py's wake_due).
        free = sa.or_(s.held_until.is_(None), s.held_until < self._statement_now)
        due = (
            sa.select(*schedules.c)
            .where(*live, s.next_fire_at <= self._statement_now, free)
            .order_by(s.next_fire_at, by_id)
            .limit(sa.bindparam("limit", type_=sa.Integer))
        )
        self.due_schedules = self.compile(due)
        # Taken and held in one statement; on PostgreSQL a row another worker is taking
        # is skipped, so concurrent workers take disjoint batches.
        taking = sa.select(s.id).where(*live, s.next_fire_at <= self._statement_now, free)
        taking = taking.order_by(s.next_fire_at, by_id).limit(
            sa.bindparam("limit", type_=sa.Integer)
        )
        if self.postgres:
            taking = taking.with_for_update(skip_locked=True)
        self.hold_due_schedules = self.compile(
            sa.update(schedules)
            .where(s.id.in_(taking.scalar_subquery()))
            .values(held_until=self._statement_now + bind("hold", s.held_until))
            .returning(*schedules.c)
        )
        earliest = (
            sa.select(s.next_fire_at)
            .where(*live)
            .order_by(s.next_fire_at)
            .limit(1)
            .scalar_subquery()
        )
        self.next_schedule = self.compile(sa.select(earliest - now))
