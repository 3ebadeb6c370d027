"""Bounded fan-out for parallel calls, which cannot deadlock when nested.

Parallel branches run on a shared pool of threads. A branch may itself fan out (a
child workflow calling `execute` with several calls), so a fixed pool could fill up
with threads that all wait for queued work. Instead, a branch that finds no free
thread runs in the caller's thread: work always makes progress, and the number of
threads stays bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class Fanout:
    """Runs callables on up to *max_threads* threads, or inline when none is free."""

    def __init__(self, max_threads: int) -> None:
        self._free = threading.BoundedSemaphore(max_threads)
        self._max = max_threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Start *fn*; return a future of its outcome."""
        if not self._free.acquire(blocking=False):
            future: Future[Any] = Future()
            try:
                future.set_result(fn())
            except BaseException as error:
                future.set_exception(error)
            return future
        try:
            return self._executor().submit(self._release_after, fn)
        except BaseException:
            self._free.release()
            raise

    def _release_after(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        finally:
            self._free.release()

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._max, thread_name_prefix="durable-branch")
            return self._pool

    def shutdown(self) -> None:
        """Stop the threads once their current work is done."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
