"""Schedules (issue 16) on the memory backend with a virtual clock: ticks, time zones
and DST, catch-up after downtime, overlap, exactly-once firing, and bad input."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
from collections.abc import Iterator
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest

import durable
from durable import RunStatus, wait, workflow
from durable.core.records import RunQuery
from durable.errors import ScheduleConflict
from durable.runtime import schedules as runtime
from durable.testing import DurableEnv

PARIS = ZoneInfo("Europe/Paris")


def _at(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, tzinfo=PARIS)


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv(start=_at(2026, 3, 27, 12)) as world:
        yield world


@workflow
def sync_customer(customer: str) -> str:
    return f"synced {customer}"


@workflow
def report(at: dt.datetime) -> str:
    return at.isoformat()


@workflow
def lingering(at: dt.datetime) -> object:
    return wait("done")


def runs_of(env: DurableEnv, workflow_name: str) -> list[durable.Run]:
    found = env.backend.list_runs(RunQuery(workflow=workflow_name), limit=10_000)
    return sorted(found, key=lambda run: run.id)


def results(env: DurableEnv, name: str) -> list[object]:
    return [durable.Handle(env.engine, run.id).result() for run in runs_of(env, name)]


def test_an_interval_schedule_fires_each_tick_once_with_its_arguments(env: DurableEnv) -> None:
    stored = durable.schedule(sync_customer, "c-42", id="sync-c-42", every=timedelta(minutes=15))
    assert stored.next_fire_at == env.clock.now() + 900
    env.advance(timedelta(minutes=14))
    assert runs_of(env, sync_customer.name) == [], "a tick is never fired early"
    env.advance(timedelta(minutes=46))
    found = runs_of(env, sync_customer.name)
    assert len(found) == 4
    assert all(run.id.startswith("sync-c-42@") for run in found)
    assert results(env, sync_customer.name) == ["synced c-42"] * 4
    schedule = env.backend.get_schedule("sync-c-42")
    assert schedule is not None and schedule.last_run_id == found[-1].id


def test_a_declared_cron_schedule_fires_in_its_time_zone_with_its_tick(env: DurableEnv) -> None:
    nightly = workflow(name="tests.nightly", schedule="0 3 * * *", timezone="Europe/Paris")(
        lambda at: at.isoformat()
    )
    env.declare_schedules(nightly)
    env.advance(timedelta(days=3))
    # 28 March 03:00 CET, 29 March 03:00 CEST (the night clocks go forward), 30 March.
    assert results(env, "tests.nightly") == [
        "2026-03-28T03:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T03:00:00+02:00",
    ]


def test_a_time_that_does_not_exist_fires_once_after_the_gap(env: DurableEnv) -> None:
    durable.schedule(report, id="two", cron="0 2 * * *", timezone="Europe/Paris")
    env.advance(timedelta(days=3))
    # 29 March has no 02:00 in Paris: it fires at 03:00 CEST, once.
    assert results(env, report.name) == [
        "2026-03-28T02:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:00:00+02:00",
    ]


def test_a_time_that_exists_twice_fires_once() -> None:
    with DurableEnv(start=_at(2026, 10, 24, 12)) as env:
        durable.schedule(report, id="half-past-two", cron="30 2 * * *", timezone="Europe/Paris")
        env.advance(timedelta(days=2))
        assert results(env, report.name) == [
            "2026-10-25T02:30:00+02:00",  # the first of the two 02:30s (summer time)
            "2026-10-26T02:30:00+01:00",
        ]


@pytest.mark.parametrize(("policy", "expected"), [("latest", 2), ("all", 10), ("skip", 1)])
def test_catch_up_after_a_three_day_outage(env: DurableEnv, policy: str, expected: int) -> None:
    durable.schedule(
        sync_customer, "c-1", id=f"hourly-{policy}", every=3600, catch_up=policy, max_catch_up=10
    )
    env.clock.advance(3 * 86400 + 30)  # nobody fired anything for three days
    env.advance(0)
    found = runs_of(env, sync_customer.name)
    # The last tick, 30 s ago, is on time and fires whatever the policy; the 71 before
    # it were missed: the latest of them, all of them (at most max_catch_up), or none.
    assert len(found) == expected
    assert found[-1].id.endswith("T11:00:00.000000Z"), found[-1].id
    if policy == "latest":
        assert found[0].id.endswith("T10:00:00.000000Z"), found[0].id
    schedule = env.backend.get_schedule(f"hourly-{policy}")
    assert schedule is not None and schedule.next_fire_at > env.clock.now()


@pytest.mark.parametrize(("overlap", "started", "cancelled"), [
    ("skip", 1, 0), ("allow", 3, 0), ("cancel_previous", 3, 2),
])  # fmt: skip
def test_overlap_when_the_previous_run_is_still_unfinished(
    env: DurableEnv, overlap: str, started: int, cancelled: int
) -> None:
    durable.schedule(lingering, id=f"o-{overlap}", every=60, overlap=overlap)
    env.advance(timedelta(minutes=3))
    found = runs_of(env, lingering.name)
    assert len(found) == started
    assert sum(run.status is RunStatus.CANCELLED for run in found) == cancelled


def test_workers_that_see_a_tick_due_at_once_start_one_run(env: DurableEnv) -> None:
    durable.schedule(sync_customer, "c-9", id="race", every=60)
    env.clock.advance(60)
    barrier = threading.Barrier(4)

    def fire() -> None:
        barrier.wait()
        runtime.fire_due(env.engine)

    threads = [threading.Thread(target=fire) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(runs_of(env, sync_customer.name)) == 1


def test_editing_a_schedule_keeps_its_next_tick_unless_its_timing_changes(env: DurableEnv) -> None:
    first = durable.schedule(sync_customer, "a", id="edit", every=600)
    env.clock.advance(100)
    again = durable.schedule(sync_customer, "b", id="edit", every=600, overlap="allow")
    assert again.next_fire_at == first.next_fire_at and again.overlap.value == "allow"
    moved = durable.schedule(sync_customer, "b", id="edit", every=60)
    # Its ticks count from its creation (kept): the first after now (creation + 100).
    assert moved.created_at == first.created_at
    assert moved.next_fire_at == first.created_at + 120
    env.advance(20)
    assert results(env, sync_customer.name) == ["synced b"]


def test_a_schedule_dropped_from_the_code_is_orphaned_not_deleted(env: DurableEnv) -> None:
    dropped = workflow(name="tests.dropped", schedule="*/5 * * * *")(lambda: "tick")
    env.declare_schedules(dropped)
    runtime.DECLARED.pop("tests.dropped")  # a deploy without the schedule
    env.declare_schedules(dropped)
    schedule = env.backend.get_schedule("tests.dropped")
    assert schedule is not None and schedule.orphaned
    env.advance(timedelta(minutes=30))
    assert runs_of(env, "tests.dropped") == [], "an orphaned schedule fires no more"


def test_pause_resume_and_trigger(env: DurableEnv) -> None:
    durable.schedule(sync_customer, "p", id="paused", every=60)
    env.backend.set_schedule_paused("paused", True)
    env.advance(timedelta(minutes=5))
    assert runs_of(env, sync_customer.name) == []
    resumed = runtime.resume(env.engine, "paused")
    assert resumed is not None and resumed.next_fire_at > env.clock.now()  # no catch-up
    manual = runtime.trigger(env.engine, "paused")
    assert manual is not None and manual.endswith("-manual")
    env.drain()
    env.advance(60)
    assert len(runs_of(env, sync_customer.name)) == 2


@pytest.mark.parametrize(("options", "message"), [
    ({"cron": "61 * * * *"}, "Bad minute"),
    ({"cron": "0 3 * *"}, "not a cron expression"),
    ({"every": 0}, "every= must be a positive duration"),
    ({"every": -5}, "every= must be a positive duration"),
    ({"cron": "* * * * *", "every": 60}, "exactly one of"),
    ({}, "exactly one of"),
    ({"every": 60, "timezone": "Mars/Olympus"}, "not an IANA time zone"),
    ({"every": 60, "catch_up": "some"}, "catch_up='some' is not one of"),
    ({"every": 60, "overlap": "queue"}, "overlap='queue' is not one of"),
    ({"every": 60, "max_catch_up": 0}, "max_catch_up= must be a positive integer"),
    ({"every": 60, "jitter": -1}, "jitter= must be a duration of 0 or more"),
    ({"every": 60, "jitter": "soon"}, "jitter= must be a duration of 0 or more"),
    ({"every": 60, "jitter": 60}, r"jitter= \(60 s\) must be shorter than every= \(60 s\)"),
])  # fmt: skip
def test_bad_schedules_are_refused_naming_what_is_wrong(
    env: DurableEnv, options: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        durable.schedule(sync_customer, "x", id="bad", **options)  # type: ignore[arg-type]
    assert env.backend.get_schedule("bad") is None


def test_bad_declared_schedules_fail_at_decoration() -> None:
    with pytest.raises(ValueError, match="Bad hour"):
        workflow(name="tests.bad", schedule="0 25 * * *")(lambda: None)
    with pytest.raises(TypeError, match="unexpected keyword"):
        workflow(name="tests.bad2", schedule="0 1 * * *", timezon="UTC")(lambda: None)


def test_an_id_taken_by_another_workflow_is_a_conflict_and_changes_nothing(
    env: DurableEnv,
) -> None:
    durable.schedule(sync_customer, "a", id="taken", every=60)
    with pytest.raises(ScheduleConflict, match="taken"):
        durable.schedule(report, id="taken", every=120)
    stored = env.backend.get_schedule("taken")
    assert stored is not None and stored.workflow == sync_customer.name and stored.every == 60


def test_arguments_that_do_not_fit_are_refused_at_once(env: DurableEnv) -> None:
    with pytest.raises(TypeError):
        durable.schedule(sync_customer, id="nofit", every=60)
    assert env.backend.get_schedule("nofit") is None


def test_a_schedule_whose_arguments_no_longer_fit_skips_its_ticks_not_the_worker(
    env: DurableEnv,
) -> None:
    """A deploy changed the workflow's signature under a stored schedule: its ticks are
    logged and skipped, it moves on, and other schedules and runs are not held up."""
    durable.schedule(sync_customer, "c-1", id="stale", every=60)
    durable.schedule(sync_customer, "c-2", id="fine", every=60)
    stale = env.backend.get_schedule("stale")
    assert stale is not None
    broken = env.engine.dump({"args": [], "kwargs": {"nope": 1}}, "test")
    env.backend.put_schedule(dataclasses.replace(stale, input=broken))
    env.advance(timedelta(minutes=3))
    assert results(env, sync_customer.name) == ["synced c-2"] * 3
    moved = env.backend.get_schedule("stale")
    assert moved is not None and moved.next_fire_at > env.clock.now()


def test_an_id_too_long_to_name_its_runs_is_refused(env: DurableEnv) -> None:
    with pytest.raises(ValueError, match="cannot name its runs"):
        durable.schedule(sync_customer, "x", id="s" * 500, every=60)
    assert env.backend.list_schedules() == []
