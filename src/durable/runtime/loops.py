"""Event loops from synchronous code: is one running here, and run a coroutine anyway."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


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
