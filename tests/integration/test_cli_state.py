"""`durable show` and `durable history` show what runs publish (their properties, or
state), on SQLite and PostgreSQL: a state section in show, a STATE column marking where
they changed in history, and the `state` fields in the machine formats."""

from __future__ import annotations

import csv
import io

import pytest

import durable
from durable import task, workflow

from .cli_world import BOTH, Cli


@task
def step(i: int) -> int:
    return i


@workflow
class Order:
    def __init__(self, order_id: str) -> None:
        self.order_id = order_id
        self.status = "new"
        self.items = ["book"]

    def handle(self) -> str:
        step(1)
        self.status = "charged"
        del self.items
        step(2)
        self.status = "done"
        return self.status


@workflow
def plain(n: int) -> int:
    """Publishes nothing."""
    return step(n)


@pytest.fixture
def cli(engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    durable.execute(Order, "o-1", id="order-1")
    durable.execute(plain, 3, id="plain-1")
    return Cli(capsys, url)


@BOTH
def test_show_prints_the_state_section(cli: Cli) -> None:
    """One property a line, values as JSON, after the run's facts; none without state."""
    out = cli("show", "order-1").out
    assert '\n\nstate:\n  order_id  "o-1"\n  status    "done"\n' in out
    assert out.index("output    ") < out.index("state:")
    assert "state:" not in cli("show", "plain-1").out
    detail = cli("show", "order-1", "-o", "json").json()
    assert detail["state"] == {"order_id": "o-1", "status": "done"}
    assert cli("show", "plain-1", "-o", "json").json()["state"] == {}


@BOTH
def test_history_marks_where_the_state_changed(cli: Cli) -> None:
    """STATE (before RESULT) says what each snapshot changed from the one before it:
    everything at first, then the changed properties, ``-name`` for one gone."""
    lines = cli("history", "order-1").out.splitlines()
    header = lines[0].split()
    assert header[-2:] == ["STATE", "RESULT"]
    at = lines[0].index("STATE")
    result = lines[0].index("RESULT")
    cells = [line[at:result].strip() for line in lines[1:]]
    assert cells == ['items=["book"], order_id="o-1", status="new"', 'status="charged", -items']
    assert [line[result:].strip() for line in lines[1:]] == ["1", "2"]


@BOTH
def test_history_without_state_has_no_state_column(cli: Cli) -> None:
    assert "STATE" not in cli("history", "plain-1").out


@BOTH
def test_history_machine_formats_carry_each_step_state(cli: Cli) -> None:
    items = cli("history", "order-1", "-o", "json").json()["items"]
    first = {"items": ["book"], "order_id": "o-1", "status": "new"}
    second = {"order_id": "o-1", "status": "charged"}
    assert [step["state"] for step in items] == [first, second]
    assert "state_changes" not in items[0]
    assert [step["state"] for step in cli("history", "order-1", "-o", "jsonl").jsonl()] == [
        first,
        second,
    ]
    rows = list(csv.DictReader(io.StringIO(cli("history", "order-1", "-o", "csv").out)))
    assert rows[1]["state"] == '{"order_id":"o-1","status":"charged"}'
    plain_rows = csv.DictReader(io.StringIO(cli("history", "plain-1", "-o", "csv").out))
    assert [row["state"] for row in plain_rows] == [""]
