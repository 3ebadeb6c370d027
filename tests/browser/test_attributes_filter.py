"""Run attributes in the dashboard, in a real headless Chromium: the runs list's
Attributes filter and column, and the run page's Attributes box."""

from __future__ import annotations

import pytest

import durable
from tests.browser import dashboard_app as wf
from tests.browser.conftest import Dashboard, Page

pytestmark = pytest.mark.browser

ROWS = "Array.from(document.querySelectorAll('#runs-body tr'))"


def test_runs_list_filters_by_attributes_and_the_run_page_shows_them(
    page: Page, dashboard: Dashboard
) -> None:
    """Typing ``customer=c-42 region=eu`` keeps the runs holding both, each row showing
    its attributes; a pair without '=' marks the field invalid and keeps the list; the
    run page lists the attributes with their JSON values."""
    # Shares the dashboard's backend, so it is not closed here (that would close both).
    engine = durable.Engine(backend=dashboard.engine.backend, lease=5.0)
    for run_id, attributes in (
        ("attr-eu", {"customer": "c-42", "region": "eu", "vip": True}),
        ("attr-us", {"customer": "c-42", "region": "us"}),
    ):
        engine.dispatch_call(wf.fulfil.bind(run_id), run_id=run_id, attributes=attributes)
    page.open("#/runs")
    page.wait_js(f"{ROWS}.some(tr => tr.dataset.key === 'attr-us')", "the runs")
    field = "#filters input[name=attr]"
    page.find(field).send_keys("customer=c-42")
    page.wait_js(
        f"{ROWS}.length === 2 && {ROWS}.every(tr => tr.dataset.key.startsWith('attr-'))",
        "one customer's runs",
    )
    shown = page.js(f"return {ROWS}.find(tr => tr.dataset.key === 'attr-eu').cells[6].textContent")
    assert shown == "customer=c-42, region=eu, vip=true"
    page.find(field).send_keys(" region=eu")
    page.wait_js(f"{ROWS}.length === 1 && {ROWS}[0].dataset.key === 'attr-eu'", "both pairs")
    page.find(field).send_keys(" vip")
    page.wait_js(f"!document.querySelector('{field}').validity.valid", "the bad pair marked")
    assert page.js(f"return {ROWS}.map(tr => tr.dataset.key)") == ["attr-eu"]
    page.open("#/runs/attr-eu")
    body = "Array.from(document.querySelectorAll('#attributes-body tr'))"
    page.wait_js(f"{body}.length === 3", "the attributes box")
    rows = page.js(f"return {body}.map(tr => [tr.cells[0].textContent, tr.cells[1].textContent])")
    assert rows == [["customer", '"c-42"'], ["region", '"eu"'], ["vip", "true"]]
    assert not page.js("return document.getElementById('run-attributes-box').hidden")
