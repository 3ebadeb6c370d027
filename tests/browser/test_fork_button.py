"""The run page's "Re-run from here" button on each step, in a real headless Chromium
(see conftest.py): fail, fix, click, and the page follows the new run; a click inside
a parallel group shows why it cannot fork there."""

from __future__ import annotations

import pytest

import durable
from tests.browser import dashboard_app as wf
from tests.browser.conftest import Dashboard, Page

pytestmark = pytest.mark.browser


def fork_button(page: Page, position: int) -> str:
    return f"#history-body button.fork-step[data-position='{position}']"


def click_fork(page: Page, position: int, actor: str | None = None) -> None:
    page.wait_js(f'document.querySelector("{fork_button(page, position)}") !== null', "the row")
    page.click(fork_button(page, position))
    page.wait_js("document.querySelector('#confirm').open", "the confirmation dialog")
    assert f"from step #{position}" in page.text("#confirm-text")
    if actor is not None:
        page.find("#confirm-actor").clear()
        page.find("#confirm-actor").send_keys(actor)
    page.confirm()


def test_rerun_a_failed_run_from_its_failed_step(page: Page, dashboard: Dashboard) -> None:
    """The fork opens, runs the failed step again with the fix and completes; the
    original keeps its failure and shows the fork in its actions."""
    with pytest.raises(ValueError, match="card declined"):
        durable.execute(wf.checkout, "o-fork", id="order-fork")
    wf.ACCEPTED.add("o-fork")  # the fix
    page.open_run("order-fork")
    click_fork(page, 1, "dora")
    new_id = page.wait_js(
        "!location.hash.endsWith('order-fork') && decodeURIComponent(location.hash.slice(7))",
        "the page to move to the new run",
    )
    dashboard.wait_status(new_id, "completed")
    page.wait_js("document.querySelector('#run-status').textContent === 'completed'", "done")
    assert page.facts("#run-facts")["Forked from"] == "order-fork"
    assert dashboard.status("order-fork") == "failed"
    page.open_run("order-fork")
    page.wait_js(
        "Array.from(document.querySelectorAll('#actions-body tr')).some(tr =>"
        " tr.cells[1].textContent === 'fork' && tr.cells[2].textContent === 'dora')",
        "the fork action by dora",
    )


def test_inside_a_parallel_group_the_page_says_where_to_fork(
    page: Page, dashboard: Dashboard
) -> None:
    """Position 2 of `fulfil` is the second of a group: the notice names 1 and 3."""
    page.open_run(dashboard.ids["completed"])
    click_fork(page, 2)
    notice = page.wait_js(
        "document.querySelector('#notice').dataset.kind === 'error'"
        " && document.querySelector('#notice').textContent",
        "the error notice",
    )
    assert "positions 1 to 2 are one parallel group" in notice
    assert "Fork from 1" in notice and "or 3" in notice
    assert page.js("return location.hash") == "#/runs/order-ok"
    # The browser logs the refused request; it is this one, and expected (the page's
    # fixture fails a test on any other error the page logged).
    logged = [e["message"] for e in page.driver.get_log("browser") if e["level"] == "SEVERE"]
    assert logged and all("/api/v1/runs/order-ok/fork" in line and "400" in line for line in logged)
