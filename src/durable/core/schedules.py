"""Schedules: a workflow run on a cron expression or at a fixed interval, stored.

A `Schedule` is what the database keeps (`ScheduleStore`); `ticks` is the pure
arithmetic of when it fires, on the schedule's own time zone. Cron expressions are
parsed and iterated by `cronsim` (the parser healthchecks.io runs in production: five
fields, ``L``, ``#``, ``W``, names; DST as cron does it, below), not by our own code.

Daylight saving time, for a cron schedule in a zone that has it:

* a time that does not exist (``0 2 * * *`` on the spring-forward day in Paris, where
  02:00 becomes 03:00) fires once, at the first moment after the gap (03:00);
* a time that exists twice (``30 2 * * *`` on the fall-back day) fires once, at its
  first occurrence (summer time).

An ``every=`` schedule counts real seconds from its creation: DST does not move it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class CatchUp(StrEnum):
    """What a schedule fires for the ticks it missed (its workers were down)."""

    #: only ticks from now on: the missed ones are dropped.
    SKIP = "skip"
    #: one run, for the most recent missed tick (the default).
    LATEST = "latest"
    #: a run for every missed tick, at most ``max_catch_up`` (the latest ones).
    ALL = "all"


class Overlap(StrEnum):
    """What a tick does when the run of the schedule's previous tick has not finished."""

    #: no run for this tick (the default).
    SKIP = "skip"
    #: a run anyway: runs of one schedule may overlap.
    ALLOW = "allow"
    #: cancel the previous run, then start this tick's.
    CANCEL_PREVIOUS = "cancel_previous"


#: The most runs one catch-up may start, unless a schedule says otherwise.
MAX_CATCH_UP = 100
#: How many missed ticks are looked at, at most, to find the latest ones.
MAX_CATCH_UP_SCAN = 10_000
#: A tick at most this many seconds late is on time: it fires whatever the catch-up
#: policy (a sweep a little late must not drop it). Later ones were missed.
GRACE = 60.0


@dataclass(frozen=True, slots=True)
class Advance:
    """One schedule moved on (`ScheduleStore.advance_schedules`): to *next_fire_at* if
    its ``next_fire_at`` is still *expected*, recording the last tick fired and its run
    (None keeps the stored ones)."""

    schedule_id: str
    expected: float
    next_fire_at: float
    last_fire_at: float | None = None
    last_run_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A stored schedule. Times are seconds since the epoch."""

    id: str
    workflow: str
    #: the runs' input and its hash, as a run's (`NewRun.input`, ``call_hash``).
    input: bytes
    call_hash: str
    #: a cron expression (five fields), or None for an ``every`` schedule.
    cron: str | None = None
    #: seconds between ticks, or None for a cron schedule.
    every: float | None = None
    #: the IANA zone the cron expression is read in.
    timezone: str = "UTC"
    catch_up: CatchUp = CatchUp.LATEST
    max_catch_up: int = MAX_CATCH_UP
    overlap: Overlap = Overlap.SKIP
    queue: str = "default"
    priority: int = 0
    #: each tick's run starts up to this many seconds after the tick (`delay`); 0: at it.
    jitter: float = 0.0
    #: declared with the code (``@workflow(schedule=...)``), upserted as workers start.
    declared: bool = False
    #: declared once, no longer in the code that workers run: it fires no more.
    orphaned: bool = False
    paused: bool = False
    #: the next tick's scheduled time.
    next_fire_at: float = 0.0
    #: the last tick fired (its scheduled time), and the run it started, if any.
    last_fire_at: float | None = None
    last_run_id: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


def zone(name: str) -> ZoneInfo:
    """The time zone *name* (IANA, such as ``Europe/Paris``).

    Raises:
        ValueError: no such zone.
    """
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"timezone={name!r} is not an IANA time zone (such as 'UTC' or 'Europe/Paris')."
        ) from None


def check_cron(expression: str) -> None:
    """Refuse a cron expression cronsim cannot read, naming the field.

    Raises:
        ValueError: with cronsim's reason ("Bad minute", ...).
    """
    from cronsim import CronSim, CronSimError

    try:
        CronSim(expression, dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    except CronSimError as error:
        raise ValueError(
            f"schedule={expression!r} is not a cron expression: {error} (five fields: "
            "minute hour day-of-month month day-of-week, such as '0 3 * * *')."
        ) from None


def ticks(schedule: Schedule, after: float) -> Iterator[float]:
    """The schedule's ticks strictly after *after*, in order (endless)."""
    if schedule.every is not None:
        # Counted from the next tick once it is stored (so that every tick is an exact
        # multiple away from it), from the creation before.
        start = schedule.next_fire_at or schedule.created_at
        step = schedule.every
        n = int((after - start) // step) + 1
        while True:
            moment = start + n * step
            if moment > after:
                yield moment
            n += 1
    else:
        from cronsim import CronSim

        here = dt.datetime.fromtimestamp(after, zone(schedule.timezone))
        for when in CronSim(schedule.cron or "", here):
            yield when.timestamp()


def first_tick(schedule: Schedule, now: float) -> float:
    """The first tick after *now*."""
    return next(ticks(schedule, now))


def due(schedule: Schedule, now: float) -> tuple[list[float], float]:
    """The ticks to fire now and the next one after *now*.

    The ticks from ``next_fire_at`` up to *now* are due. Those at most `GRACE` seconds
    old are on time and fire; older ones were missed (its workers were down), and fire
    by the catch-up policy: all of them, the latest, or none. At most ``max_catch_up``
    fire at once (the latest ones).
    """
    pending = [schedule.next_fire_at]
    following = now
    for moment in ticks(schedule, schedule.next_fire_at):
        if moment > now:
            following = moment
            break
        pending.append(moment)
        if len(pending) > 2 * MAX_CATCH_UP_SCAN:  # a tiny interval down for years
            pending = pending[-MAX_CATCH_UP_SCAN:]
    late = [moment for moment in pending if now - moment > GRACE]
    on_time = pending[len(late) :]
    if schedule.catch_up is CatchUp.ALL:
        kept = late
    elif schedule.catch_up is CatchUp.LATEST:
        kept = late[-1:]
    else:
        kept = []
    return (kept + on_time)[-schedule.max_catch_up :], following


def delay(schedule: Schedule, tick: float) -> float:
    """How long after *tick* its run starts: a spread in [0, ``jitter``) that is the
    same for every worker (a hash of the schedule's id and the tick), and different
    from schedule to schedule and tick to tick, so that schedules due together start
    spread over the window rather than all at once."""
    if not schedule.jitter:
        return 0.0
    digest = hashlib.blake2b(run_id(schedule.id, tick).encode(), digest_size=8).digest()
    return schedule.jitter * int.from_bytes(digest, "big") / 2**64


def run_id(schedule_id: str, tick: float) -> str:
    """The run a tick starts: the same for every worker that sees it due."""
    moment = dt.datetime.fromtimestamp(tick, dt.UTC)
    return f"{schedule_id}@{moment.strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"


def describe(schedule: Schedule) -> dict[str, Any]:
    """What a schedule fires on, for views."""
    if schedule.every is not None:
        return {"every": schedule.every}
    return {"cron": schedule.cron, "timezone": schedule.timezone}
