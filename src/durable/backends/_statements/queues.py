"""The SQL of queue limits (flow control): stored, and enforced in the claim.

A claim of a queue that declares limits is a transaction of its own (see
`sql/_queues.py`): it locks the queue's row (on PostgreSQL by writing it, an update
that changes nothing; SQLite's ``BEGIN IMMEDIATE`` holds the one write lock already),
counts the queue's runs that hold a slot, and runs ``claim_limited``, whose candidates
pass the per-key rule and the rate's cap on first starts inside the statement. Every
claimer of that queue, on every machine, waits for the lock, so each counts what the
one before it claimed. A queue without a rate is tried first with ``claim_unlocked``,
one statement alone that claims only if no claimer came in between (see
`_claim_unrated`).

Claims of a queue that declares nothing stay one statement, guarded by ``NOT EXISTS``
its row (`RunStatements.claim_next`): a claim that sees the row goes the locked way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from durable.backends._schema import queues, runs

from .base import QUEUED, RUNNING, Compiler, Statement, bind

_ONE: Any = sa.literal_column("1")
_ZERO: Any = sa.literal_column("0")


class QueueStatements(Compiler):
    """The statements of `QueueStore` and limited claims (`_define_queues`)."""

    #: from `RunStatements`: the version rules every claim shares.
    _served: Callable[[Any], Any]
    _first_version: Callable[[Any], Any]
    #: from `DebounceStatements`.
    _define_debounce: Callable[[], None]

    def _define_queues(self) -> None:
        q, r, now = queues.c, runs.c, self._now
        name = bind("name", q.name)
        limits = (
            q.name, q.concurrency, q.key_concurrency, q.rate, q.per, q.rate_log, q.key_rate,
            q.key_per,
        )  # fmt: skip
        self.get_queue = self.compile(sa.select(*limits).where(q.name == name))
        # PostgreSQL: every claimer of a limited queue writes its row (a new version,
        # not only a lock), which is how `claim_unlocked` sees that one came after its
        # snapshot. SQLite's BEGIN IMMEDIATE holds the one write lock already.
        lock: Any = sa.select(*limits).where(q.name == name)
        if self.postgres:
            lock = sa.update(queues).where(q.name == name).values(name=q.name).returning(*limits)
        self.lock_queue = self.compile(lock)
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
        of_run: Any = (
            sa.select(*limits, r.queue)
            .select_from(runs.join(queues, q.name == r.queue))
            .where(r.id == bind("id", r.id))
        )
        if self.postgres:
            of_run = (
                sa.update(queues)
                .where(q.name == r.queue, r.id == bind("id", r.id))
                .values(name=q.name)
                .returning(*limits, r.queue)
            )
        self.lock_queue_of_run = self.compile(of_run)
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
        self.claim_limited_unrated = self._claim_unrated(unlocked=False)
        #: claim_limited_unrated in one statement of its own, reading the limits itself
        #: (see `_claim_unrated`): no rows if it may not (or nothing is queued).
        self.claim_unlocked = self._claim_unrated(unlocked=True)
        self._define_usage()
        self._define_debounce()  # debounce.py

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

    def _free_slots(self, at: Any, concurrency: Any = None) -> Any:
        """How many runs a claim may take: ``:cap``, or fewer if the queue's free slots
        (``:concurrency`` less its runs on live leases; NULL for no limit) are fewer."""
        if concurrency is None:
            concurrency = sa.bindparam("concurrency", type_=sa.Integer)
        y = runs.alias("y").c
        running = (
            sa.select(sa.func.count())
            .where(y.queue == bind("queue", runs.c.queue), y.status == RUNNING, y.lease_until >= at)
            .scalar_subquery()
        )
        cap = sa.bindparam("cap", type_=sa.Integer)
        room = sa.func.coalesce(concurrency - running, cap)
        # Between 0 and :cap (SQLite reads LIMIT -1 as no limit), with the count of
        # running runs written once: a CASE would repeat it in each of its branches.
        if self.postgres:
            return sa.func.greatest(_ZERO, sa.func.least(room, cap))
        return sa.func.max(_ZERO, sa.func.min(room, cap))

    def _claiming(self, chosen: Any, at: Any, *guard: Any) -> Statement:
        """The claim of the runs *chosen* selects, at the statement's clock *at*."""
        r = runs.c
        return self.compile(
            sa.update(runs)
            .where(r.id.in_(chosen.scalar_subquery()), r.status == QUEUED, *guard)
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

    def _claim_unrated(self, *, unlocked: bool) -> Statement:
        """``claim_limited`` for a queue without a rate. The head is ranked per key and
        put in claim order first, and the per-key probe judges it after that, one
        candidate at a time, so the statement stops at its ``LIMIT``: a probe for each
        run it claims (or skips), not for each run of the head.

        *unlocked*: a statement alone (no transaction, no lock taken before it) that
        reads the queue's limits itself and claims only if the queue declares no rate.
        SQLite: its write lock, taken as the statement starts, serializes it. PostgreSQL:
        its snapshot is taken before it could lock the queue's row, so it writes that
        row only if no one has since the snapshot (its ``xmin`` unchanged: a claimer
        that committed after it wrote a newer version, and one still at work holds the
        row, so this waits and then finds the newer version), and claims nothing
        otherwise; every other claimer writes the row too (``lock_queue``)."""
        r, at = runs.c, self._statement_now
        order = (r.priority.desc(), r.created_at)
        q = queues.c
        name = bind("queue", r.queue)
        key_default: Any = bind("key_default", r.key_limit)
        concurrency: Any = None
        guard: list[Any] = []
        if unlocked:
            key_default = sa.select(q.key_concurrency).where(q.name == name).scalar_subquery()
            concurrency = sa.select(q.concurrency).where(q.name == name).scalar_subquery()
            unrated = (q.name == name, q.rate.is_(None), q.key_rate.is_(None))
            if self.postgres:
                seen = queues.alias("seen")
                version: Any = sa.select(sa.literal_column("seen.xmin")).where(seen.c.name == name)
                taken = (
                    sa.update(queues)
                    .where(
                        *unrated,
                        sa.literal_column("durable_queues.xmin") == version.scalar_subquery(),
                    )
                    .values(name=q.name)
                    .returning(q.name)
                    .cte("taken")
                )
                guard.append(sa.exists(sa.select(taken.c.name)))
            else:
                guard.append(sa.exists().where(*unrated))
        key_limit = sa.func.coalesce(r.key_limit, key_default)
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
            .limit(self._free_slots(at, concurrency))
        )
        return self._claiming(chosen, at, *guard)

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
