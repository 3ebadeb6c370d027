"""Every SQL statement durable runs, written once in SQLAlchemy Core.

`Queries(dialect)` compiles them for SQLite or PostgreSQL when a backend opens; at run
time `backends/sql.py` sends the compiled text straight to the driver. Compiling per
call costs more than an fsync-backed commit (see docs/performance.md). Every write is
a single statement, so each is its own short transaction:

* recording a step is one ``INSERT ... SELECT ... WHERE EXISTS (run at my epoch)
  ON CONFLICT DO UPDATE ... WHERE unfinished``: the fence and the write in one go
  (on SQLite without ``RETURNING``, see `Queries.record_quiet`);
* state changes are compare-and-set ``UPDATE ... WHERE id = ? AND epoch = ?``;
* times come from the database clock (``clock_timestamp()`` on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from durable.core.records import RunStatus, StepStatus

from ._inspect_queries import InspectQueries
from ._schema import events, history, runs
from ._wait_queries import WaitQueries

#: What recording over an unfinished (retrying or waiting) step replaces: everything
#: but its key and first start, so a cancellation marker can take a wait's place.
UPDATED_ON_RECORD = (
    "kind",
    "name",
    "call_hash",
    "status",
    "input",
    "output",
    "error",
    "attempts",
    "finished_at",
    "epoch",
    "wake_at",
)

#: The record statement's parameters, in the order `sql._step_params` builds them.
RECORD_ORDER = (*(c.name for c in history.c), "fence_id", "fence_epoch", "cancel_id")


def _constant(value: str) -> sa.ColumnClause[str]:
    """A status written into the SQL text: statuses are our constants, never user input."""
    return sa.literal_column(f"'{value}'", sa.Text)


_FINISHED = tuple(_constant(status) for status in RunStatus if status.finished)
_RUNNING = _constant(RunStatus.RUNNING)
_QUEUED = _constant(RunStatus.QUEUED)
_WAITING = _constant(RunStatus.WAITING)
_UNFINISHED_STEP = _constant(StepStatus.RETRYING), _constant(StepStatus.WAITING)
_BLOCKED = _constant(RunStatus.BLOCKED)
_CANCELLED = _constant(RunStatus.CANCELLED)

#: The one PostgreSQL notification channel; payloads are topics (see _hub.py).
CHANNEL = "durable"


def _bind(name: str, column: sa.Column[Any]) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


class Statement:
    """A statement compiled once for one (positional) dialect, with its parameter order."""

    __slots__ = ("defaults", "order", "sql")

    def __init__(self, statement: sa.Executable, dialect: sa.Dialect) -> None:
        compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
        self.sql: str = str(compiled)
        self.defaults = {k: v for k, v in compiled.params.items() if v is not None}
        self.order: tuple[str, ...] = tuple(compiled.positiontup)

    def params(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        merged = {**self.defaults, **values} if self.defaults else values
        return tuple(merged[name] for name in self.order)

    def pin_index(self, table: str, index: str) -> Statement:
        """SQLite: read *table* through *index* (``INDEXED BY``), in the one FROM that
        names it. SQLAlchemy cannot say this; the compiled text is rewritten instead."""
        before = f"FROM {table} \n"
        if self.sql.count(before) != 1:
            raise AssertionError(f"expected one {before!r} in {self.sql!r}")
        self.sql = self.sql.replace(before, f"FROM {table} INDEXED BY {index} \n")
        return self


class Queries:
    """Every statement the backend runs, compiled for one dialect.

    Statements that change what others wait for return the topics they changed, as
    their first column; on PostgreSQL they also ``pg_notify`` them in the same
    statement (a data-modifying CTE), so a notification costs no extra round trip.
    """

    def __init__(self, dialect: sa.Dialect) -> None:
        self._dialect = dialect
        self.postgres = dialect.name == "postgresql"
        self._now: sa.ColumnElement[float] = (
            sa.cast(sa.func.extract("epoch", sa.func.clock_timestamp()), sa.Double)
            if self.postgres
            else (sa.func.julianday(sa.literal_column("'now'")) - 2440587.5) * 86400.0
        )
        self._insert = pg_dialect.insert if self.postgres else sqlite_dialect.insert
        self.channel = CHANNEL
        self.now = self._compile(sa.select(self._now))
        #: suspending, waking and the inbox (see _wait_queries.py).
        self.waits = WaitQueries(self)
        self._define_runs()
        self._define_history()
        self._define_claims()
        self._define_cancellation()
        self._define_purge()
        #: listing runs, statistics, retries and the actions log (_inspect_queries.py).
        self.inspect = InspectQueries(self)
        if self.postgres:
            self._define_batches()
        #: where each parameter of the hand-built record tuple (RECORD_ORDER) goes.
        self.record_permutation: tuple[int, ...] | None = tuple(
            RECORD_ORDER.index(name) for name in self.record.order
        )
        if self.record_permutation == tuple(range(len(RECORD_ORDER))):
            self.record_permutation = None

    # -- helpers --------------------------------------------------------------------

    @property
    def now_expression(self) -> sa.ColumnElement[float]:
        """The database clock, in seconds since the epoch."""
        return self._now

    @property
    def statement_now(self) -> sa.ColumnElement[float]:
        """The database clock when the statement began: unlike `now_expression` (which
        is volatile on PostgreSQL), an index condition may compare a column with it."""
        if self.postgres:
            return sa.cast(sa.func.extract("epoch", sa.func.statement_timestamp()), sa.Double)
        return self._now

    def compile(self, statement: sa.Executable) -> Statement:
        """Compile *statement* for this dialect."""
        return Statement(statement, self._dialect)

    _compile = compile

    def _finishing(self, update: Any) -> Statement:
        """A statement finishing runs, returning their topics (``run:<id>``) first.

        On PostgreSQL it also wakes, in the same statement, each parent waiting on one
        of them (see `WaitQueries.waking_parents`). SQLite returns each run's
        ``parent_id`` second instead, and the backend wakes the parent in the same
        transaction (SQLite has no UPDATE inside WITH).
        """
        r = runs.c
        if self.postgres:
            return self.waits.waking_parents(update.returning(r.id, r.parent_id))
        return self._compile(self._notifying(update, self._run_topic(), r.parent_id))

    def _recording(self, step: list[Any], *fence: sa.ColumnElement[bool]) -> Any:
        """Insert a step (*step*: the history columns' values) if its run passes *fence*,
        or replace the unfinished (retrying or waiting) step at its position."""
        h = history.c
        insert = self._insert(history).from_select(
            [c.name for c in history.c], sa.select(*step).where(sa.exists().where(*fence))
        )
        return insert.on_conflict_do_update(
            index_elements=[h.run_id, h.position],
            set_={name: insert.excluded[name] for name in UPDATED_ON_RECORD},
            where=h.status.in_(_UNFINISHED_STEP),
        )

    def _notifying(self, dml: Any, topic: sa.ColumnElement[str], *more: Any) -> Any:
        """*dml* returning (topic, *more); on PostgreSQL also notifying the topic."""
        returning = dml.returning(topic.label("topic"), *more)
        if not self.postgres:
            return returning
        changed = returning.cte("changed")
        notify = sa.func.pg_notify(sa.literal_column(f"'{CHANNEL}'"), changed.c.topic)
        return sa.select(*changed.c, notify)

    def _in_names(self, column: sa.Column[str], param: str) -> sa.ColumnElement[bool]:
        """*column* is one of a list parameter: an array (PostgreSQL) or JSON (SQLite)."""
        if self.postgres:
            return column == sa.any_(sa.bindparam(param, type_=pg_dialect.ARRAY(sa.Text)))
        each = sa.func.json_each(sa.bindparam(param, type_=sa.Text)).table_valued("value")
        return column.in_(sa.select(each.c.value).scalar_subquery())

    @staticmethod
    def _run_topic() -> sa.ColumnElement[str]:
        return sa.literal_column("'run:'", sa.Text) + runs.c.id

    @staticmethod
    def _queue_topic() -> sa.ColumnElement[str]:
        return sa.literal_column("'queue:'", sa.Text) + runs.c.queue

    # -- runs -----------------------------------------------------------------------

    def _define_runs(self) -> None:
        r, now = runs.c, self._now
        self.get_run = self._compile(sa.select(*runs.c).where(r.id == _bind("id", r.id)))
        owned = sa.bindparam("owned", type_=sa.Integer)
        new_run = (
            self._insert(runs)
            .values(
                id=_bind("id", r.id),
                workflow=_bind("workflow", r.workflow),
                status=_bind("status", r.status),
                input=_bind("input", r.input),
                call_hash=_bind("call_hash", r.call_hash),
                output=sa.null(),
                error=sa.null(),
                epoch=_bind("epoch", r.epoch),
                lease_owner=_bind("owner", r.lease_owner),
                lease_until=now + _bind("lease", r.lease_until),
                recoveries=sa.literal_column("0"),
                parent_id=_bind("parent_id", r.parent_id),
                created_at=now,
                updated_at=now,
                finished_at=sa.null(),
                queue=_bind("queue", r.queue),
                priority=_bind("priority", r.priority),
                started_at=sa.case((owned == 1, now), else_=sa.null()),
                cancel_requested=sa.literal_column("0"),
            )
            .on_conflict_do_nothing(index_elements=[r.id])
        )
        # Only what the database decided comes back: the rest is what we sent.
        self.create_owned_run = self._compile(new_run.returning(r.created_at, r.lease_until))
        self.create_queued_run = self._compile(
            self._notifying(new_run, self._queue_topic(), r.created_at)
        )
        fenced_unfinished = (
            r.id == _bind("id", r.id),
            r.epoch == _bind("epoch", r.epoch),
            r.status.notin_(_FINISHED),
        )
        ended = {"lease_owner": sa.null(), "lease_until": sa.null(), "updated_at": now}
        self.finish_run = self._finishing(
            sa.update(runs)
            .where(*fenced_unfinished)
            .values(
                status=_bind("status", r.status),
                output=_bind("output", r.output),
                error=_bind("error", r.error),
                finished_at=now,
                **ended,
            )
        )
        self.block_run = self._compile(
            self._notifying(
                sa.update(runs)
                .where(*fenced_unfinished)
                .values(status=_BLOCKED, error=_bind("error", r.error), **ended),
                self._run_topic(),
            )
        )
        self.renew_leases = self._compile(
            sa.update(runs)
            .where(r.lease_owner == _bind("owner", r.lease_owner), r.status == _RUNNING)
            .values(lease_until=now + _bind("lease", r.lease_until))
        )
        self.release_run = self._compile(
            self._notifying(
                sa.update(runs)
                .where(
                    r.id == _bind("id", r.id),
                    r.epoch == _bind("epoch", r.epoch),
                    r.status == _RUNNING,
                )
                .values(status=_QUEUED, lease_owner=sa.null(), lease_until=sa.null()),
                self._queue_topic(),
            )
        )

    # -- history --------------------------------------------------------------------

    def _define_history(self) -> None:
        r, h = runs.c, history.c
        self.load_history = self._compile(
            sa.select(*history.c).where(h.run_id == _bind("run_id", h.run_id)).order_by(h.position)
        )
        at_my_epoch = (r.id == _bind("fence_id", r.id), r.epoch == _bind("fence_epoch", r.epoch))

        # PostgreSQL types a bare NULL in a SELECT list as text, which bytea and double
        # columns refuse; SQLite needs no casts.
        def value(column: sa.Column[Any]) -> sa.ColumnElement[Any]:
            bound = _bind(column.name, column)
            return sa.cast(bound, column.type) if self.postgres else bound

        step = [value(c) for c in history.c]
        # The row comes back only if written, carrying the run's cancellation flag, so
        # the owner learns of a cancel request without an extra query.
        cancel_flag = (
            sa.select(r.cancel_requested).where(r.id == _bind("cancel_id", r.id)).scalar_subquery()
        )
        self.record = self._compile(self._recording(step, *at_my_epoch).returning(cancel_flag))
        #: SQLite: the same write, fenced also on "no cancel request", returning nothing
        #: (the backend reads the row count): RETURNING makes SQLite collect the rows
        #: first, ~15 us of the hottest statement. A refused write reads back why.
        self.record_quiet: Statement | None = None
        if not self.postgres:
            no_cancel = r.cancel_requested == sa.literal_column("0")
            self.record_quiet = self._compile(self._recording(step, *at_my_epoch, no_cancel))
            if self.record_quiet.order != RECORD_ORDER[: len(self.record_quiet.order)]:
                raise AssertionError(f"record_quiet takes {self.record_quiet.order}")
        self.record_conflict = self._compile(
            sa.select(r.epoch, r.cancel_requested, *history.c)
            .select_from(
                runs.outerjoin(
                    history,
                    sa.and_(h.run_id == r.id, h.position == _bind("position", h.position)),
                )
            )
            .where(r.id == _bind("run_id", r.id))
        )

    # -- claims ---------------------------------------------------------------------

    def _define_claims(self) -> None:
        r, now = runs.c, self._now
        claimed = {
            "status": _RUNNING,
            "epoch": r.epoch + sa.literal_column("1"),
            "lease_owner": _bind("owner", r.lease_owner),
            "lease_until": now + _bind("lease", r.lease_until),
            "updated_at": now,
            "started_at": sa.func.coalesce(r.started_at, now),
            "wake_at": sa.null(),
            "waiting_on": sa.null(),
        }
        takeover = sa.case(
            (r.status == _RUNNING, sa.literal_column("1")), else_=sa.literal_column("0")
        )
        self.claim_run = self._compile(
            sa.update(runs)
            .where(
                r.id == _bind("id", r.id),
                r.epoch == _bind("epoch", r.epoch),
                sa.or_(
                    r.status.in_((_QUEUED, _BLOCKED)),
                    sa.and_(r.status == _WAITING, r.wake_at <= now),
                    sa.and_(
                        r.status == _RUNNING,
                        sa.or_(
                            r.lease_until < now,
                            r.lease_owner == _bind("dead_owner", r.lease_owner),
                        ),
                    ),
                ),
            )
            .values(recoveries=r.recoveries + takeover, **claimed)
            .returning(*runs.c)
        )
        self.mark_progress = self._compile(
            sa.update(runs)
            .where(r.id == _bind("id", r.id), r.epoch == _bind("epoch", r.epoch))
            .values(recoveries=sa.literal_column("0"))
        )
        ready = (
            sa.select(r.id)
            .where(
                r.status == _QUEUED,
                # One queue per statement: the claim index then yields rows in priority
                # order and LIMIT stops early. With a list of queues PostgreSQL scans and
                # sorts every queued run instead (0.93 ms vs 0.05 ms at 2,000 queued).
                r.queue == _bind("queue", r.queue),
                self._in_names(r.workflow, "workflows"),
            )
            .order_by(r.priority.desc(), r.created_at)
            .limit(sa.bindparam("limit", type_=sa.Integer))
        )
        if self.postgres:
            # Lock and claim in one statement; a locked row is someone else's, skip it.
            ready = ready.with_for_update(skip_locked=True)
        self.claim_next = self._compile(
            sa.update(runs)
            .where(r.id.in_(ready.scalar_subquery()))
            .values(**claimed)
            .returning(*runs.c)
        )
        self.queued_workflows = self._compile(
            sa.select(r.workflow)
            .where(r.status == _QUEUED, self._in_names(r.queue, "queues"))
            .distinct()
            .order_by(r.workflow)
        )
        on_this_host = sa.func.substr(
            r.lease_owner, 1, sa.bindparam("prefix_len", type_=sa.Integer)
        ) == sa.bindparam("prefix", type_=sa.Text)
        self.recoverable = self._compile(
            sa.select(*runs.c).where(
                sa.or_(
                    r.status == _BLOCKED,
                    sa.and_(r.status == _QUEUED, r.started_at.is_not(None)),
                    sa.and_(r.status == _RUNNING, sa.or_(r.lease_until < now, on_this_host)),
                )
            )
        )

    # -- batches (PostgreSQL) -------------------------------------------------------

    def _define_batches(self) -> None:
        """Many steps, or many outcomes, in one statement: columns arrive as arrays.

        Group commit (see _group.py) uses these on PostgreSQL, where one statement
        instead of one per write saves both the round trips and the client's work.
        """
        r, h = runs.c, history.c

        def unnest(columns: list[sa.Column[Any]], names: list[str]) -> Any:
            arrays = [
                sa.bindparam(f"{name}s", type_=pg_dialect.ARRAY(column.type))
                for column, name in zip(columns, names, strict=True)
            ]
            return sa.func.unnest(*arrays).table_valued(*names).render_derived(name="v")

        columns = list(history.c)
        #: the history columns, in the order record_many takes them (as "<name>s").
        self.history_columns = [c.name for c in columns]
        v = unnest(columns, self.history_columns)
        step = [v.c[c.name] for c in columns]
        written = (
            self._recording(step, r.id == v.c.run_id, r.epoch == v.c.epoch)
            .returning(h.run_id, h.position)
            .cte("written")
        )
        # Each written row comes back with its run's cancellation flag; rows fenced off,
        # or already finished, do not come back.
        self.record_many = self._compile(
            sa.select(written.c.run_id, written.c.position, r.cancel_requested).join_from(
                written, runs, r.id == written.c.run_id
            )
        )
        names = ["id", "epoch", "status", "output", "error"]
        v = unnest([r.id, r.epoch, r.status, r.output, r.error], names)
        self.finish_many = self._finishing(
            sa.update(runs)
            .where(r.id == v.c.id, r.epoch == v.c.epoch, r.status.notin_(_FINISHED))
            .values(
                status=v.c.status,
                output=v.c.output,
                error=v.c.error,
                lease_owner=sa.null(),
                lease_until=sa.null(),
                updated_at=self._now,
                finished_at=self._now,
            )
        )

    # -- cancellation ---------------------------------------------------------------

    def _define_cancellation(self) -> None:
        r = runs.c
        # A run and everything below it: children, grandchildren...
        tree = (
            sa.select(r.id.label("id")).where(r.id == _bind("id", r.id)).cte("tree", recursive=True)
        )
        below = runs.alias("below")
        tree = tree.union(sa.select(below.c.id).where(below.c.parent_id == tree.c.id))
        member = runs.alias("member")

        def in_tree(
            *statuses: sa.ColumnElement[str], fresh: bool = False
        ) -> list[sa.ColumnElement[bool]]:
            """Runs of the tree in one of *statuses* (and not yet asked to stop: *fresh*).

            The subquery walks the tree and tests each member, so that the UPDATE finds
            its rows by primary key (SQLite would otherwise read every run of that status
            through its status index: 16 ms at 100,000 waiting runs, vs 0.1 ms).
            PostgreSQL re-checks a concurrently updated row against the outer WHERE
            only, so there the test is repeated.
            """
            tests: list[sa.ColumnElement[bool]] = [member.c.status.in_(statuses)]
            if fresh:
                tests.append(member.c.cancel_requested == sa.literal_column("0"))
            ids = (
                sa.select(member.c.id)
                .select_from(tree.join(member, member.c.id == tree.c.id))
                .where(*tests)
            )
            where: list[sa.ColumnElement[bool]] = [r.id.in_(ids.scalar_subquery())]
            if self.postgres:
                where.append(r.status.in_(statuses))
                if fresh:
                    where.append(r.cancel_requested == sa.literal_column("0"))
            return where

        self.cancel_now = self._compile(
            self._notifying(
                sa.update(runs)
                .where(*in_tree(_QUEUED, _BLOCKED))
                .values(
                    status=_CANCELLED,
                    lease_owner=sa.null(),
                    lease_until=sa.null(),
                    updated_at=self._now,
                    finished_at=self._now,
                ),
                self._run_topic(),
                r.parent_id,
            )
        )
        # A waiting run is queued again, to receive Cancelled at the wait it sleeps in.
        self.cancel_waiting = self._compile(
            self.waits.waking(
                sa.update(runs)
                .where(*in_tree(_WAITING))
                .values(
                    status=_QUEUED,
                    cancel_requested=sa.literal_column("1"),
                    wake_at=sa.null(),
                    waiting_on=sa.null(),
                )
            )
        )
        self.cancel_request = self._compile(
            self._notifying(
                sa.update(runs)
                .where(*in_tree(_RUNNING, fresh=True))
                .values(cancel_requested=sa.literal_column("1")),
                self._run_topic(),
            )
        )

    # -- purging --------------------------------------------------------------------

    def _define_purge(self) -> None:
        """Finding finished runs that nothing needs any more, and deleting them.

        ``purge_candidates`` reads the next *window* runs that finished before the
        cutoff, oldest first, after a keyset (created_at, id): through the created_at
        index, since a run finishes after it is created. The backend then reads their
        relatives a generation at a time, by primary key (``purge_relatives``, going
        up) and through the parent index (``purge_children``, going down), and decides
        in Python. One recursive statement did it all, but PostgreSQL cannot estimate
        recursive CTEs: it planned hash joins over the whole table, and JIT-compiled
        them (0.8 s per window at 200,000 runs).
        """
        r = runs.c
        cutoff = sa.bindparam("cutoff", type_=sa.Double)
        after_created = sa.bindparam("after_created", type_=sa.Double)
        self.purge_candidates = self._compile(
            sa.select(r.id, r.parent_id, r.created_at)
            .where(
                r.created_at < cutoff,
                r.status.in_(_FINISHED),
                r.finished_at < cutoff,
                # The keyset, with a plain bound first: an OR alone is no index range.
                r.created_at >= after_created,
                sa.or_(r.created_at > after_created, r.id > _bind("after_id", r.id)),
            )
            .order_by(r.created_at, r.id)
            .limit(sa.bindparam("window", type_=sa.Integer))
        )
        if not self.postgres:
            # Without statistics SQLite reads every finished run through the status
            # index and sorts them all, for every window: 60 ms at 100,000.
            self.purge_candidates.pin_index("durable_runs", "durable_runs_created")
        relative = (r.id, r.parent_id, r.status, r.finished_at)
        self.purge_relatives = self._compile(
            sa.select(*relative).where(self._in_names(r.id, "ids"))
        )
        self.purge_children = self._compile(
            sa.select(*relative).where(self._in_names(r.parent_id, "ids"))
        )
        # Deleting: the runs first (still finished, or not at all), then what was theirs.
        # NOT IN the unfinished statuses, not IN the finished ones: SQLite would read
        # every finished run through the status index instead of the ids by key.
        unfinished = [_constant(status) for status in RunStatus if not status.finished]
        self.purge_runs = self._compile(
            sa.delete(runs)
            .where(self._in_names(r.id, "ids"), r.status.notin_(unfinished))
            .returning(r.id)
        )
        self.purge_history = self._compile(
            sa.delete(history).where(self._in_names(history.c.run_id, "ids"))
        )
        self.purge_events = self._compile(
            sa.delete(events).where(self._in_names(events.c.run_id, "ids"))
        )
