"""Views never fail: `durable show`, `durable history` and the REST API show what they can
of a run whose rows are corrupt, too deeply nested, or hold a dataclass with a field that
was never assigned, and mark the rest ``{"unreadable": reason}``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

import durable
from durable.core.error_payloads import dump_error
from durable.core.serde import dumps
from durable.core.viewing import DEPTH
from durable.web import make_app
from tests.conftest import BACKENDS
from tests.integration import bad_rows_app as app
from tests.integration.cli_world import Cli
from tests.integration.test_bad_rows import overwrite, suspended_after_one_step
from tests.web.client import Client

RUNS = ("too-deep", "deep", "init-false", "odd")
TOKEN = "unreadable-views-token-0123456789"
#: Deeper than any JSON parser in Python will go (a RecursionError in the C scanner).
TOO_DEEP = 100_000
#: Parsed fine, but deeper than a recursive decoder or printer gets through.
DEEP = 600


@dataclasses.dataclass
class Box:
    """A dataclass whose ``hidden`` field is never assigned: stored without it."""

    size: int
    hidden: int = dataclasses.field(init=False)


def nested(depth: int) -> bytes:
    return b"j" + b"[" * depth + b"]" * depth


def deep_error(depth: int) -> bytes:
    args = b"[" * depth + b"]" * depth
    head = b'j{"type":"builtins:ValueError","message":"deep","traceback":"","args":'
    return head + args + b"}"


def strict_json(text: str | bytes) -> Any:
    """*text* parsed as JSON that any client can parse: no NaN or Infinity."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def assert_cut_at_depth(shown: Any) -> None:
    """*shown* is DEPTH nested one-item lists, then the mark of what was cut."""
    levels = 0
    while isinstance(shown, list):
        assert len(shown) == 1, shown
        shown, levels = shown[0], levels + 1
    assert levels == DEPTH
    assert shown == {"unreadable": f"nested deeper than {DEPTH} levels; not shown"}


def make_bad_runs(engine: durable.Engine, url: str) -> None:
    """too-deep, deep and init-false runs (queued) and deep-step (a step 0 output)."""
    suspended_after_one_step(engine, "deep-step")  # first: its worker takes queued runs
    for run_id in RUNS:
        durable.dispatch(app.greet, run_id, id=run_id, queue="nobody")
    overwrite(engine, url, "too-deep", "input", nested(TOO_DEEP))
    overwrite(engine, url, "too-deep", "error", deep_error(TOO_DEEP))
    overwrite(engine, url, "deep", "input", nested(DEEP))
    overwrite(engine, url, "deep", "output", nested(DEEP))
    overwrite(engine, url, "deep", "error", deep_error(DEEP))
    box = dumps({"args": [Box(1)], "kwargs": {}}, allow_pickle=False, where="input")
    overwrite(engine, url, "init-false", "input", box)
    overwrite(engine, url, "init-false", "output", dumps(Box(2), allow_pickle=False, where="out"))
    odd = {"nan": float("nan"), "inf": float("-inf"), "text": "a\udc80b", "a\udc80": 1}
    overwrite(engine, url, "odd", "output", dumps(odd, allow_pickle=False, where="output"))
    failure = dump_error(ValueError("bad \udc80 text"), allow_pickle=False)
    overwrite(engine, url, "odd", "error", failure)
    big = {"args": [1 << 70_000], "kwargs": {}}  # past what int() may print
    overwrite(engine, url, "odd", "input", dumps(big, allow_pickle=False, where="input"))
    overwrite(engine, url, "deep-step", "output", nested(TOO_DEEP), position=0)
    overwrite(engine, url, "deep-step", "input", nested(DEEP), position=0)


def check_detail(run_id: str, shown: dict[str, Any]) -> None:
    """What the run views show for each bad run (the API's and `durable show`'s JSON)."""
    if run_id == "too-deep":
        assert set(shown["input"]) == {"unreadable"}
        assert "nested too deeply" in shown["input"]["unreadable"]
        assert shown["error"]["type"] == "unreadable"
    elif run_id == "deep":
        assert_cut_at_depth(shown["input"])
        assert_cut_at_depth(shown["output"])
        assert shown["error"]["type"] == "ValueError" and shown["error"]["message"] == "deep"
    elif run_id == "init-false":
        assert shown["input"] == {"args": [{"type": "Box", "size": 1}], "kwargs": {}}
        assert shown["output"] == {"type": "Box", "size": 2}
    elif run_id == "odd":
        assert shown["output"] == {"nan": "nan", "inf": "-inf", "text": "a\\udc80b", "a\\udc80": 1}
        assert shown["input"]["truncated"].startswith('{"args": ["0x')
        assert shown["error"]["message"] == "bad \\udc80 text"


def check_history(steps: list[dict[str, Any]]) -> None:
    assert "nested too deeply" in steps[0]["output"]["unreadable"]
    assert_cut_at_depth(steps[0]["input"])


@pytest.fixture
def api(engine: durable.Engine) -> Iterator[Client]:
    web = make_app(engine, token=TOKEN)
    try:
        yield Client(web, token=TOKEN)
    finally:
        web.close()


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_the_api_shows_what_it_can_of_bad_rows(
    url: str, engine: durable.Engine, api: Client
) -> None:
    """GET /api/v1/runs/ID and /history answer 200 for every bad run, marking the
    unreadable parts; the run list still answers too."""
    make_bad_runs(engine, url)
    for run_id in RUNS:
        reply = api.request("GET", f"/api/v1/runs/{run_id}")
        assert reply.status == 200, reply.body[:2000]
        check_detail(run_id, strict_json(reply.body))
    reply = api.request("GET", "/api/v1/runs/deep-step/history")
    assert reply.status == 200, reply.body[:2000]
    check_history(reply.json()["items"])
    assert api.request("GET", "/api/v1/runs").status == 200


@pytest.mark.parametrize(
    "url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_durable_show_and_history_show_what_they_can_of_bad_rows(
    url: str, engine: durable.Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """`durable show` and `durable history` exit 0 for every bad run, in JSON and in
    tables, marking the unreadable parts."""
    make_bad_runs(engine, url)
    cli = Cli(capsys, url)
    for run_id in RUNS:
        shown = cli("show", run_id, "-o", "json")
        assert shown.code == 0, shown.err
        check_detail(run_id, strict_json(shown.out))
        table = cli("show", run_id)
        assert table.code == 0, table.err
    check_history(cli("history", "deep-step", "-o", "json").json()["items"])
    for output in ("table", "jsonl", "csv"):
        listed = cli("history", "deep-step", "-o", output)
        assert listed.code == 0, listed.err
