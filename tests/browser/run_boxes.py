"""The colours of a run's boxes, as the browser tests check them: through data-state
and data-kind attributes and the computed fill of each box, never through pixels."""

from __future__ import annotations

from tests.browser.conftest import Page

#: the fills app.css gives each state (the contract's colours).
FILLS = {
    "not-reached": "rgb(255, 255, 255)",
    "ready": "rgb(253, 230, 138)",
    "running": "rgb(147, 197, 253)",
    "finished": "rgb(134, 239, 172)",
    "failed": "rgb(252, 165, 165)",
    "cancelled": "rgb(209, 213, 219)",
}
#: the fill of a failed step that timed out (class timed-out).
TIMED_OUT = "rgb(253, 186, 116)"


def assert_box(page: Page, node_id: str, state: str, kind: str | None = None) -> None:
    """The box *node_id* is in *state*, painted in that state's colour."""
    node = page.nodes()[node_id]
    assert node["state"] == state, (node_id, node)
    assert node["fill"] == FILLS[state], (node_id, node)
    if kind is not None:
        assert node["kind"] == kind, (node_id, node)
