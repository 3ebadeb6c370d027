"""The run page's State panel and the history's State column, in a real headless
Chromium (see conftest.py): a run's published properties as a key/value table, values
as compact JSON, refreshed as the run goes on; hidden for a run that publishes none."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import durable
from durable import task, workflow
from tests.browser.conftest import Dashboard, Page, eventually

pytestmark = pytest.mark.browser

#: Released to let `Packing` finish; `ENTERED` says it is inside `hold`.
GATE = threading.Event()
ENTERED = threading.Event()


@task
def step(i: int) -> int:
    return i


@task
def hold() -> None:
    ENTERED.set()
    GATE.wait(30)


@workflow
class Order:
    def __init__(self, order_id: str) -> None:
        self.order_id = order_id
        self.status = "new"
        self.lines = [{"sku": "<b>book</b>", "qty": 2}]

    def handle(self) -> str:
        step(1)
        self.status = "charged"
        step(2)
        self.status = "done"
        return self.status


@workflow
class Packing:
    def __init__(self, order_id: str) -> None:
        self.order_id = order_id
        self.stage = "new"

    def handle(self) -> str:
        step(1)
        self.stage = "packing"
        hold()
        self.stage = "shipped"
        return self.stage


@pytest.fixture(autouse=True)
def _open_gate() -> Iterator[None]:
    """Each test starts with the gate closed, and leaves it open (no worker stays stuck)."""
    GATE.clear()
    ENTERED.clear()
    try:
        yield
    finally:
        GATE.set()


def state_rows(page: Page) -> dict[str, str]:
    """The State table: property name -> the value as shown."""
    rows = page.js(
        "return Array.from(document.querySelectorAll('#state-body tr'))"
        ".map(tr => [tr.cells[0].textContent, tr.cells[1].textContent]);"
    )
    return dict(rows)


def history_state(page: Page) -> list[tuple[str, bool]]:
    """Each history row's State cell: its text, and whether it shows."""
    return [
        (text, shown)
        for text, shown in page.js(
            "return Array.from(document.querySelectorAll('#history-body tr'))"
            ".map(tr => [tr.cells[7].textContent, tr.cells[7].offsetParent !== null]);"
        )
    ]


def test_the_state_panel_shows_a_finished_runs_properties(page: Page) -> None:
    """Every property a row, its value as compact JSON (markup as text); the history
    says where the properties changed."""
    durable.execute(Order, "o-1", id="order-state")
    page.open_run("order-state")
    page.wait_js("!document.querySelector('#run-state-box').hidden", "the State panel")
    assert page.displayed("#run-state-box")
    assert page.text("#run-state-box h2") == "State"
    assert state_rows(page) == {
        "lines": '[{"qty":2,"sku":"<b>book</b>"}]',
        "order_id": '"o-1"',
        "status": '"done"',
    }
    assert not page.finds("#state-body b")  # the markup is text, not an element
    assert history_state(page) == [
        ('lines=[{"qty":2,"sku":"<b>book</b>"}], order_id="o-1", status="new"', True),
        ('status="charged"', True),
    ]
    title = page.attribute("#history-body tr:nth-child(2) td:nth-child(8)", "title")
    assert '"status":"charged"' in title


def test_a_run_without_state_hides_the_panel_and_the_column(page: Page) -> None:
    """order-ok (a function workflow) publishes nothing: no State panel, no column."""
    page.open_run("order-ok")
    assert not page.displayed("#run-state-box")
    assert page.finds("#state-body tr") == []
    assert not page.displayed("table.history th.state-col")
    assert {shown for _, shown in history_state(page)} == {False}


def test_the_state_panel_follows_a_running_run(page: Page, dashboard: Dashboard) -> None:
    """A run inside a task shows the properties it stored on the way in; once it ends,
    the page's next refresh shows the ones it ended with."""
    durable.dispatch(Packing, "o-2", id="packing-state")
    eventually(ENTERED.is_set, "the run to enter its task")
    page.open_run("packing-state")
    page.wait_js("!document.querySelector('#run-state-box').hidden", "the State panel")
    assert state_rows(page) == {"order_id": '"o-2"', "stage": '"packing"'}
    GATE.set()
    dashboard.wait_status("packing-state", "completed")
    page.wait_js(
        "Array.from(document.querySelectorAll('#state-body td'))"
        ".some(td => td.textContent === '\"shipped\"')",
        "the refreshed State panel",
    )
    assert state_rows(page) == {"order_id": '"o-2"', "stage": '"shipped"'}
