"""A run's streams under ASGI on asyncio (`_streams.EventBody.__aiter__`, over
`runtime.streams.follow_async` and `Watch.wait_async`): an open stream awaits its next
value on the event loop and holds no thread while it waits; the values still arrive
live, and the streams end when the run does."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable import RunStatus, workflow
from durable.backends import _hub
from durable.web import _streams, asgi_app, make_app
from tests.web.installed import installed
from tests.web.test_asgi import TOKEN, scope, until
from tests.web.test_live_asgi import soon

#: As many streams as the cap lets in (one more is refused).
STREAMS = _streams.MAX_STREAMS


@workflow
def tell(count: int) -> str:
    """Writes "first", waits for "go", then writes 1..count-1 and closes the stream."""
    lines = durable.stream("lines")
    lines.write("first")
    durable.wait("go")
    for n in range(1, count):
        lines.write({"n": n})
    lines.close()
    return "told"


def threads_waiting_on(topic: str) -> int:
    """How many threads block in `Watch.wait` on *topic* (the threaded way to follow)."""
    blocking = _hub.Watch.wait.__code__
    found = 0
    for frame in sys._current_frames().values():
        walk: Any = frame
        while walk is not None:
            watch = walk.f_locals.get("self") if walk.f_code is blocking else None
            if watch is not None and topic in watch._topics:
                found += 1
                break
            walk = walk.f_back
    return found


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[durable.Engine]:
    with installed(request.param, tmp_path) as engine:
        yield engine


def test_open_streams_hold_no_thread_on_asyncio(engine: durable.Engine) -> None:
    """As many streams as the cap allows, open through the ASGI adapter while the run
    waits: no thread waits for their values (each one did before), one more is refused,
    the values written once the run goes on reach every stream, and each ends with the
    run's ``end`` event."""
    durable.dispatch(tell, 3, id="told")
    dashboard = make_app(engine, token=TOKEN)
    app = asgi_app(dashboard)
    sent: list[list[dict[str, Any]]] = [[] for _ in range(STREAMS + 1)]
    path = "/api/v1/runs/told/streams/lines"

    def text(page: int) -> bytes:
        return b"".join(message.get("body", b"") for message in sent[page])

    def sender(page: int) -> Any:
        async def send(message: dict[str, Any]) -> None:
            sent[page].append(message)

        return send

    async def main() -> int:
        leave = asyncio.Event()
        with durable.Worker(engine, poll=0.02):
            while engine.reread("told").status is not RunStatus.WAITING:
                await asyncio.sleep(0.02)
            streams = [
                asyncio.create_task(app(scope("GET", path), until(leave), sender(page)))
                for page in range(STREAMS)
            ]
            await soon(lambda: all(b"id: 0\n" in text(p) for p in range(STREAMS)), 10, "opened")
            await app(scope("GET", path), until(leave), sender(STREAMS))
            await asyncio.sleep(0.3)  # a thread that was to wait would be waiting by now
            waiting = threads_waiting_on("stream:told")
            await asyncio.to_thread(durable.send, "told", "go", None)
            ended = b'event: end\ndata: {"ended":true}\n\n'
            await soon(lambda: all(text(p).endswith(ended) for p in range(STREAMS)), 10, "ends")
            await asyncio.wait_for(asyncio.gather(*streams), 10)
        return waiting

    waiting = asyncio.run(main())
    assert waiting == 0, f"{waiting} threads wait for {STREAMS} open streams"
    assert sent[STREAMS][0]["status"] == 503, "one stream more than the cap was let in"
    for page in range(STREAMS):
        body = text(page).decode()
        assert body.startswith("retry: 1000\n\n")
        assert '"value":"first"' in body and '"n":1' in body and '"n":2' in body
    dashboard.close()
