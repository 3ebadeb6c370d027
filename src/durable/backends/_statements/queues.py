"""The SQL of queue limits (flow control): stored, and enforced in the claim.

A claim of a queue that declares limits is a transaction of its own (see
`sql/_queues.py`): it locks the queue's row (``FOR UPDATE`` on PostgreSQL; SQLite's
``BEGIN IMMEDIATE`` holds the one write lock already), counts the queue's runs that
hold a slot, and runs ``claim_limited``, whose candidates pass the per-key rule and the
rate's cap on first starts inside the statement. Every claimer of that queue, on every
machine, waits for the lock, so each counts what the one before it claimed.

Claims of a queue that declares nothing stay one statement, guarded by ``NOT EXISTS``
its row (`RunStatements.claim_next`): a claim that sees the row goes the locked way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from durable.backends._protocol.waits import TIMERS
from durable.backends._schema import queues, runs

from .base import QUEUED, RUNNING, WAITING, Compiler, Statement, bind

_ONE: Any = sa.literal_column("1")
_ZERO: Any = sa.literal_column("0")


class QueueStatements(Compiler):
    """The statements of `QueueStore` and limited claims (`_define_queues`)."""

    #: from `RunStatements`: the version rules every claim shares.
    _served: Callable[[Any], Any]
    _first_version: Callable[[Any], Any]

    def _define_queues(self) -> None:
        q, r, now = queues.c, runs.c, self._now
        name = bind("name", q.name)
        limits = (
            q.name, q.concurrency, q.key_concurrency, q.rate, q.per, q.rate_log, q.key_rate,
            q.key_per,
        )  # fmt: skip
        self.get_queue = self.compile(sa.select(*limits).where(q.name == name))
        lock = sa.select(*limits).where(q.name == name)
        self.lock_queue = self.compile(lock.with_for_update() if self.postgres else lock)
        by_name = sa.collate(q.name, "C") if self.postgres else q.name
        self.list_queues = self.compile(sa.select(*limits).order_by(by_name))
        declared = ("name", "concurrency", "key_concurrency", "rate", "per", "key_rate", "key_per")
        written = {c: bind(c, q[c]) for c in declared}
        insert = self._insert(queues).values(**written, rate_log=sa.null(), updated_at=now)
        self.put_queue = self.compile(
            insert.on_conflict_do_update(
                index_elements=[q.name],
                set_={c: insert.excluded[c] for c in (*written, "updated_at") if c != "name"},
            ).returning(*limits)
        )
        # A run dispatched with its own key limit needs its queue's row, so that claims
        # of that queue take the locked way (a row with no limits).
        self.ensure_queue = self.compile(
            self._insert(queues)
            .values(name=name, updated_at=now)
            .on_conflict_do_nothing(index_elements=[q.name])
        )
        self.set_rate_log = self.compile(
            sa.update(queues).where(q.name == name).values(rate_log=bind("log", q.rate_log))
        )
        # The queue of a run, with its limits, locked: for claim_run.
        of_run = (
            sa.select(*limits, r.queue)
            .select_from(runs.join(queues, q.name == r.queue))
            .where(r.id == bind("id", r.id))
        )
        self.lock_queue_of_run = self.compile(
            of_run.with_for_update(of=queues) if self.postgres else of_run
        )
        live = (r.status == RUNNING, r.lease_until >= bind("at", r.lease_until))
        self.count_running = self.compile(
            sa.select(sa.func.count())
            .select_from(runs)
            .where(r.queue == bind("queue", r.queue), r.id != bind("id", r.id), *live)
        )
        self.count_running_key = self.compile(
            sa.select(sa.func.count())
            .select_from(runs)
            .where(
                r.queue == bind("queue", r.queue),
                r.concurrency_key == bind("key", r.concurrency_key),
                r.id != bind("id", r.id),
                *live,
            )
        )
        # A key's first starts since :since (its key rate's window), for claim_run.
        self.count_started_key = self.compile(
            sa.select(sa.func.count())
            .select_from(runs)
            .where(
                r.queue == bind("queue", r.queue),
                r.concurrency_key == bind("key", r.concurrency_key),
                r.started_at > bind("since", r.started_at),
            )
        )
        self.claim_limited = self._claim_limited(key_rated=False)
        #: claim_limited for a queue that declares a key rate (:key_rate, :key_per).
        self.claim_limited_key_rate = self._claim_limited(key_rated=True)
        #: claim_limited for a queue that declares no rate: no :fresh_cap, :key_rate.
        self.claim_limited_unrated = self._claim_unrated()
        self._define_usage()
        self._define_debounce()

    def _claim_limited(self, *, key_rated: bool) -> Statement:
        """``claim_limited``: `durable.core.queues.choose` in SQL, and the claim, in one
        statement: the queue's free slots (``:concurrency`` less its runs on live
        leases, NULL for no limit) cap it. Its times are the statement's clock, so a
        run it started for the first time has ``started_at == updated_at``. With
        *key_rated*, a first start of a key also needs room under the key rate (a
        statement of its own: the per-row count costs nothing where there is none)."""
        r, at = runs.c, self._statement_now
        order = (r.priority.desc(), r.created_at)
        key_limit = sa.func.coalesce(r.key_limit, bind("key_default", r.key_limit))
        # The first :scan queued runs in claim order (through the claim index): every
        # run of a key ahead of one of them is among them, so its rank is exact. The
        # backend looks further only when they yield too few.
        head = (
            sa.select(
                r.id,
                r.priority,
                r.created_at,
                r.started_at,
                r.concurrency_key.label("k"),
                key_limit.label("bound"),
            )
            .where(
                r.status == QUEUED,
                r.queue == bind("queue", r.queue),
                self._in_names(r.workflow, "workflows"),
                self._served(r),
            )
            .order_by(*order)
            .limit(sa.bindparam("scan", type_=sa.Integer))
            .subquery("head")
        )
        h = head.c
        first_start: Any = sa.case((h.started_at.is_(None), _ONE), else_=_ZERO)
        in_key = (h.priority.desc(), h.created_at)
        ranks = [sa.func.row_number().over(partition_by=h.k, order_by=in_key).label("rank")]
        if key_rated:
            fresh_rank = sa.func.sum(first_start).over(
                partition_by=h.k, order_by=in_key, rows=(None, 0)
            )
            ranks.append(fresh_rank.label("fresh_rank"))
        candidates = sa.select(*h, *ranks).subquery("candidates")
        c = candidates.c
        running_of_key = _of_key(c.k, "x", lambda x: (x.status == RUNNING, x.lease_until >= at))
        within_key_rate: list[Any] = []
        if key_rated:
            started_of_key = _of_key(
                c.k, "z", lambda z: (z.started_at > at - bind("key_per", z.started_at),)
            )
            key_rate = sa.bindparam("key_rate", type_=sa.Integer)
            within_key_rate.append(
                sa.or_(
                    c.k.is_(None),
                    c.started_at.is_not(None),
                    c.fresh_rank + started_of_key <= key_rate,
                )
            )
        first_start = sa.case((c.started_at.is_(None), _ONE), else_=_ZERO)
        eligible = (
            sa.select(
                c.id,
                c.priority,
                c.created_at,
                c.started_at,
                sa.func.sum(first_start)
                .over(order_by=(c.priority.desc(), c.created_at), rows=(None, 0))
                .label("fresh"),
            )
            .where(
                sa.or_(c.k.is_(None), c.bound.is_(None), c.rank + running_of_key <= c.bound),
                *within_key_rate,
            )
            .subquery("eligible")
        )
        e = eligible.c
        chosen = (
            sa.select(e.id)
            .where(
                sa.or_(
                    e.started_at.is_not(None),
                    e.fresh <= sa.bindparam("fresh_cap", type_=sa.Integer),
                )
            )
            .order_by(e.priority.desc(), e.created_at)
            .limit(self._free_slots(at))
        )
        return self._claiming(chosen, at)

    def _free_slots(self, at: Any) -> Any:
        """How many runs a claim may take: ``:cap``, or fewer if the queue's free slots
        (``:concurrency`` less its runs on live leases; NULL for no limit) are fewer."""
        y = runs.alias("y").c
        running = (
            sa.select(sa.func.count())
            .where(y.queue == bind("queue", runs.c.queue), y.status == RUNNING, y.lease_until >= at)
            .scalar_subquery()
        )
        cap = sa.bindparam("cap", type_=sa.Integer)
        room = sa.func.coalesce(sa.bindparam("concurrency", type_=sa.Integer) - running, cap)
        # Never negative: SQLite reads LIMIT -1 as no limit.
        return sa.case((room < 0, _ZERO), (room < cap, room), else_=cap)

    def _claiming(self, chosen: Any, at: Any) -> Statement:
        """The claim of the runs *chosen* selects, at the statement's clock *at*."""
        r = runs.c
        return self.compile(
            sa.update(runs)
            .where(r.id.in_(chosen.scalar_subquery()), r.status == QUEUED)
            .values(
                status=RUNNING,
                epoch=r.epoch + sa.literal_column("1"),
                lease_owner=bind("owner", r.lease_owner),
                lease_until=at + bind("lease", r.lease_until),
                updated_at=at,
                started_at=sa.func.coalesce(r.started_at, at),
                wake_at=sa.null(),
                waiting_on=sa.null(),
                version=self._first_version(r),
            )
            .returning(*runs.c)
        )

    def _claim_unrated(self) -> Statement:
        """``claim_limited`` for a queue without a rate. The head is ranked per key and
        put in claim order first, and the per-key probe judges it after that, one
        candidate at a time, so the statement stops at its ``LIMIT``: a probe for each
        run it claims (or skips), not for each run of the head."""
        r, at = runs.c, self._statement_now
        order = (r.priority.desc(), r.created_at)
        key_limit = sa.func.coalesce(r.key_limit, bind("key_default", r.key_limit))
        head = (
            sa.select(r.id, r.priority, r.created_at, r.concurrency_key.label("k"))
            .add_columns(key_limit.label("bound"))
            .where(
                r.status == QUEUED,
                r.queue == bind("queue", r.queue),
                self._in_names(r.workflow, "workflows"),
                self._served(r),
            )
            .order_by(*order)
            .limit(sa.bindparam("scan", type_=sa.Integer))
            .subquery("head")
        )
        h = head.c
        in_claim_order = (h.priority.desc(), h.created_at)
        rank = sa.func.row_number().over(partition_by=h.k, order_by=in_claim_order)
        # Ordered inside, so that the probe outside runs on rows already in claim order.
        ranked = sa.select(*h, rank.label("rank")).order_by(*in_claim_order).subquery("ranked")
        c = ranked.c
        # "+ 0": not the lease index, which SQLite preferred for its range, reading
        # every running run of the database per probe, but the key index's three columns.
        running_of_key = _of_key(
            c.k, "x", lambda x: (x.status == RUNNING, x.lease_until + _ZERO >= at)
        )
        chosen = (
            sa.select(c.id)
            .where(sa.or_(c.k.is_(None), c.bound.is_(None), c.rank + running_of_key <= c.bound))
            .order_by(c.priority.desc(), c.created_at)
            .limit(self._free_slots(at))
        )
        return self._claiming(chosen, at)

    def _define_usage(self) -> None:
        r, now = runs.c, self._now
        # Two statements, not one with an OR: the queued runs' queue and age are read
        # from the partial claim index alone (an index-only scan), where the OR sent
        # SQLite to the table for each of them: 143 ms for 50,000 queued runs, 10 ms now.
        #: (queue, queued runs, the oldest one's creation) per queue.
        self.queued_usage = self.compile(
            sa.select(r.queue, sa.func.count(), sa.func.min(r.created_at))
            .where(r.status == QUEUED)
            .group_by(r.queue)
        )
        #: (queue, running runs whose lease holds) per queue.
        self.running_usage = self.compile(
            sa.select(r.queue, sa.func.count())
            .where(r.status == RUNNING, r.lease_until >= now)
            .group_by(r.queue)
        )
        self.key_usage = self.compile(
            sa.select(r.queue, r.concurrency_key, sa.func.count())
            .where(r.concurrency_key.is_not(None), r.status == RUNNING, r.lease_until >= now)
            .group_by(r.queue, r.concurrency_key)
        )

    def _define_debounce(self) -> None:
        """``debounce``: an upsert on the unique index of (workflow, debounce_key). A
        conflict with the pending run updates it; a conflict with a run that has
        started (or ended) changes nothing and returns no row: ``undebounce`` frees its
        key, and the upsert runs again."""
        r, now = runs.c, self._now
        insert = self._insert(runs).values(
            id=bind("id", r.id),
            workflow=bind("workflow", r.workflow),
            status=WAITING,
            input=bind("input", r.input),
            call_hash=bind("call_hash", r.call_hash),
            epoch=sa.literal_column("0"),
            recoveries=sa.literal_column("0"),
            created_at=now,
            updated_at=now,
            queue=bind("queue", r.queue),
            priority=bind("priority", r.priority),
            cancel_requested=sa.literal_column("0"),
            wake_at=now + bind("window", r.wake_at),
            deadline_at=now + bind("timeout", r.deadline_at),
            concurrency_key=bind("key", r.concurrency_key),
            key_limit=bind("key_limit", r.key_limit),
            debounce_key=bind("key", r.debounce_key),
            version=bind("version", r.version),
            trace_context=bind("trace_context", r.trace_context),
            event_schemas=bind("event_schemas", r.event_schemas),
        )
        pushed = insert.excluded.wake_at
        cap = r.created_at + bind("longest", r.wake_at)
        upsert = insert.on_conflict_do_update(
            index_elements=[r.workflow, r.debounce_key],
            index_where=r.debounce_key.is_not(None),
            set_={
                "input": insert.excluded.input,
                "call_hash": insert.excluded.call_hash,
                "priority": insert.excluded.priority,
                "key_limit": insert.excluded.key_limit,
                "updated_at": insert.excluded.updated_at,
                "wake_at": sa.case((pushed < cap, pushed), else_=cap),
            },
            where=sa.and_(r.status == WAITING, r.started_at.is_(None), r.waiting_on.is_(None)),
        )
        self.debounce = self.compile(
            self._notifying(upsert, sa.literal_column(f"'{TIMERS}'", sa.Text), *runs.c)
        )
        self.undebounce = self.compile(
            sa.update(runs)
            .where(
                r.workflow == bind("workflow", r.workflow),
                r.debounce_key == bind("key", r.debounce_key),
            )
            .values(debounce_key=sa.null())
        )


def _of_key(key: Any, alias: str, where: Callable[[Any], tuple[Any, ...]]) -> Any:
    """How many runs of :queue with the candidate's *key* meet *where* (given the
    columns of the runs table under *alias*): a count correlated with the candidate."""
    other = runs.alias(alias).c
    return (
        sa.select(sa.func.count())
        .where(other.queue == bind("queue", runs.c.queue), other.concurrency_key == key)
        .where(*where(other))
        .scalar_subquery()
    )
