"""The SQL backend's waits: suspending runs, waking them, their inboxes, and watches.

A mixin of `SQLBackend`. The statements are in `_statements/waits.py`, whose
docstring explains the lock-then-check rule that keeps a wake-up from being lost
between a run deciding to sleep and an event (or a child's outcome) arriving.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

from durable.backends import _rows
from durable.backends._connections import Session
from durable.backends._group import Rows
from durable.backends._hub import Watch
from durable.backends._listener import Listener
from durable.backends._statements.base import CHANNEL_SQL
from durable.core.chains import successor_id
from durable.core.events import Event
from durable.core.records import RunStatus, Step, StepStatus, awaited
from durable.errors import LeaseLost, RunFinished, RunNotFound

from ._base import SQLBase

#: Other processes cannot notify a SQLite waiter, so its waits poll this often.
SQLITE_POLL = 0.05


class _NoEvent(Exception):
    """Rolls back a consume that found nothing to take, or was fenced off."""


class SQLWaits(SQLBase):
    """`WaitStore` for `SQLBackend` (see there for the contracts)."""

    dialect_name: str
    #: Hears other processes' notifications (PostgreSQL), started by the first watch.
    _listener: Listener | None
    _listener_lock: threading.Lock
    _record_in: Callable[[Session, Step, int], tuple[Step, int] | None]

    def _announce_wakes(self, rows: Sequence[Sequence[Any]]) -> None:
        """Wake waiters on both topics of rows from `Compiler._waking` statements."""
        for row in rows:
            self._hub.notify(row[0])
            self._hub.notify(row[1])

    def _wake_parents(self, session: Session, rows: Rows) -> Rows:
        """For (``run:<id>``, parent id) rows of runs just finished, in their transaction:
        queue each parent waiting on its child. Returns the topics to announce."""
        topics: Rows = []
        for topic, parent in rows:
            topics.append((topic,))
            if parent is None:
                continue
            self._execute(session, self._sql.lock_run, {"id": parent})
            for row in self._execute(
                session, self._sql.wake, {"id": parent, "waiting_on": topic}
            ).fetchall():
                topics += [(row[0],), (row[1],)]
        return topics

    def suspend_run(
        self, run_id: str, epoch: int, *, wake_at: float | None, waiting_on: str | None
    ) -> RunStatus | None:
        """See `WaitStore.suspend_run`."""
        named, any_event = awaited(waiting_on)
        kind, _, name = (named or "").partition(":")
        values = {
            "any_event": any_event,
            "id": run_id,
            "epoch": epoch,
            "wake_at": wake_at,
            "waiting_on": waiting_on,
            "event": name if kind == "event" else None,
            "child": name if kind == "run" else None,
        }

        def body(session: Session, retried: bool) -> tuple[str | None, Rows]:
            with self._db.transaction(session):
                self._execute(session, self._sql.lock_run, {"id": run_id})
                rows: Rows = self._execute(session, self._sql.suspend, values).fetchall()
                if rows:
                    return rows[0][2], rows
                if retried:
                    # Our first attempt may have committed unseen: then the run is no
                    # longer RUNNING, and its epoch is still ours.
                    run = self._execute(session, self._sql.get_run, {"id": run_id}).fetchone()
                    if run is not None and run[7] == epoch and run[2] != RunStatus.RUNNING:
                        return run[2], []
            return None, []

        status, rows = self._db.run(f"Suspending run {run_id!r}", body)
        self._announce_wakes(rows)
        return None if status is None else _rows.RUN_STATUS[status]

    def wake_due(self, *, limit: int) -> int:
        """See `WaitStore.wake_due`."""

        def body(session: Session, _retried: bool) -> Rows:
            return list(self._execute(session, self._sql.wake_due, {"limit": limit}).fetchall())

        rows = self._db.run("Waking due runs", body)
        self._announce_wakes(rows)
        return len(rows)

    def next_wake(self) -> float | None:
        """See `WaitStore.next_wake`."""
        row = self._db.run(
            "Reading the next wake-up time",
            lambda session, _: self._execute(session, self._sql.next_wake, {}).fetchone(),
        )
        return None if row is None or row[0] is None else float(row[0])

    def send_event(
        self,
        run_id: str,
        name: str,
        payload: bytes,
        *,
        key: str | None = None,
        sender: str | None = None,
    ) -> Event:
        """See `WaitStore.send_event`."""

        def body(session: Session, _retried: bool) -> tuple[Event, Rows]:
            with self._db.transaction(session):
                target = run_id
                while True:  # a continued run's events go down its chain (see continuing.py)
                    row = self._execute(session, self._sql.lock_run, {"id": target}).fetchone()
                    if row is None:
                        raise RunNotFound(f"No run has the id {target!r}.", run_id=target)
                    if key is not None:
                        earlier = self._execute(
                            session, self._sql.find_key, {"id": target, "key": key}
                        ).fetchone()
                        if earlier is not None:
                            return _rows.event(earlier), []
                    status = _rows.RUN_STATUS[row[0]]
                    if status is not RunStatus.CONTINUED:
                        break
                    target = successor_id(target)
                if status.finished:
                    raise RunFinished(
                        f"Run {target!r} has finished ({status}); it will never receive "
                        f"event {name!r}.",
                        run_id=target,
                        status=status.value,
                    )
                event_id, sent_at = self._execute(
                    session,
                    self._sql.insert_event,
                    {"id": target, "name": name, "payload": payload, "sender": sender, "key": key},
                ).fetchone()
                woken: Rows = []
                named, any_event = awaited(row[1])
                if status is RunStatus.WAITING and (any_event or named == f"event:{name}"):
                    woken = self._execute(
                        session, self._sql.wake, {"id": target, "waiting_on": row[1]}
                    ).fetchall()
            event = Event(
                id=event_id,
                run_id=target,
                name=name,
                payload=payload,
                sent_at=sent_at,
                sender=sender,
                key=key,
            )
            return event, woken

        event, woken = self._db.run(f"Sending event {name!r} to run {run_id!r}", body)
        self._announce_wakes(woken)
        return event

    def consume_event(
        self, step: Step, epoch: int, name: str | None, *, exclude: str | None = None
    ) -> tuple[Step, int] | None:
        """See `WaitStore.consume_event`."""
        take = self._sql.take_event if name is not None else self._sql.take_any_event
        values = {"id": step.run_id, "name": name, "exclude": exclude, "position": step.position}

        def body(session: Session, _retried: bool) -> tuple[Step, int] | None:
            try:
                with self._db.transaction(session):
                    taken = self._execute(session, take, values).fetchone()
                    if taken is None:
                        raise _NoEvent
                    consumed = dataclasses.replace(
                        step,
                        name=step.name if name is not None else taken[2],
                        status=StepStatus.COMPLETED,
                        input=b'j{"event":%d}' % taken[0],
                        output=taken[1],
                    )
                    written = self._record_in(session, consumed, epoch)
                    if written is None:
                        raise _NoEvent  # fenced off, or the position is finished
                    return written
            except _NoEvent:
                pass
            return None

        result = self._db.run(
            f"Consuming event {name or '(any)'!r} at position {step.position} of run "
            f"{step.run_id!r}",
            body,
        )
        if result is not None:
            return result
        # Nothing taken: maybe no event, maybe a newer owner, maybe already recorded.
        conflict = self._db.run(
            f"Reading position {step.position} of run {step.run_id!r}",
            lambda session, _: self._execute(
                session,
                self._sql.record_conflict,
                {"run_id": step.run_id, "position": step.position},
            ).fetchone(),
        )
        if conflict is None or conflict[0] != epoch:
            raise LeaseLost(
                f"Run {step.run_id!r} is no longer at epoch {epoch}; another owner took it "
                "over, so this process may not consume its events.",
                run_id=step.run_id,
                epoch=epoch,
            )
        recorded = None if conflict[2] is None else _rows.step(conflict[2:])
        if recorded is not None and recorded.status.finished:
            return recorded, int(conflict[1])
        return None

    def has_events(self, run_id: str, *, exclude: str | None = None) -> bool:
        """See `WaitStore.has_events`."""
        return self._db.run(
            f"Reading the inbox of run {run_id!r}",
            lambda session, _: bool(
                self._execute(
                    session, self._sql.has_events, {"id": run_id, "exclude": exclude}
                ).fetchone()[0]
            ),
        )

    def events(self, run_id: str) -> Sequence[Event]:
        """See `WaitStore.events`."""
        return self._db.run(
            f"Reading the events of run {run_id!r}",
            lambda session, _: [
                _rows.event(row)
                for row in self._execute(session, self._sql.list_events, {"id": run_id}).fetchall()
            ],
        )

    def watch(self, topics: Sequence[str]) -> Watch:
        """See `WaitStore.watch`. PostgreSQL hears other processes through LISTEN; SQLite
        waits poll every SQLITE_POLL seconds."""
        if self.dialect_name == "sqlite":
            return self._hub.watch(topics, cap=SQLITE_POLL)
        with self._listener_lock:
            if self._listener is None or not self._listener.alive():
                self._listener = Listener(self._db.open, self._hub, CHANNEL_SQL)
        return self._hub.watch(topics)
