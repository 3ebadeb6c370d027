"""What every role of `MemoryBackend` shares: its dictionaries behind one lock, its
clock, and its in-process hub."""

from __future__ import annotations

import itertools
import threading

from durable.backends._hub import Hub
from durable.core.attributes import Attributes, AttributeValue, canonical
from durable.core.clock import Clock
from durable.core.events import Event
from durable.core.records import Action, NewRun, Outcome, Run, RunStatus, Step, evolve
from durable.core.streams import StreamItem
from durable.errors import StorageError


class MemoryBase:
    """The state `MemoryBackend.__init__` sets up, and what every role does with it.

    Every method of every role holds ``_lock`` while it reads or changes the state,
    which makes each one atomic; hub notifications go out after the lock is released.
    """

    _clock: Clock
    _lock: threading.Lock
    _runs: dict[str, Run]
    _history: dict[str, dict[int, Step]]
    #: parent id -> the ids of runs created (or re-parented) under it: a hint, read
    #: against each run's own ``parent_id`` (a purged or moved run may linger in it).
    _children: dict[str, set[str]]
    _events: dict[str, list[Event]]
    _event_ids: itertools.count[int]
    _actions: list[Action]
    #: outcomes erased by retries: (run id, kind, the run's workflow, the outcome).
    _attempts: list[tuple[str, str, str, Outcome]]
    #: run id -> its attributes (see `MemoryAttributes`).
    _attributes: dict[str, dict[str, AttributeValue]]
    #: (run id, stream) -> its items, in offset order (see `MemoryStreams`) ...
    _streams: dict[tuple[str, str], list[StreamItem]]
    #: ... and (run id, stream, seq) -> the offset of the workflow's write *seq*.
    _stream_seqs: dict[tuple[str, str, int], int]
    _closed: bool
    _hub: Hub

    def now(self) -> float:
        """Return the injected clock's time (see `RunStore.now`)."""
        return self._clock.now()

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError("This MemoryBackend is closed.")

    def _notify(self, topics: list[str]) -> None:
        for topic in topics:
            self._hub.notify(topic)

    def _drop_streams(self, run_id: str) -> None:
        """Forget *run_id*'s streams (the lock held; see `MemoryStreams`)."""
        raise NotImplementedError

    def _set_attributes(self, run_id: str, attributes: Attributes) -> None:
        """Set *attributes* on *run_id* (the lock held)."""
        if attributes:
            self._attributes.setdefault(run_id, {}).update(attributes)

    def _copy_attributes(self, source: str, target: str) -> None:
        """Give *target* the attributes of *source* (the lock held)."""
        if self._attributes.get(source):
            self._attributes[target] = dict(self._attributes[source])

    def _has_attributes(self, run_id: str, pairs: tuple[tuple[str, str], ...]) -> bool:
        """Whether *run_id* holds every (key, canonical text) of *pairs* (the lock held)."""
        held = self._attributes.get(run_id, {})
        return all(key in held and canonical(held[key]) == text for key, text in pairs)


def written_over(stored: Step, existing: Step | None) -> Step:
    """*stored* as it is kept over the unfinished step *existing* at its position (as
    SQL's `UPDATED_ON_RECORD`): with the first start, the heartbeat details, and the
    properties snapshot unless it brings one."""
    if existing is None:
        return stored
    kept: dict[str, object] = {}
    if existing.started_at != stored.started_at:
        kept["started_at"] = existing.started_at
    if existing.details != stored.details:
        kept["details"] = existing.details
    if stored.state is None and existing.state is not None:
        kept["state"] = existing.state
    return evolve(stored, **kept) if kept else stored


def queued_run(new: NewRun, now: float, *, requests: Run | None = None) -> Run:
    """*new* as a stored QUEUED run created at *now*, with no owner (a fork, a chain's
    next link); *requests*: the run whose cancel and pause requests it carries."""
    return Run(
        id=new.id, workflow=new.workflow, status=RunStatus.QUEUED, input=new.input,
        call_hash=new.call_hash, output=None, error=None, epoch=0, lease_owner=None,
        lease_until=None, recoveries=0, parent_id=new.parent_id, created_at=now,
        updated_at=now, finished_at=None, queue=new.queue, priority=new.priority,
        cancel_requested=requests is not None and requests.cancel_requested,
        pause_requested=requests is not None and requests.pause_requested,
        deadline_at=None if new.timeout is None else now + new.timeout, key=new.key,
        key_limit=new.key_limit, version=new.version, origin=new.origin,
        trace_context=new.trace_context, event_schemas=new.event_schemas,
    )  # fmt: skip
