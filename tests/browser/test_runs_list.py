"""The dashboard's runs list in a real headless Chromium, over genuine runs (see
conftest.py): every run with its status chip and link, and the status and version
filters."""

from __future__ import annotations

from urllib.parse import quote

import pytest

import durable
from tests.browser import dashboard_app as wf
from tests.browser.conftest import Dashboard, Page

pytestmark = pytest.mark.browser


def test_runs_list_shows_every_run_with_its_status(page: Page, dashboard: Dashboard) -> None:
    """The home page lists the runs with status chips and links; filters narrow it."""
    page.open("#/runs")
    expected = {run_id: state for state, run_id in dashboard.ids.items()}
    page.wait_js(
        f"{len(expected)} <= document.querySelectorAll('#runs-body tr').length", "the runs"
    )
    rows = page.js(
        "return Array.from(document.querySelectorAll('#runs-body tr')).map(tr => ["
        "tr.dataset.key, tr.querySelector('.chip').textContent, tr.querySelector('a').href])"
    )
    shown = {key: (status, href) for key, status, href in rows}
    for run_id, status in expected.items():
        assert shown[run_id][0] == status
        assert shown[run_id][1].endswith("#/runs/" + quote(run_id, safe=""))

    from selenium.webdriver.support.ui import Select

    Select(page.find("#filters select[name=status]")).select_by_visible_text("failed")
    page.wait_js(
        "Array.from(document.querySelectorAll('#runs-body tr'))"
        ".every(tr => tr.dataset.status === 'failed')",
        "the status filter",
    )
    assert page.text("#runs-body").count("order-failed") == 1
    Select(page.find("#filters select[name=status]")).select_by_visible_text("any")


def test_runs_list_shows_and_filters_by_version(page: Page, dashboard: Dashboard) -> None:
    """A run created by a process with a code version shows it in the Version column;
    typing the version in the filter narrows the list to that version's runs (the run
    and the child it started)."""
    # Shares the dashboard's backend, so it is not closed here (that would close both).
    stamped = durable.Engine(backend=dashboard.engine.backend, lease=5.0, version="v7")
    stamped.execute_call(wf.fulfil.bind("o-v7"), run_id="order-v7")
    page.open("#/runs")
    rows = "Array.from(document.querySelectorAll('#runs-body tr'))"
    page.wait_js(f"{rows}.some(tr => tr.dataset.key === 'order-v7')", "the v7 run")
    assert (
        page.js(f"return {rows}.find(tr => tr.dataset.key === 'order-v7').cells[3].textContent")
        == "v7"
    )
    assert (
        page.js(f"return {rows}.find(tr => tr.dataset.key === 'order-ok').cells[3].textContent")
        == "-"
    )
    page.find("#filters input[name=version]").send_keys("v7")
    page.wait_js(  # the run and its child, stamped by the same process
        f"{rows}.length > 0 && {rows}.every(tr => tr.dataset.key.startsWith('order-v7')"
        " && tr.cells[3].textContent === 'v7')",
        "the version filter",
    )
    page.find("#filters input[name=version]").clear()
    page.js("document.getElementById('filters').dispatchEvent(new Event('input'))")
    page.wait_js(f"{rows}.length > 1", "the list without the filter")
