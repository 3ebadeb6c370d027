"""The SQL backend's streams: a row per item (see `_statements/streams.py`).

A mixin of `SQLBackend`. A write is one short transaction: the run's row (locked on
PostgreSQL) fences it and serializes the run's writers, then the item is inserted
at the next offset and its topic notified.
"""

from __future__ import annotations

from collections.abc import Sequence

from durable.backends._connections import Session
from durable.core.records import RunStatus
from durable.core.streams import StreamInfo, StreamItem, place
from durable.errors import LeaseLost

from ._base import SQLBase


class SQLStreams(SQLBase):
    """`StreamStore` for `SQLBackend` (see there for the contracts)."""

    def write_stream(
        self, run_id: str, epoch: int, name: str, payload: bytes | None, *, seq: int | None
    ) -> int:
        """See `StreamStore.write_stream`."""
        values = {"run_id": run_id, "stream": name, "seq": seq}
        announce: list[str] = []

        def body(session: Session, _retried: bool) -> int:
            with self._db.transaction(session):
                row = self._execute(session, self._sql.lock_stream_run, values).fetchone()
                if row is None or row[0] != epoch or row[1] != RunStatus.RUNNING:
                    raise LeaseLost(
                        f"Run {run_id!r} is no longer running at epoch {epoch} (another "
                        "owner took it over, or it ended), so this process may not write "
                        f"to its stream {name!r}.",
                        run_id=run_id,
                        epoch=epoch,
                    )
                last, closed, found = self._execute(
                    session, self._sql.stream_head, values
                ).fetchone()
                offset, write = place(
                    run_id, name, payload, last=last, closed=bool(closed), found=found
                )
                if write:
                    item = {**values, "offset": offset, "payload": payload}
                    rows = self._execute(session, self._sql.append_stream, item).fetchall()
                    announce[:] = [row[0] for row in rows]
            return offset

        offset = self._db.run(f"Writing to stream {name!r} of run {run_id!r}", body)
        for topic in announce:
            self._hub.notify(topic)
        return offset

    def stream_writes(self, run_id: str, name: str) -> int:
        """See `StreamStore.stream_writes`."""
        values = {"run_id": run_id, "stream": name}
        return self._db.run(
            f"Reading stream {name!r} of run {run_id!r}",
            lambda session, _: int(
                self._execute(session, self._sql.stream_writes, values).fetchone()[0]
            ),
        )

    def read_stream(
        self, run_id: str, name: str, offset: int, *, limit: int
    ) -> Sequence[StreamItem]:
        """See `StreamStore.read_stream`."""
        values = {"run_id": run_id, "stream": name, "offset": offset, "limit": limit}
        rows = self._db.run(
            f"Reading stream {name!r} of run {run_id!r}",
            lambda session, _: self._execute(session, self._sql.read_stream, values).fetchall(),
        )
        return [
            StreamItem(int(at), None if data is None else bytes(data), float(written))
            for at, data, written in rows
        ]

    def streams(self, run_id: str) -> Sequence[StreamInfo]:
        """See `StreamStore.streams`."""
        rows = self._db.run(
            f"Reading the streams of run {run_id!r}",
            lambda session, _: self._execute(
                session, self._sql.list_streams, {"run_id": run_id}
            ).fetchall(),
        )
        return [StreamInfo(name, int(count), bool(closed)) for name, count, closed in rows]
