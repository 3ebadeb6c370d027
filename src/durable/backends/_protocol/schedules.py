"""The storage seam's schedules role: schedules stored, found due, and advanced.

A tick fires exactly once however many workers see it due, by two means: the run it
starts has an id derived from the schedule and the tick (`run_id`), so concurrent
`create_run` calls make one run; and ``next_fire_at`` moves on by compare-and-set
(`advance_schedule`), so one worker's advance wins and the others find nothing due.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from durable.core.schedules import Advance, Schedule


class ScheduleStore(Protocol):
    """Stored schedules."""

    def put_schedule(self, schedule: Schedule) -> Schedule:
        """Create the schedule, or replace the one with its id (keeping its
        ``created_at``); ``updated_at`` is now, and ``created_at`` too for a new one
        (the backend's clock).

        Returns:
            The schedule as now stored.

        Raises:
            ScheduleConflict: a schedule with this id runs another workflow; nothing
                changed.
        """
        ...

    def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule with this id, or None."""
        ...

    def list_schedules(self) -> Sequence[Schedule]:
        """Every schedule, by id."""
        ...

    def delete_schedule(self, schedule_id: str) -> bool:
        """Delete the schedule (its runs stay). False if there was none."""
        ...

    def due_schedules(self, *, limit: int, hold: float | None = None) -> Sequence[Schedule]:
        """Up to *limit* schedules that are neither paused nor orphaned, whose
        ``next_fire_at`` has come (the backend's clock) and that no one holds, the most
        overdue first.

        With *hold*, each one returned is held for *hold* seconds: until then, or until
        it is advanced (which releases it), no call returns it. Concurrent callers with
        *hold* get disjoint schedules. A holder that dies lets its hold expire.
        """
        ...

    def next_schedule(self) -> float | None:
        """Seconds until the earliest ``next_fire_at`` of a schedule that is neither
        paused nor orphaned (negative if overdue), or None if there is none."""
        ...

    def advance_schedule(
        self,
        schedule_id: str,
        *,
        expected: float,
        next_fire_at: float,
        last_fire_at: float | None,
        last_run_id: str | None,
    ) -> bool:
        """Move the schedule on to *next_fire_at*, only if its ``next_fire_at`` is still
        *expected* (compare-and-set), recording the last tick fired and its run (None
        keeps the stored ones), and release its hold (see `due_schedules`).

        Returns:
            True if it moved; False if another worker moved it first, or it is gone.
        """
        ...

    def advance_schedules(self, moves: Sequence[Advance]) -> Sequence[str]:
        """`advance_schedule` for many schedules at once (each its own compare-and-set,
        releasing its hold); return the ids of those that moved."""
        ...

    def set_schedule_paused(self, schedule_id: str, paused: bool) -> Schedule | None:
        """Pause or resume the schedule; the schedule as now stored, or None."""
        ...
