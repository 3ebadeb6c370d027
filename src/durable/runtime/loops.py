"""Event loops from synchronous code: is one running here, and run a coroutine anyway."""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class IoPool:
    """A few threads that make the storage calls of the coroutines on one loop.

    A write waits in a thread (and is committed with the others waiting, in one
    group) while the loop runs other runs. Outcomes go back to the loop in batches:
    one wake-up of the loop for all the calls that ended since the last, not one per
    call (`run_in_executor` costs about twice as much per call on a busy loop).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, threads: int) -> None:
        self._loop = loop
        self._calls: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._ended: deque[tuple[asyncio.Future[Any], bool, Any]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._threads = [
            threading.Thread(target=self._work, name=f"durable-io-{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def run(self, fn: Callable[..., T], args: tuple[Any, ...]) -> asyncio.Future[T]:
        """``fn(*args)`` in a thread, in the caller's context; call on the loop."""
        future: asyncio.Future[T] = self._loop.create_future()
        self._calls.put((future, fn, args, contextvars.copy_context()))
        return future

    def shutdown(self) -> None:
        """Let the threads end once the calls queued so far are made."""
        for _ in self._threads:
            self._calls.put(None)

    def _work(self) -> None:
        while (call := self._calls.get()) is not None:
            future, fn, args, context = call
            try:
                ended = (future, True, context.run(fn, *args))
            except BaseException as error:  # handed to the awaiting coroutine
                ended = (future, False, error)
            with self._lock:
                self._ended.append(ended)
                if self._scheduled:
                    continue
                self._scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._deliver)
            except RuntimeError:  # the loop is closed: nobody awaits these any more
                return

    def _deliver(self) -> None:
        with self._lock:
            ended, self._ended = self._ended, deque()
            self._scheduled = False
        for future, ok, value in ended:
            if future.cancelled():
                continue
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


#: Where the storage calls of async runs go: a worker's lane sets its `IoPool`. Unset
#: (application code awaiting `execute_async`), they are made on the loop, as plain
#: calls.
io_pool: contextvars.ContextVar[IoPool | None] = contextvars.ContextVar(
    "durable_io_pool", default=None
)


async def off_loop(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``: in the lane's pool if this run has one (the loop goes on meanwhile),
    else here. Its context goes along (the run executing, for logs and faults)."""
    pool = io_pool.get()
    if pool is None:
        return fn(*args)
    return await pool.run(fn, args)


def in_event_loop() -> bool:
    """Whether an event loop runs in this thread (sleeping here would stall it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_coroutine(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run *coroutine* to completion from synchronous code, even under a running loop."""
    if not in_event_loop():
        return asyncio.run(coroutine)
    # A loop already runs in this thread (sync code called from async code): give the
    # coroutine a loop of its own in a helper thread, carrying our context along.
    result: Future[T] = Future()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            result.set_result(context.run(asyncio.run, coroutine))
        except BaseException as error:
            result.set_exception(error)

    thread = threading.Thread(target=target, name="durable-async")
    thread.start()
    thread.join()
    return result.result()
