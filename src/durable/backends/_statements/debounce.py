"""The SQL of debounce: dispatches with the same key coalesce into one pending run."""

from __future__ import annotations

import sqlalchemy as sa

from durable.backends._protocol.waits import TIMERS
from durable.backends._schema import runs

from .base import WAITING, Compiler, bind


class DebounceStatements(Compiler):
    """``debounce`` and ``undebounce`` (called from `QueueStatements._define_queues`)."""

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
