"""An event stream's pieces under ASGI: awaited natively, or from a thread outside
the host's pool.

The dashboard's event streams (a run's stream, `_streams.py`; the live versions,
`_live.py`) are blocking iterators: each piece may take up to 15 s to come. Mounted in
an asynchronous framework, each open page awaits its pieces from a thread, and that
thread must not be one of the pool the framework runs its own sync endpoints in
(anyio's default limiter, 40 threads in Starlette and FastAPI; the event loop's
default executor; Django's): forty open tabs would take them all. A live stream
(`_live.LiveBody`) is asynchronous itself and awaits its changes on the loop, so an open
page holds no thread at all on asyncio. Used by `_asgi` and `_django` under ASGI.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: What `_next_piece` returns once a stream's pieces are all sent.
_END = object()

#: Where pieces are awaited without anyio: threads of their own, made as needed.
_THREADS = ThreadPoolExecutor(max_workers=4096, thread_name_prefix="durable-stream")


async def _next_piece(pieces: Iterator[bytes]) -> Any:
    """The next of *pieces* (blocking), or `_END`: under anyio in a thread with a
    limiter of its own (anyio reuses its idle threads across limiters), else in one of
    `_THREADS`."""
    try:
        import anyio
        import anyio.to_thread
    except ImportError:
        return await asyncio.get_running_loop().run_in_executor(_THREADS, next, pieces, _END)
    return await anyio.to_thread.run_sync(next, pieces, _END, limiter=anyio.CapacityLimiter(1))


async def each_piece(body: Any) -> AsyncGenerator[bytes, None]:
    """*body*'s pieces as an asynchronous iterator; the body is closed at the end, or
    when the consumer stops (the client left). A body that is asynchronous itself (a
    live stream, `_live.LiveBody`) is iterated as such on an asyncio loop, holding no
    thread; others (and any body under another loop, such as trio) piece by piece
    through `_next_piece`."""
    try:
        if hasattr(body, "__aiter__") and _on_asyncio():
            async with contextlib.aclosing(aiter(body)) as native:
                async for piece in native:
                    yield piece
            return
        pieces = iter(body)
        while (piece := await _next_piece(pieces)) is not _END:
            yield piece
    finally:
        body.close()


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio)
        return False
    return True
