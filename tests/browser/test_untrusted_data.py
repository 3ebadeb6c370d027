"""Stored data the dashboard must not trust, in a real headless Chromium (see
conftest.py): markup in run ids and payloads renders as text, and a type tag naming a
module shows the value as stored without ever importing the module."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

import durable
from tests.browser import dashboard_app as wf
from tests.browser.conftest import Dashboard, Page
from tests.integration.gadgets import payload, write_gadget

pytestmark = pytest.mark.browser


def test_markup_in_ids_and_payloads_renders_as_text(page: Page, dashboard: Dashboard) -> None:
    """A run id and an input holding <img onerror> show as text; no element is made."""
    markup = "<img src=x onerror=alert(1)>"
    run_id = f"xss-{markup}"
    durable.execute(wf.echo, markup, id=run_id)
    page.open("#/runs")
    page.find("#filters input[name=search]").send_keys("xss-")
    page.wait_js("document.querySelectorAll('#runs-body tr').length === 1", "the search")
    assert page.text("#runs-body a") == run_id
    page.click("#runs-body a")
    page.wait_js(f"document.querySelector('#run-id').textContent === {run_id!r}", "the run")
    page.wait_js("document.querySelector('#run-input').textContent.includes('onerror')", "input")
    assert markup in page.text("#run-output")
    assert page.js("return document.querySelectorAll('img').length") == 0
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        _ = page.driver.switch_to.alert.text


def test_a_run_whose_input_names_a_module_never_imports_it(
    page: Page, dashboard: Dashboard, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row whose type tag names a module on the path: its run page renders the value
    as what it claims to be, and the module is never imported (its marker never appears)."""
    gadget = write_gadget(tmp_path)
    monkeypatch.syspath_prepend(str(gadget.folder))
    run_id = "gadget-run"
    durable.dispatch(wf.echo, "x", id=run_id, queue="parked")  # no worker serves it
    value = gadget.tag("dataclass", "Gadget", v={"name": "from-a-row"})
    data = payload({"args": [value], "kwargs": {}})
    database = str(dashboard.engine.backend.url.database)  # type: ignore[attr-defined]
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE durable_runs SET input = ? WHERE id = ?", (data, run_id))
    page.open("#/runs/" + quote(run_id, safe=""))
    page.wait_js("document.querySelector('#run-status').textContent === 'queued'", "the run")
    page.wait_js("document.querySelector('#run-input').textContent.includes('from-a-row')", "input")
    assert '"type": "Gadget"' in page.text("#run-input")
    assert not gadget.marker.exists(), "the dashboard imported the module the row names"
    assert gadget.name not in sys.modules
