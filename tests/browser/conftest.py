"""Real headless Chromium (through Selenium) against a dashboard over genuine runs.

The `dashboard` fixture fills a SQLite database with runs made by durable itself (see
`dashboard_app`): one completed, one failed, one waiting for an event, one blocked in a
task and so "running", all while an in-process `durable.Worker` serves the queue. It
then serves `durable.web.make_app(url)` on a free port in a thread.

Without Chromium, chromedriver or selenium the tests skip locally; with
DURABLE_REQUIRE_BROWSER=1 or CI=true they fail instead, so CI never passes green on
silently skipped browser tests.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import durable
from durable.runtime.defaults import swap
from tests.browser import dashboard_app as wf

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement

CHROMIUM = os.environ.get("DURABLE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("DURABLE_CHROMEDRIVER", "/usr/bin/chromedriver")
REQUIRED = os.environ.get("DURABLE_REQUIRE_BROWSER") == "1" or os.environ.get("CI") == "true"
ROOT = Path(__file__).resolve().parents[2]
#: how long a condition in the page or the database may take to come true.
PATIENCE = 15.0


def _missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install selenium)"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    return None


def eventually(check: Callable[[], Any], what: str, timeout: float = PATIENCE) -> Any:
    """Poll *check* until it returns something truthy; fail naming *what* otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.05)


def forget_earlier_pages(driver: WebDriver) -> None:
    """Leave whatever page an earlier test left open, then drop what the browser logged.

    The earlier page's scripts go on running until the browser leaves it: a dashboard
    whose server that test has stopped logs a refused request at its next poll, and
    one logged after the log was read would count against the next test."""
    driver.get("about:blank")
    driver.get_log("browser")


@pytest.fixture(scope="session")
def driver() -> Iterator[WebDriver]:
    """One headless Chromium for the whole suite."""
    reason = _missing()
    if reason is not None:
        if REQUIRED:
            pytest.fail(f"browser tests are required here (CI), but {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--window-size=1400,1000",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield browser
    finally:
        browser.quit()


@dataclass
class Dashboard:
    """A served dashboard over a database of genuine runs, and ways to make more."""

    url: str
    token: str
    engine: durable.Engine
    ids: dict[str, str] = field(default_factory=dict)
    #: the served app (`durable.web.WebApp`), with its own engine
    app: Any = None

    def status(self, run_id: str) -> str:
        return str(self.engine.reread(run_id).status)

    def wait_status(self, run_id: str, status: str) -> None:
        eventually(lambda: self.status(run_id) == status, f"run {run_id} to be {status}")

    def waiting_run(self, run_id: str) -> str:
        """Dispatch `approve` as *run_id*; return once it waits for its event."""
        durable.dispatch(wf.approve, run_id, id=run_id)
        self.wait_status(run_id, "waiting")
        return run_id

    def running_run(self, run_id: str, flow: durable.Workflow[[str], str] = wf.ship) -> str:
        """Dispatch *flow* (`ship`, or `crunch`) as *run_id*; return once it is blocked
        in its gated task (`hold`, or `grind` after its heartbeat)."""
        wf.GATES[run_id] = threading.Event()
        wf.ENTERED[run_id] = threading.Event()
        durable.dispatch(flow, run_id, id=run_id)
        eventually(wf.ENTERED[run_id].is_set, f"run {run_id} to block in its task")
        return run_id

    def release(self, run_id: str) -> None:
        wf.GATES[run_id].set()


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    """A dashboard on a fresh SQLite database holding one run in each state."""
    from durable.web import make_app, serve

    url = f"sqlite:///{tmp_path_factory.mktemp('dashboard') / 'durable.db'}"
    engine = durable.Engine(url, lease=5.0)
    previous = swap(engine)
    worker = durable.Worker(engine, poll=0.1, concurrency=4).start()
    app = make_app(url)
    server = serve(app, host="127.0.0.1", port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    board = Dashboard(f"http://127.0.0.1:{server.server_port}", app.token, engine, app=app)
    try:
        board.ids["completed"] = "order-ok"
        durable.execute(wf.fulfil, "o-1", id="order-ok")
        with pytest.raises(ValueError, match="card declined"):
            durable.execute(wf.checkout, "o-2", id="order-failed")
        # a completed `ship` run: its history gives the running one its "expected" boxes
        wf.GATES["order-shipped"] = threading.Event()
        wf.GATES["order-shipped"].set()
        wf.ENTERED["order-shipped"] = threading.Event()
        durable.execute(wf.ship, "order-shipped", id="order-shipped")
        board.ids["failed"] = "order-failed"
        board.ids["waiting"] = board.waiting_run("order-approval")
        board.ids["running"] = board.running_run("order-running")
        yield board
    finally:
        for gate in wf.GATES.values():
            gate.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        app.close()
        worker.stop(grace=5)
        swap(previous)
        engine.close()


class Page:
    """The dashboard as a user sees it in the browser: open, click, read, wait."""

    def __init__(self, driver: WebDriver, board: Dashboard) -> None:
        self.driver = driver
        self.board = board

    def login(self) -> None:
        self.driver.get(f"{self.board.url}/?token={self.board.token}")
        eventually(lambda: "token=" not in self.driver.current_url, "the token redirect")

    def open(self, fragment: str) -> None:
        """Load the dashboard at *fragment* ("#/", "#/runs", "#/runs/<encoded id>") from scratch."""
        self.driver.get(f"{self.board.url}/{fragment}")
        self.wait_js("document.querySelector('#view .page') !== null", "the page to render")

    def open_run(self, run_id: str) -> None:
        from urllib.parse import quote

        self.open("#/runs/" + quote(run_id, safe=""))
        self.wait_js(
            "document.querySelector('#run-status').textContent !== ''"
            " && document.querySelector('g.node[data-id=\"end\"]') !== null",
            f"run {run_id} to render",
        )

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def wait_js(self, expression: str, what: str, timeout: float = PATIENCE) -> Any:
        """Poll *expression* until truthy. One that throws (an element the page has not
        drawn yet, between one view and the next) counts as not yet."""
        script = f"try {{ return {expression}; }} catch (error) {{ return false; }}"
        return eventually(lambda: self.js(script), what, timeout)

    def find(self, selector: str) -> WebElement:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def finds(self, selector: str) -> list[WebElement]:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def on(self, selector: str, act: Callable[[WebElement], Any]) -> Any:
        """Find *selector* and *act* on it; if the page redrew the element in between
        (live updates and polls replace rows and charts), find it again and act again.
        A click on an element that went stale was not delivered, so retrying is safe."""
        from selenium.common.exceptions import StaleElementReferenceException

        deadline = time.monotonic() + PATIENCE
        while True:
            try:
                return act(self.find(selector))
            except StaleElementReferenceException:
                if time.monotonic() > deadline:
                    raise

    def click(self, selector: str) -> None:
        self.on(selector, lambda element: element.click())

    def text(self, selector: str) -> str:
        return str(self.on(selector, lambda element: element.text))

    def displayed(self, selector: str) -> bool:
        return bool(self.on(selector, lambda element: element.is_displayed()))

    def attribute(self, selector: str, name: str) -> str | None:
        return self.on(selector, lambda element: element.get_attribute(name))  # type: ignore[no-any-return]

    def focus(self, selector: str) -> None:
        """Give the keyboard focus to the element at *selector*, and remember that
        element for `focused`."""
        taken = self.js(
            "const node = document.querySelector(arguments[0]); node.focus();"
            " window.durableFocused = node; return document.activeElement === node;",
            selector,
        )
        assert taken, f"{selector} did not take the focus"

    def focused(self) -> str:
        """Where the keyboard focus is: "same" while the element `focus` gave it to
        still has it and is on the page (a redraw updated it in place); else the tag of
        the element that has it now (BODY: it fell to the page)."""
        return str(
            self.js(
                "const node = document.activeElement;"
                " return node === window.durableFocused && node.isConnected ? 'same'"
                " : node.tagName;"
            )
        )

    def facts(self, selector: str) -> dict[str, str]:
        """The label -> value pairs of the <dl> at *selector*."""
        pairs = self.js(
            "return Array.from(document.querySelectorAll(arguments[0] + ' > div'))"
            ".map(div => [div.querySelector('dt').textContent,"
            " div.querySelector('dd').textContent]);",
            selector,
        )
        return dict(pairs)

    def node(self, position: int | str) -> WebElement:
        key = (
            f'data-position="{position}"' if isinstance(position, int) else f'data-id="{position}"'
        )
        return self.find(f"g.node[{key}]")

    def nodes(self) -> dict[str, dict[str, str]]:
        """Every graph node by id: its data attributes and the computed fill of its shape."""
        return dict(
            self.js(
                """
                const out = {};
                for (const g of document.querySelectorAll('g.node')) {
                  out[g.dataset.id] = {
                    state: g.dataset.state, kind: g.dataset.kind, shape: g.dataset.shape,
                    position: g.dataset.position ?? null,
                    fill: getComputedStyle(g.querySelector('.shape')).fill,
                    y: g.transform.baseVal.consolidate().matrix.f,
                  };
                }
                return out;
                """
            )
        )

    def confirm(self) -> None:
        """Accept the confirmation dialog that an action opened."""
        self.wait_js("document.querySelector('#confirm').open", "the confirmation dialog")
        self.click("#confirm-yes")
        self.wait_js("!document.querySelector('#confirm').open", "the dialog to close")

    def screenshot(self, path: Path) -> None:
        """Save the whole page (not just the window) as a PNG."""
        path.parent.mkdir(parents=True, exist_ok=True)
        height, chrome = self.js(
            "return [document.documentElement.scrollHeight,"
            " window.outerHeight - window.innerHeight];"
        )
        self.driver.set_window_size(1400, min(max(height, 1000), 2400) + chrome)
        try:
            self.driver.save_screenshot(str(path))
        finally:
            self.driver.set_window_size(1400, 1000)


@pytest.fixture
def page(driver: WebDriver, dashboard: Dashboard) -> Iterator[Page]:
    """The browser, signed in to the dashboard; the test fails if the page logged an
    error (a script error, a request refused, a Content-Security-Policy violation)."""
    browser = Page(driver, dashboard)
    forget_earlier_pages(driver)
    browser.login()
    yield browser
    errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
