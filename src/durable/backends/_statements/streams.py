"""The SQL of streams (`StreamStore`): a run's values for live readers, a row each in
``durable_streams`` at offsets 0, 1, 2... per (run, stream).

A write is a short transaction: ``lock_stream_run`` reads the run's epoch and status
(locking its row on PostgreSQL, ``FOR UPDATE``: writers of one run take turns, so
offsets follow commit order and a reader never sees offset n + 1 before n);
``stream_head`` reads where the stream ends, whether it is closed, and where the
workflow's write ``:seq`` went if it was made already; then ``append_stream`` inserts
the item at the next offset and returns (and on PostgreSQL notifies) the topic
``stream:<run_id>``. SQLite runs the same statements in a ``BEGIN IMMEDIATE``
transaction, which serializes writers.
"""

from __future__ import annotations

import sqlalchemy as sa

from durable.backends._schema import runs, streams

from .base import Compiler, bind


class StreamStatements(Compiler):
    """The statements of `StreamStore`, compiled for one dialect."""

    def _define_streams(self) -> None:
        r, s = runs.c, streams.c
        run_id = bind("run_id", s.run_id)
        name = bind("stream", s.stream)
        mine = (s.run_id == run_id, s.stream == name)
        last = (
            sa.select(s.stream_offset, s.payload)
            .where(*mine)
            .order_by(s.stream_offset.desc())
            .limit(1)
        )
        head_offset = last.with_only_columns(s.stream_offset).scalar_subquery()
        head_closed = last.with_only_columns(
            sa.case((s.payload.is_(None), 1), else_=0)
        ).scalar_subquery()
        seq_offset = (
            sa.select(s.stream_offset).where(*mine, s.seq == bind("seq", s.seq)).scalar_subquery()
        )
        lock = sa.select(r.epoch, r.status).where(r.id == bind("run_id", r.id))
        #: the run's (epoch, status), its row locked on PostgreSQL. A statement of its
        #: own: a statement that waited for the lock still reads with the snapshot it
        #: began with, so the stream's head must be read by the next one.
        self.lock_stream_run = self.compile(lock.with_for_update() if self.postgres else lock)
        #: the stream's (last offset, closed?, offset of ``:seq``).
        self.stream_head = self.compile(sa.select(head_offset, head_closed, seq_offset))
        topic = sa.literal_column("'stream:'", sa.Text) + s.run_id
        insert = sa.insert(streams).values(
            run_id=run_id,
            stream=name,
            stream_offset=bind("offset", s.stream_offset),
            seq=bind("seq", s.seq),
            payload=bind("payload", s.payload),
            written_at=self._now,
        )
        #: the item at ``:offset``, returning (and notifying) ``stream:<run_id>``.
        self.append_stream = self.compile(self._notifying(insert, topic))
        #: how many ``seq`` are stored, if they are 0..n-1; else 0 (see the protocol).
        counted = sa.func.count(s.seq)
        self.stream_writes = self.compile(
            sa.select(sa.case((sa.func.max(s.seq) + 1 == counted, counted), else_=0)).where(*mine)
        )
        #: up to ``:limit`` items from ``:offset`` on.
        self.read_stream = self.compile(
            sa.select(s.stream_offset, s.payload, s.written_at)
            .where(*mine, s.stream_offset >= bind("offset", s.stream_offset))
            .order_by(s.stream_offset)
            .limit(sa.bindparam("limit", type_=sa.Integer))
        )
        #: each stream of the run: its name, values, and whether it is closed.
        self.list_streams = self.compile(
            sa.select(
                s.stream,
                sa.func.count(s.payload),
                sa.func.max(sa.case((s.payload.is_(None), 1), else_=0)),
            )
            .where(s.run_id == run_id)
            .group_by(s.stream)
            .order_by(s.stream)
        )
        self.purge_streams = self.compile(sa.delete(streams).where(self._in_names(s.run_id, "ids")))
