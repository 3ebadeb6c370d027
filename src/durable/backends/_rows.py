"""Rows to records and back: the column order of `_schema`'s tables, in one place."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from durable.core.events import Event
from durable.core.records import (
    CANCEL_REQUEST,
    PAUSE_REQUEST,
    STEP_SETTERS,
    NewRun,
    Run,
    RunStatus,
    Step,
    StepKind,
    StepStatus,
)
from durable.core.schedules import CatchUp, Overlap, Schedule

RUN_STATUS = {status.value: status for status in RunStatus}
_STEP_STATUS = {status.value: status for status in StepStatus}
_STEP_KIND = {kind.value: kind for kind in StepKind}
# Enum's ``.value`` is a descriptor call: 0.2 us, twice per step recorded.
_KIND_VALUE = {kind: kind.value for kind in StepKind}
_STATUS_VALUE = {status: status.value for status in StepStatus}


def run(row: Sequence[Any]) -> Run:
    """A `durable_runs` row as a Run."""
    return Run(
        id=row[0],
        workflow=row[1],
        status=RUN_STATUS[row[2]],
        input=row[3],
        call_hash=row[4],
        output=row[5],
        error=row[6],
        epoch=row[7],
        lease_owner=row[8],
        lease_until=row[9],
        recoveries=row[10],
        parent_id=row[11],
        created_at=row[12],
        updated_at=row[13],
        finished_at=row[14],
        queue=row[15],
        priority=row[16],
        started_at=row[17],
        cancel_requested=bool(row[18] & CANCEL_REQUEST),
        pause_requested=bool(row[18] & PAUSE_REQUEST),
        wake_at=row[19],
        waiting_on=row[20],
        deadline_at=row[21],
        state=row[22],
        key=row[23],
        key_limit=row[24],
        version=row[26],
        origin=row[27],
        trace_context=row[28],
        event_schemas=row[29],
    )


def new_run_values(new: NewRun, *, queued: bool = False) -> tuple[dict[str, Any], RunStatus, int]:
    """The parameters of a run's insert for *new* (every statement that creates a run
    binds these names: `create_run`, `create_run_in`, `create_runs`, `fork_run`,
    `continue_run`, `debounce_run`), the status it is created in, and its epoch.

    With an owner it is RUNNING at epoch 1; without, QUEUED at epoch 0, or WAITING
    until its ``start_at``. *queued*: QUEUED whatever *new* says (a fork, a chain's
    next link), as the memory backend's `queued_run`.
    """
    owned = new.owner is not None and not queued
    later = None if owned or queued else new.start_at
    status = (
        RunStatus.RUNNING if owned else RunStatus.QUEUED if later is None else RunStatus.WAITING
    )
    epoch = 1 if owned else 0
    values = {
        "id": new.id,
        "workflow": new.workflow,
        "status": status.value,
        "input": new.input,
        "call_hash": new.call_hash,
        "epoch": epoch,
        "owner": new.owner if owned else None,
        "lease": new.lease if owned else None,
        "parent_id": new.parent_id,
        "queue": new.queue,
        "priority": new.priority,
        "owned": int(owned),
        "timeout": new.timeout,
        "key": new.key,
        "key_limit": new.key_limit,
        "wake_at": later,
        "version": new.version,
        "origin": new.origin,
        "trace_context": new.trace_context,
        "event_schemas": new.event_schemas,
    }
    return values, status, epoch


def created_run(
    new: NewRun, created_at: float, lease_until: float | None, deadline_at: float | None
) -> Run:
    """The run the insert of *new* stored, from what the database decided (its times)."""
    owned = new.owner is not None
    _, status, epoch = new_run_values(new)
    return Run(
        id=new.id,
        workflow=new.workflow,
        status=status,
        input=new.input,
        call_hash=new.call_hash,
        output=None,
        error=None,
        epoch=epoch,
        lease_owner=new.owner,
        lease_until=lease_until,
        recoveries=0,
        parent_id=new.parent_id,
        created_at=created_at,
        updated_at=created_at,
        finished_at=None,
        queue=new.queue,
        priority=new.priority,
        started_at=created_at if owned else None,
        deadline_at=deadline_at,
        key=new.key,
        key_limit=new.key_limit,
        wake_at=None if owned else new.start_at,
        version=new.version,
        origin=new.origin,
        trace_context=new.trace_context,
        event_schemas=new.event_schemas,
    )


#: Step's fields, in `durable_history`'s column order (their setters: `STEP_SETTERS`).
_STEP_FIELDS = tuple(field.name for field in dataclasses.fields(Step))
_SET_KIND = STEP_SETTERS[_STEP_FIELDS.index("kind")]
_SET_STATUS = STEP_SETTERS[_STEP_FIELDS.index("status")]


def step(row: Sequence[Any]) -> Step:
    """A `durable_history` row as a Step.

    Loading a long history makes one per row, so the Step is filled slot by slot:
    the frozen dataclass's keyword ``__init__`` costs about twice as much.
    """
    made = Step.__new__(Step)
    for put, value in zip(STEP_SETTERS, row, strict=True):
        put(made, value)
    _SET_KIND(made, _STEP_KIND[row[2]])
    _SET_STATUS(made, _STEP_STATUS[row[5]])
    return made


def step_params(step: Step, epoch: int) -> tuple[Any, ...]:
    """The record statement's parameters, in `_statements.history.RECORD_ORDER`.

    The hottest statement: its parameters are built directly, not through a mapping.
    """
    return (
        step.run_id,
        step.position,
        _KIND_VALUE[step.kind],
        step.name,
        step.call_hash,
        _STATUS_VALUE[step.status],
        step.input,
        step.output,
        step.error,
        step.attempts,
        step.started_at,
        step.finished_at,
        epoch,
        step.wake_at,
        step.heartbeat_at,
        step.details,
        step.state,
        step.run_id,
        epoch,
        step.run_id,
    )


def event(row: Sequence[Any]) -> Event:
    """A `durable_events` row as an Event."""
    return Event(
        id=row[0],
        run_id=row[1],
        name=row[2],
        payload=row[3],
        sent_at=row[4],
        sender=row[5],
        key=row[6],
        consumed_position=row[7],
    )


def schedule(row: Sequence[Any]) -> Schedule:
    """A `durable_schedules` row as a Schedule."""
    return Schedule(
        id=row[0],
        workflow=row[1],
        input=row[2],
        call_hash=row[3],
        cron=row[4],
        every=row[5],
        timezone=row[6],
        catch_up=CatchUp(row[7]),
        max_catch_up=row[8],
        overlap=Overlap(row[9]),
        queue=row[10],
        priority=row[11],
        declared=bool(row[12]),
        orphaned=bool(row[13]),
        paused=bool(row[14]),
        next_fire_at=row[15],
        last_fire_at=row[16],
        last_run_id=row[17],
        created_at=row[18],
        updated_at=row[19],
        jitter=row[21] or 0.0,
    )


def schedule_values(schedule: Schedule) -> dict[str, Any]:
    """A Schedule as the parameters of `put_schedule`: its columns but the times the
    database sets (``created_at``, ``updated_at``)."""
    return {
        "id": schedule.id,
        "workflow": schedule.workflow,
        "input": schedule.input,
        "call_hash": schedule.call_hash,
        "cron": schedule.cron,
        "every": schedule.every,
        "timezone": schedule.timezone,
        "catch_up": str(schedule.catch_up),
        "max_catch_up": schedule.max_catch_up,
        "overlap": str(schedule.overlap),
        "queue": schedule.queue,
        "priority": schedule.priority,
        "declared": int(schedule.declared),
        "orphaned": int(schedule.orphaned),
        "paused": int(schedule.paused),
        "next_fire_at": schedule.next_fire_at,
        "last_fire_at": schedule.last_fire_at,
        "last_run_id": schedule.last_run_id,
        "jitter": schedule.jitter or None,
    }
