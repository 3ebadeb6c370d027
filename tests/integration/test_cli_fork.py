"""`durable fork RUN_ID --from N` on SQLite and PostgreSQL: fail, fix, fork; a fork of
a fork; the original untouched; and each bad input refused with the exit code and a
message naming what is valid."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import durable
from durable import RunStatus
from durable.core.records import RunQuery

from . import cli_app
from .cli_action_helpers import APP, actors, failed_pipelines, log_of, one_object
from .cli_world import BOTH, FORMATS, Cli, settle, status


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_fail_fix_fork(engine: durable.Engine, cli: Cli, tmp_path: Path, fmt: str) -> None:
    """A failed run forked from its failed step with the fix in place completes: the
    step before it is copied row for row and its body does not run again (the ledger
    file); the original stays failed, unchanged; both runs record the fork."""
    flag = failed_pipelines(engine, tmp_path, "p-1")
    backend = engine.backend
    before = (backend.get_run("p-1"), list(backend.load_history("p-1")))
    flag.touch()  # the fix
    result = cli("fork", "p-1", "--from", "1", "--id", "p-1b", "--user", "ann", "-o", fmt)
    shown = one_object(result, fmt)
    if shown is None:
        assert result.out == (
            "Forked run p-1 from position 1: new run p-1b of "
            "tests.integration.cli_app.pipeline on queue default (queued).\n"
        )
    else:
        assert (shown["origin"], str(shown["from"])) == ("p-1", "1")
    settle(engine, lambda: status(engine, "p-1b") is RunStatus.COMPLETED)
    assert durable.get("p-1b").result(timeout=5) == ["prepared", "done"]
    assert log_of(tmp_path, "p-1") == ["prepare", "flaky", "flaky"], "prepare ran once"
    copied = backend.load_history("p-1b")[0]
    assert copied == dataclasses.replace(before[1][0], run_id="p-1b")
    assert (backend.get_run("p-1"), list(backend.load_history("p-1"))) == before
    assert actors(engine, "p-1") == [("fork", "cli:ann")]
    assert actors(engine, "p-1b") == [("fork", "cli:ann")]
    assert cli("show", "p-1b", "-o", "json").json()["origin"] == "p-1"
    assert re.search(r"^forked from\s+p-1$", cli("show", "p-1b").out, re.MULTILINE)
    assert "forked from" not in cli("show", "p-1").out


@BOTH
def test_a_fork_of_a_fork_and_from_zero(engine: durable.Engine, cli: Cli, tmp_path: Path) -> None:
    """A fork can be forked; from 0 every body runs again; generated ids are UUIDv7."""
    flag = failed_pipelines(engine, tmp_path, "p-2")
    flag.touch()
    first = cli("fork", "p-2", "--from", "1", "-o", "json").json()["run"]["id"]
    settle(engine, lambda: status(engine, first) is RunStatus.COMPLETED)
    assert len(first) == 32 and first[12] == "7", "a generated UUIDv7"
    second = cli("fork", first, "--from", "2", "--id", "p-2c", "-o", "json").json()
    assert second["origin"] == first
    settle(engine, lambda: status(engine, "p-2c") is RunStatus.COMPLETED)
    assert log_of(tmp_path, "p-2") == ["prepare", "flaky", "flaky"], "nothing ran again"
    assert cli("fork", "p-2", "--from", "0", "--id", "p-2z").code == 0
    settle(engine, lambda: status(engine, "p-2z") is RunStatus.COMPLETED)
    assert log_of(tmp_path, "p-2") == ["prepare", "flaky", "flaky", "prepare", "flaky"]


@BOTH
def test_bad_input_is_refused_with_what_is_valid(
    engine: durable.Engine, cli: Cli, tmp_path: Path
) -> None:
    """Out of the history: exit 2 naming 0 to 2; unknown run: 3; a taken id: 4; an id
    of a child's form: 2. Nothing is created."""
    failed_pipelines(engine, tmp_path, "p-3")
    durable.execute(cli_app.completes, 1, id="done-1")
    count = len(engine.backend.list_runs(RunQuery(), limit=100))
    beyond = cli("fork", "p-3", "--from", "3")
    assert beyond.code == 2 and "positions 0 to 1, so a fork starts from 0 to 2" in beyond.err
    negative = cli("fork", "p-3", "--from", "-1")
    assert negative.code == 2 and "from 0 to 2" in negative.err
    unknown = cli("fork", "nope", "--from", "0")
    assert unknown.code == 3 and "'nope'" in unknown.err
    taken = cli("fork", "p-3", "--from", "1", "--id", "done-1")
    assert taken.code == 4 and "'done-1' already exists" in taken.err
    child_form = cli("fork", "p-3", "--from", "1", "--import", APP, "--id", "x/1")
    assert child_form.code == 2 and "child run" in child_form.err
    assert len(engine.backend.list_runs(RunQuery(), limit=100)) == count
