"""The dashboard over ASGI (Starlette, FastAPI, any ASGI server): a thin native adapter.

`WebApp` is a WSGI callable whose handlers block on the database, so each request runs
it in a worker thread: the body is read first (at most `MAX_BODY` and one byte: more
makes the app answer 413), the environ built from the scope, the app called in a
thread, and its one body chunk sent back. Only an event stream (a run's stream,
`_streams.py`; the live versions, `_live.py`) comes in pieces: each is awaited from a
thread and sent as it comes, and the body is closed when the client leaves. Those
threads are not the pool the framework serves its own sync endpoints from (anyio's
default limiter, 40 threads in Starlette and FastAPI): a page waits up to 15 s for its
next piece, and 40 open tabs would otherwise stall the host application. None of a
general WSGI bridge's machinery (a queue per response, a thread waiting on the event
loop for each chunk) is needed. benchmarks/mounts.py measured it against a2wsgi and Starlette's
(deprecated) WSGIMiddleware; docs/howto/web-apps.md has the numbers and the choice.

Under Starlette's ``mount`` the prefix arrives as ``root_path`` and becomes
SCRIPT_NAME, so every link, redirect and cookie path the app makes stays under it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ._app import WebApp
from ._http import MAX_BODY
from ._pieces import each_piece

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class AsgiApp:
    """A `WebApp` served over ASGI; mount it, or run it alone under an ASGI server.

    The lifespan protocol is answered (its shutdown closes an engine the app opened
    from a URL); a WebSocket is refused.

    Attributes:
        wsgi: the WSGI application behind it.
        token: its login token (``wsgi.token``).
    """

    def __init__(self, app: WebApp) -> None:
        self.wsgi = app
        self.token = app.token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind == "websocket":
            await receive()  # websocket.connect: refused (the server answers 403)
            await send({"type": "websocket.close", "code": 1003})
            return
        if kind != "http":
            raise ValueError(f"durable's dashboard speaks HTTP, not ASGI {kind!r} connections.")
        body = await _read_body(receive)
        if body is None:
            return  # the client went away
        environ = wsgi_environ(scope, body)
        status, headers, payload = await _in_thread(self._call, environ)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if isinstance(payload, bytes):
            await send({"type": "http.response.body", "body": payload})
            return
        # An event stream (_streams.py): each piece as the app makes it, until the
        # client leaves (seen at the next piece: a keep-alive comes every 15 s at most).
        left = asyncio.ensure_future(_disconnect(receive))
        try:
            async with contextlib.aclosing(each_piece(payload)) as pieces:
                async for piece in pieces:
                    if left.done():
                        return
                    message = {"type": "http.response.body", "body": piece, "more_body": True}
                    await send(message)
            await send({"type": "http.response.body", "body": b""})
        finally:
            left.cancel()

    def _call(self, environ: dict[str, Any]) -> tuple[int, list[tuple[bytes, bytes]], Any]:
        started: list[Any] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Any:
            started[:] = [status, headers]

        chunks = self.wsgi(environ, start_response)
        status, headers = started
        encoded = [
            (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers
        ]
        if not isinstance(chunks, list):
            return int(status[:3]), encoded, chunks  # streamed by __call__, then closed
        return int(status[:3]), encoded, b"".join(chunks)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await _in_thread(lambda _: self.wsgi.close(), None)
                await send({"type": "lifespan.shutdown.complete"})
                return


def wsgi_environ(scope: Scope, body: bytes) -> dict[str, Any]:
    """The WSGI environ (PEP 3333) of an ASGI HTTP *scope* and its whole *body*.

    ``root_path`` is SCRIPT_NAME; ``path`` less that prefix (Starlette keeps the full
    path in ``path`` since 0.33, older servers and frameworks gave the rest) is
    PATH_INFO; ``raw_path`` is passed as ``REQUEST_URI`` so that an id holding "%2F"
    stays one segment (`durable.web._http.Request.path`).
    """
    root = scope.get("root_path", "")
    path = scope["path"]
    if root and (path == root or path.startswith(root.rstrip("/") + "/")):
        path = path[len(root) :]
    server = scope.get("server") or ("localhost", 80)
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": root.encode().decode("latin-1"),
        "PATH_INFO": path.encode().decode("latin-1"),
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1] if server[1] is not None else 80),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    client = scope.get("client")
    if client:
        environ["REMOTE_ADDR"] = str(client[0])
    raw = scope.get("raw_path")
    if raw:
        environ["REQUEST_URI"] = raw.decode("latin-1")
    for name, value in scope.get("headers", ()):
        key = name.decode("latin-1").upper().replace("-", "_")
        if key == "CONTENT_LENGTH":
            continue  # the length of the body read, above
        if key != "CONTENT_TYPE":
            key = "HTTP_" + key
        text = value.decode("latin-1")
        if key in environ:  # repeated headers are one, comma-joined (cookies with ";")
            text = environ[key] + ("; " if key == "HTTP_COOKIE" else ",") + text
        environ[key] = text
    return environ


async def _read_body(receive: Receive) -> bytes | None:
    """The request body, cut after `MAX_BODY` + 1 bytes; None if the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_BODY or not message.get("more_body", False):
            return b"".join(chunks)


async def _disconnect(receive: Receive) -> None:
    """Return once the client has gone (``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _in_thread(function: Callable[..., Any], *arguments: Any) -> Any:
    """``function(*arguments)`` in a worker thread: anyio's (shared with the framework's
    own sync endpoints) when installed, as with Starlette and FastAPI; else asyncio's
    default executor."""
    try:
        import anyio.to_thread
    except ImportError:  # a bare ASGI server on asyncio
        return await asyncio.to_thread(function, *arguments)
    return await anyio.to_thread.run_sync(function, *arguments)


def asgi_app(dashboard: WebApp) -> AsgiApp:
    """*dashboard* (from `make_app`) as an ASGI application, to mount in Starlette or
    FastAPI (``app.mount("/durable", asgi_app(dashboard))``) or serve alone.

    Raises:
        TypeError: *dashboard* is not a `WebApp` (make one with `make_app`).
    """
    if not isinstance(dashboard, WebApp):
        raise TypeError(
            f"asgi_app() takes the WebApp that make_app() returns, not {type(dashboard).__name__}: "
            "asgi_app(make_app(engine, token=...))."
        )
    return AsgiApp(dashboard)
