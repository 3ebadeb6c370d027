"""The memory backend's schedules: a dictionary by id.

A mixin of `MemoryBackend`; the reference for what `sql/_schedules.py` does with SQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from durable.core.schedules import Advance, Schedule
from durable.errors import ScheduleConflict

from ._base import MemoryBase


class MemorySchedules(MemoryBase):
    """`ScheduleStore` for `MemoryBackend` (see there for the contracts)."""

    _schedules: dict[str, Schedule]
    #: until when a firing holds a schedule (see `ScheduleStore.due_schedules`).
    _held: dict[str, float]

    def put_schedule(self, schedule: Schedule) -> Schedule:
        """See `ScheduleStore.put_schedule`."""
        with self._lock:
            self._check_open()
            now = self.now()
            existing = self._schedules.get(schedule.id)
            if existing is not None and existing.workflow != schedule.workflow:
                raise ScheduleConflict(
                    f"Schedule {schedule.id!r} runs {existing.workflow!r}, not "
                    f"{schedule.workflow!r}: give this one another id, or delete that one "
                    "first (durable schedule rm).",
                    schedule_id=schedule.id,
                )
            created = now if existing is None else existing.created_at
            stored = dataclasses.replace(schedule, created_at=created, updated_at=now)
            self._schedules[schedule.id] = stored
            return stored

    def get_schedule(self, schedule_id: str) -> Schedule | None:
        """See `ScheduleStore.get_schedule`."""
        with self._lock:
            self._check_open()
            return self._schedules.get(schedule_id)

    def list_schedules(self) -> Sequence[Schedule]:
        """See `ScheduleStore.list_schedules`."""
        with self._lock:
            self._check_open()
            return [self._schedules[key] for key in sorted(self._schedules)]

    def delete_schedule(self, schedule_id: str) -> bool:
        """See `ScheduleStore.delete_schedule`."""
        with self._lock:
            self._check_open()
            return self._schedules.pop(schedule_id, None) is not None

    def _live(self) -> list[Schedule]:
        return [s for s in self._schedules.values() if not s.paused and not s.orphaned]

    def due_schedules(self, *, limit: int, hold: float | None = None) -> Sequence[Schedule]:
        """See `ScheduleStore.due_schedules`."""
        with self._lock:
            self._check_open()
            now = self.now()
            due = [
                s
                for s in self._live()
                if s.next_fire_at <= now and self._held.get(s.id, now - 1) < now
            ]
            taken = sorted(due, key=lambda s: (s.next_fire_at, s.id))[:limit]
            if hold is not None:
                self._held.update((s.id, now + hold) for s in taken)
            return taken

    def advance_schedules(self, moves: Sequence[Advance]) -> Sequence[str]:
        """See `ScheduleStore.advance_schedules`."""
        return [
            move.schedule_id
            for move in moves
            if self.advance_schedule(
                move.schedule_id,
                expected=move.expected,
                next_fire_at=move.next_fire_at,
                last_fire_at=move.last_fire_at,
                last_run_id=move.last_run_id,
            )
        ]

    def next_schedule(self) -> float | None:
        """See `ScheduleStore.next_schedule`."""
        with self._lock:
            self._check_open()
            times = [s.next_fire_at for s in self._live()]
            return min(times) - self.now() if times else None

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
        with self._lock:
            self._check_open()
            schedule = self._schedules.get(schedule_id)
            if schedule is None or schedule.next_fire_at != expected:
                return False
            self._held.pop(schedule_id, None)
            self._schedules[schedule_id] = dataclasses.replace(
                schedule,
                next_fire_at=next_fire_at,
                last_fire_at=schedule.last_fire_at if last_fire_at is None else last_fire_at,
                last_run_id=schedule.last_run_id if last_run_id is None else last_run_id,
                updated_at=self.now(),
            )
            return True

    def set_schedule_paused(self, schedule_id: str, paused: bool) -> Schedule | None:
        """See `ScheduleStore.set_schedule_paused`."""
        with self._lock:
            self._check_open()
            schedule = self._schedules.get(schedule_id)
            if schedule is None:
                return None
            stored = dataclasses.replace(schedule, paused=paused, updated_at=self.now())
            self._schedules[schedule_id] = stored
            return stored
