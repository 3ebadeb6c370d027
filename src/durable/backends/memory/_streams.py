"""The memory backend's streams: a list of items per (run, stream), behind the lock.

A mixin of `MemoryBackend` (see `MemoryBase`); the reference for what
`sql/_streams.py` does with a table.
"""

from __future__ import annotations

from collections.abc import Sequence

from durable.core.records import RunStatus
from durable.core.streams import StreamInfo, StreamItem, place, stream_topic
from durable.errors import LeaseLost

from ._base import MemoryBase


class MemoryStreams(MemoryBase):
    """`StreamStore` for `MemoryBackend` (see there for the contracts)."""

    def write_stream(
        self, run_id: str, epoch: int, name: str, payload: bytes | None, *, seq: int | None
    ) -> int:
        """See `StreamStore.write_stream`."""
        with self._lock:
            self._check_open()
            run = self._runs.get(run_id)
            if run is None or run.epoch != epoch or run.status is not RunStatus.RUNNING:
                raise LeaseLost(
                    f"Run {run_id!r} is no longer running at epoch {epoch} (another owner "
                    f"took it over, or it ended), so this process may not write to its "
                    f"stream {name!r}.",
                    run_id=run_id,
                    epoch=epoch,
                )
            items = self._streams.setdefault((run_id, name), [])
            found = None if seq is None else self._stream_seqs.get((run_id, name, seq))
            last = items[-1] if items else None
            offset, write = place(
                run_id,
                name,
                payload,
                last=None if last is None else last.offset,
                closed=last is not None and last.closed,
                found=found,
            )
            if write:
                items.append(StreamItem(offset, payload, self._clock.now()))
                if seq is not None:
                    self._stream_seqs[(run_id, name, seq)] = offset
        if write:
            self._notify([stream_topic(run_id)])
        return offset

    def stream_writes(self, run_id: str, name: str) -> int:
        """See `StreamStore.stream_writes`."""
        with self._lock:
            self._check_open()
            seqs = [s for (r, n, s) in self._stream_seqs if r == run_id and n == name]
            return len(seqs) if seqs and max(seqs) + 1 == len(seqs) else 0

    def read_stream(
        self, run_id: str, name: str, offset: int, *, limit: int
    ) -> Sequence[StreamItem]:
        """See `StreamStore.read_stream`."""
        with self._lock:
            self._check_open()
            items = self._streams.get((run_id, name), [])
            return items[max(offset, 0) : max(offset, 0) + limit]

    def streams(self, run_id: str) -> Sequence[StreamInfo]:
        """See `StreamStore.streams`."""
        with self._lock:
            self._check_open()
            return [
                StreamInfo(name, sum(not item.closed for item in items), items[-1].closed)
                for (owner, name), items in sorted(self._streams.items())
                if owner == run_id and items
            ]

    def _drop_streams(self, run_id: str) -> None:
        """Forget *run_id*'s streams (the lock held): it is purged."""
        for key in [key for key in self._streams if key[0] == run_id]:
            del self._streams[key]
        for seq in [seq for seq in self._stream_seqs if seq[0] == run_id]:
            del self._stream_seqs[seq]
