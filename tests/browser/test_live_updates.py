"""Live updates in a real headless Chromium (see conftest.py): with the server's live
stream up, a run finishing elsewhere (the fixture's own Engine and Worker, not the
app's) shows on the open runs page within 2 s, without a reload; with the stream
endpoint failing, the page falls back to polling and still follows the runs."""

from __future__ import annotations

import dataclasses
import itertools
import time

import pytest

import durable
from durable.web._http import HTTPError
from tests.browser import dashboard_app as wf
from tests.browser.conftest import Dashboard, Page, eventually

pytestmark = pytest.mark.browser

MARKER = "window.__liveMarker"


def open_runs(page: Page) -> None:
    """Open the runs page and mark the window: a reload or navigation would lose it."""
    page.open("#/runs")
    page.js(f"{MARKER} = 'still here';")


def test_a_run_finishing_elsewhere_shows_within_two_seconds(
    page: Page, dashboard: Dashboard
) -> None:
    run_id = dashboard.running_run("live-running")
    open_runs(page)
    page.wait_js("document.querySelector('#live').dataset.stream === 'up'", "the live stream")
    # (the answer kept for the version of the page's opening may be a moment old)
    page.wait_js(
        f"document.querySelector(`#runs-body tr[data-key='{run_id}']`)"
        ".getAttribute('data-status') === 'running'",
        "the running run",
    )
    time.sleep(1.0)  # quiet: what follows is this change's doing, not the opening's
    dashboard.release(run_id)
    dashboard.wait_status(run_id, "completed")
    finished = time.monotonic()
    page.wait_js(
        f"document.querySelector(`#runs-body tr[data-key='{run_id}']`)"
        ".getAttribute('data-status') === 'completed'",
        "the finished run on the open page",
        timeout=2.0,
    )
    assert time.monotonic() - finished < 2.0
    assert page.js(f"return {MARKER};") == "still here", "the page was reloaded"
    page.click("#live")  # Paused: the stream is closed, the server stops watching
    page.wait_js("document.querySelector('#live').dataset.stream === 'down'", "closed")
    eventually(lambda: not dashboard.app.live.watching, "the server to stop watching")
    page.click("#live")
    page.wait_js("document.querySelector('#live').dataset.stream === 'up'", "the stream again")


def test_the_page_polls_when_the_stream_fails(page: Page, dashboard: Dashboard) -> None:
    app = dashboard.app
    attempts: list[float] = []

    def refuse(*_: object) -> None:
        attempts.append(time.monotonic())
        raise HTTPError(503, "live updates are off in this test", headers=[("Retry-After", "1")])

    # Leave the login's page first: its stream may still be connecting (under load it
    # does so late), and a refusal it got would count as one of this page's attempts.
    page.driver.get("about:blank")
    routes = app._routes
    index = next(i for i, r in enumerate(routes) if r.pattern.match("/api/v1/live"))
    original = routes[index]
    routes[index] = dataclasses.replace(original, handler=refuse)
    try:
        open_runs(page)
        page.wait_js("document.querySelector('#live').dataset.stream === 'down'", "no stream")
        durable.dispatch(wf.approve, "live-polled", id="live-polled")
        page.wait_js(
            "document.querySelector(`#runs-body tr[data-key='live-polled']`) !== null",
            "the new run, by polling",
            timeout=8.0,
        )
        assert page.js(f"return {MARKER};") == "still here", "the page was reloaded"
        assert len(attempts) >= 2, "the stream is retried"
        gaps = [later - earlier for earlier, later in itertools.pairwise(attempts)]
        assert all(gap > 0.5 for gap in gaps), f"retried with backoff, not at once: {gaps}"
    finally:
        routes[index] = original
    # back up at its next retry; the refused streams were logged as errors by the
    # browser before: expected here
    page.wait_js("document.querySelector('#live').dataset.stream === 'up'", "the stream back")
    page.driver.get_log("browser")
