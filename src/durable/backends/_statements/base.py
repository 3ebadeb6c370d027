"""What every statement module shares: `Statement`, the status constants, and the
expressions each dialect spells its own way (`Compiler`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from durable.backends._protocol.waits import TIMERS
from durable.backends._schema import runs
from durable.core.records import RunStatus, StepStatus

#: The PostgreSQL notification channel of durable's tables in schema ``public``;
#: payloads are topics (see _hub.py).
CHANNEL = "durable"

#: The channel of the schema durable's tables are in (``current_schema()``), so that two
#: deployments in two schemas of one database do not wake each other: ``durable`` for
#: ``public`` (what every version before this one used, so old and new processes of one
#: deployment still hear each other), else ``durable:<schema>``, or ``durable:<md5 of
#: it>`` where that would pass the 63 bytes of a channel's name.
CHANNEL_SQL = (
    f"CASE WHEN coalesce(current_schema(), 'public') = 'public' THEN '{CHANNEL}' "
    f"WHEN octet_length(current_schema()) <= 54 THEN '{CHANNEL}:' || current_schema() "
    f"ELSE '{CHANNEL}:' || md5(current_schema()) END"
)


def constant(value: str) -> sa.ColumnClause[str]:
    """A status written into the SQL text: statuses are our constants, never user input."""
    return sa.literal_column(f"'{value}'", sa.Text)


FINISHED = tuple(constant(status) for status in RunStatus if status.finished)
RUNNING = constant(RunStatus.RUNNING)
QUEUED = constant(RunStatus.QUEUED)
WAITING = constant(RunStatus.WAITING)
BLOCKED = constant(RunStatus.BLOCKED)
CANCELLED = constant(RunStatus.CANCELLED)
PAUSED = constant(RunStatus.PAUSED)
UNFINISHED_STEP = tuple(constant(status) for status in StepStatus if not status.finished)


def bind(name: str, column: sa.Column[Any]) -> sa.BindParameter[Any]:
    """A parameter *name* typed as *column*."""
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


class Compiler:
    """Compiles statements for one dialect, with the expressions they share.

    Statements that change what others wait for return the topics they changed, as
    their first column; on PostgreSQL they also ``pg_notify`` them in the same
    statement (a data-modifying CTE), so a notification costs no extra round trip.
    """

    def __init__(self, dialect: sa.Dialect) -> None:
        self._dialect = dialect
        self.postgres = dialect.name == "postgresql"
        #: The database clock, in seconds since the epoch.
        self._now: sa.ColumnElement[float] = (
            sa.cast(sa.func.extract("epoch", sa.func.clock_timestamp()), sa.Double)
            if self.postgres
            else (sa.func.julianday(sa.literal_column("'now'")) - 2440587.5) * 86400.0
        )
        self._insert = pg_dialect.insert if self.postgres else sqlite_dialect.insert

    def compile(self, statement: sa.Executable) -> Statement:
        """Compile *statement* for this dialect."""
        return Statement(statement, self._dialect)

    @property
    def _statement_now(self) -> sa.ColumnElement[float]:
        """The database clock when the statement began: unlike ``_now`` (which is
        volatile on PostgreSQL), an index condition may compare a column with it."""
        if self.postgres:
            return sa.cast(sa.func.extract("epoch", sa.func.statement_timestamp()), sa.Double)
        return self._now

    def _notifying(
        self, dml: Any, topic: sa.ColumnElement[str], *more: Any, channel: str | None = None
    ) -> Any:
        """*dml* returning (topic, *more); on PostgreSQL also notifying the topic, on
        *channel* if given, else on that of the connection's schema (`CHANNEL_SQL`)."""
        returning = dml.returning(topic.label("topic"), *more)
        if not self.postgres:
            return returning
        changed = returning.cte("changed")
        named = schema_channel() if channel is None else sa.literal(channel, sa.Text)
        notify = sa.func.pg_notify(named, changed.c.topic)
        return sa.select(*changed.c, notify)

    def _waking(self, dml: Any, *more: Any) -> Any:
        """*dml* returning (``run:<id>``, a second topic, *more*), both notified on
        PostgreSQL in the same statement. The second topic is ``queue:<name>`` for a
        run now QUEUED, `TIMERS` for one now sleeping, else ``run:<id>`` again."""
        r = runs.c
        run_topic = sa.literal_column("'run:'", sa.Text) + r.id
        also = sa.case(
            (r.status == QUEUED, sa.literal_column("'queue:'", sa.Text) + r.queue),
            (r.wake_at.is_not(None), sa.literal_column(f"'{TIMERS}'", sa.Text)),
            else_=run_topic,
        )
        returning = dml.returning(run_topic.label("topic"), also.label("also"), *more)
        if not self.postgres:
            return returning
        changed = returning.cte("changed")
        channel = schema_channel()
        return sa.select(
            *changed.c,
            sa.func.pg_notify(channel, changed.c.topic),
            sa.func.pg_notify(channel, changed.c.also),
        )

    def _one_of(
        self, column: sa.ColumnElement[Any], values: Sequence[Any]
    ) -> sa.ColumnElement[bool]:
        """*column* is one of *values* (constants or parameters). On SQLite as
        equalities: it answers ``IN (...)`` from a temporary B-tree it builds at each
        execution (a page cache of its own), which cost a step's statement 6-8 us of
        its 30. PostgreSQL keeps ``IN``, which its index conditions read as one. Not for
        a column SQLite can seek in an index: it turns such equalities back into ``IN``
        (the step pair's check of its positions did that)."""
        if self.postgres:
            return column.in_(values)
        return sa.or_(*(column == value for value in values))

    def _none_of(
        self, column: sa.ColumnElement[Any], values: Sequence[Any]
    ) -> sa.ColumnElement[bool]:
        """*column* is none of *values*: `_one_of`, negated."""
        if self.postgres:
            return column.not_in(values)
        return sa.and_(*(column != value for value in values))

    def _in_names(self, column: sa.Column[str], param: str) -> sa.ColumnElement[bool]:
        """*column* is one of a list parameter: an array (PostgreSQL) or JSON (SQLite)."""
        if self.postgres:
            return column == sa.any_(sa.bindparam(param, type_=pg_dialect.ARRAY(sa.Text)))
        each = sa.func.json_each(sa.bindparam(param, type_=sa.Text)).table_valued("value")
        return column.in_(sa.select(each.c.value).scalar_subquery())

    @staticmethod
    def _unnest(columns: list[sa.Column[Any]], names: list[str]) -> Any:
        """PostgreSQL: rows ``v`` with fields *names*, from one array parameter per
        column (``:<name>s``): many writes in one statement (see `_group.py`)."""
        arrays = [
            sa.bindparam(f"{name}s", type_=pg_dialect.ARRAY(column.type))
            for column, name in zip(columns, names, strict=True)
        ]
        return sa.func.unnest(*arrays).table_valued(*names).render_derived(name="v")

    @staticmethod
    def _run_topic() -> sa.ColumnElement[str]:
        return sa.literal_column("'run:'", sa.Text) + runs.c.id

    @staticmethod
    def _queue_topic() -> sa.ColumnElement[str]:
        return sa.literal_column("'queue:'", sa.Text) + runs.c.queue

    @classmethod
    def _new_topic(cls, wake_at: sa.ColumnElement[Any]) -> sa.ColumnElement[str]:
        """What a created run announces: its queue, or `TIMERS` if it starts later (at
        *wake_at*: give the bound value, not the column, on SQLite, whose 3.40 RETURNING
        of an INSERT into a WITHOUT ROWID table reads ``wake_at IS NOT NULL`` as true
        for a NULL ``wake_at``)."""
        timers = sa.literal_column(f"'{TIMERS}'", sa.Text)
        return sa.case((wake_at.is_not(None), timers), else_=cls._queue_topic())


def schema_channel() -> sa.ColumnElement[str]:
    """The notification channel of the connection's schema, in SQL (`CHANNEL_SQL`)."""
    return sa.literal_column(f"({CHANNEL_SQL})", sa.Text)
