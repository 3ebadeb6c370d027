"""The SQL of histories: loading a run's steps, and recording one (or, on PostgreSQL,
many at once).

Recording a step is one ``INSERT ... SELECT ... WHERE EXISTS (run at my epoch)
ON CONFLICT DO UPDATE ... WHERE unfinished``: the fence and the write in one go, so a
finished position is never changed (first writer wins). On SQLite it runs without
``RETURNING`` (see `HistoryStatements.record_quiet`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa

from durable.backends._schema import history, runs
from durable.core.records import CANCEL_REQUEST, StepStatus

from .base import FINISHED, UNFINISHED_STEP, Compiler, Statement, bind

#: What SQLite says when the step pair aborts at a finished position (see
#: `HistoryStatements._define_record_pair`): the pair was refused, nothing written.
ABORTED = "NOT NULL constraint failed: durable_history.status"

#: What recording over an unfinished (running, retrying or waiting) step replaces: everything
#: but its key, first start and heartbeat details (kept for the next attempt), so a
#: cancellation marker can take a wait's place; its properties snapshot only by another.
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
    "heartbeat_at",
    "state",
)

#: The record statement's parameters, in the order `_rows.step_params` builds them.
RECORD_ORDER = (*(c.name for c in history.c), "fence_id", "fence_epoch", "cancel_id")

#: The columns of a pair that are NULL in nearly every pair: in a task's result (no
#: error, wake-up, heartbeat or snapshot), and in the next task's start (no outcome).
PAIR_NULLS = (
    {"error", "wake_at", "heartbeat_at", "details", "state"},
    {"output", "error", "finished_at", "wake_at", "heartbeat_at", "details", "state"},
)


def _picks(order: tuple[str, ...]) -> Callable[[Sequence[Any]], Any]:
    """Where each parameter of a pair statement (in *order*) comes from in the two
    steps' record parameters (in RECORD_ORDER), concatenated: one itemgetter."""
    width = len(RECORD_ORDER)
    at = {name: i for i, name in enumerate(RECORD_ORDER)}
    at |= {
        f"{name}_{row}": row * width + i for i, name in enumerate(RECORD_ORDER) for row in (0, 1)
    }
    return operator.itemgetter(*(at[name] for name in order))


class HistoryStatements(Compiler):
    """The statements of `HistoryStore`, compiled for one dialect (`_define_history`)."""

    def _define_history(self) -> None:
        r, h = runs.c, history.c
        self.load_history = self.compile(
            sa.select(*history.c).where(h.run_id == bind("run_id", h.run_id)).order_by(h.position)
        )
        at_my_epoch = (r.id == bind("fence_id", r.id), r.epoch == bind("fence_epoch", r.epoch))

        step = [self._value(c.name, c) for c in history.c]
        # The row comes back only if written, carrying the run's cancellation flag, so
        # the owner learns of a cancel request without an extra query.
        cancel_flag = (
            sa.select(r.cancel_requested).where(r.id == bind("cancel_id", r.id)).scalar_subquery()
        )
        self.record = self.compile(self._recording(step, *at_my_epoch).returning(cancel_flag))
        #: SQLite: the same write, fenced also on "no cancel request", returning nothing
        #: (the backend reads the row count): RETURNING makes SQLite collect the rows
        #: first, ~15 us of the hottest statement. A refused write reads back why.
        self.record_quiet: Statement | None = None
        #: SQLite: a run's last step, recorded just before its outcome in one transaction
        #: (`SQLRuns._finish_recording`), fenced also on the run being unfinished: it is
        #: written exactly when the outcome will be. Written before the run moves, it is
        #: counted with the run's other calls (`_tallies_schema`), not by a trigger of its
        #: own at every outcome.
        self.record_last: Statement | None = None
        if self.postgres:
            self._define_record_pair(at_my_epoch, cancel_flag)
        else:
            no_cancel = r.cancel_requested == sa.literal_column("0")
            self.record_quiet = self.compile(self._recording(step, *at_my_epoch, no_cancel))
            if self.record_quiet.order != RECORD_ORDER[: len(self.record_quiet.order)]:
                raise AssertionError(f"record_quiet takes {self.record_quiet.order}")
            unfinished = self._none_of(r.status, FINISHED)
            self.record_last = self.compile(self._recording(step, *at_my_epoch, unfinished))
            if self.record_last.order != self.record_quiet.order:
                raise AssertionError(f"record_last takes {self.record_last.order}")
            self._define_record_pair((*at_my_epoch, no_cancel), None)
        self.record_conflict = self.compile(
            sa.select(r.epoch, r.cancel_requested, *history.c)
            .select_from(
                runs.outerjoin(
                    history,
                    sa.and_(h.run_id == r.id, h.position == bind("position", h.position)),
                )
            )
            .where(r.id == bind("run_id", r.id))
        )
        if self.postgres:
            self._define_record_many()
        self._define_heartbeat()
        #: where each parameter of the hand-built record tuple (RECORD_ORDER) goes.
        self.record_permutation: tuple[int, ...] | None = tuple(
            RECORD_ORDER.index(name) for name in self.record.order
        )
        if self.record_permutation == tuple(range(len(RECORD_ORDER))):
            self.record_permutation = None

    def _recording(
        self, step: list[Any], *fence: sa.ColumnElement[bool], aborting: bool = False
    ) -> Any:
        """Insert a step (*step*: the history columns' values) if its run passes *fence*,
        or replace the unfinished (running, retrying or waiting) step at its position.

        *aborting* (SQLite's pair): a finished step is not skipped but aborts the whole
        statement, which SQLite then undoes (`ABORTED`): its status would be set to NULL,
        which the column refuses."""
        h = history.c
        insert = self._insert(history).from_select(
            [c.name for c in history.c], sa.select(*step).where(sa.exists().where(*fence))
        )
        replaced: dict[str, Any] = {name: insert.excluded[name] for name in UPDATED_ON_RECORD}
        # A snapshot comes with the step that ended the code that changed it; a later
        # write at the position without one (its result after its start) keeps it.
        replaced["state"] = sa.func.coalesce(insert.excluded.state, h.state)
        unfinished = self._one_of(h.status, UNFINISHED_STEP)
        if aborting:
            replaced["status"] = sa.case((unfinished, insert.excluded.status))
        return insert.on_conflict_do_update(
            index_elements=[h.run_id, h.position],
            set_=replaced,
            where=None if aborting else unfinished,
        )

    def _value(self, name: str, column: sa.Column[Any]) -> sa.ColumnElement[Any]:
        """The parameter *name* for *column* in a SELECT list. PostgreSQL types a bare
        NULL there as text, which bytea and double columns refuse; SQLite needs no casts."""
        bound = bind(name, column)
        return sa.cast(bound, column.type) if self.postgres else bound

    def _define_record_pair(
        self, fence: tuple[sa.ColumnElement[bool], ...], flag: sa.ColumnElement[Any] | None
    ) -> None:
        """Two steps in one statement: a task's result and the next task's start (see
        `HistoryStore.record_steps`), fenced like `record_quiet` on SQLite and like
        `record` on PostgreSQL (each written row returns the cancellation *flag*). Its
        parameters are picked from the two steps' RECORD_ORDER parameters joined
        (`record_pair_picks`). Scalar parameters, not the arrays of `record_many`: psycopg
        dumps arrays in Python, ~70 us a pair.

        All or nothing: if either position is already finished (an earlier attempt of
        this very write whose acknowledgement was lost), neither is written, and the
        backend records each alone, as `record` would. PostgreSQL checks both positions
        first. On SQLite the pair aborts at a finished position instead (`ABORTED`), and
        SQLite undoes the whole statement: a check there would read the table the
        statement writes, and SQLite copies the rows of an INSERT whose SELECT does that
        into a temporary table first (39,000 instructions of a 460,000-instruction step,
        with the check's probes)."""
        if self.postgres:
            done = history.alias("done")
            fence = (
                *fence,
                ~sa.exists().where(
                    done.c.run_id == bind("run_id_0", history.c.run_id),
                    self._one_of(
                        done.c.position,
                        [bind(f"position_{i}", history.c.position) for i in (0, 1)],
                    ),
                    self._none_of(done.c.status, UNFINISHED_STEP),
                ),
            )
        statement = self._pair(fence, flag, (set(), set()))
        self.record_pair = self.compile(statement)
        #: the record_pair's parameters, from the two steps' record parameters joined.
        self.record_pair_picks = _picks(self.record_pair.order)
        # The pair as it nearly always is (a task's result, the next task's start): its
        # columns that are then NULL written as NULL, not bound. CPython's sqlite3 looks
        # an adapter up for every None (and bytes) it binds: 19,000 instructions a step
        # on SQLite, 3.7 %, for these 12 parameters of 39.
        self.record_pair_lean = self.compile(self._pair(fence, flag, PAIR_NULLS))
        self.record_pair_lean_picks = _picks(self.record_pair_lean.order)
        #: the two steps' record parameters that must all be None for record_pair_lean.
        self.record_pair_nulls = _picks(
            tuple(f"{name}_{row}" for row, names in enumerate(PAIR_NULLS) for name in sorted(names))
        )

    def _pair(
        self,
        fence: tuple[sa.ColumnElement[bool], ...],
        flag: sa.ColumnElement[Any] | None,
        nulls: tuple[set[str], set[str]],
    ) -> Any:
        """The pair's statement, with the columns named in *nulls* (per row) NULL."""
        rows = [
            sa.select(
                *(
                    (
                        self._null(c) if c.name in nulls[i] else self._value(f"{c.name}_{i}", c)
                    ).label(c.name)
                    for c in history.c
                )
            )
            for i in (0, 1)
        ]
        v = sa.union_all(*rows).subquery("v")
        statement = self._recording(
            [v.c[c.name] for c in history.c], *fence, aborting=not self.postgres
        )
        return statement if flag is None else statement.returning(flag)

    def _null(self, column: sa.Column[Any]) -> sa.ColumnElement[Any]:
        """NULL in a SELECT list for *column* (typed on PostgreSQL, as `_value`)."""
        return sa.cast(sa.null(), column.type) if self.postgres else sa.null()

    def _define_heartbeat(self) -> None:
        """A task attempt's heartbeat: its time (the database clock) and its details
        (kept when None), only while the attempt is RUNNING under the run's current
        epoch and the run has no cancel request; the row count says whether it was.
        `heartbeat_check` reads back why not: the run's epoch and cancel request, the
        step's status and attempt."""
        r, h = runs.c, history.c
        running: sa.ColumnElement[str] = sa.literal_column(f"'{StepStatus.RUNNING.value}'")
        # A pause request lets the attempt finish: only a cancel request stops it.
        no_cancel = r.cancel_requested.op("&")(sa.literal_column(str(CANCEL_REQUEST))) == 0
        self.heartbeat = self.compile(
            sa.update(history)
            .where(
                h.run_id == bind("run_id", h.run_id),
                h.position == bind("position", h.position),
                h.status == running,
                h.attempts == bind("attempt", h.attempts),
                sa.exists().where(r.id == h.run_id, r.epoch == bind("epoch", r.epoch), no_cancel),
            )
            .values(
                heartbeat_at=self._now,
                details=sa.func.coalesce(bind("details", h.details), h.details),
                # now + NULL is NULL: without a gap the hang deadline stays as it is.
                wake_at=sa.func.coalesce(self._now + bind("gap", h.wake_at), h.wake_at),
            )
        )
        self.heartbeat_check = self.compile(
            sa.select(r.epoch, r.cancel_requested, h.status, h.attempts)
            .select_from(
                runs.outerjoin(
                    history,
                    sa.and_(h.run_id == r.id, h.position == bind("position", h.position)),
                )
            )
            .where(r.id == bind("run_id", r.id))
        )

    def _define_record_many(self) -> None:
        """PostgreSQL: many steps in one statement, their columns as arrays. Group
        commit (see _group.py) uses it instead of one statement per step, which saves
        both the round trips and the client's work."""
        r, h = runs.c, history.c
        columns = list(history.c)
        #: the history columns, in the order record_many takes them (as "<name>s").
        self.history_columns = [c.name for c in columns]
        v = self._unnest(columns, self.history_columns)
        step = [v.c[c.name] for c in columns]
        written = (
            self._recording(step, r.id == v.c.run_id, r.epoch == v.c.epoch)
            .returning(h.run_id, h.position)
            .cte("written")
        )
        # Each written row comes back with its run's cancellation flag; rows fenced off,
        # or already finished, do not come back.
        self.record_many = self.compile(
            sa.select(written.c.run_id, written.c.position, r.cancel_requested).join_from(
                written, runs, r.id == written.c.run_id
            )
        )
