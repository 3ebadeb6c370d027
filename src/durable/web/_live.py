"""Live updates: one change watch per web-app process, and its Server-Sent Events.

Open dashboard tabs used to poll their page's endpoints every 5 s each, so the
database's reads grew with the tabs. Now a `LiveHub` notices changes once per process,
however many tabs are open, and counts them in a version; ``GET api/v1/live`` sends
that version to each tab whenever it moves, and the tab refreshes then (and answers
come from the shared `_cache`, so 20 tabs cost what one does).

How a change is noticed, while at least one client is connected (no thread otherwise):

- SQLite: the database file and its ``-wal`` file are looked at (``stat``) every
  `STEP` seconds, and the WAL index's header read (the first bytes of ``-shm``); a
  commit changes the WAL's size or time and that header. No statement is run.
- PostgreSQL: the backend's LISTEN connection (`backend.watch`), which hears runs
  created, claimed back, woken, finished, cancelled... by any process at once.
- Any other backend (memory): its watch.

On every backend the version also moves every `SAFETY` seconds without news: a
recorded step sends no notification on PostgreSQL, and time moves on its own (the
overview's last hour slides, a queued run's age grows). That is the old polling
interval, now paid once per process instead of once per tab.

A POST or DELETE through the app moves the version too (`bump`), so the page that
asked for a change sees it at once. Versions coalesce: at most one per `MIN_GAP`
second.

The stream sends ``data: {"version": N}`` at once and at each change, a comment every
`KEEP_ALIVE` seconds of quiet (a client that left is noticed when it fails), and ends
after `LONGEST` seconds (an EventSource reconnects). At most `MAX_CLIENTS` are open per
app; one more is a 503 with ``Retry-After`` (the page then polls).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

from durable.backends._hub import ANY

from ._http import HTTPError, Request, Response
from ._routes import Params, Route, route
from ._security import Principal

log = logging.getLogger("durable.web")

#: Seconds between two looks for a change.
STEP = 0.25
#: The version moves at least this often (seconds) where a change may go unheard.
SAFETY = 5.0
#: Seconds between two versions at least: a busy database (or a lease renewed while a
#: task runs) moves it at this pace, and the open pages refresh at most this often.
MIN_GAP = 0.75
#: Seconds of quiet after which a comment line is sent.
KEEP_ALIVE = 15.0
#: Seconds one stream lasts at most (the client reconnects to go on).
LONGEST = 300.0
#: Streams open at once per app.
MAX_CLIENTS = 32
#: Milliseconds an EventSource waits before it reconnects.
RETRY_MS = 2000


class LiveHub:
    """The version of what the database holds, as one web-app process has seen it.

    Args:
        backend: gives the engine's backend, watched while clients are connected
            (asked when the watch starts).
    """

    def __init__(self, backend: Callable[[], Any]) -> None:
        self._backend = backend
        self._condition = threading.Condition()
        self._version = 0
        self._clients = 0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._subscribers: list[Callable[[int], None]] = []
        #: Streams awaiting a change on an event loop (`wait_async`): each wakes its own.
        self._wakers: set[Callable[[], None]] = set()

    @property
    def version(self) -> int:
        """The current version: it moves at every change noticed."""
        return self._version

    @property
    def closed(self) -> bool:
        """Whether the app closed: streams end."""
        return self._closed

    @property
    def watching(self) -> bool:
        """Whether changes are being watched for (at least one client is connected):
        only then may answers be shared (`_cache`)."""
        return self._clients > 0 and self._thread is not None

    def subscribe(self, callback: Callable[[int], None]) -> None:
        """Call *callback* with the new version at each change (under no lock)."""
        self._subscribers.append(callback)

    def bump(self) -> int:
        """Mark a change: the version moves and every stream is told."""
        with self._condition:
            self._version += 1
            version = self._version
            self._condition.notify_all()
            wakers = list(self._wakers)
        for wake in wakers:
            wake()
        for callback in self._subscribers:
            callback(version)
        return version

    def wait(self, seen: int, timeout: float) -> int:
        """The version once it is not *seen*, or after *timeout* seconds."""
        with self._condition:
            self._condition.wait_for(lambda: self._version != seen or self._closed, timeout)
            return self._version

    async def wait_async(self, seen: int, timeout: float) -> int:
        """`wait` for a coroutine on an asyncio loop, which holds no thread meanwhile:
        `bump` (from the watch's thread or any other) wakes it through the loop."""
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                loop.call_soon_threadsafe(woken.set)

        with self._condition:
            if self._version != seen or self._closed:
                return self._version
            self._wakers.add(wake)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), timeout)
        finally:
            with self._condition:
                self._wakers.discard(wake)
        return self._version

    def connect(self) -> None:
        """A client arrived: start watching if nobody was."""
        with self._condition:
            self._clients += 1
            if self._thread is not None or self._closed:
                return
        # Before answers are shared again: any kept while nobody watched may be stale.
        self.bump()
        self._start()

    def _start(self) -> None:
        with self._condition:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="durable-live", daemon=True)
                self._thread.start()

    def disconnect(self) -> None:
        """A client left; the watch stops with the last one."""
        with self._condition:
            self._clients -= 1
            last = self._clients == 0
            self._condition.notify_all()
        if last:
            self.bump()  # the answers kept are dropped: nobody watches for changes now

    def close(self) -> None:
        """Stop watching and end every stream (the app is closing)."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()
            wakers = list(self._wakers)
        for wake in wakers:
            wake()

    def _run(self) -> None:
        try:
            backend = self._backend()
            files = _sqlite_files(backend)
            watch = None if files else backend.watch([ANY])
        except Exception:  # not watchable: the SAFETY tick alone
            log.warning("watching the database for changes failed", exc_info=True)
            files, watch = (), None
        stamp = _stamp(files)
        last = time.monotonic()
        while True:
            with self._condition:
                if self._clients <= 0 or self._closed:
                    self._thread = None
                    return
            try:
                if watch is not None:
                    heard = watch.wait(STEP) or time.monotonic() - last >= SAFETY
                elif files:  # looked at first: a commit during MIN_GAP shows at once
                    fresh = _stamp(files)
                    heard = fresh != stamp or time.monotonic() - last >= SAFETY
                    stamp = fresh
                    if not heard:
                        self._condition_wait(STEP)
                else:
                    self._condition_wait(STEP)
                    heard = time.monotonic() - last >= SAFETY
            except Exception:  # a lost connection: a change may have been missed
                log.warning("watching the database for changes failed", exc_info=True)
                heard = True
                self._condition_wait(STEP)
            if heard:
                last = time.monotonic()
                self.bump()
                self._condition_wait(MIN_GAP)

    def _condition_wait(self, seconds: float) -> None:
        """Sleep *seconds*, or less when the app closes or the last client left."""
        with self._condition:
            self._condition.wait_for(lambda: self._closed or self._clients <= 0, seconds)


def _sqlite_files(backend: Any) -> tuple[Path, ...]:
    """The files a SQLite backend's commits change (the database, its WAL and WAL
    index), or () for any other backend (or an in-memory SQLite database, watched as
    others are)."""
    if getattr(backend, "dialect_name", None) != "sqlite":
        return ()
    database = getattr(getattr(backend, "url", None), "database", None)
    if not database or database == ":memory:" or database.startswith("file:"):
        return ()
    path = Path(database).absolute()
    return path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


#: The WAL index's header, at the start of the ``-shm`` file (SQLite's walformat.html):
#: its change counter, last valid frame and salts move at every commit.
_WAL_INDEX_HEADER = 48


def _stamp(files: tuple[Path, ...]) -> tuple[Any, ...]:
    """What a commit changes about *files*: each one's inode, size and time, and for
    the WAL index (``-shm``) its header. The time alone may miss a commit: the kernel
    may stamp a file from a clock that ticks every few ms, and once the WAL restarts
    after a checkpoint, commits rewrite it in place without changing its size."""
    stamps: list[Any] = []
    for path in files:
        try:
            if path.name.endswith("-shm"):
                with open(path, "rb") as index:
                    stamps.append(index.read(_WAL_INDEX_HEADER))
                continue
            st = os.stat(path)
        except OSError:
            stamps.append(None)
        else:
            stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(stamps)


class Live:
    """The ``api/v1/live`` endpoint, bound to a hub."""

    def __init__(self, hub: LiveHub) -> None:
        self.hub = hub
        self._slots = threading.BoundedSemaphore(MAX_CLIENTS)

    def routes(self) -> list[Route]:
        """The endpoint; its answer is a stream, never shared."""
        return [route("GET", "/api/v1/live", self.events, shared=False)]

    def events(self, request: Request, principal: Principal, params: Params) -> Response:
        """The version as Server-Sent Events: now, then at each change."""
        if not self._slots.acquire(blocking=False):
            raise HTTPError(
                503,
                f"{MAX_CLIENTS} pages follow live updates already; this one polls instead.",
                headers=[("Retry-After", "5")],
            )
        headers = [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("X-Accel-Buffering", "no"),  # a proxy in front must not hold events back
        ]
        return Response(200, headers, chunks=LiveBody(self.hub, self._slots.release))


class LiveBody:
    """One client's stream: connected to the hub from its making until the server
    closes it (at the end, or when the client left)."""

    def __init__(self, hub: LiveHub, release: Callable[[], Any]) -> None:
        self._hub = hub
        self._release = release
        self._open = True
        hub.connect()

    def __iter__(self) -> Iterator[bytes]:
        """The pieces, each waited for in the server's thread (WSGI)."""
        yield f"retry: {RETRY_MS}\n\n".encode()
        ends = time.monotonic() + LONGEST
        seen = self._hub.version
        yield _event(seen)
        while self._open and time.monotonic() < ends:
            version = self._hub.wait(seen, _quiet(ends))
            if self._hub.closed:
                return
            yield b": keep-alive\n\n" if version == seen else _event(version)
            seen = version

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The same pieces, awaited on the running asyncio loop without a thread of
        their own (`_pieces` takes these under ASGI)."""
        yield f"retry: {RETRY_MS}\n\n".encode()
        ends = time.monotonic() + LONGEST
        seen = self._hub.version
        yield _event(seen)
        while self._open and time.monotonic() < ends:
            version = await self._hub.wait_async(seen, _quiet(ends))
            if self._hub.closed:
                return
            yield b": keep-alive\n\n" if version == seen else _event(version)
            seen = version

    def close(self) -> None:
        if self._open:
            self._open = False
            self._hub.disconnect()
            self._release()


def _quiet(ends: float) -> float:
    """Seconds to wait for a change before a keep-alive, within the stream's end."""
    return min(KEEP_ALIVE, max(ends - time.monotonic(), 0))


def _event(version: int) -> bytes:
    return f'data: {{"version":{version}}}\n\n'.encode()
