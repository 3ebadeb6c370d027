"""The streams role of the storage seam: values a run writes for live readers.

Items are stored per (run, stream name) at offsets 0, 1, 2... in commit order, so a
reader that asks for the items from an offset sees each value once and in order. A
write is fenced like a step: only the run's owner at its epoch, while the run is
RUNNING, may write. A write notifies ``stream:<run_id>`` (`core.streams.stream_topic`;
on PostgreSQL in its transaction), so readers `watch` it. Purging a run deletes its
streams; forks and continue-as-new successors start with none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from durable.core.streams import StreamInfo, StreamItem


class StreamStore(Protocol):
    """Appending to a run's streams, closing them, and reading them back."""

    def write_stream(
        self, run_id: str, epoch: int, name: str, payload: bytes | None, *, seq: int | None
    ) -> int:
        """Append *payload* to stream *name* of run *run_id* at the next offset, or close
        the stream (*payload* None: a close marker at the next offset).

        *seq*: the workflow's number for this write (0, 1, 2... per stream, the same on
        every replay), or None for a task body's write. If a write of *seq* is stored
        already (a replay, or a retry of a write whose acknowledgement was lost), nothing
        is written and its offset is returned. Closing a closed stream writes nothing.
        Writes to one stream are serialized: offsets follow commit order.

        Returns:
            The offset of the item written (or found, or of the existing close marker).

        Raises:
            LeaseLost: the run is not RUNNING at *epoch*; nothing was written.
            InvalidValue: a value written after the stream's close marker.
        """
        ...

    def stream_writes(self, run_id: str, name: str) -> int:
        """A number n such that the workflow's writes 0..n-1 (``seq``) to stream *name*
        are all stored: how many are, if they are 0..n-1 without a gap; else 0 (a replay
        then asks `write_stream` for each write, which finds the stored ones)."""
        ...

    def read_stream(
        self, run_id: str, name: str, offset: int, *, limit: int
    ) -> Sequence[StreamItem]:
        """Up to *limit* items of stream *name* of run *run_id* from *offset* on, in
        offset order (the close marker last, if it is among them)."""
        ...

    def streams(self, run_id: str) -> Sequence[StreamInfo]:
        """The run's streams by name: how many values each holds and whether it is
        closed. A run with none (or unknown) has an empty list."""
        ...
