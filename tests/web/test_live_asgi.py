"""Live pages under ASGI on asyncio (`_live.LiveBody.__aiter__`, `_pieces.each_piece`):
an open page awaits its changes on the event loop and holds no thread while it waits."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

import durable
from durable.web import _live, asgi_app, make_app
from tests.web.test_asgi import TOKEN, scope, until

PAGES = 20


def threads_waiting_in(hub: _live.LiveHub) -> int:
    """How many threads are blocked in *hub*'s `LiveHub.wait` (the WSGI way of waiting;
    other tests' hubs in this process are not counted)."""
    blocking = _live.LiveHub.wait.__code__
    found = 0
    for frame in sys._current_frames().values():
        walk: Any = frame
        while walk is not None:
            if walk.f_code is blocking and walk.f_locals.get("self") is hub:
                found += 1
                break
            walk = walk.f_back
    return found


async def soon(condition: Callable[[], bool], seconds: float, what: str) -> None:
    ends = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < ends, f"not within {seconds} s: {what}"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("url", ["memory"], indirect=True)
def test_open_live_pages_hold_no_thread_on_asyncio(engine: durable.Engine) -> None:
    """Twenty live pages open through the ASGI adapter: no thread waits for their
    changes (each one did before), one change reaches every page within 2 s, and once
    the clients leave the streams end and the watch stops."""
    dashboard = make_app(engine, token=TOKEN)
    app = asgi_app(dashboard)
    sent: list[list[bytes]] = [[] for _ in range(PAGES)]

    def sender(page: int) -> Any:
        async def send(message: dict[str, Any]) -> None:
            sent[page].append(message.get("body", b""))

        return send

    async def main() -> int:
        leave = asyncio.Event()
        pages = [
            asyncio.create_task(app(scope("GET", "/api/v1/live"), until(leave), sender(page)))
            for page in range(PAGES)
        ]
        # the start, the retry line and the first version, on every page
        await soon(lambda: all(len(bodies) >= 3 for bodies in sent), 10, "every page opened")
        await asyncio.sleep(0.2)  # a thread that was to wait would be waiting by now
        waiting = threads_waiting_in(dashboard.live)
        version = dashboard.live.bump()
        news = f'"version":{version}'.encode()
        await soon(lambda: all(news in b"".join(bodies) for bodies in sent), 2, "the change")
        leave.set()
        dashboard.live.bump()  # the next piece shows each page its client left
        await asyncio.wait_for(asyncio.gather(*pages), 10)
        return waiting

    waiting = asyncio.run(main())
    assert waiting == 0, f"{waiting} threads wait in the hub for {PAGES} open pages"
    assert not dashboard.live.watching
    dashboard.close()
