"""An event stream's next piece, awaited from a thread outside the host's pool.

The dashboard's event streams (a run's stream, `_streams.py`; the live versions,
`_live.py`) are blocking iterators: each piece may take up to 15 s to come. Mounted in
an asynchronous framework, each open page awaits its pieces from a thread, and that
thread must not be one of the pool the framework runs its own sync endpoints in
(anyio's default limiter, 40 threads in Starlette and FastAPI; the event loop's
default executor; Django's): forty open tabs would take them all. Used by `_asgi` and
`_django` under ASGI.
"""

from __future__ import annotations

import asyncio
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
    """*body*'s pieces as an asynchronous iterator, each awaited by `_next_piece`; the
    body is closed at the end, or when the consumer stops (the client left)."""
    pieces = iter(body)
    try:
        while (piece := await _next_piece(pieces)) is not _END:
            yield piece
    finally:
        body.close()
