"""How a real backend is seen by the model: `observe` reads the whole observable state
of a backend as a `Dump`, `view_run`, `view_step` and `view_event` show one answer so,
and `describe_difference` says what differs between two dumps.

Ids of events become their place in the order every observed event was sent (stable
when `continue_run` moves an event to another run) and times become settled facts (a
lease is live or expired, a timer due or later), so that backends with different clocks
and id sequences compare equal when they agree.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from durable.backends import Backend
from durable.backends._protocol.queues import QueueUsage
from durable.core.events import Event
from durable.core.records import Run, Step
from tests.backends._model_records import (
    GHOST,
    HOSTS,
    OBSERVED,
    QUEUE_NAMES,
    QUEUE_SETS,
    Dump,
    RunView,
)

_EVENT_INPUT = re.compile(rb'j\{"event":(\d+)\}')


def _run_view(run: Run, now: float) -> RunView:
    lease = None
    if run.lease_until is not None:
        lease = "live" if run.lease_until > now else "expired"
    wake = None
    if run.wake_at is not None:
        wake = "due" if run.wake_at <= now else "later"
    return RunView(
        workflow=run.workflow,
        input=run.input,
        call_hash=run.call_hash,
        parent=run.parent_id,
        queue=run.queue,
        priority=run.priority,
        status=run.status,
        epoch=run.epoch,
        owner=run.lease_owner,
        lease=lease,
        recoveries=run.recoveries,
        cancel=run.cancel_requested,
        pause=run.pause_requested,
        output=run.output,
        error=run.error,
        started=run.started_at is not None,
        finished=run.finished_at is not None,
        wake=wake,
        waiting_on=run.waiting_on,
        timeout=None if run.deadline_at is None else round(run.deadline_at - run.created_at, 3),
        state=run.state,
        key=run.key,
        key_limit=run.key_limit,
        version=run.version,
        origin=run.origin,
    )


def _normal_step(step: Step, index: dict[int, int]) -> Step:
    if step.heartbeat_at is not None:  # each backend's own clock: only "stamped" counts
        step = dataclasses.replace(step, heartbeat_at=0.0)
    match = _EVENT_INPUT.fullmatch(step.input or b"")
    if match is None:
        return step
    position = index.get(int(match[1]))
    if position is None:  # an id of no observed event: shown as is, so it differs
        return step
    return dataclasses.replace(step, input=b'j{"event":#%d}' % position)


def _sending_order(backend: Backend) -> dict[int, int]:
    """Event id -> its place in the order every observed event was sent."""
    ids = sorted(event.id for run_id in OBSERVED for event in backend.events(run_id))
    return {event_id: i for i, event_id in enumerate(ids)}


def view_run(backend: Backend, run: Run | None) -> RunView | None:
    """*run* as the model shows it, its lease and timer judged by the backend's now."""
    return None if run is None else _run_view(run, backend.now())


def view_step(backend: Backend, step: Step) -> Step:
    """*step* as the model shows it: an event id in its input becomes its sending order."""
    if _EVENT_INPUT.fullmatch(step.input or b"") is None:
        return _normal_step(step, {})
    return _normal_step(step, _sending_order(backend))


def view_event(backend: Backend, event: Event) -> Event:
    """*event* as the model shows it: its id is its place in the sending order."""
    order = _sending_order(backend)
    return dataclasses.replace(event, id=order.get(event.id, -1), sent_at=0.0)


def observe(backend: Backend) -> Dump:
    """Read the whole observable state of *backend*."""
    now = backend.now()
    runs: dict[str, RunView | None] = {}
    inboxes: dict[str, Sequence[Event]] = {}
    for run_id in OBSERVED:
        run = backend.get_run(run_id)
        runs[run_id] = None if run is None else _run_view(run, now)
        # Nothing names a run before it is created; the ghost is named all the time.
        inboxes[run_id] = () if run is None and run_id != GHOST else backend.events(run_id)
        ids = [event.id for event in inboxes[run_id]]
        assert ids == sorted(set(ids)), f"events of {run_id!r} not in sending order: {ids}"
    order = {i: n for n, i in enumerate(sorted(e.id for inbox in inboxes.values() for e in inbox))}
    events = {
        run_id: tuple(dataclasses.replace(e, id=order[e.id], sent_at=0.0) for e in inbox)
        for run_id, inbox in inboxes.items()
    }
    history = {
        run_id: ()
        if runs[run_id] is None and run_id != GHOST
        else tuple(_normal_step(s, order) for s in backend.load_history(run_id))
        for run_id in OBSERVED
    }
    next_wake = backend.next_wake()
    declared = tuple(backend.list_queues())
    for name in QUEUE_NAMES:
        listed = next((queue for queue in declared if queue.name == name), None)
        assert backend.get_queue(name) == listed, f"get_queue({name!r}) is not what is listed"
    return Dump(
        runs=runs,
        history=history,
        events=events,
        recoverable={
            host: tuple(sorted(run.id for run in backend.recoverable(host=host))) for host in HOSTS
        },
        queued_workflows={
            name: tuple(backend.queued_workflows(queues)) for name, queues in QUEUE_SETS.items()
        },
        next_wake=None if next_wake is None else "due" if next_wake <= 0 else "later",
        published={
            run_id: None if runs[run_id] is None and run_id != GHOST else backend.state(run_id)
            for run_id in OBSERVED
        },
        queues=declared,
        next_start={name: _start(backend.next_start(name)) for name in QUEUE_NAMES},
        usage=tuple(_usage(row) for row in backend.queue_usage()),
    )


def _start(seconds: float | None) -> str | None:
    return None if seconds is None else "now" if seconds == 0.0 else "later"


def _usage(row: QueueUsage) -> tuple[str, int, int, dict[str, int]]:
    assert (row.oldest_queued_at is None) == (row.queued == 0), f"oldest_queued_at of {row}"
    return row.name, row.queued, row.running, row.keys


def describe_difference(expected: Dump, got: Dump) -> list[str]:
    """What differs between two dumps, one line per run field, step, event or list."""
    lines: list[str] = []
    for run_id in OBSERVED:
        want, have = expected.runs[run_id], got.runs[run_id]
        if want is None or have is None:
            if want != have:
                lines.append(f"run {run_id}: expected {want}, got {have}")
        else:
            for name in (f.name for f in dataclasses.fields(RunView)):
                a, b = getattr(want, name), getattr(have, name)
                if a != b:
                    lines.append(f"run {run_id}.{name}: expected {a!r}, got {b!r}")
        lines += _sequence_difference(
            f"history of {run_id}", expected.history[run_id], got.history[run_id]
        )
        lines += _sequence_difference(
            f"inbox of {run_id}", expected.events[run_id], got.events[run_id]
        )
    for name in (
        "recoverable",
        "queued_workflows",
        "next_wake",
        "published",
        "queues",
        "next_start",
        "usage",
    ):
        a, b = getattr(expected, name), getattr(got, name)
        if a != b:
            lines.append(f"{name}: expected {a!r}, got {b!r}")
    return lines


def _sequence_difference(what: str, want: Sequence[object], have: Sequence[object]) -> list[str]:
    if len(want) != len(have):
        return [f"{what}: expected {len(want)} entries, got {len(have)}: {list(have)}"]
    return [
        f"{what}[{i}]: expected {a}, got {b}"
        for i, (a, b) in enumerate(zip(want, have, strict=True))
        if a != b
    ]
