"""`durable.stream(name)`: values a run streams out while it runs (tokens, progress).

Write inside a workflow or a task body; read from anywhere with
``durable.get(run_id).stream(name)`` (see `runtime/streams.py` for what is stored once
and what at least once, and docs/howto/streams.md).
"""

from __future__ import annotations

from typing import Any

from durable.core.streams import check_stream_name
from durable.runtime import streams


class Stream:
    """A named stream of the run whose code writes to it.

    Cheap to make, and not tied to a run until written: a module may hold
    ``TOKENS = durable.stream("tokens")`` and its workflows and tasks write to their own
    run's stream of that name.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        #: the stream's name.
        self.name = check_stream_name(name)

    def write(self, value: Any) -> None:
        """Append *value* (any value durable can store, encoded like a task's result and
        limited to ``max_payload`` like it) to this run's stream; readers see it as soon
        as it is committed.

        In workflow code a write is stored once, whatever replays; in a task body each
        attempt's writes are kept, and a retry appends after them.

        Raises:
            DurableError: called outside a workflow or a task body of a run.
            SerializationError: *value* cannot be stored (PayloadTooLarge: it is larger
                than ``max_payload``); nothing was written.
            InvalidValue: the stream was closed.
        """
        streams.write(self.name, value)

    async def write_async(self, value: Any) -> None:
        """`write` for ``async def`` workflows and tasks: the same write, with its
        database call made off the event loop (on a worker's lane, in its pool), so
        other runs on the loop go on meanwhile. Raises as `write` does."""
        await streams.write_async(self.name, value)

    async def close_async(self) -> None:
        """`close` for async code, its database call off the event loop."""
        await streams.write_async(self.name, None, close=True)

    def close(self) -> None:
        """Close the stream: readers end once they have read its values. Closing it
        again does nothing; writing to it afterwards raises InvalidValue. A stream that
        is never closed ends for its readers when the run ends.

        Raises:
            DurableError: called outside a workflow or a task body of a run.
        """
        streams.write(self.name, None, close=True)

    def __repr__(self) -> str:
        return f"durable.stream({self.name!r})"


def stream(name: str) -> Stream:
    """The stream *name* of the run this code belongs to: ``.write(value)`` appends,
    ``.close()`` ends it. Readers iterate ``handle.stream(name)``.

    Raises:
        InvalidValue: *name* is empty, longer than 200 characters, or holds a NUL or a
            lone surrogate.
    """
    return Stream(name)
