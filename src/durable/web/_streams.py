"""A run's streams over HTTP: their list as JSON, and one stream as Server-Sent Events.

``GET /api/v1/runs/{id}/streams/{name}`` answers ``text/event-stream``: a ``retry:``
line, then one event per value (``id:`` its offset, so a browser's EventSource that
reconnects sends ``Last-Event-ID`` and resumes after it; ``data:`` the JSON of
``{"offset", "value", "written_at"}``, the value shown as the dashboard shows any,
never unpickled), a comment every `KEEP_ALIVE` seconds of quiet (a client that left is
noticed when it fails), and an ``end`` event once the stream is closed or the run has
ended and its values are sent. Each response lasts at most `LONGEST` seconds, then
ends without ``end`` (an EventSource reconnects where it was), and at most
`MAX_STREAMS` are open at once per app (one more is a 503 with ``Retry-After``): a
stream holds a thread of `durable ui`'s server, whose connections are capped. Under
ASGI on asyncio a stream awaits its values on the loop and holds no thread while it
waits (`EventBody.__aiter__`); the cap applies there too.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from durable.ops import _streams

from ._http import HTTPError, Request, Response
from ._routes import Params, Route, route
from ._security import Principal

if TYPE_CHECKING:
    from durable.ops import Operations

log = logging.getLogger("durable.web")

#: Seconds of quiet after which a comment line is sent.
KEEP_ALIVE = 15.0
#: Seconds one event-stream response lasts at most (a client reconnects to go on).
LONGEST = 300.0
#: Event-stream responses open at once per app.
MAX_STREAMS = 16
#: Milliseconds an EventSource waits before it reconnects.
RETRY_MS = 1000


class Streams:
    """The stream endpoints, bound to one `Operations`."""

    def __init__(self, ops: Operations) -> None:
        self.ops = ops
        self._slots = threading.BoundedSemaphore(MAX_STREAMS)

    def routes(self) -> list[Route]:
        """The endpoints, to come before the bare ``runs/{id}``."""
        return [
            route("GET", "/api/v1/runs/{id}/streams/{name}", self.events, shared=False),
            route("GET", "/api/v1/runs/{id}/streams", self.list),
        ]

    def list(self, request: Request, principal: Principal, params: Params) -> Response:
        """The run's streams: ``{"items": [{"name", "length", "closed"}]}``."""
        return Response.json({"items": _streams.streams(self.ops.engine, params["id"])})

    def events(self, request: Request, principal: Principal, params: Params) -> Response:
        """Stream *name* of the run as Server-Sent Events, from ``?offset=`` (or after
        the ``Last-Event-ID`` a reconnecting client sends)."""
        offset = _offset(request)
        items = _streams.items(
            self.ops.engine, params["id"], params["name"], offset, idle=KEEP_ALIVE
        )
        if not self._slots.acquire(blocking=False):
            raise HTTPError(
                503,
                f"{MAX_STREAMS} streams are being followed already; try again in a moment.",
                headers=[("Retry-After", "2")],
            )
        headers = [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("X-Accel-Buffering", "no"),  # a proxy in front must not hold events back
        ]
        return Response(200, headers, chunks=EventBody(items, self._slots.release))


class EventBody:
    """The body of an event-stream response: iterated by the server (in a thread, or
    on an asyncio loop under ASGI, where waiting for the next value holds no thread),
    closed by it at the end (or when the client left), which frees its slot once."""

    def __init__(self, items: _streams.Items, release: Any) -> None:
        self._items = items
        self._release = release
        self._released = False
        self._iterating: Any = None  # the items' iterator in a thread, to close

    def __iter__(self) -> Iterator[bytes]:
        yield f"retry: {RETRY_MS}\n\n".encode()
        ends = time.monotonic() + LONGEST
        self._iterating = iter(self._items)
        try:
            for item in self._iterating:
                piece = _piece(item)
                if piece is None:
                    break
                yield piece
                if time.monotonic() > ends:
                    return  # the client reconnects with Last-Event-ID
        except Exception:  # headers are sent: end the stream, and say why in the log
            log.exception("following a stream failed")
            yield _FAILED
            return
        yield _END

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The same pieces, awaited on the running asyncio loop (`_pieces`)."""
        yield f"retry: {RETRY_MS}\n\n".encode()
        ends = time.monotonic() + LONGEST
        try:
            async with contextlib.aclosing(aiter(self._items)) as items:
                async for item in items:
                    piece = _piece(item)
                    if piece is None:
                        break
                    yield piece
                    if time.monotonic() > ends:
                        return  # the client reconnects with Last-Event-ID
        except Exception:  # headers are sent: end the stream, and say why in the log
            log.exception("following a stream failed")
            yield _FAILED
            return
        yield _END

    def close(self) -> None:
        if not self._released:
            self._released = True
            self._release()
        close = getattr(self._iterating, "close", None)
        if close is not None:
            with contextlib.suppress(ValueError):  # running elsewhere: ends by itself
                close()


_END = b'event: end\ndata: {"ended":true}\n\n'
_FAILED = b'event: error\ndata: {"detail":"reading the stream failed; see the log"}\n\n'


def _piece(item: dict[str, Any] | None) -> bytes | None:
    """The event of *item*, a keep-alive comment for None; None for the close marker."""
    if item is None:
        return b": keep-alive\n\n"
    if item.get("closed"):
        return None
    data = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    return f"id: {item['offset']}\ndata: {data}\n\n".encode("utf-8", "replace")


def _offset(request: Request) -> int:
    """``?offset=`` (0 when absent), or one past ``Last-Event-ID`` (a reconnect)."""
    given = request.arg("offset")
    last = request.header("Last-Event-ID")
    if given is None and last is not None:
        if last.isascii() and last.isdigit():
            return int(last) + 1
        raise HTTPError(400, f"Last-Event-ID must be an offset (a whole number), not {last!r}.")
    if given is None:
        return 0
    if not (given.isascii() and given.isdigit()) or int(given) > 2**31 - 1:
        raise HTTPError(
            400, f"offset must be a whole number from 0 (the first value), not {given!r}."
        )
    return int(given)
