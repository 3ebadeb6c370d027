"""`durable.web.asgi_app` driven by hand-made ASGI messages: bodies (cut at the limit,
in chunks, abandoned), raw paths under a mount, lifespan and WebSockets."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import durable
from durable.ops import Operations
from durable.web import _live, asgi_app, make_app
from durable.web._http import MAX_BODY
from tests.web.mount_checks import greet

TOKEN = "asgi-token"
MOUNT = "/tools/durable"


def scope(method: str, path: str, *, raw: bytes | None = None, **headers: str) -> dict[str, Any]:
    """An HTTP scope as Starlette's mount passes it: the full path, the mount as root_path."""
    every = {"host": "127.0.0.1:8000", "authorization": f"Bearer {TOKEN}", **headers}
    return {
        "type": "http",
        "method": method,
        "scheme": "http",
        "http_version": "1.1",
        "root_path": MOUNT,
        "path": MOUNT + path,
        "raw_path": raw if raw is not None else (MOUNT + path).encode(),
        "query_string": b"",
        "headers": [(k.replace("_", "-").encode(), v.encode()) for k, v in every.items()],
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
    }


def until(leave: asyncio.Event) -> Any:
    """An ASGI receive: the request (no body), then, once *leave* is set, the client
    leaving."""
    inbox = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        await leave.wait()
        return {"type": "http.disconnect"}

    return receive


def call(app: Any, scope_: dict[str, Any], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run *app* on *scope_*, feeding it *messages*; return what it sent."""
    sent: list[dict[str, Any]] = []
    inbox = list(messages)

    async def receive() -> dict[str, Any]:
        if not inbox:  # nothing more: an app that asks waits until the test times out
            await asyncio.sleep(3600)
        return inbox.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope_, receive, send))
    return sent


def answer(sent: list[dict[str, Any]]) -> tuple[int, dict[str, str], bytes]:
    start, body = sent
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers, body["body"]


def test_a_body_in_chunks_is_read_whole(memory_engine: durable.Engine) -> None:
    """A POST body sent in several messages (no Content-Length) starts the run, and
    the Location carries the mount."""
    app = asgi_app(make_app(memory_engine, token=TOKEN))
    data = json.dumps({"workflow": greet.name, "args": ["x"], "id": "chunked"}).encode()
    parts = [data[:10], data[10:20], data[20:]]
    messages = [
        {"type": "http.request", "body": part, "more_body": i < 2} for i, part in enumerate(parts)
    ]
    sent = call(app, scope("POST", "/api/v1/runs", content_type="application/json"), messages)
    status, headers, _ = answer(sent)
    assert status == 201 and headers["location"] == f"{MOUNT}/api/v1/runs/chunked"
    assert memory_engine.reread("chunked").status == "queued"


def test_a_body_over_the_limit_is_cut_and_refused(memory_engine: durable.Engine) -> None:
    """Past MAX_BODY the adapter stops reading (the rest is never asked for) and the app
    answers 413; nothing is stored."""
    app = asgi_app(make_app(memory_engine, token=TOKEN))
    chunk = b" " * (MAX_BODY // 2 + 1)
    messages = [{"type": "http.request", "body": chunk, "more_body": True} for _ in range(2)]
    sent = call(app, scope("POST", "/api/v1/runs", content_type="application/json"), messages)
    status, _, body = answer(sent)
    assert status == 413 and b"over" in body
    assert Operations(memory_engine).list_runs()["items"] == []


def test_an_id_holding_a_slash_stays_one_segment_under_the_mount(
    memory_engine: durable.Engine,
) -> None:
    """raw_path reaches the app, so runs/a%2Fb is the run "a/b", not a deeper path."""
    durable.dispatch(greet, "y", id="a/b")
    app = asgi_app(make_app(memory_engine, token=TOKEN))
    raw = f"{MOUNT}/api/v1/runs/a%2Fb".encode()
    sent = call(app, scope("GET", "/api/v1/runs/a/b", raw=raw), [{"type": "http.request"}])
    status, _, body = answer(sent)
    assert status == 200 and json.loads(body)["id"] == "a/b"


def test_a_client_that_leaves_gets_no_answer(memory_engine: durable.Engine) -> None:
    """A disconnect while the body is read ends the request quietly."""
    app = asgi_app(make_app(memory_engine, token=TOKEN))
    messages = [
        {"type": "http.request", "body": b"{", "more_body": True},
        {"type": "http.disconnect"},
    ]
    assert call(app, scope("POST", "/api/v1/runs", content_type="application/json"), messages) == []


def test_lifespan_is_answered_and_websockets_closed(tmp_path: Any) -> None:
    """Startup and shutdown complete (shutdown closes the engine opened from the URL);
    a WebSocket is closed at once."""
    app = asgi_app(make_app(f"sqlite:///{tmp_path / 'd.db'}", token=TOKEN))
    close, closed = app.wsgi.close, []
    app.wsgi.close = lambda: closed.append(close())  # type: ignore[method-assign]
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent = call(app, {"type": "lifespan"}, messages)
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert closed == [None]
    socket = call(app, {"type": "websocket", "path": "/"}, [{"type": "websocket.connect"}])
    assert socket == [{"type": "websocket.close", "code": 1003}]


def test_cookie_headers_sent_apart_are_one_cookie_header(memory_engine: durable.Engine) -> None:
    """HTTP/2 may split cookies over several headers: the session's is still found."""
    app = asgi_app(make_app(memory_engine, token=TOKEN))
    login = scope("GET", "/", authorization="")
    login["query_string"] = f"token={TOKEN}".encode()
    status, headers, _ = answer(call(app, login, [{"type": "http.request"}]))
    assert status == 303 and headers["location"] == f"{MOUNT}/"
    session = headers["set-cookie"].split(";")[0].encode()
    browser = scope("GET", "/api/v1/session", authorization="")
    browser["headers"] += [(b"cookie", b"theme=dark"), (b"cookie", session)]
    status, _, body = answer(call(app, browser, [{"type": "http.request"}]))
    assert status == 200 and "csrf" in json.loads(body)


@pytest.mark.parametrize("pool", ["anyio", "asyncio"])
def test_open_event_streams_leave_the_host_apps_threads_free(
    memory_engine: durable.Engine, monkeypatch: pytest.MonkeyPatch, pool: str
) -> None:
    """An open event stream waits for its next piece in a thread, but never in the pool
    the host framework runs its own sync endpoints in: anyio's default limiter (40
    threads in Starlette and FastAPI), or without anyio the event loop's default
    executor. Here that pool has 2 threads and 4 live pages are open: a sync call of
    the host app still gets a thread at once."""
    import anyio.to_thread

    monkeypatch.setattr(_live, "KEEP_ALIVE", 5.0)  # without the fix: a thread every 5 s
    if pool == "asyncio":  # a bare ASGI server: no anyio to import
        monkeypatch.setitem(sys.modules, "anyio", None)
        monkeypatch.setitem(sys.modules, "anyio.to_thread", None)
    dashboard = make_app(memory_engine, token=TOKEN)
    app = asgi_app(dashboard)
    pages = 4

    async def main() -> float:
        if pool == "anyio":
            anyio.to_thread.current_default_thread_limiter().total_tokens = 2
            host_call = anyio.to_thread.run_sync(lambda: None)
        else:
            asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2))
            host_call = asyncio.to_thread(lambda: None)
        leave = asyncio.Event()
        sent: list[list[dict[str, Any]]] = [[] for _ in range(pages)]

        def page(i: int) -> Any:
            async def send(message: dict[str, Any]) -> None:
                sent[i].append(message)

            return app(scope("GET", "/api/v1/live"), until(leave), send)

        streams = [asyncio.ensure_future(page(i)) for i in range(pages)]
        while not all(len(s) >= 3 for s in sent):  # each: the start, retry, a version
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # each page now waits for its next piece
        started = time.monotonic()
        try:
            await asyncio.wait_for(host_call, timeout=3)
            return time.monotonic() - started
        finally:
            leave.set()
            dashboard.live.bump()  # each page's wait ends and it sees the client gone
            await asyncio.gather(*streams)

    waited = asyncio.run(main())
    assert waited < 1.0
    dashboard.close()
