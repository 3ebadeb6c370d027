"""`Operations.queues` and `durable queues` (issue 16: depth, running, limit, rate,
oldest queued age, per-key usage): on the memory backend with a virtual clock, so every
age is exact, and through the command line on SQLite in every output format."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.cli.main import main
from durable.cli.queues import QUEUE_FIELDS
from durable.ops import Operations
from durable.testing import DurableEnv

LEASE = 60.0
HEADER = ["QUEUE", "QUEUED", "RUNNING", "LIMIT", "KEY LIMIT", "RATE", "KEY RATE", "OLDEST", "KEYS"]


@durable.workflow
def deliver(to: str) -> str:
    return to


def claim(engine: durable.Engine, queue: str) -> list[str]:
    """Claim what the queue's limits let start (no code runs); the claimed runs' ids."""
    runs = engine.backend.claim_next(
        owner=engine.owner, queue=queue, workflows=[deliver.name], limit=50, lease=LEASE
    )
    return sorted(run.id for run in runs)


def fill(engine: durable.Engine, tick: Any = lambda seconds: None) -> None:
    """Queues in the states the listing tells apart; *tick(s)* moves the clock on.

    emails (concurrency 2, key_concurrency 1, 100 per second): a1 and a2 of tenant-a,
    b1 of tenant-b, n1 without a key, in this claim order (by priority: runs created in
    one millisecond may tie on SQLite); the claim takes a1 and b1 (a2 waits for its
    key, n1 for a slot). imports (concurrency 5): three runs of key "big" that may run two at
    once (their own key_concurrency=), one of "aaa"; the claim takes big-1, big-2 and
    aaa-1. reports (no limits): one queued run, dispatched first. idle: a rate and a key
    rate, no runs.
    """
    durable.queue("emails", concurrency=2, key_concurrency=1, rate=(100, dt.timedelta(seconds=1)))
    durable.queue("imports", concurrency=5)
    durable.queue("idle", rate=(3, dt.timedelta(minutes=1)), key_rate=(1, 10))
    durable.dispatch(deliver, "r1", id="r1", queue="reports")
    tick(5)
    durable.dispatch(deliver, "a1", id="a1", queue="emails", key="tenant-a", priority=3)
    tick(5)
    durable.dispatch(deliver, "a2", id="a2", queue="emails", key="tenant-a", priority=2)
    durable.dispatch(deliver, "b1", id="b1", queue="emails", key="tenant-b", priority=1)
    durable.dispatch(deliver, "n1", id="n1", queue="emails")
    for n in (1, 2, 3):
        durable.dispatch(
            deliver,
            f"big-{n}",
            id=f"big-{n}",
            queue="imports",
            key="big",
            key_concurrency=2,
            priority=4 - n,
        )
    durable.dispatch(deliver, "aaa-1", id="aaa-1", queue="imports", key="aaa")
    tick(20)
    assert claim(engine, "emails") == ["a1", "b1"]
    assert claim(engine, "imports") == ["aaa-1", "big-1", "big-2"]


# -- the view ---------------------------------------------------------------------------


@pytest.fixture
def env() -> Iterator[DurableEnv]:
    with DurableEnv(start=dt.datetime(2026, 5, 4, 12, tzinfo=dt.UTC)) as world:
        yield world


def test_each_queue_shows_its_depth_running_limits_and_oldest_age(env: DurableEnv) -> None:
    fill(env.engine, env.clock.advance)
    assert Operations(env.engine).queues() == [
        {
            "name": "emails",
            "queued": 2,
            "running": 2,
            "concurrency": 2,
            "key_concurrency": 1,
            "rate": "100 per 0:00:01",
            "key_rate": None,
            "oldest_queued_at": "2026-05-04T12:00:10.000000Z",
            "oldest_queued_age": 20.0,
            "keys": {"tenant-a": 1, "tenant-b": 1},
        },
        {
            "name": "idle",
            "queued": 0,
            "running": 0,
            "concurrency": None,
            "key_concurrency": None,
            "rate": "3 per 0:01:00",
            "key_rate": "1 per 0:00:10",
            "oldest_queued_at": None,
            "oldest_queued_age": None,
            "keys": {},
        },
        {
            "name": "imports",
            "queued": 1,
            "running": 3,
            "concurrency": 5,
            "key_concurrency": None,
            "rate": None,
            "key_rate": None,
            "oldest_queued_at": "2026-05-04T12:00:10.000000Z",
            "oldest_queued_age": 20.0,
            "keys": {"big": 2, "aaa": 1},
        },
        {
            "name": "reports",
            "queued": 1,
            "running": 0,
            "concurrency": None,
            "key_concurrency": None,
            "rate": None,
            "key_rate": None,
            "oldest_queued_at": "2026-05-04T12:00:00.000000Z",
            "oldest_queued_age": 30.0,
            "keys": {},
        },
    ]


def test_the_view_follows_the_runs_and_the_clock(env: DurableEnv) -> None:
    """The age grows with the backend's clock; a finished run frees its slot and key; a
    run whose lease expired holds none; keys tied on count come by name."""
    fill(env.engine, env.clock.advance)
    env.clock.advance(10)
    emails = Operations(env.engine).queues()[0]
    assert (emails["name"], emails["oldest_queued_age"]) == ("emails", 30.0)

    run = env.engine.backend.get_run("a1")
    assert run is not None
    env.engine.backend.finish_run("a1", run.epoch, durable.RunStatus.COMPLETED, output=None)
    emails = Operations(env.engine).queues()[0]
    assert (emails["running"], emails["keys"]) == (1, {"tenant-b": 1})

    env.clock.advance(LEASE + 1)  # b1's worker is gone: its slot is free
    imports = Operations(env.engine).queues()[2]
    emails = Operations(env.engine).queues()[0]
    assert (emails["running"], emails["keys"], emails["queued"]) == (0, {}, 2)
    assert (imports["running"], imports["keys"]) == (0, {})


def test_a_queue_with_no_runs_and_no_limits_is_not_listed(env: DurableEnv) -> None:
    assert Operations(env.engine).queues() == []
    durable.queue("emails", concurrency=3)
    assert [queue["name"] for queue in Operations(env.engine).queues()] == ["emails"]


# -- the command line -------------------------------------------------------------------


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[tuple[durable.Engine, str]]:
    url = f"sqlite:///{tmp_path / 'durable.db'}"
    engine = durable.configure(url, lease=LEASE)
    try:
        yield engine, url
    finally:
        engine.close()


def cli(capsys: pytest.CaptureFixture[str], url: str, *args: str) -> str:
    capsys.readouterr()
    code = main(["queues", *args, "--db", url])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return out


def test_the_table_has_a_row_per_queue(
    sqlite: tuple[durable.Engine, str], capsys: pytest.CaptureFixture[str]
) -> None:
    engine, url = sqlite
    fill(engine)
    header, *lines = cli(capsys, url).splitlines()
    assert re.split(r"\s{2,}", header) == HEADER
    rows = {row[0]: row for row in (re.split(r"\s{2,}", line) for line in lines)}
    assert list(rows) == ["emails", "idle", "imports", "reports"]
    age = re.compile(r"\d\.\d{3}s")  # seconds, to the millisecond, under ten seconds
    emails = rows["emails"]
    assert emails[:7] == ["emails", "2", "2", "2", "1", "100 per 0:00:01", "-"]
    assert age.fullmatch(emails[7]) and emails[8] == "tenant-a=1, tenant-b=1"
    idle = ["idle", "0", "0", "-", "-", "3 per 0:01:00", "1 per 0:00:10", "-", "-"]
    assert rows["idle"] == idle
    assert rows["imports"][:7] == ["imports", "1", "3", "5", "-", "-", "-"]
    assert rows["imports"][8] == "big=2, aaa=1"
    assert rows["reports"][:7] == ["reports", "1", "0", "-", "-", "-", "-"]
    assert age.fullmatch(rows["reports"][7]) and rows["reports"][8] == "-"


def test_json_and_csv_carry_the_operations_view(
    sqlite: tuple[durable.Engine, str], capsys: pytest.CaptureFixture[str]
) -> None:
    engine, url = sqlite
    fill(engine)
    before = Operations(engine).queues()
    items = json.loads(cli(capsys, url, "-o", "json"))["items"]
    after = Operations(engine).queues()

    def aged(views: list[dict[str, Any]]) -> list[float | None]:
        return [view.pop("oldest_queued_age") for view in views]

    ages = zip(aged(before), aged(items), aged(after), strict=True)
    assert items == before == after  # all but the ages, which the clock moves on
    for earlier, printed, later in ages:
        assert (earlier is None) == (printed is None) == (later is None)
        assert earlier is None or earlier <= printed <= later  # type: ignore[operator]

    text = cli(capsys, url, "-o", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert text.splitlines()[0].split(",") == list(QUEUE_FIELDS)
    emails = rows[0]
    assert (emails["name"], emails["running"], emails["concurrency"]) == ("emails", "2", "2")
    assert json.loads(emails["keys"]) == {"tenant-a": 1, "tenant-b": 1}
    assert (rows[1]["name"], rows[1]["concurrency"], rows[1]["oldest_queued_age"]) == (
        "idle",
        "",
        "",
    )
    jsonl = [json.loads(line) for line in cli(capsys, url, "-o", "jsonl").splitlines()]
    assert [row["name"] for row in jsonl] == ["emails", "idle", "imports", "reports"]


def test_no_queues_and_control_characters_in_keys(
    sqlite: tuple[durable.Engine, str], capsys: pytest.CaptureFixture[str]
) -> None:
    engine, url = sqlite
    assert cli(capsys, url) == "No queues.\n"
    assert json.loads(cli(capsys, url, "-o", "json")) == {"items": []}

    durable.queue("emails", concurrency=2)
    durable.dispatch(deliver, "x", id="x", queue="emails", key="evil\x1b[2J")
    assert claim(engine, "emails") == ["x"]
    out = cli(capsys, url)
    assert "\x1b" not in out and "evil\\x1b[2J=1" in out
