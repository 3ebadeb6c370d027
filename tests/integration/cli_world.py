"""What the CLI tests share: runs in known states, and `durable` called in-process.

`make_runs` leaves one run in each interesting state on the test's database; `Cli`
calls `durable.cli.main` with ``--db`` pointing there and captures what it prints.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import durable
from durable import RunStatus, Worker
from durable.cli.main import main

from . import cli_app

BOTH = pytest.mark.parametrize(
    "url", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
FORMATS = ("table", "json", "jsonl", "csv")


@dataclass(frozen=True)
class Result:
    """What one `durable` command did: exit code, stdout, stderr."""

    code: int
    out: str
    err: str

    def json(self) -> Any:
        """stdout parsed as JSON, after checking the command succeeded."""
        assert self.code == 0, self.err
        return json.loads(self.out)

    def jsonl(self) -> list[Any]:
        """stdout parsed as JSON lines, after checking the command succeeded."""
        assert self.code == 0, self.err
        return [json.loads(line) for line in self.out.splitlines()]


class Cli:
    """`durable ...` run in this process against one database."""

    def __init__(self, capsys: pytest.CaptureFixture[str], url: str) -> None:
        self.capsys = capsys
        self.url = url

    def __call__(self, *args: str) -> Result:
        self.capsys.readouterr()  # drop what earlier steps printed
        code = main([*args, "--db", self.url])
        out, err = self.capsys.readouterr()
        return Result(code, out, err)


def status(engine: durable.Engine, run_id: str) -> RunStatus | None:
    """The run's stored status, or None if there is no such run."""
    run = engine.backend.get_run(run_id)
    return None if run is None else run.status


def settle(engine: durable.Engine, done: Callable[[], bool]) -> None:
    """Run a worker in this process until *done()* holds."""
    with Worker(engine, concurrency=4, poll=0.02):
        deadline = time.monotonic() + 30
        while not done():
            assert time.monotonic() < deadline, "the worker did not get the runs there"
            time.sleep(0.01)


def make_runs(engine: durable.Engine) -> None:
    """Runs in every state the tests look at, oldest first:

    done-1 completed; fail-1 failed (ValueError: boom); parent-1 completed, with its
    child parent-1/0; wait-1 waiting for the event "approved"; queued-1 queued on a
    queue nobody serves.
    """
    durable.execute(cli_app.completes, 1, id="done-1")
    with pytest.raises(ValueError, match="boom"):
        durable.execute(cli_app.fails, "boom", id="fail-1")
    durable.execute(cli_app.parent, 2, id="parent-1")
    durable.dispatch(cli_app.approval, "o-1", id="wait-1")
    settle(engine, lambda: status(engine, "wait-1") is RunStatus.WAITING)
    durable.dispatch(cli_app.completes, 5, id="queued-1", queue="later")
