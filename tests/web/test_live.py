"""Live updates (`durable.web._live`, `_cache`): a change made by another engine moves
the version the stream sends, on SQLite and PostgreSQL; while a client follows it, GET
answers are shared per version (20 identical GETs after a change read once, none is
served after the next change, ETags still give 304s, the memory is bounded); and
authentication still comes first."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable.runtime.defaults import swap
from durable.web import WebApp, _cache, _live, asgi_app, make_app, serve
from tests.conftest import BACKENDS
from tests.web.client import Client
from tests.web.test_asgi import TOKEN as ASGI_TOKEN
from tests.web.test_asgi import scope
from tests.web.test_streams import Events, _environ

TOKEN = "live-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@durable.workflow(name="tests.web.live.double")
def double(n: int) -> int:
    return 2 * n


class Following:
    """A client of ``api/v1/live`` called in-process: the hub watches until `close`."""

    def __init__(self, app: WebApp) -> None:
        self.chunks: Any = app(_environ("/api/v1/live", TOKEN), lambda *_: None)
        self.pieces = iter(self.chunks)
        assert next(self.pieces) == f"retry: {_live.RETRY_MS}\n\n".encode()

    def next(self) -> bytes:
        return next(self.pieces)

    def close(self) -> None:
        self.chunks.close()


@pytest.fixture
def app(engine: durable.Engine) -> Iterator[WebApp]:
    dashboard = make_app(engine, token=TOKEN)
    yield dashboard
    dashboard.close()


@pytest.fixture
def following(app: WebApp) -> Iterator[Following]:
    client = Following(app)
    client.next()  # the first version
    _settle(app)
    yield client
    client.close()


def _settle(app: WebApp) -> None:
    """Wait until the versions of starting to watch are past (PostgreSQL's LISTEN
    connection announces itself), so that only the test moves the version."""
    seen, quiet = app.live.version, time.monotonic()
    while time.monotonic() - quiet < _live.MIN_GAP + 2 * _live.STEP:
        time.sleep(0.05)
        if app.live.version != seen:
            seen, quiet = app.live.version, time.monotonic()


def _count_calls(app: WebApp, name: str, pause: float = 0.0) -> list[int]:
    """Count (and slow down by *pause*) the app's calls of `Operations.<name>`."""
    calls: list[int] = []
    real = getattr(app.ops, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        time.sleep(pause)
        return real(*args, **kwargs)

    setattr(app.ops, name, counted)
    return calls


@pytest.mark.parametrize(
    "url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_a_run_finished_by_another_engine_moves_the_version(url: str) -> None:
    """Through `serve`: the stream sends a version at once, and a new one within 2 s of a
    run completed by another Engine on the same database (another process would do
    the same: nothing is shared in memory)."""
    engine = durable.Engine(url, lease=5.0)
    other = durable.Engine(url, lease=5.0)
    app = make_app(engine, token=TOKEN)
    server = serve(app, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    events = Events(server.server_port, "/api/v1/live", Authorization=AUTH["Authorization"])
    try:
        assert events.response.getheader("Content-Type") == "text/event-stream; charset=utf-8"
        assert events.next() == {"retry": str(_live.RETRY_MS)}
        first = int(events.next()["data"].split(":")[1].rstrip("}"))
        received: list[int] = []

        def read() -> None:
            with contextlib.suppress(Exception):  # the connection closes at the end
                while True:
                    received.append(int(events.next()["data"].split(":")[1].rstrip("}")))

        threading.Thread(target=read, daemon=True).start()
        api = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)

        def status() -> str:
            api.request("GET", "/api/v1/runs/doubled", headers=AUTH)
            return str(json.loads(api.getresponse().read())["status"])

        previous = swap(other)
        try:
            durable.dispatch(double, 21, id="doubled")
            assert status() == "queued"  # kept for the version of now
            with durable.Worker(other, poll=0.02):
                assert durable.get("doubled").result(timeout=20) == 42
        finally:
            swap(previous)
        done = time.monotonic()
        while status() != "completed":
            assert time.monotonic() - done < 2.0, "the finished run was not seen in 2 s"
            time.sleep(0.05)
        while not received or received[-1] == first:
            assert time.monotonic() - done < 2.0, "no new version was sent in 2 s"
            time.sleep(0.05)
        assert received[-1] > first
    finally:
        events.close()
        app.close()  # ends the stream its server thread still waits in
        server.shutdown()
        server.server_close()
        other.close()
        engine.close()


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_twenty_identical_gets_after_a_change_read_once(app: WebApp, following: Following) -> None:
    """20 tabs asking for the same page at the same moment cost one read of it; a
    second page (another query) is its own read. (The version may move on its own
    meanwhile, and then a second read is right: the hub's safety tick, or on PostgreSQL
    a notification from a test beside this one, on the channel every schema of the
    database shares. Such an attempt proves nothing and is made again.)"""
    calls = _count_calls(app, "list_runs", pause=0.2)
    replies: list[Any] = []

    def get() -> None:
        replies.append(Client(app, token=TOKEN).get("/api/v1/runs", query="limit=5"))

    for _ in range(5):
        calls.clear()
        replies.clear()
        version = app.live.bump()
        threads = [threading.Thread(target=get) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if app.live.version == version:
            break
    else:
        pytest.fail("the version moved during each of five attempts")
    assert len(calls) == 1
    assert {reply.status for reply in replies} == {200}
    assert len({reply.body for reply in replies}) == 1
    Client(app, token=TOKEN).get("/api/v1/runs", query="limit=6")
    assert len(calls) == 2


@pytest.mark.parametrize("url", ["memory", "sqlite"], indirect=True)
def test_a_kept_answer_is_never_served_after_a_change(
    app: WebApp, following: Following, engine: durable.Engine
) -> None:
    """A GET after the version moved reads again and sees the change; a GET through
    the app that changes something (POST) moves it by itself."""
    api = Client(app, token=TOKEN)
    before = api.get("/api/v1/runs").json()["items"]
    calls = _count_calls(app, "list_runs")
    assert api.get("/api/v1/runs").json()["items"] == before and calls == []  # kept
    durable.dispatch(double, 1, id="new-one")
    app.live.bump()
    after = api.get("/api/v1/runs").json()["items"]
    assert [run["id"] for run in after] == ["new-one"] and len(calls) == 1
    assert api.post("/api/v1/runs/new-one/cancel", {}).status == 200
    assert api.get("/api/v1/runs").json()["items"][0]["status"] == "cancelled"


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_the_version_moves_by_itself_when_the_database_changes(
    app: WebApp, following: Following, engine: durable.Engine
) -> None:
    """Without any bump by hand, a run dispatched by another engine is seen (SQLite's
    file watch) and the next GET reads it."""
    api = Client(app, token=TOKEN)
    assert api.get("/api/v1/runs").json()["items"] == []
    other = durable.Engine(engine.backend.url.render_as_string(), lease=5.0)  # type: ignore[attr-defined]
    previous = swap(other)
    try:
        durable.dispatch(double, 2, id="seen")
    finally:
        swap(previous)
        other.close()
    following.next()  # the version moved
    assert [run["id"] for run in api.get("/api/v1/runs").json()["items"]] == ["seen"]


@pytest.mark.parametrize("url", ["memory"], indirect=True)
def test_etags_still_give_304_and_change_with_the_run(
    app: WebApp, following: Following, engine: durable.Engine
) -> None:
    """A kept run page answers 304 to the ETag it was served with, and 200 with a new
    one after a change."""
    durable.dispatch(double, 3, id="tagged")
    app.live.bump()
    api = Client(app, token=TOKEN)
    first = api.get("/api/v1/runs/tagged")
    tag = first.header("ETag")
    assert first.status == 200 and tag
    again = api.get("/api/v1/runs/tagged", headers={"If-None-Match": tag})
    assert again.status == 304 and again.header("ETag") == tag
    assert api.post("/api/v1/runs/tagged/cancel", {}).status == 200
    changed = api.get("/api/v1/runs/tagged", headers={"If-None-Match": tag})
    assert changed.status == 200 and changed.json()["status"] == "cancelled"


@pytest.mark.parametrize("url", ["memory"], indirect=True)
def test_authentication_comes_before_a_kept_answer(app: WebApp, following: Following) -> None:
    """A kept answer is not given without credentials, nor with a wrong token; the
    session endpoint is never shared."""
    assert Client(app, token=TOKEN).get("/api/v1/runs").status == 200  # kept now
    for client in (Client(app), Client(app, token="wrong")):
        assert client.get("/api/v1/runs").status == 401
        assert client.get("/api/v1/live").status == 401
    one, two = Client(app), Client(app)
    one.login(TOKEN)
    two.login(TOKEN)
    csrf = {c.get("/api/v1/session").json()["csrf"] for c in (one, two)}
    assert len(csrf) == 2


@pytest.mark.parametrize("url", ["memory"], indirect=True)
def test_nothing_is_shared_without_a_live_client(app: WebApp) -> None:
    """With no stream open there is no watch, so every GET reads; the watch ends with
    the last client."""
    calls = _count_calls(app, "list_runs")
    api = Client(app, token=TOKEN)
    api.get("/api/v1/runs")
    api.get("/api/v1/runs")
    assert len(calls) == 2
    client = Following(app)
    client.next()
    api.get("/api/v1/runs")
    api.get("/api/v1/runs")
    assert len(calls) == 3 and app.live.watching
    client.close()
    deadline = time.monotonic() + 5
    while app.live.watching:
        assert time.monotonic() < deadline, "the watch outlived its last client"
        time.sleep(0.02)
    assert len(app._cache) == 0, "what was kept is dropped when the watch ends"
    api.get("/api/v1/runs")
    assert len(calls) == 4


@pytest.mark.parametrize("url", ["memory"], indirect=True)
def test_the_kept_answers_are_bounded(
    app: WebApp, following: Following, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most max_entries answers and max_bytes of bodies are kept."""
    cache = _cache.ResponseCache(app.live, max_entries=3, max_bytes=10_000)
    monkeypatch.setattr(app, "_cache", cache)
    api = Client(app, token=TOKEN)
    for limit in range(1, 8):
        assert api.get("/api/v1/runs", query=f"limit={limit}").status == 200
    assert len(cache) == 3 and 0 < cache.size <= 10_000
    app.live.bump()
    assert len(cache) == 0 and cache.size == 0


@pytest.mark.parametrize("url", ["memory"], indirect=True)
def test_live_clients_are_capped(app: WebApp, monkeypatch: pytest.MonkeyPatch) -> None:
    """One client more than MAX_CLIENTS is a 503 with Retry-After (its page polls)."""
    monkeypatch.setattr(_live, "MAX_CLIENTS", 1)
    capped = make_app(app.ops.engine, token=TOKEN)
    client = Following(capped)
    try:
        busy = Client(capped, token=TOKEN).get("/api/v1/live")
        assert busy.status == 503 and busy.header("Retry-After") == "5"
    finally:
        client.close()
    again = Following(capped)
    again.close()


def test_a_closed_connection_ends_the_stream_under_serve(tmp_path: Any) -> None:
    """A client that leaves is noticed at the next keep-alive: the watch stops."""
    engine = durable.Engine(f"sqlite:///{tmp_path / 'd.db'}")
    app = make_app(engine, token=TOKEN)
    server = serve(app, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    previous = _live.KEEP_ALIVE
    _live.KEEP_ALIVE = 0.1
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
        connection.request("GET", "/api/v1/live", headers=AUTH)
        assert connection.getresponse().status == 200
        assert app.live.watching
        connection.close()
        deadline = time.monotonic() + 5
        while app.live.watching:
            assert time.monotonic() < deadline, "the stream outlived its client"
            time.sleep(0.05)
    finally:
        _live.KEEP_ALIVE = previous
        server.shutdown()
        server.server_close()
        engine.close()


@pytest.mark.parametrize("url", ["memory"], indirect=True)
def test_the_asgi_adapter_streams_versions_until_the_client_leaves(
    engine: durable.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the ASGI adapter the version comes piece by piece, a change brings a new
    one, and the stream (and the watch) ends once the client disconnects."""
    monkeypatch.setattr(_live, "KEEP_ALIVE", 0.1)
    dashboard = make_app(engine, token=ASGI_TOKEN)
    app = asgi_app(dashboard)
    sent: list[dict[str, Any]] = []
    inbox = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        while len(sent) < 3:  # the start, the retry line, the first version
            await asyncio.sleep(0.01)
        dashboard.live.bump()
        while len(sent) < 4:  # the next version
            await asyncio.sleep(0.01)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(app(scope("GET", "/api/v1/live"), receive, send))
    assert sent[0]["status"] == 200
    first, second = (int(m["body"].split(b":")[-1].rstrip(b"}\n")) for m in sent[2:4])
    assert second > first
    assert all(message.get("more_body") for message in sent[1:]), "no end: the client left"
    assert not dashboard.live.watching
