"""Every SQL statement durable runs, written once in SQLAlchemy Core.

`Queries(dialect)` compiles them for SQLite or PostgreSQL when a backend opens; at run
time `backends/sql.py` sends the compiled text straight to the driver. Compiling per
call costs more than an fsync-backed commit (see docs/performance.md). Every write is
a single statement, so each is its own short transaction:

* recording a step is one ``INSERT ... SELECT ... WHERE EXISTS (run at my epoch)
  ON CONFLICT DO UPDATE ... WHERE unfinished``: the fence and the write in one go;
* state changes are compare-and-set ``UPDATE ... WHERE id = ? AND epoch = ?``;
* times come from the database clock (``clock_timestamp()`` on PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from durable._records import RunStatus, StepStatus

from ._schema import history, runs

#: The record statement's parameters, in the order `sql._step_params` builds them.
RECORD_ORDER = (*(c.name for c in history.c), "fence_id", "fence_epoch")


def _constant(value: str) -> sa.ColumnClause[str]:
    """A status written into the SQL text: statuses are our constants, never user input."""
    return sa.literal_column(f"'{value}'", sa.Text)


_FINISHED = _constant(RunStatus.COMPLETED), _constant(RunStatus.FAILED)
_RUNNING = _constant(RunStatus.RUNNING)
_CLAIMABLE = _constant(RunStatus.QUEUED), _constant(RunStatus.BLOCKED)
_BLOCKED = _constant(RunStatus.BLOCKED)
_RETRYING = _constant(StepStatus.RETRYING)


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


class Queries:
    """Every statement the backend runs, compiled for one dialect."""

    def __init__(self, dialect: sa.Dialect) -> None:
        postgres = dialect.name == "postgresql"
        now: sa.ColumnElement[float] = (
            sa.cast(sa.func.extract("epoch", sa.func.clock_timestamp()), sa.Double)
            if postgres
            else (sa.func.julianday(sa.literal_column("'now'")) - 2440587.5) * 86400.0
        )
        insert = pg_dialect.insert if postgres else sqlite_dialect.insert
        r, h = runs.c, history.c

        def compile_(statement: sa.Executable) -> Statement:
            return Statement(statement, dialect)

        self.now = compile_(sa.select(now))
        self.get_run = compile_(sa.select(*runs.c).where(r.id == _bind("id", r.id)))
        self.load_history = compile_(
            sa.select(*history.c).where(h.run_id == _bind("run_id", h.run_id)).order_by(h.position)
        )
        self.create_run = compile_(
            insert(runs)
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
            )
            .on_conflict_do_nothing(index_elements=[r.id])
            # Only what the database decided: the rest is what we sent.
            .returning(r.created_at, r.lease_until)
        )
        fence = sa.exists().where(
            r.id == _bind("fence_id", r.id), r.epoch == _bind("fence_epoch", r.epoch)
        )

        # PostgreSQL types a bare NULL in a SELECT list as text, which bytea and double
        # columns refuse; SQLite needs no casts.
        def value(column: sa.Column[Any]) -> sa.ColumnElement[Any]:
            bound = _bind(column.name, column)
            return sa.cast(bound, column.type) if postgres else bound

        record = insert(history).from_select(
            [c.name for c in history.c], sa.select(*(value(c) for c in history.c)).where(fence)
        )
        updated = ("status", "input", "output", "error", "attempts", "finished_at", "epoch")
        self.record = compile_(
            record.on_conflict_do_update(
                index_elements=[h.run_id, h.position],
                set_={name: record.excluded[name] for name in updated},
                where=h.status == _RETRYING,
            )
        )
        self.record_conflict = compile_(
            sa.select(r.epoch, *history.c)
            .select_from(
                runs.outerjoin(
                    history,
                    sa.and_(h.run_id == r.id, h.position == _bind("position", h.position)),
                )
            )
            .where(r.id == _bind("run_id", r.id))
        )
        fenced_unfinished = (
            r.id == _bind("id", r.id),
            r.epoch == _bind("epoch", r.epoch),
            r.status.notin_(_FINISHED),
        )
        self.finish_run = compile_(
            sa.update(runs)
            .where(*fenced_unfinished)
            .values(
                status=_bind("status", r.status),
                output=_bind("output", r.output),
                error=_bind("error", r.error),
                lease_owner=sa.null(),
                lease_until=sa.null(),
                updated_at=now,
                finished_at=now,
            )
        )
        self.block_run = compile_(
            sa.update(runs)
            .where(*fenced_unfinished)
            .values(
                status=_BLOCKED,
                error=_bind("error", r.error),
                lease_owner=sa.null(),
                lease_until=sa.null(),
                updated_at=now,
            )
        )
        self.claim_run = compile_(
            sa.update(runs)
            .where(
                r.id == _bind("id", r.id),
                r.epoch == _bind("epoch", r.epoch),
                sa.or_(
                    r.status.in_(_CLAIMABLE),
                    sa.and_(
                        r.status == _RUNNING,
                        sa.or_(
                            r.lease_until < now,
                            r.lease_owner == _bind("dead_owner", r.lease_owner),
                        ),
                    ),
                ),
            )
            .values(
                status=_RUNNING,
                epoch=r.epoch + sa.literal_column("1"),
                lease_owner=_bind("owner", r.lease_owner),
                lease_until=now + _bind("lease", r.lease_until),
                recoveries=r.recoveries
                + sa.case(
                    (r.status == _RUNNING, sa.literal_column("1")), else_=sa.literal_column("0")
                ),
                updated_at=now,
            )
            .returning(*runs.c)
        )
        self.recoverable = compile_(
            sa.select(*runs.c).where(
                sa.or_(
                    r.status == _BLOCKED,
                    sa.and_(
                        r.status == _RUNNING,
                        sa.or_(
                            r.lease_until < now,
                            sa.func.substr(
                                r.lease_owner, 1, sa.bindparam("prefix_len", type_=sa.Integer)
                            )
                            == sa.bindparam("prefix", type_=sa.Text),
                        ),
                    ),
                )
            )
        )
        self.renew_leases = compile_(
            sa.update(runs)
            .where(r.lease_owner == _bind("owner", r.lease_owner), r.status == _RUNNING)
            .values(lease_until=now + _bind("lease", r.lease_until))
        )
        if self.record.order != RECORD_ORDER:  # _step_params builds that tuple by hand
            raise AssertionError(f"record parameters changed order: {self.record.order}")
        self.release_run = compile_(
            sa.update(runs)
            .where(
                r.id == _bind("id", r.id), r.epoch == _bind("epoch", r.epoch), r.status == _RUNNING
            )
            .values(lease_owner=sa.null(), lease_until=now - 1.0)
        )
