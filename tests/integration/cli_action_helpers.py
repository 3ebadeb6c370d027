"""What the tests of `durable start`, `cancel`, `retry`, `send`, `fork`, `pause` and
the schedules' commands share: who acted on a run, the object an action printed, and
runs that failed and can be retried."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.ops import Operations

from . import cli_app
from .cli_world import Result

APP = "tests.integration.cli_app"


def actors(engine: durable.Engine, run_id: str) -> list[tuple[str, str | None]]:
    """(action, actor) of everything operators did to the run."""
    return [(done["action"], done["actor"]) for done in Operations(engine).actions(run_id)]


def one_object(result: Result, fmt: str) -> dict[str, Any] | None:
    """The object an action printed as json, jsonl or csv (None for the table)."""
    assert result.code == 0, result.err
    if fmt == "json":
        return dict(json.loads(result.out))
    if fmt == "jsonl":
        (line,) = result.out.splitlines()
        return dict(json.loads(line))
    if fmt == "csv":
        (row,) = csv.DictReader(io.StringIO(result.out))
        return row
    return None


def failed_pipelines(engine: durable.Engine, tmp_path: Path, *run_ids: str) -> Path:
    """Runs of `pipeline` that failed in `flaky`; returns the flag file that lets
    `flaky` pass. Each run logs its task bodies to ``<tmp>/<id>.log``."""
    flag = tmp_path / "flag"
    for run_id in run_ids:
        with pytest.raises(RuntimeError, match="no flag file"):
            durable.execute(cli_app.pipeline, str(tmp_path / f"{run_id}.log"), str(flag), id=run_id)
    return flag


def log_of(tmp_path: Path, run_id: str) -> list[str]:
    return (tmp_path / f"{run_id}.log").read_text().split()
