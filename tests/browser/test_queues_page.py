"""The Queues page in a real headless Chromium (see conftest.py): the nav link, the
columns of `durable queues` for a queue with limits and keyed runs holding slots, key
text shown as text (never as HTML), and the page following the runs as it polls."""

from __future__ import annotations

import datetime as dt

import pytest

import durable
from tests.browser import dashboard_app as wf
from tests.browser.conftest import Dashboard, Page

pytestmark = pytest.mark.browser

OWNER = "queues-page-test"
HEADERS = [
    "Queue",
    "Queued",
    "Running",
    "Limit",
    "Key limit",
    "Rate",
    "Oldest queued",
    "Running per key",
]


def keyed_runs(dashboard: Dashboard, queue: str, *keys: str | None) -> list[str]:
    """Dispatch `approve` on *queue*, one run per key (earlier keys claimed first), then
    claim what the queue's limits let start (no worker serves it); the claimed ids."""
    for n, key in enumerate(keys):
        run_id = f"{queue}-{n}"
        durable.dispatch(wf.approve, run_id, id=run_id, queue=queue, key=key, priority=-n)
    claimed = dashboard.engine.backend.claim_next(
        owner=OWNER, queue=queue, workflows=[wf.approve.name], limit=10, lease=300
    )
    return sorted(run.id for run in claimed)


def row(page: Page, queue: str) -> str:
    """The CSS selector of the queue's row, once the page shows it."""
    selector = f'#queues-body tr[data-key="{queue}"]'
    page.wait_js(f"document.querySelector('{selector}') !== null", f"the row of {queue}")
    return selector


def cells(page: Page, selector: str) -> list[str]:
    return list(
        page.js(
            "return Array.from(document.querySelector(arguments[0]).cells)"
            ".map(td => td.textContent);",
            selector,
        )
    )


def keys(page: Page, selector: str) -> list[str]:
    return list(
        page.js(
            "return Array.from(document.querySelectorAll(arguments[0] + ' td .key'))"
            ".map(span => span.textContent);",
            selector,
        )
    )


def test_the_nav_link_opens_the_queues_page(page: Page, dashboard: Dashboard) -> None:
    durable.queue("page-mail", concurrency=2, key_concurrency=1, rate=(50, dt.timedelta(minutes=1)))
    claimed = keyed_runs(dashboard, "page-mail", "tenant-x", "tenant-x", "tenant-y", None)
    assert claimed == ["page-mail-0", "page-mail-2"]  # a slot each for tenant-x and tenant-y
    page.open("#/")
    page.click("#nav-queues")
    selector = row(page, "page-mail")
    assert page.driver.current_url.endswith("#/queues")
    assert page.attribute("#nav-queues", "aria-current") == "page"
    for other in ("#nav-runs", "#nav-schedules"):
        assert page.attribute(other, "aria-current") is None
    headers = page.js(
        "return Array.from(document.querySelectorAll('#queues-table th'))"
        ".map(th => th.textContent);"
    )
    assert headers == HEADERS

    name, queued, running, limit, key_limit, rate, oldest, _ = cells(page, selector)
    assert (name, queued, running, limit, key_limit) == ("page-mail", "2", "2", "2", "1")
    assert rate == "50 per 0:01:00" and oldest != "—"
    title = page.attribute(f"{selector} td:nth-child(7)", "title")
    assert title is not None and title.startswith("since ")
    assert keys(page, selector) == ["tenant-x=1", "tenant-y=1"]
    assert page.attribute(selector, "data-full") == "true"

    # the default queue (the dashboard's runs) has no limits: dashes, not "null"
    default = cells(page, row(page, "default"))
    assert default[3:6] == ["—", "—", "—"]


def test_keys_are_text_and_the_page_follows_the_runs(page: Page, dashboard: Dashboard) -> None:
    durable.queue("page-html", concurrency=3)
    markup = "<img src=x onerror=alert(1)>"
    claimed = keyed_runs(dashboard, "page-html", markup, "plain")
    assert claimed == ["page-html-0", "page-html-1"]
    page.open("#/queues")
    selector = row(page, "page-html")
    assert keys(page, selector) == [f"{markup}=1", "plain=1"]
    assert page.finds(f"{selector} img") == []
    assert cells(page, selector)[1:4] == ["0", "2", "3"]
    assert page.attribute(selector, "data-full") == "false"

    run = dashboard.engine.backend.get_run("page-html-0")
    assert run is not None
    dashboard.engine.backend.finish_run(
        "page-html-0", run.epoch, durable.RunStatus.COMPLETED, output=None
    )
    page.wait_js(
        f"document.querySelector('{selector}').cells[2].textContent === '1'",
        "the finished run's slot to be freed",
    )
    assert keys(page, selector) == ["plain=1"]
