"""Streams at run time: writing from a workflow or a task body, and following a stream.

Writing (`write`, for `durable.stream(name).write(value)` and ``.close()``):

* in workflow code, each write to a stream is numbered by the code itself (0, 1, 2...
  per stream, counted in the `RunContext`: the same on every replay), and stored once
  under that number (`StreamStore.write_stream`'s ``seq``). The first write to a stream
  in an execution reads how many of its numbered writes are stored already; a replay
  skips those without a database call (still encoding each value, so a value that
  could not be stored raises again where it did). A write takes no position in the
  history: adding one to running code is no divergence. The task result still
  deferred is written first: a value the workflow derives from a task's result is then
  never stored unless that result is (a crash in between would run the task again and
  might give another value for the same write);
* in a task body, the value is appended at once, fenced by the attempt's epoch. Each
  attempt's values stay: an attempt that failed (or whose worker died) keeps what it
  wrote, and the next attempt appends after it. Task writes are at least once.

Reading (`follow`): items from an offset, each as soon as it is committed, ending at
the close marker, or once the run has finished and everything it wrote is read. A
watch on ``stream:<run_id>`` and ``run:<run_id>`` is made before the first read, so a
value written between a read and the wait that follows is never missed (PostgreSQL
hears other processes through LISTEN; SQLite polls every 50 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator, Iterator
from typing import Any

from durable.core.records import Run
from durable.core.streams import PAGE, StreamItem, stream_topic
from durable.errors import DurableError, InvalidValue, LeaseLost, RunNotFound, StorageError

from .activity import TaskScope
from .context import RunContext, current
from .host import Host
from .loops import off_loop


def write(name: str, value: Any, *, close: bool = False) -> None:
    """Write *value* to stream *name* of the run this code belongs to, or close it.

    Raises:
        DurableError: called outside a workflow or a task body of a run.
        SerializationError, PayloadTooLarge: *value* cannot be stored; nothing written.
        InvalidValue: the stream is closed.
    """
    store = prepare(name, value, close)
    if store is not None:
        store()


async def write_async(name: str, value: Any, *, close: bool = False) -> None:
    """`write` for async code: the storage call runs off the event loop (in the lane's
    pool on a worker), after the checks, the numbering and the encoding made here, in
    the order the code calls it."""
    context = current.get()
    store = prepare(name, value, close)
    if store is None:
        return
    if not isinstance(context, RunContext):
        await off_loop(store)
        return
    # Workflow writes commit one at a time, in the order the code numbered them (the
    # lock is FIFO), even when gathered: offsets follow the code, and no later write
    # is stored while an earlier one is not (see `StreamStore.stream_writes`).
    order = _ORDER.get(context)
    if order is None:
        order = _ORDER[context] = asyncio.Lock()
    async with order:
        await off_loop(store)


#: per run executing here, the order of its workflow code's async writes.
_ORDER: weakref.WeakKeyDictionary[RunContext, asyncio.Lock] = weakref.WeakKeyDictionary()


def prepare(name: str, value: Any, close: bool) -> Callable[[], None] | None:
    """Everything a write does but storing: where it is called, its number (workflow
    code), its encoding. Returns the storage call to make, or None (a replayed write)."""
    context = current.get()
    if isinstance(context, RunContext):
        return _from_workflow(context, name, value, close)
    if isinstance(context, TaskScope) and context.activity is not None:
        host, activity, run_id = context.host, context.activity, context.run_id
        assert host is not None  # an attempt's scope always names its engine
        payload = None if close else _dump(host, value, run_id, name)
        return lambda: _store(host, run_id, activity.epoch, name, payload)
    verb = "close()" if close else "write()"
    raise DurableError(
        f"Stream {name!r}: {verb} works only inside a workflow or a task body that a "
        "run executes (its values belong to that run). To read a run's stream, use "
        "durable.get(run_id).stream(name)."
    )


def _store(host: Host, run_id: str, epoch: int, name: str, payload: bytes | None) -> None:
    host.backend.write_stream(run_id, epoch, name, payload, seq=None)


def _from_workflow(
    context: RunContext, name: str, value: Any, close: bool
) -> Callable[[], None] | None:
    """A workflow's write: numbered, stored once (see the module docstring)."""
    context.check()
    counter = context.streams.get(name)
    if counter is None:
        dry = context.frontier is not None  # a dry replay executes nothing
        stored = 1 << 62 if dry else context.host.backend.stream_writes(context.run_id, name)
        counter = context.streams[name] = [0, stored]
    seq = counter[0]
    counter[0] += 1
    payload = None if close else _dump(context.host, value, context.run_id, name)
    if seq < counter[1]:
        return None  # written by an earlier execution of this code

    def store() -> None:
        context.flush()
        try:
            context.host.backend.write_stream(context.run_id, context.epoch, name, payload, seq=seq)
        except (LeaseLost, StorageError) as error:
            raise context.poison(error) from None

    return store


def _dump(host: Host, value: Any, run_id: str, name: str) -> bytes:
    return host.dump(value, lambda: f"a value written to stream {name!r} of run {run_id!r}")


def follow(
    host: Host, run_id: str, name: str, offset: int = 0, *, idle: float = 15.0
) -> Iterator[StreamItem | None]:
    """The items of stream *name* of run *run_id* from *offset* on, each as soon as it
    is committed; the close marker last, if the stream is closed. Ends there, or once
    the run has finished and its items are read. Yields None after *idle* seconds with
    nothing new (a reader may stop there: a web request sends a keep-alive).

    Raises:
        RunNotFound: no run has that id.
    """
    watch = host.backend.watch([stream_topic(run_id), f"run:{run_id}"])
    cursor = _Cursor(run_id, offset, idle)
    while True:
        for item in cursor.take(*_read(host, run_id, name, cursor.offset)):
            yield item
            if item is not None and item.closed:
                return
        if cursor.pause is None:
            return
        if cursor.pause > 0:
            watch.wait(cursor.pause)


async def follow_async(
    host: Host, run_id: str, name: str, offset: int = 0, *, idle: float = 15.0
) -> AsyncGenerator[StreamItem | None, None]:
    """`follow` for a coroutine: each read runs in a thread, and the waits between them
    are awaited on the loop (`Watch.wait_async`), so a follower waiting for the next
    item holds no thread."""
    watch = host.backend.watch([stream_topic(run_id), f"run:{run_id}"])
    cursor = _Cursor(run_id, offset, idle)
    while True:
        read = await asyncio.to_thread(_read, host, run_id, name, cursor.offset)
        for item in cursor.take(*read):
            yield item
            if item is not None and item.closed:
                return
        if cursor.pause is None:
            return
        if cursor.pause > 0:
            await watch.wait_async(cursor.pause)


def _read(host: Host, run_id: str, name: str, offset: int) -> tuple[Run | None, list[StreamItem]]:
    """The run, then a page of its stream from *offset*. The status first: a finished
    run writes nothing more (writes are fenced on RUNNING), so the page read after it is
    all there is."""
    run = host.backend.get_run(run_id)
    if run is None:
        return None, []
    return run, list(host.backend.read_stream(run_id, name, offset, limit=PAGE))


class _Cursor:
    """Where a follower is, and what it does after each read (`follow`, `follow_async`)."""

    def __init__(self, run_id: str, offset: int, idle: float) -> None:
        self.run_id, self.offset, self.idle = run_id, offset, idle
        self.quiet_since = time.monotonic()
        #: after the items of the last read: None to end, 0 to read again at once, or
        #: the seconds to wait for news first.
        self.pause: float | None = 0.0

    def take(self, run: Run | None, items: list[StreamItem]) -> list[StreamItem | None]:
        """The items to hand out after reading *run* and a page of *items*; sets `pause`.

        Raises:
            RunNotFound: no run has that id.
        """
        if run is None:
            raise RunNotFound(f"No run has the id {self.run_id!r}.", run_id=self.run_id)
        out: list[StreamItem | None] = list(items)
        if items:
            self.offset = items[-1].offset + 1
        if len(items) == PAGE:
            self.pause = 0.0
        elif run.status.finished:
            self.pause = None
        elif items:
            self.quiet_since, self.pause = time.monotonic(), 0.0
        else:
            left = self.quiet_since + self.idle - time.monotonic()
            if left <= 0:
                self.quiet_since, self.pause = time.monotonic(), 0.0
                out.append(None)
            else:
                self.pause = left
        return out


class StreamReader:
    """A run's stream, read live: iterate it (``for`` or ``async for``) for its values,
    each as soon as it is committed, until the stream is closed or the run has ended.

    `offset` is the offset of the next value: a reader that stops may start again there
    (``handle.stream(name, offset=reader.offset)``).
    """

    def __init__(self, host: Host, run_id: str, name: str, offset: int) -> None:
        if type(offset) is not int or offset < 0:
            raise InvalidValue(f"A stream offset is an int from 0, not {offset!r}.")
        self._host, self.run_id, self.name = host, run_id, name
        #: the offset of the next value to read.
        self.offset = offset

    def __iter__(self) -> Iterator[Any]:
        return self._values(idle=15.0)

    def _values(self, *, idle: float) -> Generator[Any, None, None]:
        for item in follow(self._host, self.run_id, self.name, self.offset, idle=idle):
            if item is None:
                continue
            if item.payload is None:
                return
            value = self._host.load(item.payload, self.run_id, None)
            self.offset = item.offset + 1
            yield value

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._async_values()

    async def _async_values(self) -> AsyncIterator[Any]:
        """The same values, awaited on the loop: each read runs in a thread, and a
        reader waiting for the next value holds none (`follow_async`)."""
        items = follow_async(self._host, self.run_id, self.name, self.offset)
        async with contextlib.aclosing(items):
            async for item in items:
                if item is None:
                    continue
                if item.payload is None:
                    return
                value = self._host.load(item.payload, self.run_id, None)
                self.offset = item.offset + 1
                yield value
