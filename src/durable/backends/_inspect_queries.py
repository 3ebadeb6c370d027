"""The SQL of inspecting and operating runs: listing, statistics, retries, actions.

Built as ``Queries.inspect``, like `_wait_queries.py`. Listing filters vary per call,
so those statements are compiled per shape of filter (which fields are set) and
cached: a handful of shapes, each compiled once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect

from durable.core.records import RunQuery, RunStatus, StepKind, StepStatus

from ._schema import actions, history, runs

if TYPE_CHECKING:
    from ._queries import Queries, Statement

_RETRYABLE = (RunStatus.FAILED.value, RunStatus.DEAD.value)


def _constant(value: str) -> sa.ColumnClause[str]:
    return sa.literal_column(f"'{value}'", sa.Text)


def query_values(query: RunQuery) -> dict[str, Any]:
    """The parameters of a `RunQuery`, named as `InspectQueries.listing` binds them."""
    values: dict[str, Any] = {
        "workflow": query.workflow,
        "statuses": [status.value for status in query.statuses] or None,
        "queue": query.queue,
        "since": query.since,
        "until": query.until,
        "parent_id": query.parent_id,
        "pattern": None if query.id_contains is None else f"%{_escape(query.id_contains)}%",
        "after_created": None if query.after is None else query.after[0],
        "after_id": None if query.after is None else query.after[1],
    }
    return {name: value for name, value in values.items() if value is not None}


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class InspectQueries:
    """Statements for `Backend.list_runs`, `count_runs`, `outcomes`, `retry_run`,
    `record_action` and `actions`, compiled for one dialect."""

    def __init__(self, queries: Queries) -> None:
        self._q = queries
        self._listings: dict[tuple[frozenset[str], bool], Statement] = {}
        r, h, a = runs.c, history.c, actions.c
        since = sa.bindparam("since", type_=sa.Double)
        finished = [_constant(s.value) for s in RunStatus if s.finished]
        self.run_outcomes = queries.compile(
            sa.select(r.workflow, r.status, sa.func.coalesce(r.started_at, r.created_at))
            .add_columns(r.finished_at)
            .where(r.created_at >= since, r.status.in_(finished))
        )
        steps = [_constant(StepStatus.COMPLETED.value), _constant(StepStatus.FAILED.value)]
        self.task_outcomes = queries.compile(
            sa.select(h.name, h.status, h.started_at, h.finished_at).where(
                h.kind == _constant(StepKind.TASK.value),
                h.status.in_(steps),
                h.started_at >= since,
            )
        )
        self.named_task_outcomes = queries.compile(
            sa.select(h.name, h.status, h.started_at, h.finished_at).where(
                h.kind == _constant(StepKind.TASK.value),
                h.status.in_(steps),
                h.started_at >= since,
                h.name == sa.bindparam("name", type_=sa.Text),
            )
        )
        run_id = sa.bindparam("id", type_=sa.Text)
        self.reopen_steps = queries.compile(
            sa.delete(history).where(
                h.run_id == run_id,
                self._in_positions(h.position),
                h.status == _constant(StepStatus.FAILED.value),
            )
        )
        self.requeue = queries.compile(
            queries._notifying(
                sa.update(runs)
                .where(r.id == run_id, r.status.in_([_constant(s) for s in _RETRYABLE]))
                .values(
                    status=_constant(RunStatus.QUEUED.value),
                    output=sa.null(),
                    error=sa.null(),
                    finished_at=sa.null(),
                    recoveries=sa.literal_column("0"),
                    lease_owner=sa.null(),
                    lease_until=sa.null(),
                    cancel_requested=sa.literal_column("0"),
                    wake_at=sa.null(),
                    waiting_on=sa.null(),
                    updated_at=queries.now_expression,
                ),
                queries._queue_topic(),
            )
        )
        self.lock_run = queries.compile(sa.select(r.status).where(r.id == run_id).with_for_update())
        self.add_action = queries.compile(
            sa.insert(actions)
            .values(
                run_id=run_id,
                action=sa.bindparam("action", type_=sa.Text),
                actor=sa.bindparam("actor", type_=sa.Text),
                at=queries.now_expression,
                detail=sa.bindparam("detail", type_=sa.Text),
            )
            .returning(*actions.c)
        )
        self.actions = queries.compile(
            sa.select(*actions.c).where(a.run_id == run_id).order_by(a.id)
        )
        self.purge_actions = queries.compile(
            sa.delete(actions).where(queries._in_names(a.run_id, "ids"))
        )

    def _in_positions(self, column: sa.Column[int]) -> sa.ColumnElement[bool]:
        """*column* is one of the ``:positions`` list: an array or a JSON array."""
        if self._q.postgres:
            array = sa.bindparam("positions", type_=pg_dialect.ARRAY(sa.Integer))
            return column == sa.any_(array)
        each = sa.func.json_each(sa.bindparam("positions", type_=sa.Text)).table_valued("value")
        return column.in_(sa.select(each.c.value).scalar_subquery())

    def listing(self, values: dict[str, Any], *, count: bool) -> Statement:
        """The statement listing (newest first, up to ``:limit``) or counting the runs
        matching the filters set in *values* (from `query_values`)."""
        key = (frozenset(values), count)
        statement = self._listings.get(key)
        if statement is None:
            statement = self._listings[key] = self._q.compile(self._listing(values, count))
        return statement

    def _listing(self, values: dict[str, Any], count: bool) -> Any:
        r = runs.c
        where: list[Any] = []
        if "workflow" in values:
            where.append(r.workflow == sa.bindparam("workflow", type_=sa.Text))
        if "statuses" in values:
            where.append(self._q._in_names(r.status, "statuses"))
        if "queue" in values:
            where.append(r.queue == sa.bindparam("queue", type_=sa.Text))
        if "since" in values:
            where.append(r.created_at >= sa.bindparam("since", type_=sa.Double))
        if "until" in values:
            where.append(r.created_at < sa.bindparam("until", type_=sa.Double))
        if "parent_id" in values:
            where.append(r.parent_id == sa.bindparam("parent_id", type_=sa.Text))
        if "pattern" in values:
            where.append(r.id.like(sa.bindparam("pattern", type_=sa.Text), escape="\\"))
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
