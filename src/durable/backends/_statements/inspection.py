"""The SQL of inspecting and operating runs: listing, statistics, retries, actions,
and purging old finished runs.

Listing filters vary per call, so those statements are compiled per shape of filter
(which fields are set) and cached (`RunListings`): a handful of shapes, each compiled
once.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect

from durable.backends._schema import actions, attempts, events, history, runs
from durable.core.records import RunQuery, RunStatus, StepKind, StepStatus

from .attributes import attribute_filter, holders_count
from .base import FINISHED, Compiler, Statement, bind, constant

_RETRYABLE = (RunStatus.FAILED.value, RunStatus.DEAD.value)


def query_values(query: RunQuery) -> dict[str, Any]:
    """The parameters of a `RunQuery`, named as `RunListings.listing` binds them."""
    values: dict[str, Any] = {
        "workflow": query.workflow,
        # One status is an equality: the (status, created_at) index then lists its runs
        # newest first without sorting them (a list of them is sorted).
        "status": query.statuses[0].value if len(query.statuses) == 1 else None,
        "statuses": [status.value for status in query.statuses]
        if len(query.statuses) > 1
        else None,
        "queue": query.queue,
        "since": query.since,
        "until": query.until,
        "parent_id": query.parent_id,
        "search": query.id_contains,
        "after_created": None if query.after is None else query.after[0],
        "after_id": None if query.after is None else query.after[1],
        "version": query.version,
    }
    for index, (key, text) in enumerate(query.attributes):
        values[f"attr_key_{index}"], values[f"attr_value_{index}"] = key, text
    return {name: value for name, value in values.items() if value is not None}


class InspectionStatements(Compiler):
    """The statements of `InspectionStore`, compiled for one dialect
    (`_define_inspection`); listings are compiled on first use (``inspect``)."""

    def _define_inspection(self) -> None:
        #: Listing and counting runs: statements compiled per shape of filter.
        self.inspect = RunListings(self)
        r, h, a = runs.c, history.c, actions.c
        since = sa.bindparam("since", type_=sa.Double)
        self.run_outcomes = self.compile(
            sa.select(r.workflow, r.status, sa.func.coalesce(r.started_at, r.created_at))
            .add_columns(r.finished_at)
            .where(r.created_at >= since)
        )
        steps = [constant(StepStatus.COMPLETED.value), constant(StepStatus.FAILED.value)]
        self.task_outcomes = self.compile(
            sa.select(h.name, h.status, h.started_at, h.finished_at).where(
                h.kind == constant(StepKind.TASK.value),
                h.status.in_(steps),
                h.started_at >= since,
            )
        )
        self.named_task_outcomes = self.compile(
            sa.select(h.name, h.status, h.started_at, h.finished_at).where(
                h.kind == constant(StepKind.TASK.value),
                h.status.in_(steps),
                h.started_at >= since,
                h.name == sa.bindparam("name", type_=sa.Text),
            )
        )
        #: the task calls of one workflow's runs (its tasks, for `stats --workflow`).
        self.workflow_task_outcomes = self.compile(
            sa.select(h.name, h.status, h.started_at, h.finished_at)
            .join_from(history, runs, r.id == h.run_id)
            .where(
                h.kind == constant(StepKind.TASK.value),
                h.status.in_(steps),
                h.started_at >= since,
                r.workflow == sa.bindparam("workflow", type_=sa.Text),
            )
        )
        run_id = sa.bindparam("id", type_=sa.Text)
        self._define_attempts(run_id)
        self.reopen_steps = self.compile(
            sa.delete(history).where(
                h.run_id == run_id,
                self._in_positions(h.position),
                h.status == constant(StepStatus.FAILED.value),
            )
        )
        self.requeue = self.compile(
            self._notifying(
                sa.update(runs)
                .where(r.id == run_id, r.status.in_([constant(s) for s in _RETRYABLE]))
                .values(
                    status=constant(RunStatus.QUEUED.value),
                    output=sa.null(),
                    error=sa.null(),
                    finished_at=sa.null(),
                    recoveries=sa.literal_column("0"),
                    lease_owner=sa.null(),
                    lease_until=sa.null(),
                    cancel_requested=sa.literal_column("0"),
                    wake_at=sa.null(),
                    waiting_on=sa.null(),
                    state=sa.null(),  # the end's snapshot: newer steps' come first now
                    updated_at=self._now,
                ),
                self._queue_topic(),
            )
        )
        self.lock_for_retry = self.compile(
            sa.select(r.status).where(r.id == run_id).with_for_update()
        )
        self.add_action = self.compile(
            sa.insert(actions)
            .values(
                run_id=run_id,
                action=sa.bindparam("action", type_=sa.Text),
                actor=sa.bindparam("actor", type_=sa.Text),
                at=self._now,
                detail=sa.bindparam("detail", type_=sa.Text),
            )
            .returning(*actions.c)
        )
        self.actions = self.compile(sa.select(*actions.c).where(a.run_id == run_id).order_by(a.id))
        # The latest properties snapshot: the run's own (written as it ended), else its
        # last step's that has one (the primary key walked backwards from its end).
        latest = (
            sa.select(h.state)
            .where(h.run_id == r.id, h.state.is_not(None))
            .order_by(h.position.desc())
            .limit(1)
            .scalar_subquery()
        )
        self.state = self.compile(
            sa.select(sa.func.coalesce(r.state, latest)).where(r.id == run_id)
        )
        self._define_purge()

    def _define_attempts(self, run_id: Any) -> None:
        """Keeping what a retry erases (`retry_run`), and reading it back (`outcomes`)."""
        r, h, t = runs.c, history.c, attempts.c
        columns = ("run_id", "kind", "name", "workflow", "status", "started_at", "finished_at")
        retryable = [constant(s) for s in _RETRYABLE]
        self.keep_run_attempt = self.compile(
            sa.insert(attempts).from_select(
                columns,
                sa.select(r.id, constant("run"), r.workflow, r.workflow, r.status)
                .add_columns(sa.func.coalesce(r.started_at, r.created_at), r.finished_at)
                .where(r.id == run_id, r.status.in_(retryable)),
            )
        )
        self.keep_step_attempts = self.compile(
            sa.insert(attempts).from_select(
                columns,
                sa.select(h.run_id, constant("task"), h.name, r.workflow, h.status)
                .add_columns(h.started_at, h.finished_at)
                .join_from(history, runs, r.id == h.run_id)
                .where(
                    h.run_id == run_id,
                    self._in_positions(h.position),
                    h.status == constant(StepStatus.FAILED.value),
                    h.kind == constant(StepKind.TASK.value),
                ),
            )
        )
        #: name, status, start, finish and the run's workflow of kept attempts.
        self.kept_attempts = self.compile(
            sa.select(t.name, t.status, t.started_at, t.finished_at, t.workflow).where(
                t.kind == sa.bindparam("kind", type_=sa.Text),
                t.started_at >= sa.bindparam("since", type_=sa.Double),
            )
        )

    def _in_positions(self, column: sa.Column[int]) -> sa.ColumnElement[bool]:
        """*column* is one of the ``:positions`` list: an array or a JSON array."""
        if self.postgres:
            array = sa.bindparam("positions", type_=pg_dialect.ARRAY(sa.Integer))
            return column == sa.any_(array)
        each = sa.func.json_each(sa.bindparam("positions", type_=sa.Text)).table_valued("value")
        return column.in_(sa.select(each.c.value).scalar_subquery())

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
        self.purge_candidates = self.compile(
            sa.select(r.id, r.parent_id, r.created_at)
            .where(
                r.created_at < cutoff,
                r.status.in_(FINISHED),
                r.finished_at < cutoff,
                # The keyset, with a plain bound first: an OR alone is no index range.
                r.created_at >= after_created,
                sa.or_(r.created_at > after_created, r.id > bind("after_id", r.id)),
            )
            .order_by(r.created_at, r.id)
            .limit(sa.bindparam("window", type_=sa.Integer))
        )
        if not self.postgres:
            # Without statistics SQLite reads every finished run through the status
            # index and sorts them all, for every window: 60 ms at 100,000.
            self.purge_candidates.pin_index("durable_runs", "durable_runs_created")
        relative = (r.id, r.parent_id, r.status, r.finished_at)
        self.purge_relatives = self.compile(sa.select(*relative).where(self._in_names(r.id, "ids")))
        self.purge_children = self.compile(
            sa.select(*relative).where(self._in_names(r.parent_id, "ids"))
        )
        # Deleting: the runs first (still finished, or not at all), then what was theirs.
        # NOT IN the unfinished statuses, not IN the finished ones: SQLite would read
        # every finished run through the status index instead of the ids by key.
        unfinished = [constant(status) for status in RunStatus if not status.finished]
        self.purge_runs = self.compile(
            sa.delete(runs)
            .where(self._in_names(r.id, "ids"), r.status.notin_(unfinished))
            .returning(r.id)
        )
        self.purge_history = self.compile(
            sa.delete(history).where(self._in_names(history.c.run_id, "ids"))
        )
        self.purge_events = self.compile(
            sa.delete(events).where(self._in_names(events.c.run_id, "ids"))
        )
        self.purge_actions = self.compile(
            sa.delete(actions).where(self._in_names(actions.c.run_id, "ids"))
        )
        self.purge_attempts = self.compile(
            sa.delete(attempts).where(self._in_names(attempts.c.run_id, "ids"))
        )


class RunListings:
    """The statements of `list_runs` and `count_runs`: one per shape of filter (which
    fields of the `RunQuery` are set), compiled on first use and kept."""

    def __init__(self, compiler: Compiler) -> None:
        self._compiler = compiler
        self._listings: dict[tuple[frozenset[str], bool], Statement] = {}

    def listing(self, values: dict[str, Any], *, count: bool) -> Statement:
        """The statement listing (newest first, up to ``:limit``) or counting the runs
        matching the filters set in *values* (from `query_values`)."""
        key = (frozenset(values), count)
        statement = self._listings.get(key)
        if statement is None:
            statement = self._listings[key] = self._compiler.compile(self._listing(values, count))
        return statement

    def _listing(self, values: dict[str, Any], count: bool) -> Any:
        alone = {"attr_key_0", "attr_value_0", "attr_drive_0"}
        if count and "attr_key_0" in values and set(values) <= alone:
            return holders_count()  # one attribute and nothing else: its index alone
        r = runs.c
        where: list[Any] = []
        if "workflow" in values:
            where.append(r.workflow == sa.bindparam("workflow", type_=sa.Text))
        if "status" in values:
            where.append(r.status == sa.bindparam("status", type_=sa.Text))
        if "statuses" in values:
            where.append(self._compiler._in_names(r.status, "statuses"))
        if "queue" in values:
            where.append(r.queue == sa.bindparam("queue", type_=sa.Text))
        if "since" in values:
            where.append(r.created_at >= sa.bindparam("since", type_=sa.Double))
        if "until" in values:
            where.append(r.created_at < sa.bindparam("until", type_=sa.Double))
        if "parent_id" in values:
            where.append(r.parent_id == sa.bindparam("parent_id", type_=sa.Text))
        if "search" in values:
            # A case-sensitive substring, as on the memory backend: LIKE would ignore
            # ASCII case on SQLite (and make "%" and "_" wildcards).
            needle = sa.bindparam("search", type_=sa.Text)
            position = sa.func.strpos if self._compiler.postgres else sa.func.instr
            where.append(position(r.id, needle) > 0)
        if "version" in values:
            where.append(r.version == sa.bindparam("version", type_=sa.Text))
        where += [
            attribute_filter(i, drive=f"attr_drive_{i}" in values)
            for i in range(len(values))
            if f"attr_key_{i}" in values
        ]
        if "after_created" in values:
            after = sa.bindparam("after_created", type_=sa.Double)
            where.append(r.created_at <= after)  # a plain bound first: an index range
            where.append(
                sa.or_(r.created_at < after, r.id < sa.bindparam("after_id", type_=sa.Text))
            )
        if count:
            return sa.select(sa.func.count()).select_from(runs).where(*where)
        return (
            sa.select(*runs.c)
            .where(*where)
            .order_by(r.created_at.desc(), r.id.desc())
            .limit(sa.bindparam("limit", type_=sa.Integer))
        )
