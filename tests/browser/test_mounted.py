"""The dashboard mounted under a prefix in FastAPI, served by uvicorn on a free port,
in a real headless Chromium (see conftest.py): the login, every asset and API call and
the cookie stay under the prefix, and a button's POST passes the CSRF and Origin
checks there."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import durable
from durable.runtime.defaults import swap
from tests.browser import dashboard_app as wf
from tests.browser.conftest import Dashboard, Page, eventually
from tests.browser.test_pause import acted, click, status_is

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.browser

PREFIX = "/tools/durable"
TOKEN = "mounted-token"


@pytest.fixture(scope="module")
def mounted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """FastAPI with a route of its own and the dashboard at PREFIX, under uvicorn in a
    thread, over a SQLite database with one completed run; a worker serves the queue."""
    fastapi = pytest.importorskip("fastapi")
    uvicorn = pytest.importorskip("uvicorn")
    from durable.web import asgi_app, make_app

    url = f"sqlite:///{tmp_path_factory.mktemp('mounted') / 'durable.db'}"
    engine = durable.Engine(url, lease=5.0)
    previous = swap(engine)
    worker = durable.Worker(engine, poll=0.1, concurrency=2).start()
    app = fastapi.FastAPI()

    @app.get("/")
    def home() -> dict[str, str]:
        return {"app": "host"}

    app.mount(PREFIX, asgi_app(make_app(engine, token=TOKEN)))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    eventually(lambda: server.started, "uvicorn to start")
    port = sock.getsockname()[1]
    board = Dashboard(f"http://127.0.0.1:{port}{PREFIX}", TOKEN, engine)
    try:
        durable.execute(wf.fulfil, "o-m", id="mounted-ok")
        yield board
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        worker.stop(grace=5)
        swap(previous)
        engine.close()


def test_dashboard_mounted_in_fastapi_under_a_prefix(
    driver: WebDriver, mounted: Dashboard, tmp_path: Path
) -> None:
    """Log in under the prefix, browse to a run and cancel it with the page's button:
    every request the page made went under the prefix, the cookie is scoped to it,
    and nothing was refused or blocked."""
    page = Page(driver, mounted)
    driver.get(f"{mounted.url}/")  # the 401 page: on this host, to clear its cookies,
    driver.delete_all_cookies()  # which other tests' dashboards (other ports) left
    driver.get_log("browser")  # drop what earlier tests left, and that 401
    page.login()
    assert driver.current_url == f"{mounted.url}/"
    [cookie] = [c for c in driver.get_cookies() if c["name"].startswith("durable_session")]
    assert cookie["path"] == PREFIX and cookie["httpOnly"] and cookie["sameSite"] == "Strict"

    page.open("#/runs")
    page.wait_js("document.querySelector('#runs-body').textContent.includes('mounted-ok')", "runs")
    page.open_run("mounted-ok")
    assert page.text("#run-status") == "completed"

    waiting = mounted.waiting_run("mounted-wait")
    page.open_run(waiting)
    click(page, "cancel", "mia")  # a POST with the cookie: CSRF token and Origin checked
    status_is(page, "cancelled")
    acted(page, "cancel", "mia")
    eventually(lambda: mounted.status(waiting) == "cancelled", "the run to be cancelled")

    used: list[Any] = page.js(
        "return performance.getEntriesByType('resource').map(entry => entry.name)"
    )
    assert any("/api/v1/runs/" in name for name in used), used
    assert any(name.endswith("/static/app.js") for name in used), used
    outside = [name for name in used if not name.startswith(f"{mounted.url}/")]
    assert not outside, outside
    errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    page.screenshot(tmp_path / "mounted.png")
