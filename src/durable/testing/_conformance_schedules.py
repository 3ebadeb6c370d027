"""The Backend contracts of schedules (`ScheduleStore`), as executable checks (see
`_conformance.py`).

Storing, replacing and deleting schedules; which are due and when the next one is;
and moving a schedule on by compare-and-set, which exactly one of several racing
workers wins.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from durable.backends import Backend
from durable.core.records import RunStatus
from durable.core.schedules import Advance, CatchUp, Overlap, Schedule
from durable.errors import ScheduleConflict

from ._conformance import FAR, SHORT_LEASE, MakeBackend, _expire, _new, _opened, _race


def _schedule(schedule_id: str, next_fire_at: float, **fields: Any) -> Schedule:
    values: dict[str, Any] = {
        "id": schedule_id,
        "workflow": "app.workflow",
        "input": b'j{"args":[],"kwargs":{}}',
        "call_hash": "v1:00",
        "every": 60.0,
        "next_fire_at": next_fire_at,
    }
    values.update(fields)
    return Schedule(**values)


def _stored(backend: Backend, schedule_id: str) -> Schedule:
    schedule = backend.get_schedule(schedule_id)
    assert schedule is not None, f"schedule {schedule_id!r} must exist"
    return schedule


def _same(given: Schedule, stored: Schedule) -> bool:
    """*stored* is *given*, but for the times the backend sets."""
    stamped = dataclasses.replace(given, created_at=stored.created_at, updated_at=stored.updated_at)
    return stamped == stored


def check_schedule_round_trip(make: MakeBackend) -> None:
    """put_schedule stores every field as given, stamped created_at == updated_at with
    the backend's clock; get_schedule reads it back; list_schedules lists all by id."""
    with _opened(make) as backend:
        assert backend.list_schedules() == [] and backend.get_schedule("nightly") is None
        before = backend.now()
        full = _schedule(
            "nightly",
            before + FAR + 0.123456789,
            workflow="app.report",
            input=b"\x00\xffbytes",
            call_hash="v1:ab",
            cron="30 2 * * 1-5",
            every=None,
            timezone="Europe/Paris",
            catch_up=CatchUp.ALL,
            max_catch_up=7,
            jitter=42.5,
            overlap=Overlap.CANCEL_PREVIOUS,
            queue="reports",
            priority=-3,
            declared=True,
            orphaned=True,
            paused=True,
            last_fire_at=before - 12.5,
            last_run_id="nightly@2024-01-01T02:30:00.000000Z",
        )
        stored = backend.put_schedule(full)
        after = backend.now()
        assert _same(full, stored), f"every field is stored as given: {stored}"
        assert stored.created_at == stored.updated_at, "a new schedule: both stamps are now"
        assert before <= stored.created_at <= after, "stamped with the backend's clock"
        assert _stored(backend, "nightly") == stored
        plain = _schedule("Hourly", before + 1.0 / 3, every=3600.0)
        assert _same(plain, backend.put_schedule(plain)), "the defaults round-trip"
        backend.put_schedule(_schedule("a-b", before))
        backend.put_schedule(_schedule("a_b", before))
        ids = [schedule.id for schedule in backend.list_schedules()]
        assert ids == sorted(ids) == ["Hourly", "a-b", "a_b", "nightly"], f"by id: {ids}"
        assert backend.list_schedules()[-1] == stored


def check_schedule_replace_and_delete(make: MakeBackend) -> None:
    """A second put_schedule replaces the schedule, keeping created_at and moving
    updated_at; a put for another workflow raises ScheduleConflict and changes nothing;
    delete_schedule deletes (True), then finds nothing (False)."""
    with _opened(make) as backend:
        now = backend.now()
        first = backend.put_schedule(_schedule("nightly", now + FAR))
        time.sleep(0.01)  # clocks that tick in milliseconds tick
        changed = _schedule(
            "nightly", now + 2 * FAR, cron="0 3 * * *", every=None, paused=True, priority=4
        )
        second = backend.put_schedule(changed)
        assert _same(changed, second), f"replaced by the new fields: {second}"
        assert second.created_at == first.created_at, "created_at is kept"
        assert second.updated_at > first.updated_at, "updated_at moves on"
        assert _stored(backend, "nightly") == second
        try:
            backend.put_schedule(_schedule("nightly", now, workflow="app.other"))
        except ScheduleConflict as error:
            assert error.schedule_id == "nightly", f"names the id: {error.schedule_id!r}"
        else:
            raise AssertionError("a schedule id of another workflow raises ScheduleConflict")
        assert _stored(backend, "nightly") == second, "a conflicting put changes nothing"
        assert backend.delete_schedule("nightly") is True
        assert backend.get_schedule("nightly") is None and backend.list_schedules() == []
        assert backend.delete_schedule("nightly") is False, "nothing left to delete"
        fresh = backend.put_schedule(_schedule("nightly", now, workflow="app.other"))
        assert fresh.workflow == "app.other", "once deleted, the id is free"


def check_due_and_next_schedule(make: MakeBackend) -> None:
    """due_schedules lists schedules whose next_fire_at has come, neither paused nor
    orphaned, the most overdue first, up to the limit; next_schedule is the seconds to
    the earliest such next_fire_at (negative if overdue), or None."""
    with _opened(make) as backend:
        assert backend.next_schedule() is None, "no schedule: None"
        assert backend.due_schedules(limit=10) == []
        now = backend.now()
        backend.put_schedule(_schedule("paused", now - 300, paused=True))
        backend.put_schedule(_schedule("orphaned", now - 400, orphaned=True))
        assert backend.next_schedule() is None, "paused and orphaned schedules do not count"
        assert backend.due_schedules(limit=10) == []
        backend.put_schedule(_schedule("soon", now + FAR))
        ahead = backend.next_schedule()
        assert ahead is not None and FAR - 60 < ahead <= FAR, f"seconds until it: {ahead}"
        assert backend.due_schedules(limit=10) == [], "not due before its time"
        backend.put_schedule(_schedule("later", now - 10))
        backend.put_schedule(_schedule("late", now - 100))
        behind = backend.next_schedule()
        assert behind is not None and -160 < behind <= -100, f"overdue: negative ({behind})"
        due = [schedule.id for schedule in backend.due_schedules(limit=10)]
        assert due == ["late", "later"], f"only live due ones, most overdue first: {due}"
        first = backend.due_schedules(limit=1)
        assert [schedule.id for schedule in first] == ["late"], "up to the limit"
        assert first[0] == _stored(backend, "late"), "whole schedules"
        backend.set_schedule_paused("late", True)
        due = [schedule.id for schedule in backend.due_schedules(limit=10)]
        assert due == ["later"], f"a paused schedule is not due: {due}"
        backend.set_schedule_paused("late", False)
        due = [schedule.id for schedule in backend.due_schedules(limit=10)]
        assert due == ["late", "later"], f"resumed, it is due again: {due}"


def check_advance_schedule_compare_and_set(make: MakeBackend) -> None:
    """advance_schedule moves next_fire_at on only from the expected value (compared
    exactly), recording the last tick and run (None keeps them); a stale expected
    value, or an unknown schedule, moves nothing (False)."""
    with _opened(make) as backend:
        now = backend.now()
        backend.put_schedule(_schedule("every", now - 5.123456789012345))
        read = _stored(backend, "every")
        tick, following = read.next_fire_at, now + 54.876543210987654
        moved = backend.advance_schedule(
            "every",
            expected=tick,
            next_fire_at=following,
            last_fire_at=tick,
            last_run_id="every@tick-1",
        )
        assert moved is True, "the value read is the value stored, exactly"
        after = _stored(backend, "every")
        assert after.next_fire_at == following and after.last_fire_at == tick
        assert after.last_run_id == "every@tick-1"
        assert after.updated_at >= read.updated_at and after.created_at == read.created_at
        again = backend.advance_schedule(
            "every", expected=tick, next_fire_at=now + FAR, last_fire_at=now, last_run_id="x"
        )
        assert again is False, "a stale expected value moves nothing"
        assert _stored(backend, "every") == after
        kept = backend.advance_schedule(
            "every", expected=following, next_fire_at=now + FAR, last_fire_at=None, last_run_id=None
        )
        assert kept is True
        last = _stored(backend, "every")
        assert last.next_fire_at == now + FAR
        assert (last.last_fire_at, last.last_run_id) == (tick, "every@tick-1"), "None keeps"
        missing = backend.advance_schedule(
            "missing", expected=tick, next_fire_at=now, last_fire_at=None, last_run_id=None
        )
        assert missing is False, "an unknown schedule: False"


def check_set_schedule_paused(make: MakeBackend) -> None:
    """set_schedule_paused pauses and resumes a schedule, returning it as now stored
    (updated_at moved, the rest kept), or None for an unknown id."""
    with _opened(make) as backend:
        stored = backend.put_schedule(_schedule("hourly", backend.now() - 1))
        paused = backend.set_schedule_paused("hourly", True)
        assert paused is not None and paused.paused, "paused"
        assert paused == dataclasses.replace(stored, paused=True, updated_at=paused.updated_at)
        assert paused.updated_at >= stored.updated_at
        assert _stored(backend, "hourly") == paused
        resumed = backend.set_schedule_paused("hourly", False)
        assert resumed is not None and not resumed.paused, "resumed"
        assert _stored(backend, "hourly") == resumed
        assert backend.set_schedule_paused("missing", True) is None


def check_advance_schedule_race(make: MakeBackend) -> None:
    """Workers advancing one schedule from the same expected value at the same time:
    exactly one wins, and the schedule holds the winner's values."""
    with _opened(make) as backend:
        backend.put_schedule(_schedule("race", backend.now() - 1))
        tick = _stored(backend, "race").next_fire_at
        workers = 8

        def advance(i: int) -> bool:
            return backend.advance_schedule(
                "race",
                expected=tick,
                next_fire_at=tick + 60 + i,
                last_fire_at=tick,
                last_run_id=f"race@{i}",
            )

        results = _race(workers, advance)
        assert results.count(True) == 1, f"exactly one worker advances it: {results}"
        winner = results.index(True)
        stored = _stored(backend, "race")
        assert stored.next_fire_at == tick + 60 + winner, "the winner's next tick"
        assert stored.last_run_id == f"race@{winner}", "the winner's run"


def check_held_schedules_are_taken_by_one_worker(make: MakeBackend) -> None:
    """due_schedules with a hold: racing workers take disjoint schedules; a held one is
    not due to others until advanced (which releases it) or until the hold ends."""
    with _opened(make) as backend:
        before = backend.now() - 1
        for i in range(30):
            backend.put_schedule(_schedule(f"h{i:02d}", before))
        taken = _race(4, lambda i: [s.id for s in backend.due_schedules(limit=10, hold=30.0)])
        every = [schedule_id for batch in taken for schedule_id in batch]
        assert len(every) == len(set(every)) == 30, f"disjoint and complete: {taken}"
        assert backend.due_schedules(limit=50) == [], "held ones are not due to others"
        first = _stored(backend, "h00")
        moves = [
            Advance("h00", first.next_fire_at, first.next_fire_at + 60, first.next_fire_at, "r0"),
            Advance("h01", first.next_fire_at - 5, first.next_fire_at + 60),  # stale
            Advance("h02", first.next_fire_at, first.next_fire_at),  # released, not moved
        ]
        assert sorted(backend.advance_schedules(moves)) == ["h00", "h02"]
        assert _stored(backend, "h00").last_run_id == "r0"
        assert _stored(backend, "h01").next_fire_at == first.next_fire_at, "a stale CAS"
        assert [s.id for s in backend.due_schedules(limit=50)] == ["h02"], "released"
        backend.put_schedule(_schedule("short", before))
        assert [s.id for s in backend.due_schedules(limit=1, hold=SHORT_LEASE)] == ["h02"]
        assert [s.id for s in backend.due_schedules(limit=5, hold=SHORT_LEASE)] == ["short"]
        _expire()
        assert [s.id for s in backend.due_schedules(limit=5)] == ["h02", "short"], "expired"


def check_create_runs_makes_each_once(make: MakeBackend) -> None:
    """create_runs: a batch of queued runs, each created unless its id exists; the ids
    it created are returned, and racing batches create each run once."""
    with _opened(make) as backend:
        backend.create_run(_new("r03", owner=None))

        def batch(i: int) -> list[str]:
            news = [
                dataclasses.replace(_new(f"r{j:02d}", owner=None), queue="q") for j in range(10)
            ]
            return list(backend.create_runs(news))

        made = _race(3, batch)
        every = [run_id for one in made for run_id in one]
        assert sorted(every) == [f"r{j:02d}" for j in range(10) if j != 3], made
        run = backend.get_run("r05")
        assert run is not None and run.status is RunStatus.QUEUED and run.queue == "q"
        existing = backend.get_run("r03")
        assert existing is not None and existing.queue == "default", "an existing run is kept"
        assert backend.create_runs([]) == []


def check_a_run_created_to_start_later_waits_until_then(make: MakeBackend) -> None:
    """create_runs (and create_run) with ``start_at``: the run is WAITING until that
    moment, with no ``waiting_on``; `wake_due` queues it once the moment has come, not
    before, and then it is claimed like any other (a jittered schedule tick)."""
    with _opened(make) as backend:
        soon = backend.now() + 0.3
        later = dataclasses.replace(_new("late", owner=None), queue="q", start_at=soon)
        now_one = dataclasses.replace(_new("now", owner=None), queue="q")
        assert sorted(backend.create_runs([later, now_one])) == ["late", "now"]
        single = dataclasses.replace(_new("single", owner=None), queue="q", start_at=soon)
        made, created = backend.create_run(single)
        assert created and made.status is RunStatus.WAITING and made.wake_at == soon
        for run_id in ("late", "single"):
            run = backend.get_run(run_id)
            assert run is not None and run.status is RunStatus.WAITING, run_id
            assert run.wake_at == soon and run.waiting_on is None and run.started_at is None
        backend.wake_due(limit=10)
        claimed = backend.claim_next(
            owner="w", queue="q", workflows=["app.workflow"], limit=10, lease=30
        )
        assert [run.id for run in claimed] == ["now"], "only the run without start_at"
        time.sleep(max(0.0, soon - backend.now()) + 0.05)
        assert backend.wake_due(limit=10) == 2
        claimed = backend.claim_next(
            owner="w", queue="q", workflows=["app.workflow"], limit=10, lease=30
        )
        assert sorted(run.id for run in claimed) == ["late", "single"]
