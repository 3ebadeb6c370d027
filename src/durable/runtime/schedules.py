"""Schedules at run time: storing them, firing their ticks, declaring them at start.

Each due tick of a schedule starts one run, whose id is derived from the schedule's
id and the tick's scheduled time (`core.schedules.run_id`): every worker that sees the
tick due creates that same run, and `create_run` keeps only the first. The schedule
then moves on to its next tick by compare-and-set (`ScheduleStore.advance_schedule`),
so the ticks it fired are not looked at again. A tick is never fired early: "due" is
judged by the database's clock.

A scheduled run gets the schedule's arguments, and ``at=`` (the tick's scheduled time,
an aware datetime in the schedule's zone) if its function takes a parameter named
``at`` that the arguments do not give.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import inspect
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from durable.core.functions import Call, Durable
from durable.core.hashing import call_hash
from durable.core.records import NewRun, RunStatus
from durable.core.run_options import check_run_id
from durable.core.schedules import (
    Advance,
    CatchUp,
    Overlap,
    Schedule,
    check_cron,
    delay,
    due,
    first_tick,
    run_id,
    zone,
)
from durable.errors import PayloadError, RunNotFound

from . import registry, runs
from .host import Host

log = logging.getLogger("durable")

#: The most schedules one sweep fires: their runs are one statement, their moves another
#: (benchmarks/schedules.py: 500 fire 10,000 ticks in about half the time 100 take).
BATCH = 500

#: The schedules declared with the code (``@workflow(schedule=...)``), by workflow name.
DECLARED: dict[str, Spec] = {}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """When a schedule fires and what it does with missed and overlapping ticks: what
    ``@workflow(schedule=...)`` and `durable.schedule` take."""

    cron: str | None = None
    every: float | None = None
    timezone: str = "UTC"
    catch_up: CatchUp = CatchUp.LATEST
    max_catch_up: int = 100
    overlap: Overlap = Overlap.SKIP
    queue: str = "default"
    priority: int = 0
    jitter: float = 0.0

    @classmethod
    def make(cls, **options: Any) -> Spec:
        """A checked spec.

        Raises:
            ValueError: a bad cron expression, zone, interval, policy or bound; named.
        """
        cron, every = options.get("cron"), options.get("every")
        if (cron is None) == (every is None):
            raise ValueError(
                "A schedule needs exactly one of schedule= (a cron expression) and every=."
            )
        if isinstance(every, dt.timedelta):
            every = every.total_seconds()
        if every is not None and not every > 0:
            raise ValueError(f"every= must be a positive duration, not {options['every']!r}.")
        if cron is not None:
            check_cron(cron)
        timezone = options.get("timezone") or "UTC"
        zone(timezone)
        catch_up = _choice(CatchUp, "catch_up", options.get("catch_up", CatchUp.LATEST))
        overlap = _choice(Overlap, "overlap", options.get("overlap", Overlap.SKIP))
        bound = options.get("max_catch_up", 100)
        if not isinstance(bound, int) or bound < 1:
            raise ValueError(f"max_catch_up= must be a positive integer, not {bound!r}.")
        jitter = _jitter(options.get("jitter"), every)
        return cls(
            cron=cron,
            every=every,
            timezone=timezone,
            catch_up=catch_up,
            max_catch_up=bound,
            overlap=overlap,
            queue=options.get("queue", "default"),
            priority=options.get("priority", 0),
            jitter=jitter,
        )


def _jitter(given: Any, every: float | None) -> float:
    """Seconds of ``jitter=`` (a timedelta or seconds; None: 0), checked: not negative,
    and shorter than an ``every=`` interval (a tick's run would start after the next)."""
    seconds = given.total_seconds() if isinstance(given, dt.timedelta) else given or 0.0
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise ValueError(f"jitter= must be a duration of 0 or more, not {given!r}.")
    if every is not None and seconds >= every:
        raise ValueError(
            f"jitter= ({seconds:g} s) must be shorter than every= ({every:g} s): each "
            "tick's run starts within the jitter after its tick, before the next tick."
        )
    return float(seconds)


def _choice(kind: type[Any], name: str, value: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(repr(member.value) for member in kind)
        raise ValueError(f"{name}={value!r} is not one of {allowed}.") from None


def store(
    host: Host,
    target: Durable[..., Any],
    spec: Spec,
    *,
    schedule_id: str,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    declared: bool = False,
) -> Schedule:
    """Create or update schedule *schedule_id*. Its next tick is kept when only its
    arguments or policies change, and computed afresh when its timing does.

    Raises:
        ScheduleConflict: the id belongs to a schedule of another workflow.
        SerializationError: an argument cannot be stored.
    """
    kwargs = dict(kwargs or {})
    try:  # its runs' ids must be ids a run can have
        check_run_id(f"{run_id(schedule_id, 0)}-manual")
    except ValueError as error:
        raise ValueError(f"Schedule id {schedule_id!r} cannot name its runs: {error}") from None
    now = host.backend.now()
    probe = dict(kwargs)
    if "at" not in probe and _takes_at(target, len(args)):
        probe["at"] = dt.datetime.fromtimestamp(now, dt.UTC)
    target.bind(*args, **probe)  # the arguments must fit: a TypeError here, not per tick
    where = f"the arguments of schedule {schedule_id!r}"
    payload = host.dump({"args": list(args), "kwargs": kwargs}, where)
    existing = host.backend.get_schedule(schedule_id)
    schedule = Schedule(
        id=schedule_id,
        workflow=target.name,
        input=payload,
        call_hash=call_hash(target.kind, target.name, {"args": list(args), "kwargs": kwargs}),
        cron=spec.cron,
        every=spec.every,
        timezone=spec.timezone,
        catch_up=spec.catch_up,
        max_catch_up=spec.max_catch_up,
        overlap=spec.overlap,
        queue=spec.queue,
        priority=spec.priority,
        jitter=spec.jitter,
        declared=declared,
        created_at=now if existing is None else existing.created_at,
    )
    same_timing = existing is not None and (existing.cron, existing.every, existing.timezone) == (
        spec.cron,
        spec.every,
        spec.timezone,
    )
    if existing is not None and same_timing:
        schedule = dataclasses.replace(
            schedule,
            paused=existing.paused,
            next_fire_at=existing.next_fire_at,
            last_fire_at=existing.last_fire_at,
            last_run_id=existing.last_run_id,
        )
    else:
        schedule = dataclasses.replace(
            schedule,
            paused=existing.paused if existing is not None else False,
            next_fire_at=first_tick(schedule, now),
            last_fire_at=None if existing is None else existing.last_fire_at,
            last_run_id=None if existing is None else existing.last_run_id,
        )
    return host.backend.put_schedule(schedule)


def declare(host: Host, targets: Iterable[Durable[..., Any]]) -> list[Schedule]:
    """Store the schedules declared with the code (``@workflow(schedule=...)``), each
    under its workflow's name; mark orphaned the declared schedules of workflows known
    here that no longer declare one (they fire no more, and stay visible)."""
    declared: list[Schedule] = []
    names: set[str] = set()
    for target in targets:
        names.add(target.name)
        spec = DECLARED.get(target.name)
        if spec is not None:
            declared.append(store(host, target, spec, schedule_id=target.name, declared=True))
    ids = {schedule.id for schedule in declared}
    for schedule in host.backend.list_schedules():
        gone = schedule.declared and schedule.workflow in names and schedule.id not in ids
        if gone and not schedule.orphaned:
            log.warning(
                "schedule %s: no longer declared by %s; orphaned", schedule.id, schedule.workflow
            )
            host.backend.put_schedule(dataclasses.replace(schedule, orphaned=True))
    return declared


def fire_due(host: Host, *, limit: int = BATCH) -> int:
    """Fire the due ticks of up to *limit* due schedules; return how many due schedules
    it took. They are taken held for the lease (`ScheduleStore.due_schedules`), so that
    other workers take others at the same time; their runs are written in one go
    (`RunStore.create_runs`) and then the schedules moved on in one go
    (`ScheduleStore.advance_schedules`). A worker that dies between the two leaves its
    schedules held until its lease would have ended: then another fires the same ticks
    (their runs exist: the ids are the ticks') and moves them on."""
    found = host.backend.due_schedules(limit=limit, hold=host.lease)
    if not found:
        return 0
    now = host.backend.now()
    news: list[NewRun] = []
    moves: list[Advance] = []
    for schedule in found:
        target = registry.find(schedule.workflow)
        if target is None:
            host.warn_unknown(schedule.workflow, f"schedule {schedule.id}")
            # Not ours to fire: released at once, for a worker that knows it.
            moves.append(Advance(schedule.id, schedule.next_fire_at, schedule.next_fire_at))
            continue
        moments, following = due(schedule, now)
        if moments and not _overlap_allows(host, schedule):
            moments = []
        last = None
        for moment in moments:
            made = _tick_run(host, schedule, target, moment)
            if made is not None:
                news.append(made)
                last = made.id
        fired = moments[-1] if moments else None
        moves.append(Advance(schedule.id, schedule.next_fire_at, following, fired, last))
    host.backend.create_runs(news)
    host.backend.advance_schedules(moves)
    return len(found)


def _overlap_allows(host: Host, schedule: Schedule) -> bool:
    """Whether this firing may start runs, by the overlap policy, given the run its
    previous firing started, or the current run of its chain if it continued as new
    (ticks caught up together are all started)."""
    previous = schedule.last_run_id
    if previous is None or schedule.overlap is Overlap.ALLOW:
        return True
    earlier = host.backend.get_run(previous)
    if earlier is not None and earlier.status is RunStatus.CONTINUED:
        try:
            earlier = host.follow(earlier)  # continue_as_new: the chain's current run
        except RunNotFound:
            earlier = None
    if earlier is None or earlier.status.finished:
        return True
    if schedule.overlap is Overlap.SKIP:
        log.info("schedule %s: tick skipped, run %s has not finished", schedule.id, previous)
        return False
    host.cancel(previous)
    return True


def _tick_run(
    host: Host, schedule: Schedule, target: Durable[..., Any], moment: float
) -> NewRun | None:
    """The run of the tick at *moment*, or None if it cannot start: the schedule's
    arguments no longer fit its workflow (its code changed), say. That is logged and
    the tick skipped; one schedule's error never stops a worker."""
    identity = run_id(schedule.id, moment)
    try:
        call = _call(host, schedule, target, moment)
        if call is None:
            return None
        new = runs.prepare(
            host, call, identity, None, owner=None, queue=schedule.queue,
            priority=schedule.priority,
        )  # fmt: skip
        spread = delay(schedule, moment)
        return dataclasses.replace(new, start_at=moment + spread) if spread else new
    except Exception:
        log.exception(
            "schedule %s: the run of tick %s could not start; skipped", schedule.id, identity
        )
        return None


def _call(
    host: Host, schedule: Schedule, target: Durable[..., Any], moment: float
) -> Call[Any] | None:
    """The call a tick makes: the schedule's arguments, and ``at=`` if wanted."""
    try:
        stored = host.load(schedule.input, schedule.id, None)
    except PayloadError:
        log.exception("schedule %s: its arguments cannot be read; tick skipped", schedule.id)
        return None
    args, kwargs = list(stored["args"]), dict(stored["kwargs"])
    if "at" not in kwargs and _takes_at(target, len(args)):
        kwargs["at"] = dt.datetime.fromtimestamp(moment, zone(schedule.timezone))
    return target.bind(*args, **kwargs)


@functools.lru_cache(maxsize=1024)
def _takes_at(target: Durable[..., Any], given: int) -> bool:
    """Whether *target* has a parameter ``at`` not filled by *given* positionals."""
    try:
        parameters = list(inspect.signature(target.fn).parameters.values())
    except (TypeError, ValueError):
        return False
    names = [p.name for p in parameters]
    return "at" in names and names.index("at") >= given


def trigger(host: Host, schedule_id: str) -> str | None:
    """Start a run of the schedule now, outside its ticks; its id, or None if the
    schedule does not exist or its workflow is unknown here."""
    schedule = host.backend.get_schedule(schedule_id)
    target = None if schedule is None else registry.find(schedule.workflow)
    if schedule is None or target is None:
        return None
    now = host.backend.now()
    call = _call(host, schedule, target, now)
    if call is None:
        return None
    identity = f"{run_id(schedule_id, now)}-manual"
    runs.create(
        host, call, identity, None, owner=None, queue=schedule.queue, priority=schedule.priority
    )
    return identity


def resume(host: Host, schedule_id: str) -> Schedule | None:
    """Let a paused schedule fire again, from its next tick after now: the ticks it
    would have fired while paused are not caught up (it was paused on purpose)."""
    schedule = host.backend.get_schedule(schedule_id)
    if schedule is None:
        return None
    now = host.backend.now()
    moved = dataclasses.replace(schedule, paused=False, next_fire_at=first_tick(schedule, now))
    return host.backend.put_schedule(moved)


class Ticker:
    """A worker's view of the schedules: fires the due ones, and says when to look
    again (read at most every *poll* seconds)."""

    def __init__(self, host: Host, poll: float) -> None:
        self._host = host
        self._poll = poll
        self._due = 0.0  # monotonic time the earliest schedule is due

    def fire(self) -> float:
        """Fire what is due; return the seconds until the next may be."""
        now = time.monotonic()
        if now < self._due:
            return self._due - now
        while fire_due(self._host) == BATCH and time.monotonic() - now < self._poll:
            pass
        due_in = self._host.backend.next_schedule()
        # Still due after firing: schedules of workflows unknown here (or more than a
        # poll's worth): look again in a poll, not in a busy loop.
        wait = self._poll if due_in is None or due_in <= 0 else min(due_in, self._poll)
        self._due = time.monotonic() + wait
        return wait
