"""Schedules as operators see and change them: the JSON shapes and the actions."""

from __future__ import annotations

from typing import Any

from durable.core.schedules import Schedule, describe
from durable.runtime import schedules
from durable.runtime.engine import Engine

from ._errors import Conflict, NotFound
from ._values import iso


def view(engine: Engine, schedule: Schedule) -> dict[str, Any]:
    """A schedule as JSON, with the status of the run its last tick started."""
    last = None
    if schedule.last_run_id is not None:
        run = engine.backend.get_run(schedule.last_run_id)
        last = {
            "id": schedule.last_run_id,
            "status": None if run is None else run.status.value,
        }
    return {
        "id": schedule.id,
        "workflow": schedule.workflow,
        **describe(schedule),
        "catch_up": schedule.catch_up.value,
        "max_catch_up": schedule.max_catch_up,
        "jitter": schedule.jitter,
        "overlap": schedule.overlap.value,
        "queue": schedule.queue,
        "priority": schedule.priority,
        "declared": schedule.declared,
        "orphaned": schedule.orphaned,
        "paused": schedule.paused,
        "next_fire_at": None
        if schedule.paused or schedule.orphaned
        else iso(schedule.next_fire_at),
        "last_fire_at": iso(schedule.last_fire_at),
        "last_run": last,
        "created_at": iso(schedule.created_at),
        "updated_at": iso(schedule.updated_at),
    }


def found(engine: Engine, schedule_id: str) -> Schedule:
    """The schedule, or NotFound."""
    schedule = engine.backend.get_schedule(schedule_id)
    if schedule is None:
        raise NotFound(f"No schedule has the id {schedule_id!r}; `durable schedules` lists them.")
    return schedule


def pause(engine: Engine, schedule_id: str) -> dict[str, Any]:
    """Stop a schedule's ticks (runs it started go on)."""
    found(engine, schedule_id)
    stored = engine.backend.set_schedule_paused(schedule_id, True)
    return view(engine, found(engine, schedule_id) if stored is None else stored)


def resume(engine: Engine, schedule_id: str) -> dict[str, Any]:
    """Let a paused schedule fire again, from its next tick after now."""
    schedule = found(engine, schedule_id)
    if not schedule.paused:
        raise Conflict(f"Schedule {schedule_id!r} is not paused; there is nothing to resume.")
    stored = schedules.resume(engine, schedule_id)
    return view(engine, found(engine, schedule_id) if stored is None else stored)


def delete(engine: Engine, schedule_id: str) -> dict[str, Any]:
    """Delete a schedule; the runs it started stay."""
    schedule = found(engine, schedule_id)
    engine.backend.delete_schedule(schedule_id)
    return {"deleted": schedule.id}


def trigger(engine: Engine, schedule_id: str) -> dict[str, Any]:
    """Start a run of the schedule now, outside its ticks."""
    schedule = found(engine, schedule_id)
    try:
        started = schedules.trigger(engine, schedule_id)
    except (TypeError, ValueError) as error:
        raise Conflict(
            f"Schedule {schedule_id!r} cannot start a run of {schedule.workflow!r}: {error} "
            "(its stored arguments may no longer fit the workflow's code: store the "
            "schedule again with arguments that do)."
        ) from None
    if started is None:
        raise Conflict(
            f"Schedule {schedule_id!r} runs {schedule.workflow!r}, which is not registered "
            "in this process: import the module that defines it (durable ... --import "
            "MODULE), or let a worker that has it fire the schedule."
        )
    return {"run": started}
