"""The SQL backend's queues: limits stored, and the locked claims that enforce them.

A mixin of `SQLBackend`; the statements are in `_statements/queues.py`, which says how
a limited claim serializes. `_runs.py` tries the plain claim first and comes here when
the queue declares limits (`_claim_limited`, `_claim_run_limited`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from durable.backends import _rows
from durable.backends._connections import Session
from durable.backends._protocol.queues import QueueUsage
from durable.core import queues
from durable.core.queues import Queue
from durable.core.records import NewRun, Run

from ._base import SQLBase

#: How long a claim trusts having seen that a queue declares no limits. Trusting it
#: longer cannot break a limit: the plain claim refuses a queue with a row anyway.
_UNLIMITED_FOR = 1.0


def _queue(row: Sequence[Any]) -> Queue:
    return Queue(
        name=row[0], concurrency=row[1], key_concurrency=row[2], rate=row[3], per=row[4],
        key_rate=row[6], key_per=row[7],
    )  # fmt: skip


class SQLQueues(SQLBase):
    """`QueueStore` for `SQLBackend` (see there for the contracts)."""

    #: queues known to declare limits; queues seen to declare none, until when.
    _limited: set[str]
    _unlimited_until: dict[str, float]
    #: queues whose row exists (a run with its own key limit makes sure of it).
    _with_rows: set[str]
    #: limited queues last seen to declare a rate (their claims take the lock first).
    _rated: set[str]

    def put_queue(self, queue: Queue) -> Queue:
        """See `QueueStore.put_queue`."""
        values = {
            "name": queue.name,
            "concurrency": queue.concurrency,
            "key_concurrency": queue.key_concurrency,
            "rate": queue.rate,
            "per": queue.per,
            "key_rate": queue.key_rate,
            "key_per": queue.key_per,
        }
        row = self._db.run(
            f"Declaring queue {queue.name!r}",
            lambda conn, _: self._execute(conn, self._sql.put_queue, values).fetchone(),
        )
        self._limited.add(queue.name)
        return _queue(row)

    def get_queue(self, name: str) -> Queue | None:
        """See `QueueStore.get_queue`."""
        row = self._read_queue(name)
        return None if row is None else _queue(row)

    def _read_queue(self, name: str) -> Sequence[Any] | None:
        return self._db.run(  # type: ignore[no-any-return]
            f"Reading queue {name!r}",
            lambda conn, _: self._execute(conn, self._sql.get_queue, {"name": name}).fetchone(),
        )

    def list_queues(self) -> Sequence[Queue]:
        """See `QueueStore.list_queues`."""
        return self._db.run(
            "Listing queues",
            lambda conn, _: [
                _queue(row) for row in self._execute(conn, self._sql.list_queues, {}).fetchall()
            ],
        )

    def next_start(self, name: str) -> float | None:
        """See `QueueStore.next_start`."""

        def body(conn: Any, _retried: bool) -> float | None:
            row = self._execute(conn, self._sql.get_queue, {"name": name}).fetchone()
            if row is None or row[3] is None:
                return None
            now = float(self._execute(conn, self._sql.now, {}).fetchone()[0])
            return queues.next_start(_queue(row), queues.unpack(row[5]), now)

        return self._db.run(f"Reading queue {name!r}", body)

    def queue_usage(self) -> Sequence[QueueUsage]:
        """See `QueueStore.queue_usage`."""

        def body(conn: Any, _retried: bool) -> list[QueueUsage]:
            queued = self._execute(conn, self._sql.queued_usage, {}).fetchall()
            running = dict(self._execute(conn, self._sql.running_usage, {}).fetchall())
            keyed = self._execute(conn, self._sql.key_usage, {}).fetchall()
            declared = self._execute(conn, self._sql.list_queues, {}).fetchall()
            found: dict[str, tuple[int, int, float | None]] = {
                queue: (int(count), int(running.get(queue, 0)), oldest)
                for queue, count, oldest in queued
            }
            for queue, count in running.items():
                if queue not in found:
                    found[queue] = (0, int(count), None)
            keys: dict[str, dict[str, int]] = {}
            for queue, key, count in sorted(keyed, key=lambda row: -row[2]):
                into = keys.setdefault(queue, {})
                if len(into) < 20:
                    into[key] = int(count)
            names = sorted({*found, *(row[0] for row in declared)})
            return [
                QueueUsage(
                    name=name,
                    queued=found.get(name, (0, 0, None))[0],
                    running=found.get(name, (0, 0, None))[1],
                    oldest_queued_at=found.get(name, (0, 0, None))[2],
                    keys=keys.get(name, {}),
                )
                for name in names
            ]

        return self._db.run("Reading queue usage", body)

    def debounce_run(self, new: NewRun, *, window: float, longest: float) -> tuple[Run, bool]:
        """See `QueueStore.debounce_run`."""
        values = {**_rows.new_run_values(new)[0], "window": window, "longest": longest}
        if new.key_limit is not None:
            self._db.run(
                f"Declaring queue {new.queue!r}",
                lambda conn, _: self._ensure_queue(conn, new.queue),
            )

        def body(session: Session, _retried: bool) -> Sequence[Any]:
            # Upserting again after a lost commit finds our own run pending: harmless.
            with self._db.transaction(session):
                row = self._execute(session, self._sql.debounce, values).fetchone()
                if row is None:  # the key's last run has started: free the key
                    self._execute(session, self._sql.undebounce, values)
                    row = self._execute(session, self._sql.debounce, values).fetchone()
                return row  # type: ignore[no-any-return]

        row = self._db.run(f"Debouncing a run of {new.workflow!r}", body)
        self._hub.notify(row[0])
        run = _rows.run(row[1:])  # after the topic (and before pg_notify's column)
        return run, run.id == new.id

    # -- for _runs.py -----------------------------------------------------------------

    def _declares(self, queue: str) -> bool:
        """Whether *queue* may declare limits: known to, or not seen otherwise lately."""
        if queue in self._limited:
            return True
        if self._unlimited_until.get(queue, 0.0) > time.monotonic():
            return False
        if self._read_queue(queue) is not None:
            self._limited.add(queue)
            return True
        self._unlimited_until[queue] = time.monotonic() + _UNLIMITED_FOR
        return False

    def _ensure_queue(self, session: Session, name: str) -> None:
        """Make sure queue *name* has its row (for a run with its own key limit)."""
        if name not in self._with_rows:
            self._execute(session, self._sql.ensure_queue, {"name": name})
            self._with_rows.add(name)
            self._limited.add(name)
            self._unlimited_until.pop(name, None)

    def _claim_limited(
        self,
        *,
        owner: str,
        queue: str,
        workflows: Sequence[str],
        limit: int,
        lease: float,
        versions: dict[str, str | None],
    ) -> list[Run] | None:
        """Claim from a queue that declares limits, holding its lock; None if it has
        no row after all (then the plain claim applies). *versions*: the claim's
        ``version`` and ``only`` parameters (see `claim_next`)."""
        names = self._names(list(workflows))
        if queue not in self._rated:
            # One statement that needs no lock (see `claim_unlocked`); none claimed: a
            # rate declared since, a claimer in between, or nothing queued: locked way.
            values = {
                "owner": owner, "lease": lease, "queue": queue, "workflows": names,
                "cap": limit, "scan": 4 * limit + 64, **versions,
            }  # fmt: skip
            rows = self._db.run(
                f"Claiming queued runs of {queue!r}",
                lambda conn, retried: (
                    []
                    if retried
                    else self._execute(conn, self._sql.claim_unlocked, values).fetchall()
                ),
            )
            if rows:
                return [_rows.run(row) for row in rows]

        def body(session: Session, retried: bool) -> list[Run] | None:
            if retried:  # see claim_next: a claim that committed unseen is not retried
                return []
            with self._db.transaction(session):
                row = self._execute(session, self._sql.lock_queue, {"name": queue}).fetchone()
                if row is None:
                    return None
                limits, log = _queue(row), queues.unpack(row[5])
                if limits.rate is None and limits.key_rate is None:
                    self._rated.discard(queue)
                else:
                    self._rated.add(queue)
                fresh_cap = queues.LIMIT_MAX
                if limits.rate is not None:
                    now = float(self._execute(session, self._sql.now, {}).fetchone()[0])
                    fresh_cap = queues.allowed(limits, log, now)
                runs: list[Run] = []
                claim = self._sql.claim_limited_unrated
                if limits.key_rate is not None:
                    claim = self._sql.claim_limited_key_rate
                elif limits.rate is not None:
                    claim = self._sql.claim_limited
                # The first few queued runs; all of them only when those yield nothing
                # (keys held back at the whole head of the queue; with no free slot the
                # statement's LIMIT is 0, and it reads nothing either time).
                for scan in (4 * limit + 64, queues.LIMIT_MAX):
                    values = {
                        "owner": owner,
                        "lease": lease,
                        "queue": queue,
                        "workflows": names,
                        "key_default": limits.key_concurrency,
                        "concurrency": limits.concurrency,
                        "fresh_cap": fresh_cap - _fresh(runs),
                        "cap": limit - len(runs),
                        "scan": scan,
                        "key_rate": limits.key_rate,
                        "key_per": limits.key_per,
                        **versions,
                    }
                    claimed = self._execute(session, claim, values).fetchall()
                    runs += [_rows.run(found) for found in claimed]
                    if claimed:
                        break
                fresh = _fresh(runs)
                if limits.rate is not None and fresh:
                    # The starts as stored: the claim statement's clock, not the earlier
                    # reading (a window judged from that would let a start in early).
                    started = max(run.updated_at for run in runs)
                    packed = queues.pack(queues.record(limits, log, started, fresh))
                    self._execute(session, self._sql.set_rate_log, {"name": queue, "log": packed})
                return runs

        return self._db.run(f"Claiming queued runs of {queue!r}", body)

    def _claim_run_limited(
        self, run_id: str, values: dict[str, Any], session: Session
    ) -> Run | None:
        """`claim_run` of a run whose queue declares limits, holding its lock (in
        *session*'s open transaction): the claim if the limits admit the run."""
        row = self._execute(session, self._sql.lock_queue_of_run, {"id": run_id}).fetchone()
        if row is None:
            return None
        limits, log = _queue(row), queues.unpack(row[5])
        current = self._execute(session, self._sql.get_run, {"id": run_id}).fetchone()
        if current is None:
            return None
        run = _rows.run(current)
        now = float(self._execute(session, self._sql.now, {}).fetchone()[0])
        if limits.concurrency is not None:
            running = self._count(session, self._sql.count_running, run.queue, now, run_id)
            if running >= limits.concurrency:
                return None
        bound = run.key_limit if run.key_limit is not None else limits.key_concurrency
        if run.key is not None and bound is not None:
            count = self._count(
                session, self._sql.count_running_key, run.queue, now, run_id, key=run.key
            )
            if count >= bound:
                return None
        fresh = run.started_at is None
        if fresh and queues.allowed(limits, log, now) <= 0:
            return None
        if fresh and run.key is not None and limits.key_rate is not None:
            since = now - (limits.key_per or 0.0)
            values_of_key = {"queue": run.queue, "key": run.key, "since": since}
            started = self._execute(session, self._sql.count_started_key, values_of_key)
            if started.fetchone()[0] >= limits.key_rate:
                return None
        row = self._execute(session, self._sql.claim_run_unguarded, values).fetchone()
        claimed = None if row is None else _rows.run(row)
        if claimed is not None and fresh and limits.rate is not None:
            started = claimed.started_at if claimed.started_at is not None else now
            packed = queues.pack(queues.record(limits, log, started, 1))
            self._execute(session, self._sql.set_rate_log, {"name": run.queue, "log": packed})
        return claimed

    def _count(
        self,
        session: Session,
        statement: Any,
        queue: str,
        now: float,
        run_id: str = "",
        *,
        key: str | None = None,
    ) -> int:
        values = {"queue": queue, "at": now, "id": run_id, "key": key}
        return int(self._execute(session, statement, values).fetchone()[0])


def _fresh(runs: Sequence[Run]) -> int:
    """How many of *runs* the claim started for the first time (its statement sets both
    times from one clock reading)."""
    return sum(1 for run in runs if run.started_at == run.updated_at)
