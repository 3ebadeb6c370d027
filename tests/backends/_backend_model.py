"""The reference model of test_state_machine.py, and the views it is compared through.

`Model` is the `Backend` contracts (src/durable/backends/_protocol/) written as plain
Python over the observable state only. `observe` reads the same state from a real
backend as a `Dump`: ids of events become their place in the order every observed
event was sent (stable when `continue_run` moves an event to another run) and times
become settled facts (a lease is live or expired, a timer due or later), so that
backends with different clocks and id sequences compare equal when they agree.
`check_transition` holds the invariants between two consecutive states.

Chains: a run continued (`continue_run`) hands over to ``<id>~1``, that one to
``<id>~2``... (`durable.core.chains`). Only the links in LINKS are observed, so the
machine continues a run only where its successor's id is one of them; a fork takes
FORK, or else an id of RUN_IDS no run has.

Flow control: the model keeps each queue's declared limits and, for its rate, only how
many starts its log holds. Rates are an hour long (`PER`), so no start ever leaves the
window and the log is just a count: its rate's allowance is `rate - count`.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from durable.backends import Backend
from durable.backends._protocol.queues import QueueUsage
from durable.core.chains import successor_id
from durable.core.events import Event
from durable.core.queues import Queue
from durable.core.records import (
    CANCEL_REQUEST,
    PAUSE_REQUEST,
    NewRun,
    Run,
    RunStatus,
    Step,
    StepStatus,
)

#: The ids runs are created with, and one no run ever has.
RUN_IDS = ("r0", "r1", "r2", "r3", "r4")
GHOST = "ghost"
#: The successors a chain may have (r1 is r0's child: it never continues), and the id
#: forks take first. Each costs a `get_run` per observation while no run has it: few.
LINKS = ("r0~1", "r0~2", "r2~1")
FORK = "f0"
OBSERVED = (*RUN_IDS, *LINKS, FORK, GHOST)
#: Leases that cannot run out during a test, and the one expiry sets (a minute ago).
LEASE = 3600.0
EXPIRED = -60.0
#: Timers that are over at once, and timers never due during a test.
PAST = -60.0
FAR = 3600.0

_EVENT_INPUT = re.compile(rb'j\{"event":(\d+)\}')
#: The prefix of ``waiting_on`` for a run that any event wakes (a class with on_event).
ANY_EVENT = "events|"
#: The period of every rate: no start leaves the window during a test.
PER = 3600.0
#: The queues the machine uses, and one it never declares nor creates runs in.
QUEUE_NAMES = ("default", "mail", "other")


@dataclass(frozen=True, slots=True)
class Raised:
    """The answer of a call that raised one of the contract's errors."""

    error: str
    run_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RunView:
    """What can be observed of a run, without times: they are judged against now."""

    workflow: str
    input: bytes
    call_hash: str
    parent: str | None
    queue: str
    priority: int
    status: RunStatus
    epoch: int
    owner: str | None
    #: "live", "expired", or None without a lease.
    lease: str | None
    recoveries: int
    cancel: bool
    #: `Run.pause_requested`: asked to pause while RUNNING (kept until parked or resumed).
    pause: bool = False
    output: bytes | None = None
    error: bytes | None = None
    started: bool
    finished: bool = False
    #: "due", "later", or None without a timer.
    wake: str | None = None
    waiting_on: str | None = None
    #: the run's timeout: its deadline less its creation (to the millisecond), or None.
    timeout: float | None = None
    #: the properties snapshot its end stored (`Run.state`).
    state: bytes | None = None
    #: flow control: `Run.key`, `Run.key_limit`.
    key: str | None = None
    key_limit: int | None = None
    #: code versions: `Run.version` (stamped by a first claim), `Run.origin` (a fork's).
    version: str | None = None
    origin: str | None = None


@dataclass(frozen=True, slots=True)
class Dump:
    """The observable state of a backend: every run of OBSERVED and what it holds."""

    runs: dict[str, RunView | None]
    #: steps with event ids in their input replaced by sending order (see `view_step`).
    history: dict[str, tuple[Step, ...]]
    #: events with their place in the sending order of all observed events as id, and
    #: sent_at 0.
    events: dict[str, tuple[Event, ...]]
    #: host -> ids of runs `recoverable(host=...)` lists, sorted.
    recoverable: dict[str, tuple[str, ...]]
    #: queue (or "*" for every queue) -> `queued_workflows`.
    queued_workflows: dict[str, tuple[str, ...]]
    #: `next_wake`: None, "due" (zero or negative) or "later".
    next_wake: str | None
    #: run -> `state(run_id)`: its latest properties snapshot.
    published: dict[str, tuple[bytes | None] | None]
    #: `list_queues` (each also `get_queue` by name).
    queues: tuple[Queue, ...] = ()
    #: queue -> `next_start`: None (no rate), "now" (0.0) or "later".
    next_start: dict[str, str | None] = field(default_factory=dict)
    #: `queue_usage`: (name, queued, running, running per key), the oldest time left out.
    usage: tuple[tuple[str, int, int, dict[str, int]], ...] = ()


#: The hosts `recoverable` is asked about: one with owners (h1:...), one without.
HOSTS = ("h1", "h3")
#: The queue lists `queued_workflows` is asked about.
QUEUE_SETS = {"default": ("default",), "*": ("default", "mail")}


# -- views of real records ------------------------------------------------------------


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


# -- the invariants -------------------------------------------------------------------


def check_transition(before: Dump | None, after: Dump) -> None:
    """The invariants of one state, and of the step from *before* to *after*."""
    for run_id in OBSERVED:
        run = after.runs[run_id]
        steps, inbox = after.history[run_id], after.events[run_id]
        if run is None:
            assert not steps and not inbox, f"{run_id}: history or events without a run"
            continue
        positions = [step.position for step in steps]
        # A fork copies only the finished steps: it may skip the positions of others.
        gapless = positions == list(range(len(steps)))
        assert gapless or run.origin is not None, f"{run_id}: positions {positions} have gaps"
        assert positions == sorted(set(positions)), f"{run_id}: positions {positions}"
        _check_run(run_id, run)
        _check_inbox(run_id, steps, inbox)
        if before is None:
            continue
        was = before.runs[run_id]
        if was is None:
            continue
        assert run.epoch >= was.epoch, f"{run_id}: epoch went back from {was.epoch} to {run.epoch}"
        earlier_steps, earlier = before.history[run_id], before.events[run_id]
        reopened = was.status is RunStatus.CANCELLED and not run.status.finished
        if reopened:
            _check_reopened(run_id, was, run, earlier_steps, steps)
        elif was.status.finished:
            assert (run.status, run.output, run.error) == (was.status, was.output, was.error), (
                f"{run_id}: a finished run changed: {was} -> {run}"
            )
        at = {step.position: step for step in steps}
        end = max(at, default=-1) + 1
        for done in earlier_steps:
            if done.status.finished and (done.position < end or not reopened):
                assert at.get(done.position) == done, (
                    f"{run_id}: finished step {done.position} changed: {done} -> "
                    f"{at.get(done.position)}"
                )
        if run.status is RunStatus.CONTINUED and was.status is not RunStatus.CONTINUED:
            # Handed over: its unconsumed events moved to its successor.
            kept = tuple(e for e in earlier if e.consumed_position is not None)
            assert inbox == kept, f"{run_id}: continued, its inbox {earlier} became {inbox}"
            continue
        assert len(inbox) >= len(earlier), f"{run_id}: events were lost"
        for sent, now in zip(earlier, inbox, strict=False):
            # Only consumed_position may change, and only once, from None; unless the
            # run was reopened, which gives back the events of the positions it dropped.
            taken_at = sent.consumed_position
            if reopened and taken_at is not None and taken_at >= end:
                assert now == dataclasses.replace(sent, consumed_position=None), (
                    f"{run_id}: event {sent} of a dropped position is now {now}"
                )
                continue
            settled = taken_at is not None
            same = (now if settled else dataclasses.replace(now, consumed_position=None)) == sent
            assert same, f"{run_id}: event {sent} changed to {now}"


def _check_run(run_id: str, run: RunView) -> None:
    """What a run of each status looks like."""
    running = run.status is RunStatus.RUNNING
    assert (run.owner is not None and run.lease is not None) == running, (
        f"{run_id}: a run has an owner and a lease exactly when RUNNING: {run}"
    )
    assert run.finished == run.status.finished, f"{run_id}: finished_at vs status: {run}"
    assert run.started == (run.epoch > 0), f"{run_id}: started vs epoch: {run}"
    assert not (run.cancel and run.pause), f"{run_id}: a cancel request clears a pause: {run}"
    if run.status is RunStatus.WAITING:
        assert run.wake is not None or run.waiting_on is not None, (
            f"{run_id}: WAITING on nothing: {run}"
        )
    if run.status in (RunStatus.QUEUED, RunStatus.RUNNING):
        assert run.wake is None and run.waiting_on is None, (
            f"{run_id}: a {run.status} run keeps a wait: {run}"
        )
    if run.status is RunStatus.PAUSED:
        # A run asked to cancel is never paused; a paused one keeps what it waited for.
        assert not run.cancel, f"{run_id}: PAUSED with a cancel request: {run}"


def _check_reopened(
    run_id: str, was: RunView, run: RunView, earlier: tuple[Step, ...], steps: tuple[Step, ...]
) -> None:
    """A CANCELLED run reopened (`resume_run(drop_from=)`): queued with no outcome and
    no request, its history cut after a prefix of what it was."""
    fresh = dataclasses.replace(
        was,
        status=RunStatus.QUEUED,
        output=None,
        error=None,
        finished=False,
        recoveries=0,
        cancel=False,
        pause=False,
        wake=None,
        waiting_on=None,
        state=None,
    )
    assert run == fresh, f"{run_id}: a cancelled run reopened as {run}, from {was}"
    assert steps == earlier[: len(steps)], f"{run_id}: reopened, its history is no prefix"


def _check_inbox(run_id: str, steps: tuple[Step, ...], inbox: tuple[Event, ...]) -> None:
    """Each event is consumed by one position, which records it; FIFO per name."""
    positions = [e.consumed_position for e in inbox if e.consumed_position is not None]
    assert len(positions) == len(set(positions)), f"{run_id}: a position took two events"
    for name in {e.name for e in inbox}:
        taken = [e.consumed_position is not None for e in inbox if e.name == name]
        assert taken == sorted(taken, reverse=True), (
            f"{run_id}: event {name!r} consumed out of order: {taken}"
        )
    at = {step.position: step for step in steps}
    for event in inbox:
        if event.consumed_position is None:
            continue
        step = at.get(event.consumed_position)
        assert step is not None, f"{run_id}: event {event} has no step"
        assert step.status is StepStatus.COMPLETED and step.output == event.payload, (
            f"{run_id}: step {step} does not hold event {event}"
        )
        assert step.input == b'j{"event":#%d}' % event.id, (
            f"{run_id}: step {step} names another event"
        )


# -- the model ------------------------------------------------------------------------


@dataclass
class Model:
    """The Backend contracts over plain dictionaries: the state every backend must show."""

    runs: dict[str, RunView] = field(default_factory=dict)
    history: dict[str, dict[int, Step]] = field(default_factory=dict)
    inbox: dict[str, list[Event]] = field(default_factory=dict)
    #: creation order (claim_next takes the oldest first).
    created: dict[str, int] = field(default_factory=dict)
    #: the order of the timers of napping runs (wake_due takes the most overdue first).
    napped: dict[str, int] = field(default_factory=dict)
    #: the limits each queue declares (a queue without a row has none).
    queues: dict[str, Queue] = field(default_factory=dict)
    #: queue -> how many start times its rate's log holds.
    rate_log: dict[str, int] = field(default_factory=dict)
    #: (workflow, key) -> the run `debounce_run` last created for it.
    debounced: dict[tuple[str, str], str] = field(default_factory=dict)
    _clock: itertools.count[int] = field(default_factory=itertools.count)
    #: the ids of events, in sending order (`observe` shows each backend's so).
    _sent: itertools.count[int] = field(default_factory=itertools.count)

    def next_position(self, run_id: str) -> int:
        """The position after the last step (a fork's history may have gaps)."""
        return max(self.history.get(run_id, {}), default=-1) + 1

    def dump(self) -> Dump:
        """The state, as `observe` reads it from a backend."""
        runs: dict[str, RunView | None] = {r: self.runs.get(r) for r in OBSERVED}
        waiting = [r for r in self.runs.values() if r.status is RunStatus.WAITING and r.wake]
        return Dump(
            runs=runs,
            history={
                r: tuple(s for _, s in sorted(self.history.get(r, {}).items())) for r in OBSERVED
            },
            events={r: tuple(self.inbox.get(r, [])) for r in OBSERVED},
            recoverable={host: self._recoverable(host) for host in HOSTS},
            queued_workflows={
                name: tuple(
                    sorted(
                        {
                            r.workflow
                            for r in self.runs.values()
                            if r.status is RunStatus.QUEUED and r.queue in queues
                        }
                    )
                )
                for name, queues in QUEUE_SETS.items()
            },
            next_wake=(
                "due" if any(r.wake == "due" for r in waiting) else "later" if waiting else None
            ),
            published={r: self._published(r) for r in OBSERVED},
            queues=tuple(self.queues[name] for name in sorted(self.queues)),
            next_start={name: self._next_start(name) for name in QUEUE_NAMES},
            usage=self._usage(),
        )

    def _next_start(self, name: str) -> str | None:
        queue = self.queues.get(name)
        if queue is None or queue.rate is None:
            return None
        return "now" if self._allowed(queue) > 0 else "later"

    def _usage(self) -> tuple[tuple[str, int, int, dict[str, int]], ...]:
        """`queue_usage`: queues with QUEUED or live RUNNING runs, or a row."""
        names = set(self.queues)
        queued: dict[str, int] = {}
        running: dict[str, int] = {}
        keys: dict[str, dict[str, int]] = {}
        for run_id, run in self.runs.items():
            if run.status is RunStatus.QUEUED:
                queued[run.queue] = queued.get(run.queue, 0) + 1
            elif self._live(run_id):
                running[run.queue] = running.get(run.queue, 0) + 1
                if run.key is not None:
                    held = keys.setdefault(run.queue, {})
                    held[run.key] = held.get(run.key, 0) + 1
            else:
                continue
            names.add(run.queue)
        return tuple(
            (name, queued.get(name, 0), running.get(name, 0), keys.get(name, {}))
            for name in sorted(names)
        )

    def _published(self, run_id: str) -> tuple[bytes | None] | None:
        """`state(run_id)`: the run's own snapshot, else its furthest step's."""
        run = self.runs.get(run_id)
        if run is None:
            return None
        held = [s.state for _, s in sorted(self.history.get(run_id, {}).items()) if s.state]
        return (run.state if run.state is not None else held[-1] if held else None,)

    def _recoverable(self, host: str) -> tuple[str, ...]:
        def needs_owner(run_id: str, run: RunView) -> bool:
            if run.status is RunStatus.BLOCKED:
                return True
            if run.status is RunStatus.QUEUED:
                return run.started
            if run.status is not RunStatus.RUNNING:
                return False
            mine = (run.owner or "").startswith(f"{host}:")
            return run.lease == "expired" or mine or self._hung(run_id)

        return tuple(sorted(i for i, run in self.runs.items() if needs_owner(i, run)))

    def _hung(self, run_id: str) -> bool:
        """Whether a task attempt of the run is past its heartbeat deadline: a RUNNING
        step with a ``wake_at`` (the machine writes them in 1970: always past)."""
        return any(
            step.status is StepStatus.RUNNING and step.wake_at is not None
            for step in self.history.get(run_id, {}).values()
        )

    # -- runs -------------------------------------------------------------------------

    def create(self, new: NewRun) -> tuple[RunView | None, bool]:
        """`Backend.create_run`: a key limit gives the queue a row first, even when the
        id is known."""
        self._ensure_queue(new)
        existing = self.runs.get(new.id)
        if existing is not None:
            return existing, False
        owned = new.owner is not None
        run = RunView(
            workflow=new.workflow,
            input=new.input,
            call_hash=new.call_hash,
            parent=new.parent_id,
            queue=new.queue,
            priority=new.priority,
            status=RunStatus.RUNNING if owned else RunStatus.QUEUED,
            epoch=1 if owned else 0,
            owner=new.owner,
            lease="live" if owned else None,
            recoveries=0,
            cancel=False,
            started=owned,
            timeout=new.timeout,
            key=new.key,
            key_limit=new.key_limit,
            version=new.version,
            origin=new.origin,
        )
        self._add(new, run)
        return run, True

    def _add(self, new: NewRun, run: RunView) -> None:
        """A run created (its queue's row: `_ensure_queue`, before)."""
        self.runs[new.id] = run
        self.history[new.id] = {}
        self.created[new.id] = next(self._clock)

    def _claim(self, run_id: str, owner: str, *, takeover: bool, version: str | None) -> RunView:
        """A claim: a run started for the first time takes the claimer's *version*."""
        run = self.runs[run_id]
        self.runs[run_id] = claimed = dataclasses.replace(
            run,
            status=RunStatus.RUNNING,
            epoch=run.epoch + 1,
            owner=owner,
            lease="live",
            recoveries=run.recoveries + 1 if takeover else run.recoveries,
            started=True,
            wake=None,
            waiting_on=None,
            version=version if not run.started and version is not None else run.version,
        )
        return claimed

    def claim_next(
        self,
        owner: str,
        queue: str,
        workflows: Sequence[str],
        limit: int,
        *,
        version: str | None = None,
        only: str | None = None,
    ) -> list[tuple[str, RunView]]:
        """`Backend.claim_next`: with *only* (``only_version``), the runs of that
        version or of none (`durable.core.run_options.serves`)."""
        ready = sorted(
            (
                run_id
                for run_id, run in self.runs.items()
                if run.status is RunStatus.QUEUED
                and run.queue == queue
                and run.workflow in workflows
                and (only is None or run.version in (None, only))
            ),
            key=lambda run_id: (-self.runs[run_id].priority, self.created[run_id]),
        )
        limits = self.queues.get(queue)
        chosen = ready[:limit] if limits is None else self._choose(limits, ready, limit)
        return [
            (run_id, self._claim(run_id, owner, takeover=False, version=version))
            for run_id in chosen
        ]

    # -- flow control (see durable.core.queues: choose, admits, allowed, record) --------

    def _live(self, run_id: str) -> bool:
        """Whether the run holds a slot of its queue: RUNNING on a live lease."""
        run = self.runs[run_id]
        return run.status is RunStatus.RUNNING and run.lease == "live"

    def _allowed(self, queue: Queue) -> int:
        """How many first starts the queue's rate allows now (no start leaves the hour)."""
        if queue.rate is None:
            return 1 << 31
        return max(0, queue.rate - self.rate_log.get(queue.name, 0))

    def _note_starts(self, queue: Queue, fresh: int) -> None:
        """The rate's log after a claim made *fresh* first starts: kept to `rate`; a
        claim that starts nothing leaves it as it is."""
        if queue.rate is not None and fresh:
            self.rate_log[queue.name] = min(self.rate_log.get(queue.name, 0) + fresh, queue.rate)

    def _choose(self, queue: Queue, ready: list[str], limit: int) -> list[str]:
        """`choose`: the key rule, then the rate's cap on first starts, then the slots."""
        running = [i for i, r in self.runs.items() if r.queue == queue.name and self._live(i)]
        cap = limit if queue.concurrency is None else min(limit, queue.concurrency - len(running))
        if cap <= 0:
            return []
        rank: dict[str, int] = {}
        fresh_rank: dict[str, int] = {}
        eligible: list[str] = []
        for run_id in ready:
            run = self.runs[run_id]
            if run.key is not None:
                rank[run.key] = rank.get(run.key, 0) + 1
                if not run.started:
                    fresh_rank[run.key] = fresh_rank.get(run.key, 0) + 1
                held = sum(1 for i in running if self.runs[i].key == run.key)
                bound = run.key_limit if run.key_limit is not None else queue.key_concurrency
                if bound is not None and rank[run.key] + held > bound:
                    continue
                recent = self._key_starts(queue.name, run.key)
                late = queue.key_rate is not None and not run.started
                if late and fresh_rank[run.key] + recent > (queue.key_rate or 0):
                    continue
            eligible.append(run_id)
        room, fresh, chosen = self._allowed(queue), 0, []
        for run_id in eligible:
            if not self.runs[run_id].started:
                fresh += 1
                if fresh > room:
                    continue
            chosen.append(run_id)
        chosen = chosen[:cap]
        self._note_starts(queue, sum(1 for i in chosen if not self.runs[i].started))
        return chosen

    def _key_starts(self, queue: str, key: str) -> int:
        """A key's first starts inside its key rate's window: every start of its runs
        (no start leaves the hour)."""
        return sum(1 for r in self.runs.values() if r.queue == queue and r.key == key and r.started)

    def _admitted(self, run_id: str) -> bool:
        """`admits`: whether the limits of the run's queue let it be claimed on its own
        (noted in the rate's log if so)."""
        run = self.runs[run_id]
        queue = self.queues.get(run.queue)
        if queue is None:
            return True
        others = [
            other
            for i, other in self.runs.items()
            if i != run_id and other.queue == run.queue and self._live(i)
        ]
        if queue.concurrency is not None and len(others) >= queue.concurrency:
            return False
        bound = run.key_limit if run.key_limit is not None else queue.key_concurrency
        mates = sum(1 for other in others if other.key == run.key)
        if run.key is not None and bound is not None and mates >= bound:
            return False
        if not run.started and self._allowed(queue) <= 0:
            return False
        rated = queue.key_rate is not None and run.key is not None and not run.started
        if rated and self._key_starts(run.queue, run.key or "") >= (queue.key_rate or 0):
            return False
        self._note_starts(queue, 0 if run.started else 1)
        return True

    def _ensure_queue(self, new: NewRun) -> None:
        """A run with a key limit of its own gives its queue a row (no limits)."""
        if new.key_limit is not None and new.queue not in self.queues:
            self.queues[new.queue] = Queue(name=new.queue)

    def put_queue(self, queue: Queue) -> Queue:
        """`Backend.put_queue`: the limits replaced, the rate's log kept."""
        self.queues[queue.name] = queue
        return queue

    def debounce_run(self, new: NewRun) -> tuple[RunView, bool]:
        """`Backend.debounce_run` with a window never over: the pending run of the
        workflow and key takes *new*'s input, call hash, priority and key limit;
        without one, *new* is created WAITING (its id must be new)."""
        assert new.key is not None
        self._ensure_queue(new)
        slot = (new.workflow, new.key)
        pending = self.debounced.get(slot)
        if pending is not None and self.pending(pending):
            self.runs[pending] = run = dataclasses.replace(
                self.runs[pending],
                input=new.input,
                call_hash=new.call_hash,
                priority=new.priority,
                key_limit=new.key_limit,
            )
            return run, False
        assert new.id not in self.runs, "debounce_run under an id that is taken"
        run = RunView(
            workflow=new.workflow,
            input=new.input,
            call_hash=new.call_hash,
            parent=None,
            queue=new.queue,
            priority=new.priority,
            status=RunStatus.WAITING,
            epoch=0,
            owner=None,
            lease=None,
            recoveries=0,
            cancel=False,
            started=False,
            wake="later",
            timeout=new.timeout,
            key=new.key,
            key_limit=new.key_limit,
        )
        self._add(new, run)
        self.debounced[slot] = new.id
        return run, True

    def pending(self, run_id: str) -> bool:
        """Whether a debounced run has not started: WAITING on its timer alone."""
        run = self.runs[run_id]
        return run.status is RunStatus.WAITING and not run.started and run.waiting_on is None

    def claim_run(
        self,
        run_id: str,
        owner: str,
        epoch: int,
        dead_owner: str | None,
        *,
        version: str | None = None,
        only: str | None = None,
    ) -> RunView | None:
        """`Backend.claim_run`: *version* and *only* as for `claim_next`."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch:
            return None
        if only is not None and run.version not in (None, only):
            return None
        if run.status is RunStatus.RUNNING:
            dead = dead_owner is not None and run.owner == dead_owner
            if (run.lease == "expired" or dead or self._hung(run_id)) and self._admitted(run_id):
                return self._claim(run_id, owner, takeover=True, version=version)
            return None
        due = run.status is RunStatus.WAITING and run.wake == "due"
        if (run.status in (RunStatus.QUEUED, RunStatus.BLOCKED) or due) and self._admitted(run_id):
            return self._claim(run_id, owner, takeover=False, version=version)
        return None

    def mark_progress(self, run_id: str, epoch: int) -> None:
        """`Backend.mark_progress`."""
        run = self.runs.get(run_id)
        if run is not None and run.epoch == epoch:
            self.runs[run_id] = dataclasses.replace(run, recoveries=0)

    def renew_leases(self, owner: str, *, live: bool) -> int:
        """`Backend.renew_leases` with a lease in the future (*live*) or in the past."""
        mine = [
            run_id
            for run_id, run in self.runs.items()
            if run.status is RunStatus.RUNNING and run.owner == owner
        ]
        for run_id in mine:
            self.runs[run_id] = dataclasses.replace(
                self.runs[run_id], lease="live" if live else "expired"
            )
        return len(mine)

    def release_run(self, run_id: str, epoch: int) -> bool:
        """`Backend.release_run`."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
            return False
        self.runs[run_id] = dataclasses.replace(
            run, status=RunStatus.QUEUED, owner=None, lease=None
        )
        return True

    def finish_run(
        self,
        run_id: str,
        epoch: int,
        status: RunStatus,
        *,
        output: bytes | None,
        error: bytes | None,
        last_step: Step | None = None,
        state: bytes | None = None,
    ) -> bool:
        """`Backend.finish_run`: the last step, if any, recorded with the outcome."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status.finished:
            return False
        if last_step is not None:
            self.record(last_step, epoch)
        self.runs[run_id] = dataclasses.replace(
            run,
            status=status,
            output=output,
            error=error,
            owner=None,
            lease=None,
            finished=status.finished,
            state=run.state if state is None else state,
        )
        if status.finished:
            self._wake(run.parent, f"run:{run_id}")
        return True

    def continue_run(
        self,
        run_id: str,
        epoch: int,
        successor: NewRun,
        *,
        last_step: Step | None,
        state: bytes | None,
    ) -> bool | Raised:
        """`Backend.continue_run`: fenced by *epoch* and the run being unfinished and
        top-level; the run ends CONTINUED (with its last step, as `finish_run`), its
        successor is queued with its requests, unconsumed events and unfinished
        children. A successor id that is taken changes nothing."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status.finished or run.parent is not None:
            return False
        if successor.id in self.runs:
            return Raised("IdempotencyConflict", successor.id)
        self._ensure_queue(successor)
        if last_step is not None:
            self.record(last_step, epoch)
        self.runs[run_id] = dataclasses.replace(
            run,
            status=RunStatus.CONTINUED,
            output=None,
            error=None,
            owner=None,
            lease=None,
            finished=True,
            state=run.state if state is None else state,
        )
        created, _ = self.create(successor)
        assert created is not None
        self.runs[successor.id] = dataclasses.replace(created, cancel=run.cancel, pause=run.pause)
        inbox = self.inbox.pop(run_id, [])
        self.inbox[run_id] = [e for e in inbox if e.consumed_position is not None]
        self.inbox[successor.id] = [
            dataclasses.replace(e, run_id=successor.id)
            for e in inbox
            if e.consumed_position is None
        ]
        for child_id, child in self.runs.items():
            if child.parent == run_id and not child.status.finished:
                self.runs[child_id] = dataclasses.replace(child, parent=successor.id)
        return True

    def fork_run(self, original_id: str, new: NewRun, before: int) -> RunView | None:
        """`Backend.fork_run`: *new* queued, holding copies of the original's finished
        steps below *before*; None (nothing written) without the original or when
        *new*'s id is taken."""
        if original_id not in self.runs or new.id in self.runs:
            return None
        run, _ = self.create(new)
        self.history[new.id] = {
            position: dataclasses.replace(step, run_id=new.id)
            for position, step in sorted(self.history[original_id].items())
            if position < before and step.status.finished
        }
        return run

    def _tree(self, run_id: str) -> list[str]:
        """*run_id* and every run below it."""
        tree, frontier = {run_id}, {run_id}
        while frontier:
            frontier = {i for i, r in self.runs.items() if r.parent in frontier} - tree
            tree |= frontier
        return sorted(tree)

    def cancel_run(self, run_id: str) -> RunView | None:
        """`Backend.cancel_run`: decided for each member of the tree by its status before."""
        if run_id not in self.runs:
            return None
        stopped: list[str] = []
        for member in self._tree(run_id):
            run = self.runs[member]
            if run.status is RunStatus.BLOCKED or (
                run.status in (RunStatus.QUEUED, RunStatus.PAUSED) and not run.started
            ):
                # Never started (or cannot replay): nothing of its code is left to run.
                self.runs[member] = dataclasses.replace(
                    run, status=RunStatus.CANCELLED, owner=None, lease=None, finished=True
                )
                stopped.append(member)
            elif run.status is RunStatus.RUNNING:
                if not run.cancel:
                    self.runs[member] = dataclasses.replace(run, cancel=True, pause=False)
            elif run.status in (RunStatus.WAITING, RunStatus.PAUSED) or (
                run.status is RunStatus.QUEUED and not run.cancel
            ):
                # Started: queued with the request, so its code sees Cancelled.
                self.runs[member] = dataclasses.replace(
                    run,
                    status=RunStatus.QUEUED,
                    cancel=True,
                    pause=False,
                    wake=None,
                    waiting_on=None,
                )
        for member in stopped:
            self._wake(self.runs[member].parent, f"run:{member}")
        return self.runs[run_id]

    def pause_run(self, run_id: str) -> RunView | None:
        """`Backend.pause_run`: idle members stop at once (keeping their wait), running
        ones are asked; members asked to cancel are left alone."""
        if run_id not in self.runs:
            return None
        for member in self._tree(run_id):
            run = self.runs[member]
            if run.cancel:
                continue
            if run.status in (RunStatus.QUEUED, RunStatus.WAITING):
                self.runs[member] = dataclasses.replace(
                    run, status=RunStatus.PAUSED, owner=None, lease=None
                )
            elif run.status is RunStatus.RUNNING and not run.pause:
                self.runs[member] = dataclasses.replace(run, pause=True)
        return self.runs[run_id]

    def resume_run(self, run_id: str, drop_from: int | None) -> RunView | None:
        """`Backend.resume_run`: a CANCELLED root reopened (with *drop_from*), then paused
        members queued and pause requests withdrawn."""
        root = self.runs.get(run_id)
        if root is None:
            return None
        if root.status is RunStatus.CANCELLED and drop_from is not None:
            steps = self.history[run_id]
            for position in [p for p in steps if p >= drop_from]:
                del steps[position]
            self.inbox[run_id] = [
                e
                if e.consumed_position is None or e.consumed_position < drop_from
                else dataclasses.replace(e, consumed_position=None)
                for e in self.inbox.get(run_id, [])
            ]
            self.runs[run_id] = dataclasses.replace(
                root,
                status=RunStatus.QUEUED,
                output=None,
                error=None,
                finished=False,
                state=None,
                recoveries=0,
                cancel=False,
                pause=False,
                wake=None,
                waiting_on=None,
            )
        for member in self._tree(run_id):
            run = self.runs[member]
            if run.status is RunStatus.PAUSED:
                self.runs[member] = dataclasses.replace(
                    run, status=RunStatus.QUEUED, pause=False, wake=None, waiting_on=None
                )
            elif run.pause:
                self.runs[member] = dataclasses.replace(run, pause=False)
        return self.runs[run_id]

    def park_run(self, run_id: str, epoch: int) -> RunStatus | None:
        """`Backend.park_run`: the owner stops its RUNNING run, PAUSED if still asked."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
            return None
        status = RunStatus.PAUSED if run.pause else RunStatus.QUEUED
        self.runs[run_id] = dataclasses.replace(
            run, status=status, pause=False, owner=None, lease=None
        )
        return status

    # -- waiting ----------------------------------------------------------------------

    def _wake(self, run_id: str | None, waiting_on: str | None = None) -> None:
        """Queue *run_id* if it is WAITING on *waiting_on* (any wait if None); one that
        waits ``events|...`` takes any ``event:`` too."""
        run = self.runs.get(run_id) if run_id is not None else None
        if run is None or run.status is not RunStatus.WAITING:
            return
        if waiting_on is not None:
            awaited = run.waiting_on or ""
            any_event = awaited.startswith(ANY_EVENT)
            named = awaited.removeprefix(ANY_EVENT)
            if named != waiting_on and not (any_event and waiting_on.startswith("event:")):
                return
        assert run_id is not None
        self.runs[run_id] = dataclasses.replace(
            run, status=RunStatus.QUEUED, wake=None, waiting_on=None
        )

    def suspend_run(
        self, run_id: str, epoch: int, *, timer: str | None, waiting_on: str | None
    ) -> RunStatus | None:
        """`Backend.suspend_run` with a timer long *past*, *later* (far away), a *nap*
        (due by the time anyone looks), or None."""
        run = self.runs.get(run_id)
        if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
            return None
        over = timer == "past" or self._satisfied(run_id, waiting_on)
        if over:
            self.runs[run_id] = dataclasses.replace(
                run, status=RunStatus.QUEUED, owner=None, lease=None, wake=None, waiting_on=None
            )
            return RunStatus.QUEUED
        self.runs[run_id] = dataclasses.replace(
            run,
            status=RunStatus.WAITING,
            owner=None,
            lease=None,
            wake={None: None, "later": "later", "nap": "due"}[timer],
            waiting_on=waiting_on,
        )
        if timer == "nap":
            self.napped[run_id] = next(self._clock)
        return RunStatus.WAITING

    def _satisfied(self, run_id: str, waiting_on: str | None) -> bool:
        awaited = waiting_on or ""
        unconsumed = [e for e in self.inbox.get(run_id, []) if e.consumed_position is None]
        if awaited.startswith(ANY_EVENT) and unconsumed:
            return True
        kind, _, name = awaited.removeprefix(ANY_EVENT).partition(":")
        if kind == "event":
            return any(e.name == name for e in unconsumed)
        other = self.runs.get(name) if kind == "run" else None
        return other is not None and other.status.finished

    def wake_due(self, limit: int) -> int:
        """`Backend.wake_due`: napping runs are the due ones, the earliest nap first."""
        due = sorted(
            (i for i, r in self.runs.items() if r.status is RunStatus.WAITING and r.wake == "due"),
            key=lambda run_id: self.napped[run_id],
        )[:limit]
        for run_id in due:
            self._wake(run_id)
        return len(due)

    # -- history and events -----------------------------------------------------------

    def record(self, step: Step, epoch: int) -> tuple[Step, int] | Raised:
        """`Backend.record`: the step as stored, and the run's requests."""
        run = self.runs.get(step.run_id)
        if run is None or run.epoch != epoch:
            return Raised("LeaseLost", step.run_id)
        steps = self.history[step.run_id]
        existing = steps.get(step.position)
        if existing is not None and existing.status.finished:
            return existing, _requests(run)
        stored = dataclasses.replace(step, epoch=epoch)
        steps[step.position] = _keep_first_start(stored, existing)
        return stored, _requests(run)

    def record_steps(self, steps: list[Step], epoch: int) -> tuple[list[Step], int] | Raised:
        """`Backend.record_steps`: each as `record` would, in one commit."""
        run = self.runs.get(steps[0].run_id)
        if run is None or run.epoch != epoch:
            return Raised("LeaseLost", steps[0].run_id)
        done = [self.record(step, epoch) for step in steps]
        return [d[0] for d in done if isinstance(d, tuple)], _requests(run)

    def heartbeat(
        self, run_id: str, position: int, epoch: int, attempt: int, details: bytes | None
    ) -> bool | Raised:
        """`Backend.heartbeat`: stamps a running attempt; True (nothing written) on a
        cancel request; LeaseLost when fenced or no longer that attempt."""
        run = self.runs.get(run_id)
        step = self.history[run_id].get(position) if run is not None else None
        if (
            run is None
            or step is None
            or run.epoch != epoch
            or step.status is not StepStatus.RUNNING
            or step.attempts != attempt
        ):
            return Raised("LeaseLost", run_id)
        if run.cancel:
            return True
        self.history[run_id][position] = dataclasses.replace(
            step, heartbeat_at=0.0, details=step.details if details is None else details
        )
        return False

    def send_event(
        self, run_id: str, name: str, payload: bytes, *, key: str | None, sender: str | None
    ) -> Event | Raised:
        """`Backend.send_event`: a CONTINUED run's chain is followed (a key seen by a
        run on the way counts as seen)."""
        while True:
            run = self.runs.get(run_id)
            if run is None:
                return Raised("RunNotFound", run_id)
            inbox = self.inbox.setdefault(run_id, [])
            earlier = next((e for e in inbox if key is not None and e.key == key), None)
            if earlier is not None:
                return earlier
            if run.status is not RunStatus.CONTINUED:
                break
            run_id = successor_id(run_id)
        if run.status.finished:
            return Raised("RunFinished", run_id)
        event = Event(
            id=next(self._sent),
            run_id=run_id,
            name=name,
            payload=payload,
            sent_at=0.0,
            sender=sender,
            key=key,
        )
        inbox.append(event)
        self._wake(run_id, f"event:{name}")
        return event

    def consume_event(
        self, step: Step, epoch: int, name: str | None, exclude: str | None = None
    ) -> tuple[Step, int] | Raised | None:
        """`Backend.consume_event`: the oldest unconsumed event *name*, or of any name but
        *exclude* if *name* is None (the stored step takes the event's name)."""
        run = self.runs.get(step.run_id)
        if run is None or run.epoch != epoch:
            return Raised("LeaseLost", step.run_id)
        steps = self.history[step.run_id]
        existing = steps.get(step.position)
        if existing is not None and existing.status.finished:
            return existing, _requests(run)
        inbox = self.inbox.get(step.run_id, [])
        index = next(
            (
                i
                for i, e in enumerate(inbox)
                if e.consumed_position is None
                and (e.name == name if name is not None else e.name != exclude)
            ),
            None,
        )
        if index is None:
            return None
        event = inbox[index]
        inbox[index] = dataclasses.replace(event, consumed_position=step.position)
        stored = dataclasses.replace(
            step,
            name=event.name,
            status=StepStatus.COMPLETED,
            input=b'j{"event":#%d}' % event.id,
            output=event.payload,
            epoch=epoch,
        )
        steps[step.position] = _keep_first_start(stored, existing)
        return stored, _requests(run)

    def has_events(self, run_id: str, exclude: str | None) -> bool:
        """`Backend.has_events`: an unconsumed event not named *exclude* (False for an
        unknown run)."""
        return any(
            e.consumed_position is None and e.name != exclude for e in self.inbox.get(run_id, [])
        )


def _requests(run: RunView) -> int:
    """What `record` and `consume_event` answer: the run's requests, as bits."""
    return (CANCEL_REQUEST if run.cancel else 0) | (PAUSE_REQUEST if run.pause else 0)


def _keep_first_start(step: Step, replaced: Step | None) -> Step:
    """A position written over (it was retrying or waiting) keeps its first start; the
    writer is answered with its own step all the same."""
    if replaced is None:
        return step
    return dataclasses.replace(
        step,
        started_at=replaced.started_at,
        details=replaced.details,
        state=replaced.state if step.state is None else step.state,
    )
