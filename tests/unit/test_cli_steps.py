"""How `durable history` and `durable show` word a task step (cli/runs.py)."""

from __future__ import annotations

import datetime as dt

from durable.cli.runs import _step_result

START = dt.datetime(2026, 11, 26, 10, 0, 0, tzinfo=dt.UTC)


def iso(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def test_a_running_task_shows_progress_elapsed_time_and_heartbeat() -> None:
    step = {
        "status": "running",
        "progress": 0.4,
        "started_at": iso(START),
        "heartbeat_at": iso(START + dt.timedelta(seconds=80)),
    }
    now = (START + dt.timedelta(seconds=95)).timestamp()
    assert _step_result(step, now) == "running, 40%, for 1m35s, heartbeat 2026-11-26T10:01:20Z"


def test_a_running_task_without_times_says_only_running() -> None:
    assert _step_result({"status": "running", "started_at": "garbled"}) == "running"
