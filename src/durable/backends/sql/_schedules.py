"""The SQL backend's schedules: stored, found due, and moved on by compare-and-set.

A mixin of `SQLBackend`; the statements are in `_statements/schedules.py`. Every call
is one statement but `put_schedule`, which reads back, in the same transaction, why
its upsert was refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durable.backends import _rows
from durable.core.schedules import Advance, Schedule
from durable.errors import ScheduleConflict

from ._base import SQLBase


class SQLSchedules(SQLBase):
    """`ScheduleStore` for `SQLBackend` (see there for the contracts)."""

    def put_schedule(self, schedule: Schedule) -> Schedule:
        """See `ScheduleStore.put_schedule`."""
        values = _rows.schedule_values(schedule)

        def body(conn: Any, _retried: bool) -> tuple[Any, str | None]:
            # An upsert again is harmless: a retry after a lost commit needs no read-back.
            with self._db.transaction(conn):
                row = self._execute(conn, self._sql.put_schedule, values).fetchone()
                if row is not None:
                    return row, None
                # Refused: the row is another workflow's (and locked until we commit).
                stored = self._execute(conn, self._sql.get_schedule, {"id": schedule.id}).fetchone()
                return None, None if stored is None else stored[1]

        row, other = self._db.run(f"Storing schedule {schedule.id!r}", body)
        if row is None:
            raise ScheduleConflict(
                f"Schedule {schedule.id!r} runs {other!r}, not {schedule.workflow!r}: give "
                "this one another id, or delete that one first (durable schedule rm).",
                schedule_id=schedule.id,
            )
        return _rows.schedule(row)

    def get_schedule(self, schedule_id: str) -> Schedule | None:
        """See `ScheduleStore.get_schedule`."""
        row = self._db.run(
            f"Reading schedule {schedule_id!r}",
            lambda conn, _: self._execute(
                conn, self._sql.get_schedule, {"id": schedule_id}
            ).fetchone(),
        )
        return None if row is None else _rows.schedule(row)

    def list_schedules(self) -> Sequence[Schedule]:
        """See `ScheduleStore.list_schedules`."""
        return self._db.run(
            "Listing schedules",
            lambda conn, _: [
                _rows.schedule(row)
                for row in self._execute(conn, self._sql.list_schedules, {}).fetchall()
            ],
        )

    def delete_schedule(self, schedule_id: str) -> bool:
        """See `ScheduleStore.delete_schedule`."""
        row = self._db.run(
            f"Deleting schedule {schedule_id!r}",
            lambda conn, _: self._execute(
                conn, self._sql.delete_schedule, {"id": schedule_id}
            ).fetchone(),
        )
        return row is not None

    def due_schedules(self, *, limit: int, hold: float | None = None) -> Sequence[Schedule]:
        """See `ScheduleStore.due_schedules`."""
        values = {"limit": max(0, limit), "hold": hold}
        statement = self._sql.due_schedules if hold is None else self._sql.hold_due_schedules

        def body(conn: Any, retried: bool) -> list[Schedule]:
            if retried and hold is not None:
                return []  # a hold that committed unseen expires; nothing is lost
            return [
                _rows.schedule(row) for row in self._execute(conn, statement, values).fetchall()
            ]

        return self._db.run("Taking due schedules", body)

    def advance_schedules(self, moves: Sequence[Advance]) -> Sequence[str]:
        """See `ScheduleStore.advance_schedules`: one statement on PostgreSQL, one
        transaction of compare-and-sets on SQLite."""
        if not moves:
            return []
        if self._sql.postgres:
            columns = {
                "ids": [move.schedule_id for move in moves],
                "expecteds": [move.expected for move in moves],
                "next_fire_ats": [move.next_fire_at for move in moves],
                "last_fire_ats": [move.last_fire_at for move in moves],
                "last_run_ids": [move.last_run_id for move in moves],
            }
            rows = self._db.run(
                "Advancing schedules",
                lambda conn, _: self._execute(
                    conn, self._sql.advance_schedules, columns
                ).fetchall(),
            )
            return [row[0] for row in rows]

        def body(session: Any, _retried: bool) -> list[str]:
            moved = []
            with self._db.transaction(session):
                for move in moves:
                    values = {
                        "id": move.schedule_id,
                        "expected": move.expected,
                        "next_fire_at": move.next_fire_at,
                        "last_fire_at": move.last_fire_at,
                        "last_run_id": move.last_run_id,
                    }
                    if self._execute(session, self._sql.advance_schedule, values).fetchone():
                        moved.append(move.schedule_id)
            return moved

        return self._db.run("Advancing schedules", body)

    def next_schedule(self) -> float | None:
        """See `ScheduleStore.next_schedule`."""
        row = self._db.run(
            "Reading the next schedule's time",
            lambda conn, _: self._execute(conn, self._sql.next_schedule, {}).fetchone(),
        )
        return None if row is None or row[0] is None else float(row[0])

    def advance_schedule(
        self,
        schedule_id: str,
        *,
        expected: float,
        next_fire_at: float,
        last_fire_at: float | None,
        last_run_id: str | None,
    ) -> bool:
        """See `ScheduleStore.advance_schedule`."""
        values = {
            "id": schedule_id,
            "expected": expected,
            "next_fire_at": next_fire_at,
            "last_fire_at": last_fire_at,
            "last_run_id": last_run_id,
        }
        row = self._db.run(
            f"Advancing schedule {schedule_id!r}",
            lambda conn, _: self._execute(conn, self._sql.advance_schedule, values).fetchone(),
        )
        return row is not None

    def set_schedule_paused(self, schedule_id: str, paused: bool) -> Schedule | None:
        """See `ScheduleStore.set_schedule_paused`."""
        values = {"id": schedule_id, "paused": int(paused)}
        row = self._db.run(
            f"{'Pausing' if paused else 'Resuming'} schedule {schedule_id!r}",
            lambda conn, _: self._execute(conn, self._sql.pause_schedule, values).fetchone(),
        )
        return None if row is None else _rows.schedule(row)
