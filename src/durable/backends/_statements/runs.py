"""The SQL of runs and their leases: creating, finishing, claiming.

Every change is a compare-and-set ``UPDATE ... WHERE id = ? AND epoch = ?`` (or a
conditional insert), a statement of its own (cancelling and pausing are in
control.py). Finishing a run also wakes a parent waiting on it: on PostgreSQL in
the same statement (`RunStatements._waking_parents`), following the lock-then-check
rule of waits.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

from durable.backends._schema import history, queues, runs
from durable.core.records import ANY_EVENT

from .base import (
    BLOCKED,
    FINISHED,
    QUEUED,
    RUNNING,
    WAITING,
    Compiler,
    Statement,
    bind,
    schema_channel,
)


class RunStatements(Compiler):
    """The statements of `RunStore`, compiled for one dialect (`_define_runs`)."""

    #: from `HistoryStatements`: a run's last step is recorded with its outcome.
    _recording: Callable[..., Any]
    _value: Callable[[str, sa.Column[Any]], sa.ColumnElement[Any]]

    def _define_runs(self) -> None:
        self.now = self.compile(sa.select(self._now))
        self._define_lifecycle()
        self._define_claims()
        if self.postgres:
            self._define_finish_many()

    def _define_lifecycle(self) -> None:
        r, now = runs.c, self._now
        self.get_run = self.compile(sa.select(*runs.c).where(r.id == bind("id", r.id)))
        owned = sa.bindparam("owned", type_=sa.Integer)
        # One clock for the whole row (PostgreSQL's clock_timestamp() moves within a
        # statement): its deadline is exactly its creation plus its timeout.
        at = self._statement_now
        new_run = (
            self._insert(runs)
            .values(
                id=bind("id", r.id),
                workflow=bind("workflow", r.workflow),
                status=bind("status", r.status),
                input=bind("input", r.input),
                call_hash=bind("call_hash", r.call_hash),
                output=sa.null(),
                error=sa.null(),
                epoch=bind("epoch", r.epoch),
                lease_owner=bind("owner", r.lease_owner),
                lease_until=at + bind("lease", r.lease_until),
                recoveries=sa.literal_column("0"),
                parent_id=bind("parent_id", r.parent_id),
                created_at=at,
                updated_at=at,
                finished_at=sa.null(),
                queue=bind("queue", r.queue),
                priority=bind("priority", r.priority),
                started_at=sa.case((owned == 1, at), else_=sa.null()),
                cancel_requested=sa.literal_column("0"),
                deadline_at=at + bind("timeout", r.deadline_at),
                concurrency_key=bind("key", r.concurrency_key),
                key_limit=bind("key_limit", r.key_limit),
                wake_at=bind("wake_at", r.wake_at),
                version=bind("version", r.version),
                origin=bind("origin", r.origin),
                trace_context=bind("trace_context", r.trace_context),
                event_schemas=bind("event_schemas", r.event_schemas),
            )
            .on_conflict_do_nothing(index_elements=[r.id])
        )
        # Only what the database decided comes back: the rest is what we sent.
        self.create_owned_run = self.compile(
            new_run.returning(r.created_at, r.lease_until, r.deadline_at)
        )
        #: uncompiled, given the channel by name: a caller's connection runs it in its
        #: transaction (outbox), where the current schema may not be durable's.
        self.queued_run_clause = functools.partial(
            self._notifying,
            new_run, self._new_topic(bind("wake_at", r.wake_at)), r.created_at, r.deadline_at,
        )  # fmt: skip
        self.create_queued_run = self.compile(self.queued_run_clause())
        if self.postgres:
            columns = [
                r.id, r.workflow, r.input, r.call_hash, r.queue, r.priority, r.deadline_at,
                r.wake_at, r.version, r.trace_context, r.event_schemas,
            ]  # fmt: skip
            names = [
                "id", "workflow", "input", "call_hash", "queue", "priority", "timeout", "wake_at",
                "version", "trace_context", "event_schemas",
            ]  # fmt: skip
            v = self._unnest(columns, names)
            status = sa.case((v.c.wake_at.is_(None), QUEUED), else_=WAITING)
            many = self._insert(runs).from_select(
                [
                    "id", "workflow", "status", "input", "call_hash", "epoch", "recoveries",
                    "created_at", "updated_at", "queue", "priority", "cancel_requested",
                    "deadline_at", "wake_at", "version", "trace_context", "event_schemas",
                ],
                sa.select(
                    v.c.id, v.c.workflow, status, v.c.input, v.c.call_hash,
                    sa.literal_column("0"), sa.literal_column("0"), now, now, v.c.queue,
                    v.c.priority, sa.literal_column("0"), now + v.c.timeout, v.c.wake_at,
                    v.c.version, v.c.trace_context, v.c.event_schemas,
                ),
            )  # fmt: skip
            self.create_queued_runs = self.compile(
                self._notifying(
                    many.on_conflict_do_nothing(index_elements=[r.id]),
                    self._new_topic(r.wake_at),
                    r.id,
                )
            )
        fenced_unfinished = (
            r.id == bind("id", r.id),
            r.epoch == bind("epoch", r.epoch),
            self._none_of(r.status, FINISHED),
        )
        ended = {"lease_owner": sa.null(), "lease_until": sa.null(), "updated_at": now}
        finishing = (
            sa.update(runs)
            .where(*fenced_unfinished)
            .values(
                status=bind("status", r.status),
                output=bind("output", r.output),
                error=bind("error", r.error),
                finished_at=now,
                state=sa.func.coalesce(bind("state", r.state), r.state),
                **ended,
            )
        )
        self.finish_run = self._finishing(finishing)
        #: PostgreSQL: finish_run that also records the run's last step, its parameters
        #: ``step_<column>`` (see `RunStore.finish_run`); SQLite records it in the same
        #: transaction instead.
        self.finish_run_recording: Statement | None = None
        if self.postgres:
            step = [self._value(f"step_{c.name}", c) for c in history.c]
            recorded = self._recording(step, *fenced_unfinished).cte("recorded")
            self.finish_run_recording = self._waking_parents(
                finishing.returning(r.id, r.parent_id), also=recorded
            )
        self.block_run = self.compile(
            self._notifying(
                sa.update(runs)
                .where(*fenced_unfinished)
                .values(status=BLOCKED, error=bind("error", r.error), **ended),
                self._run_topic(),
            )
        )
        self.renew_leases = self.compile(
            sa.update(runs)
            .where(r.lease_owner == bind("owner", r.lease_owner), r.status == RUNNING)
            .values(lease_until=now + bind("lease", r.lease_until))
        )
        self.release_run = self.compile(
            self._notifying(
                sa.update(runs)
                .where(
                    r.id == bind("id", r.id),
                    r.epoch == bind("epoch", r.epoch),
                    r.status == RUNNING,
                )
                .values(status=QUEUED, lease_owner=sa.null(), lease_until=sa.null()),
                self._queue_topic(),
            )
        )

    def _finishing(self, update: Any) -> Statement:
        """A statement finishing runs, returning their topics (``run:<id>``) first.

        On PostgreSQL it also wakes, in the same statement, each parent waiting on one
        of them (see `_waking_parents`). SQLite returns each run's ``parent_id``
        second instead, and the backend wakes the parent in the same transaction
        (SQLite has no UPDATE inside WITH).
        """
        r = runs.c
        if self.postgres:
            return self._waking_parents(update.returning(r.id, r.parent_id))
        return self.compile(self._notifying(update, self._run_topic(), r.parent_id))

    def _waking_parents(self, finished: Any, *, also: Any = None) -> Statement:
        """PostgreSQL: *finished* (an UPDATE finishing runs, returning their ``id`` and
        ``parent_id``) and, in the same statement, each parent waiting on one of them
        queued again. Returns (topic,) rows: ``run:<id>`` per finished run, and
        ``run:<parent>`` and ``queue:<name>`` per woken parent; all are notified.

        The parents' UPDATE matches them by id whatever their status, so it waits for
        the lock of a parent that is suspending right now and then re-reads its row
        (READ COMMITTED re-evaluates an updated row): a parent that commits WAITING on
        a finishing child is woken by it."""
        r = runs.c
        done = finished.cte("finished")
        done_topics = sa.select(sa.literal_column("'run:'", sa.Text) + done.c.id)
        # ... or on one of them and any event (a workflow class with on_event).
        also_events = sa.select(sa.literal_column(f"'{ANY_EVENT}run:'", sa.Text) + done.c.id)
        waits_on_one = sa.and_(
            r.status == WAITING,
            sa.or_(r.waiting_on.in_(done_topics), r.waiting_on.in_(also_events)),
        )
        woken = (
            sa.update(runs)
            .where(
                r.id.in_(sa.select(done.c.parent_id)),
                r.id.not_in(sa.select(done.c.id)),  # never update one row twice
                r.status.in_((RUNNING, WAITING)),
            )
            .values(
                status=sa.case((waits_on_one, QUEUED), else_=r.status),
                wake_at=sa.case((waits_on_one, sa.null()), else_=r.wake_at),
                waiting_on=sa.case((waits_on_one, sa.null()), else_=r.waiting_on),
            )
            .returning(r.id, r.status, r.queue)
            .cte("woken")
        )
        queued = sa.select(woken).where(woken.c.status == QUEUED).subquery()
        topics = sa.union_all(
            sa.select(sa.literal_column("'run:'", sa.Text) + done.c.id),
            sa.select(sa.literal_column("'run:'", sa.Text) + queued.c.id),
            sa.select(sa.literal_column("'queue:'", sa.Text) + queued.c.queue),
        ).subquery()
        topic = topics.c[0]
        notified = sa.select(topic, sa.func.pg_notify(schema_channel(), topic))
        return self.compile(notified if also is None else notified.add_cte(also))

    def _define_finish_many(self) -> None:
        """PostgreSQL: many outcomes in one statement, their columns as arrays. Group
        commit (see _group.py) uses it instead of one statement per finished run."""
        r = runs.c
        columns = [r.id, r.epoch, r.status, r.output, r.error, r.state]
        v = self._unnest(columns, [c.name for c in columns])
        self.finish_many = self._finishing(
            sa.update(runs)
            .where(r.id == v.c.id, r.epoch == v.c.epoch, r.status.notin_(FINISHED))
            .values(
                status=v.c.status,
                output=v.c.output,
                error=v.c.error,
                state=sa.func.coalesce(v.c.state, r.state),
                **dict.fromkeys(("lease_owner", "lease_until"), sa.null()),
                **dict.fromkeys(("updated_at", "finished_at"), self._now),
            )
        )

    # -- claims ---------------------------------------------------------------------

    def _define_claims(self) -> None:
        r, now = runs.c, self._now
        claimed = {
            "status": RUNNING,
            "epoch": r.epoch + sa.literal_column("1"),
            "lease_owner": bind("owner", r.lease_owner),
            "lease_until": now + bind("lease", r.lease_until),
            "updated_at": now,
            "started_at": sa.func.coalesce(r.started_at, now),
            "wake_at": sa.null(),
            "waiting_on": sa.null(),
            "version": self._first_version(r),
        }
        takeover = sa.case(
            (r.status == RUNNING, sa.literal_column("1")), else_=sa.literal_column("0")
        )
        hung = self._hung(r)
        claimable = (
            r.id == bind("id", r.id),
            r.epoch == bind("epoch", r.epoch),
            self._served(r),
            sa.or_(
                r.status.in_((QUEUED, BLOCKED)),
                sa.and_(r.status == WAITING, r.wake_at <= now),
                sa.and_(
                    r.status == RUNNING,
                    sa.or_(
                        r.lease_until < now,
                        r.lease_owner == bind("dead_owner", r.lease_owner),
                        hung,
                    ),
                ),
            ),
        )

        def claim(*where: Any) -> Statement:
            return self.compile(
                sa.update(runs)
                .where(*claimable, *where)
                .values(recoveries=r.recoveries + takeover, **claimed)
                .returning(*runs.c)
            )

        # A run of a queue that declares limits is claimed the locked way (queues.py),
        # with the unguarded statement.
        self.claim_run = claim(~sa.exists().where(queues.c.name == r.queue))
        self.claim_run_unguarded = claim()
        self.mark_progress = self.compile(
            sa.update(runs)
            .where(r.id == bind("id", r.id), r.epoch == bind("epoch", r.epoch))
            .values(recoveries=sa.literal_column("0"))
        )
        ready = (
            sa.select(r.id)
            .where(
                r.status == QUEUED,
                # One queue per statement: the claim index then yields rows in priority
                # order and LIMIT stops early. With a list of queues PostgreSQL scans and
                # sorts every queued run instead (0.93 ms vs 0.05 ms at 2,000 queued).
                r.queue == bind("queue", r.queue),
                self._in_names(r.workflow, "workflows"),
                # A row filter on the claim index's walk: it reads past other versions'
                # queued runs at the head (see docs/architecture.md, "Versions").
                self._served(r),
                ~sa.exists().where(queues.c.name == bind("queue", r.queue)),
            )
            .order_by(r.priority.desc(), r.created_at)
            .limit(sa.bindparam("limit", type_=sa.Integer))
        )
        if self.postgres:
            # Lock and claim in one statement; a locked row is someone else's, skip it.
            ready = ready.with_for_update(skip_locked=True)
        self.claim_next = self.compile(
            sa.update(runs)
            .where(r.id.in_(ready.scalar_subquery()))
            .values(**claimed)
            .returning(*runs.c)
        )
        self.queued_workflows = self.compile(
            sa.select(r.workflow)
            .where(r.status == QUEUED, self._in_names(r.queue, "queues"))
            .distinct()
            .order_by(r.workflow)
        )
        on_this_host = sa.func.substr(
            r.lease_owner, 1, sa.bindparam("prefix_len", type_=sa.Integer)
        ) == sa.bindparam("prefix", type_=sa.Text)
        self.recoverable = self.compile(
            sa.select(*runs.c).where(
                sa.or_(
                    r.status == BLOCKED,
                    sa.and_(r.status == QUEUED, r.started_at.is_not(None)),
                    sa.and_(
                        r.status == RUNNING,
                        sa.or_(r.lease_until < now, on_this_host, self._hung(r)),
                    ),
                )
            )
        )

    @staticmethod
    def _first_version(r: Any) -> sa.ColumnElement[Any]:
        """A claim's ``version``: the claimer's (``:version``) for a run it starts for the
        first time, if it declares one; else the run's own."""
        mine = sa.func.coalesce(bind("version", r.version), r.version)
        return sa.case((r.started_at.is_(None), mine), else_=r.version)

    @staticmethod
    def _served(r: Any) -> sa.ColumnElement[bool]:
        """Whether a claimer that serves only version ``:only`` (NULL: any) may claim
        the run: one of that version, or one of none (`run_options.serves`)."""
        only = bind("only", r.version)
        return sa.or_(only.is_(None), r.version.is_(None), r.version == only)

    def _hung(self, r: Any) -> sa.ColumnElement[bool]:
        """Whether run *r* has a task attempt past its heartbeat deadline: a RUNNING
        step whose ``wake_at`` has passed (through the partial heartbeating index)."""
        h = history.c
        return sa.exists().where(
            h.run_id == r.id,
            h.status == RUNNING,
            h.wake_at.is_not(None),
            h.wake_at < self._now,
        )
