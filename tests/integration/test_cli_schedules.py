"""`durable schedules` and `durable schedule pause|resume|rm|trigger ID`, on SQLite and
PostgreSQL, in every output format; trigger also in a fresh process, which must import
the schedule's workflow (by its dotted name, or --import)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import durable
from durable import RunStatus
from durable.cli.schedules import SCHEDULE_FIELDS, interval
from durable.core.records import RunQuery
from durable.ops import Operations
from durable.runtime import schedules

from . import schedule_workflows as flows
from .cli_action_helpers import one_object
from .cli_world import BOTH, FORMATS, Cli, Result, status

MODULE = "tests.integration.schedule_workflows"
REPO = Path(__file__).resolve().parents[2]
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def every(schedule_id: str, customer: str, **options: Any) -> str:
    """An interval schedule of `sync_customer` (15 minutes unless told), stored now."""
    options.setdefault("every", timedelta(minutes=15))
    durable.schedule(flows.sync_customer, customer, id=schedule_id, **options)
    return schedule_id


def fire_now(engine: durable.Engine, schedule_id: str) -> str:
    """Make the schedule's next tick due and fire it (no worker runs the run); its id."""
    stored = engine.backend.get_schedule(schedule_id)
    assert stored is not None
    engine.backend.put_schedule(dataclasses.replace(stored, next_fire_at=engine.backend.now() - 1))
    schedules.fire_due(engine)
    fired = engine.backend.get_schedule(schedule_id)
    assert fired is not None and fired.last_run_id is not None
    return fired.last_run_id


def table_rows(result: Result) -> dict[str, list[str]]:
    """The table's rows by id, split on the column gaps (two spaces or more)."""
    assert result.code == 0, result.err
    header, *lines = result.out.splitlines()
    assert re.split(r"\s{2,}", header) == ["ID", "WORKFLOW", "WHEN", "NEXT", "LAST", "LAST RUN"]
    rows = [re.split(r"\s{2,}", line) for line in lines]
    return {row[0]: row for row in rows}


def a_world(engine: durable.Engine) -> dict[str, str]:
    """Schedules in every state the listing tells apart; the run a tick started."""
    every("sync-c-1", "c-1")
    durable.schedule(flows.nightly_report, id="nightly", cron="0 3 * * *", timezone="Europe/Paris")
    every("sync-paused", "c-2", every=90.5)
    engine.backend.set_schedule_paused("sync-paused", True)
    every("sync-orphan", "c-3", every=timedelta(hours=1, minutes=30))
    stored = engine.backend.get_schedule("sync-orphan")
    assert stored is not None
    engine.backend.put_schedule(dataclasses.replace(stored, declared=True, orphaned=True))
    every("sync-fired", "c-4", every=timedelta(days=1))
    return {"fired": fire_now(engine, "sync-fired")}


def test_intervals_read_as_people_write_them() -> None:
    assert [interval(s) for s in (900, 5400, 86400, 90061, 61, 0.5, 90.5)] == [
        "15m",
        "1h30m",
        "1d",
        "1d1h1m1s",
        "1m1s",
        "0.5s",
        "90.5s",
    ]


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_schedules_lists_every_schedule(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    """The table: WHEN as cron and zone or "every ...", NEXT a time or why there is
    none, LAST and LAST RUN with its status. The machine formats: the Schedule views."""
    fired = a_world(engine)["fired"]
    views = Operations(engine).list_schedules()
    assert [view["id"] for view in views] == [
        "nightly",
        "sync-c-1",
        "sync-fired",
        "sync-orphan",
        "sync-paused",
    ]
    result = cli("schedules", "-o", fmt)
    assert result.code == 0, result.err
    if fmt == "table":
        rows = table_rows(result)
        assert rows["nightly"][2:4] == ["0 3 * * * Europe/Paris", rows["nightly"][3]]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT0[12]:00:00Z", rows["nightly"][3])  # 03:00 Paris
        assert rows["nightly"][4:] == ["-", "-"]
        assert rows["sync-c-1"][2] == "every 15m" and re.fullmatch(TIME, rows["sync-c-1"][3])
        assert rows["sync-paused"][2:4] == ["every 90.5s", "paused"]
        assert rows["sync-orphan"][2:4] == ["every 1h30m", "orphaned"]
        assert rows["sync-fired"][2] == "every 1d"
        assert re.fullmatch(TIME, rows["sync-fired"][4])
        assert rows["sync-fired"][5] == f"{fired} (queued)"
        assert rows["sync-c-1"][1] == flows.sync_customer.name[:39] + "…"  # cut at 40
    elif fmt == "json":
        assert result.json() == {"items": views}
    elif fmt == "jsonl":
        assert result.jsonl() == views
    else:
        reader = csv.DictReader(io.StringIO(result.out))
        assert tuple(reader.fieldnames or ()) == SCHEDULE_FIELDS
        rows_csv = {row["id"]: row for row in reader}
        assert rows_csv.keys() == {view["id"] for view in views}
        assert (rows_csv["nightly"]["cron"], rows_csv["nightly"]["every"]) == ("0 3 * * *", "")
        assert rows_csv["sync-paused"]["paused"] == "true"
        assert rows_csv["sync-paused"]["next_fire_at"] == ""
        assert json.loads(rows_csv["sync-fired"]["last_run"]) == {"id": fired, "status": "queued"}


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_no_schedules(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    result = cli("schedules", "-o", fmt)
    assert result.code == 0, result.err
    expected = {
        "table": "No schedules.\n",
        "json": '{\n  "items": []\n}\n',
        "jsonl": "",
        "csv": ",".join(SCHEDULE_FIELDS) + "\n",
    }
    assert result.out == expected[fmt]


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_pause_then_resume(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    """pause stops the ticks (no next tick, listed paused); pausing again is fine;
    resume fires again from the next tick after now; resuming again is a conflict."""
    every("sync-p", "c-1")
    paused = cli("schedule", "pause", "sync-p", "-o", fmt)
    shown = one_object(paused, fmt)
    if shown is None:
        assert paused.out == "Paused schedule sync-p.\n"
    else:
        assert str(shown["paused"]).lower() == "true"
        assert shown["next_fire_at"] in (None, "")
    stored = engine.backend.get_schedule("sync-p")
    assert stored is not None and stored.paused
    assert table_rows(cli("schedules"))["sync-p"][3] == "paused"
    assert cli("schedule", "pause", "sync-p").code == 0

    resumed = cli("schedule", "resume", "sync-p", "-o", fmt)
    shown = one_object(resumed, fmt)
    stored = engine.backend.get_schedule("sync-p")
    assert stored is not None and not stored.paused
    assert stored.next_fire_at > engine.backend.now()
    if shown is None:
        assert re.fullmatch(f"Resumed schedule sync-p; next tick {TIME}.\n", resumed.out)
    else:
        assert str(shown["paused"]).lower() == "false" and shown["next_fire_at"]
    again = cli("schedule", "resume", "sync-p")
    assert again.code == 4
    assert again.err == "durable: Schedule 'sync-p' is not paused; there is nothing to resume.\n"


@BOTH
@pytest.mark.parametrize("verb", ["pause", "resume", "rm", "trigger"])
def test_unknown_schedules_exit_3(engine: durable.Engine, cli: Cli, verb: str) -> None:
    result = cli("schedule", verb, "nope")
    assert result.code == 3 and result.out == ""
    assert result.err == (
        "durable: No schedule has the id 'nope'; `durable schedules` lists them.\n"
    )


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_rm_deletes_and_keeps_the_runs(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    every("sync-rm", "c-1")
    run_id = fire_now(engine, "sync-rm")
    result = cli("schedule", "rm", "sync-rm", "-o", fmt)
    shown = one_object(result, fmt)
    if shown is None:
        assert result.out == "Deleted schedule sync-rm; the runs it started stay.\n"
    else:
        assert shown == {"deleted": "sync-rm"}
    assert engine.backend.get_schedule("sync-rm") is None
    assert status(engine, run_id) is RunStatus.QUEUED
    assert cli("schedules").out == "No schedules.\n"
    assert cli("schedule", "rm", "sync-rm").code == 3


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_trigger_starts_a_run_now(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    """A queued run of the schedule's workflow with its arguments, on its queue, id
    <schedule>@<now>-manual; not the last run of a tick."""
    every("sync-t", "c-9", queue="later")
    result = cli("schedule", "trigger", "sync-t", "-o", fmt)
    shown = one_object(result, fmt)
    [run] = engine.backend.list_runs(RunQuery(id_contains="sync-t@"), limit=10)
    assert run.id.endswith("-manual") and (run.queue, run.status) == ("later", RunStatus.QUEUED)
    assert Operations(engine).get_run(run.id)["input"] == {"args": ["c-9"], "kwargs": {}}
    if shown is None:
        assert result.out == f"Started run {run.id}.\n"
    else:
        assert shown == {"run": run.id}
    listed = cli("schedules", "-o", "json").json()["items"]
    assert listed[0]["last_run"] is None


def fresh(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m durable ...` in a new process, from the repository's root."""
    return subprocess.run(
        [sys.executable, "-m", "durable", *args, "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=os.environ,
        check=False,
    )


@BOTH
def test_trigger_in_a_fresh_process_imports_the_workflow(engine: durable.Engine, url: str) -> None:
    """By the workflow's dotted name, or --import; a workflow nobody can import here is
    a conflict that says how to import it; a module that does not import, bad input."""
    every("sync-fresh", "c-5")
    by_name = fresh(url, "schedule", "trigger", "sync-fresh", "-o", "json")
    assert by_name.returncode == 0, by_name.stderr
    first = json.loads(by_name.stdout)["run"]
    assert status(engine, first) is RunStatus.QUEUED

    imported = fresh(url, "schedule", "trigger", "sync-fresh", "--import", MODULE)
    assert imported.returncode == 0, imported.stderr
    assert re.fullmatch(r"Started run sync-fresh@\S+-manual\.\n", imported.stdout)

    stored = engine.backend.get_schedule("sync-fresh")
    assert stored is not None
    engine.backend.put_schedule(
        dataclasses.replace(stored, id="elsewhere", workflow="nowhere.to.be.found")
    )
    unknown = fresh(url, "schedule", "trigger", "elsewhere")
    assert unknown.returncode == 4 and "not registered" in unknown.stderr
    assert "--import" in unknown.stderr
    broken = fresh(url, "schedule", "trigger", "sync-fresh", "--import", "tests.no_such_module")
    assert broken.returncode == 2 and "cannot import" in broken.stderr
    assert len(engine.backend.list_runs(RunQuery(id_contains="sync-fresh@"), limit=10)) == 2


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_a_missing_database_file_is_an_error(url: str, cli: Cli) -> None:
    """Listing or acting on a SQLite file that does not exist does not create it."""
    for args in (["schedules"], ["schedule", "pause", "x"]):
        result = cli(*args)
        assert result.code == 1 and "no database file" in result.err
    assert not Path(url.removeprefix("sqlite:///")).exists()
