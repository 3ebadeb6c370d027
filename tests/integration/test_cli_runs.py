"""`durable ls`, `show`, `history` and `stats` on real runs, SQLite and PostgreSQL,
in every output format."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.cli.main import main

from . import cli_app
from .cli_world import BOTH, Cli, make_runs

ALL = ["queued-1", "wait-1", "parent-1/0", "parent-1", "fail-1", "done-1"]
APP = "tests.integration.cli_app"


@pytest.fixture
def cli(engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    """The runs of `make_runs` on the test's database, and the CLI pointed at it."""
    make_runs(engine)
    return Cli(capsys, url)


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def ids(items: list[dict[str, Any]]) -> list[str]:
    return [item["id"] for item in items]


@BOTH
def test_ls_prints_the_same_runs_in_every_format(cli: Cli) -> None:
    """json is the ops page, jsonl its items, csv one row per item with nested values as
    JSON text, the table one line per run; all newest first."""
    page = cli("ls", "-o", "json").json()
    assert ids(page["items"]) == ALL
    assert page["next_cursor"] is None
    assert cli("ls", "-o", "jsonl").jsonl() == page["items"]

    rows = csv_rows(cli("ls", "-o", "csv").out)
    assert [row["id"] for row in rows] == ALL
    assert list(rows[0]) == list(page["items"][0])
    child = rows[ALL.index("parent-1/0")]
    assert child["parent_id"] == "parent-1"
    assert child["cancel_requested"] == "false"
    assert rows[0]["started_at"] == ""  # null: an empty cell

    table = cli("ls")
    assert table.code == 0
    lines = table.out.splitlines()
    assert lines[0].split() == [
        "ID", "WORKFLOW", "STATUS", "QUEUE", "VERSION", "CREATED", "DURATION", "WAITING",
        "ON", "ATTRIBUTES",
    ]  # fmt: skip
    assert [line.split()[0] for line in lines[1:]] == ALL
    assert "event:approved" in lines[2]
    created = lines[1].split()[5]
    assert dt.datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").year > 2000  # to the second


@BOTH
def test_ls_filters(cli: Cli) -> None:
    """Each filter narrows the list; they combine; statuses repeat or take commas."""

    def listed(*args: str) -> list[str]:
        return ids(cli("ls", "-o", "json", *args).json()["items"])

    assert listed("--status", "failed") == ["fail-1"]
    assert listed("--status", "failed", "--status", "waiting") == ["wait-1", "fail-1"]
    assert listed("--status", "queued,waiting") == ["queued-1", "wait-1"]
    assert listed("--workflow", f"{APP}.completes") == ["queued-1", "parent-1/0", "done-1"]
    assert listed("--workflow", f"{APP}.completes", "--status", "completed") == [
        "parent-1/0",
        "done-1",
    ]
    assert listed("--queue", "later") == ["queued-1"]
    assert listed("--parent", "parent-1") == ["parent-1/0"]
    assert listed("--search=-1/") == ["parent-1/0"]
    assert listed("--since", "1h") == ALL
    assert listed("--until", "1h") == []
    tomorrow = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).isoformat()
    assert listed("--since", tomorrow) == []
    assert listed("--until", tomorrow, "--since", "2000-01-01") == ALL


@BOTH
def test_ls_pages_with_a_cursor(cli: Cli) -> None:
    """--limit cuts a page; the table says how to get the next one on stderr, and the
    cursors walk every run exactly once."""
    first = cli("ls", "--limit", "4")
    assert len(first.out.splitlines()) == 5
    assert "More runs: add --cursor " in first.err
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = cli("ls", "-o", "json", "--limit", "4", *(["--cursor", cursor] if cursor else []))
        answer = page.json()
        if not seen:
            assert f"--cursor {answer['next_cursor']}" in first.err
        seen.extend(ids(answer["items"]))
        cursor = answer["next_cursor"]
        if cursor is None:
            break
    assert seen == ALL


@BOTH
def test_show_a_failed_run(cli: Cli) -> None:
    """show: status, input, the error with its traceback; the same object in every
    format."""
    detail = cli("show", "fail-1", "-o", "json").json()
    assert detail["status"] == "failed"
    assert detail["input"] == {"args": ["boom"], "kwargs": {}}
    assert detail["error"]["type"].rsplit(".", 1)[-1] == "ValueError"
    assert detail["error"]["message"] == "boom"
    assert "raise ValueError(message)" in detail["error"]["traceback"]
    assert cli("show", "fail-1", "-o", "jsonl").jsonl() == [detail]
    (row,) = csv_rows(cli("show", "fail-1", "-o", "csv").out)
    assert json.loads(row["error"]) == detail["error"]
    assert json.loads(row["input"]) == detail["input"]

    table = cli("show", "fail-1")
    assert table.code == 0
    assert "status    failed" in table.out
    assert 'input     {"args": ["boom"], "kwargs": {}}' in table.out
    assert "error     ValueError: boom" in table.out
    assert "traceback:\n  Traceback (most recent call last):" in table.out


@BOTH
def test_show_what_a_run_waits_on_and_its_children(cli: Cli) -> None:
    """A waiting run names its event; a parent lists its children and output."""
    waiting = cli("show", "wait-1", "-o", "json").json()
    assert waiting["waiting"]["kind"] == "event"
    assert waiting["waiting"]["event"] == "approved"
    assert "waiting on  event 'approved'" in cli("show", "wait-1").out
    parent = cli("show", "parent-1", "-o", "json").json()
    assert parent["children"] == ["parent-1/0"]
    assert parent["output"] == 70
    table = cli("show", "parent-1").out
    assert "children  parent-1/0" in table
    assert "output    70" in table


@BOTH
def test_history_one_line_per_position(cli: Cli) -> None:
    """history: position, kind, name, status, attempts, duration, output or error."""
    steps = cli("history", "done-1", "-o", "json").json()["items"]
    assert [(s["position"], s["kind"], s["name"], s["output"]) for s in steps] == [
        (0, "task", f"{APP}.add", 2),
        (1, "task", f"{APP}.add", 3),
    ]
    assert cli("history", "done-1", "-o", "jsonl").jsonl() == steps
    rows = csv_rows(cli("history", "done-1", "-o", "csv").out)
    assert [row["position"] for row in rows] == ["0", "1"]
    assert rows[0]["output"] == "2"

    failed = cli("history", "fail-1").out.splitlines()
    assert failed[0].split() == [
        "POS", "KIND", "NAME", "STATUS", "ATTEMPTS", "DURATION", "RESULT"
    ]  # fmt: skip
    assert failed[1].split()[:5] == ["0", "task", f"{APP}.explode", "failed", "1"]
    assert failed[1].endswith("ValueError: boom")
    child = cli("history", "parent-1").out.splitlines()[1].split()
    assert child[:4] == ["0", "workflow", f"{APP}.completes", "completed"]


@BOTH
def test_stats_per_workflow_and_task(cli: Cli) -> None:
    """stats: runs, successes and failures per workflow and per task, in every format."""
    answer = cli("stats", "-o", "json").json()
    workflows = {stat["name"]: stat for stat in answer["workflows"]}
    assert workflows[f"{APP}.completes"]["completed"] == 2
    # RUNS counts every run, unfinished ones too (queued-1 waits on a queue nobody serves)
    assert workflows[f"{APP}.completes"]["runs"] == 3
    assert workflows[f"{APP}.approval"]["runs"] == 1  # wait-1, waiting
    assert workflows[f"{APP}.approval"]["success"] is None
    assert workflows[f"{APP}.fails"]["failed"] == 1
    assert workflows[f"{APP}.fails"]["success"] == 0
    assert workflows[f"{APP}.fails"]["failures_24h"] == 1
    tasks = {stat["name"]: stat for stat in answer["tasks"]}
    assert tasks[f"{APP}.add"]["runs"] == 4
    assert tasks[f"{APP}.add"]["success"] == 100

    lines = cli("stats", "-o", "jsonl").jsonl()
    assert [line["kind"] for line in lines] == ["workflow"] * len(workflows) + ["task"] * len(tasks)
    assert {line["name"] for line in lines} == set(workflows) | set(tasks)
    rows = csv_rows(cli("stats", "-o", "csv").out)
    assert {(row["kind"], row["name"]) for row in rows} >= {("task", f"{APP}.explode")}

    table = cli("stats").out
    assert "WORKFLOW" in table and "TASK" in table and "SUCCESS" in table
    assert f"{APP}.fails" in table and "0.0%" in table

    only = cli("stats", "--workflow", f"{APP}.fails", "--since", "1h", "-o", "json").json()
    assert [stat["name"] for stat in only["workflows"]] == [f"{APP}.fails"]
    assert [stat["name"] for stat in only["tasks"]] == [f"{APP}.explode"], "its tasks only"
    one_task = cli("stats", "--task", f"{APP}.add", "-o", "json").json()
    assert [stat["name"] for stat in one_task["tasks"]] == [f"{APP}.add"]
    assert one_task["workflows"] == [], "--task: that task, no workflow"
    assert "WORKFLOW" not in cli("stats", "--task", f"{APP}.add").out


@BOTH
@pytest.mark.parametrize("command", ["show", "history"])
def test_an_unknown_run_exits_3(cli: Cli, command: str) -> None:
    """A run id that does not exist: exit 3 and a message naming it, on stderr."""
    result = cli(command, "nope", "-o", "json")
    assert result.code == 3
    assert result.out == ""
    assert result.err.startswith("durable: No run has the id 'nope'")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ls", "--since", "5x"], "'5x' is neither an ISO 8601 time"),
        (["ls", "--status", "sleeping"], "'sleeping' is not a run status"),
        (["ls", "--limit", "0"], "'0' is not a positive whole number"),
        (["ls", "-o", "yaml"], "invalid choice: 'yaml'"),
    ],
)
def test_bad_options_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Malformed options are usage errors: exit 2, saying what is wrong."""
    assert main(args) == 2
    assert message in capsys.readouterr().err


@BOTH
def test_a_cursor_it_did_not_give_exits_2(cli: Cli) -> None:
    """A made-up cursor is bad input (the ops BadRequest): exit 2."""
    result = cli("ls", "--cursor", "not-a-cursor")
    assert result.code == 2
    assert "is not one this API gave out" in result.err


def test_a_missing_database_file_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reading a SQLite path with no file is an error, and creates no file."""
    missing = tmp_path / "nope.db"
    assert main(["ls", "--db", f"sqlite:///{missing}"]) == 1
    assert f"durable: no database file at {missing}" in capsys.readouterr().err
    assert not missing.exists()


def test_an_unreachable_server_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    """A database that cannot be reached is a general error (exit 1) naming it."""
    assert main(["ls", "--db", "postgresql://postgres@127.0.0.1:1/test"]) == 1
    assert "Cannot connect to postgresql://postgres@127.0.0.1:1/test" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_the_database_comes_from_the_environment(
    engine: durable.Engine,
    url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without --db, $DURABLE_DATABASE_URL names the database."""
    durable.execute(cli_app.completes, 1, id="from-env")
    monkeypatch.setenv("DURABLE_DATABASE_URL", url)
    assert main(["ls", "-o", "jsonl"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["id"] for line in listed] == ["from-env"]


@BOTH
def test_the_console_command_works(cli: Cli, tmp_path: Path) -> None:
    """`python -m durable` runs the same commands as a real process would."""
    env = {**os.environ, "DURABLE_DATABASE_URL": cli.url}
    listed = subprocess.run(
        [sys.executable, "-m", "durable", "ls", "-o", "json", "--status", "failed"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert ids(json.loads(listed.stdout)["items"]) == ["fail-1"]
    missing = subprocess.run(
        [sys.executable, "-m", "durable", "show", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=False,
    )
    assert missing.returncode == 3
    assert "durable: No run has the id 'nope'" in missing.stderr
