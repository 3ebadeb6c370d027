"""The run page's Streams section, in a real headless Chromium (see conftest.py): a
running run's stream shows each value live (over an EventSource) while the run is
still inside a task, then its end; a finished run's streams show whole; a run without
streams has no section."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import durable
from durable import task, workflow
from tests.browser.conftest import Dashboard, Page, eventually

pytestmark = pytest.mark.browser

#: Released to let `chatty` go on; `ENTERED` says it is inside `hold`.
GATE = threading.Event()
ENTERED = threading.Event()


@task
def hold() -> None:
    ENTERED.set()
    GATE.wait(30)


@workflow
def chatty(words: list[str]) -> int:
    """Streams the first word, blocks in a task, streams the rest and closes."""
    tokens = durable.stream("tokens")
    tokens.write(words[0])
    hold()
    for word in words[1:]:
        tokens.write(word)
    tokens.close()
    durable.stream("progress").write({"done": len(words), "of": len(words)})
    return len(words)


@pytest.fixture(autouse=True)
def _open_gate() -> Iterator[None]:
    GATE.clear()
    ENTERED.clear()
    try:
        yield
    finally:
        GATE.set()


def values(page: Page, stream: str) -> list[str]:
    return list(
        page.js(
            "return Array.from(document.querySelectorAll("
            f"'ol[data-stream=\"{stream}\"] li')).map(li => li.textContent);"
        )
    )


def test_a_running_runs_stream_shows_live(page: Page, dashboard: Dashboard) -> None:
    durable.dispatch(chatty, ["<b>hello</b>", "brave", "world"], id="chatty-live")
    eventually(ENTERED.is_set, "the run to enter its task")
    page.open_run("chatty-live")
    page.wait_js("!document.querySelector('#run-streams-box').hidden", "the Streams section")
    page.wait_js(
        "document.querySelectorAll('ol[data-stream=\"tokens\"] li').length === 1",
        "the first value",
    )
    assert values(page, "tokens") == ['"<b>hello</b>"']
    assert not page.finds("ol[data-stream='tokens'] b"), "a value is text, not markup"
    assert dashboard.status("chatty-live") == "running", "shown while the run runs"
    page.click("#live")  # the page stops polling: what comes now comes live
    assert page.attribute("#live", "aria-pressed") == "false"
    GATE.set()
    page.wait_js(
        "document.querySelectorAll('ol[data-stream=\"tokens\"] li').length === 3",
        "the values sent over the open EventSource",
    )
    assert values(page, "tokens") == ['"<b>hello</b>"', '"brave"', '"world"']
    page.wait_js(
        "document.querySelector('ol[data-stream=\"tokens\"]')"
        ".previousElementSibling.textContent.includes('ended')",
        "the stream's end",
    )
    dashboard.wait_status("chatty-live", "completed")


def test_a_finished_runs_streams_show_whole(page: Page, dashboard: Dashboard) -> None:
    GATE.set()
    durable.execute(chatty, ["a", "b"], id="chatty-done")
    page.open_run("chatty-done")
    page.wait_js(
        "document.querySelectorAll('ol[data-stream=\"progress\"] li').length === 1"
        " && document.querySelectorAll('ol[data-stream=\"tokens\"] li').length === 2",
        "both streams",
    )
    assert values(page, "tokens") == ['"a"', '"b"']
    assert values(page, "progress") == ['{\n  "done": 2,\n  "of": 2\n}']


def test_a_run_without_streams_has_no_section(page: Page) -> None:
    page.open_run("order-ok")
    assert not page.displayed("#run-streams-box")
