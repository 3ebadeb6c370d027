"""`durable start` on SQLite and PostgreSQL, in every output format: a run queued with
its arguments, attributes and actor, the module a dotted name starts with imported, and
what it cannot start refused with an exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import durable

from .cli_action_helpers import APP, actors, one_object
from .cli_world import BOTH, FORMATS, Cli

REPO = Path(__file__).resolve().parents[2]


@BOTH
@pytest.mark.parametrize("fmt", FORMATS)
def test_start_queues_a_run(engine: durable.Engine, cli: Cli, fmt: str) -> None:
    """start queues a run of a registered workflow, records who started it, and prints
    the RunSummary; a worker then runs it."""
    result = cli(
        "start", f"{APP}.completes", "--args", "[3]", "--id", "s-1", "--queue", "later",
        "--priority", "5", "--user", "alice", "-o", fmt,
    )  # fmt: skip
    shown = one_object(result, fmt)
    if shown is None:
        assert result.out == f"Started run s-1 of {APP}.completes on queue later (queued).\n"
    else:
        assert (shown["id"], shown["status"], shown["queue"]) == ("s-1", "queued", "later")
        assert str(shown["priority"]) == "5"
    assert actors(engine, "s-1") == [("start", "cli:alice")]
    with durable.Worker(engine, queues=["later"], poll=0.02):
        assert durable.get("s-1").result(timeout=30) == 9


@BOTH
def test_start_with_keyword_arguments_and_the_users_name(
    engine: durable.Engine, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--kwargs fills keyword arguments; the actor defaults to cli:$USER."""
    monkeypatch.setenv("USER", "bob")
    run = cli("start", f"{APP}.approval", "--kwargs", '{"order": "o-9"}', "-o", "json").json()
    detail = cli("show", run["id"], "-o", "json").json()
    assert detail["input"] == {"args": [], "kwargs": {"order": "o-9"}}
    assert actors(engine, run["id"]) == [("start", "cli:bob")]


@BOTH
def test_start_with_attributes_that_ls_finds(engine: durable.Engine, cli: Cli) -> None:
    """--attributes are the run's, typed, and `durable ls --attr` finds it by them."""
    given = '{"customer": "c-42", "vip": true, "n": 5}'
    run = cli(
        "start", f"{APP}.completes", "--args", "[1]", "--attributes", given, "-o", "json"
    ).json()
    found = cli("ls", "--attr", "customer=c-42", "--attr", "n=5", "-o", "json").json()
    assert [item["id"] for item in found["items"]] == [run["id"]]
    assert found["items"][0]["attributes"] == {"customer": "c-42", "vip": True, "n": 5}


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nope.flows.missing"], 3, "No workflow named 'nope.flows.missing' is registered"),
        ([f"{APP}.completes", "--args", "[1,"], 2, "--args is not valid JSON"),
        ([f"{APP}.completes", "--args", '{"x": 1}'], 2, "--args must be a JSON array"),
        ([f"{APP}.completes", "--kwargs", "[1]"], 2, "--kwargs must be a JSON object"),
        ([f"{APP}.completes", "--args", "[1, 2, 3]"], 2, "The arguments do not fit"),
        ([f"{APP}.completes", "--attributes", "[1]"], 2, "--attributes must be a JSON object"),
        ([f"{APP}.completes", "--attributes", '{"k": null}'], 2, "k"),
        (["x", "--import", "tests.integration.no_such_module"], 2, "cannot import"),
    ],
)
def test_start_refuses_what_it_cannot_start(
    engine: durable.Engine, cli: Cli, args: list[str], code: int, message: str
) -> None:
    """An unknown workflow is not found (3); bad JSON, arguments that do not fit and a
    module that cannot be imported are bad input (2); nothing is written."""
    result = cli("start", *args)
    assert result.code == code
    assert result.err.startswith("durable: ") and message in result.err
    assert cli("ls", "-o", "json").json()["items"] == []


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_start_reports_a_module_that_fails_to_import(
    engine: durable.Engine,
    cli: Cli,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module under the workflow's name that exists but raises is bad input (2), with
    its error; a name past the last module is not found (3)."""
    (tmp_path / "brokenpkg").mkdir()
    (tmp_path / "brokenpkg" / "__init__.py").write_text("raise ImportError('needs pyyaml')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # start puts the cwd on it
    broken = cli("start", "brokenpkg.flows.nightly")
    assert broken.code == 2
    assert "durable: cannot import brokenpkg.flows: needs pyyaml" in broken.err
    nested = cli("start", f"{APP}.Holder.nightly")
    assert nested.code == 3
    assert f"No workflow named '{APP}.Holder.nightly'" in nested.err


@BOTH
def test_start_with_a_taken_id_conflicts(engine: durable.Engine, cli: Cli) -> None:
    """The same id with the same call returns the run; with another call, exit 4."""
    first = cli("start", f"{APP}.completes", "--args", "[1]", "--id", "dup", "-o", "json")
    again = cli("start", f"{APP}.completes", "--args", "[1]", "--id", "dup", "-o", "json")
    assert again.json() == first.json()
    other = cli("start", f"{APP}.completes", "--args", "[2]", "--id", "dup")
    assert other.code == 4
    assert other.err.startswith("durable: ")


@pytest.mark.parametrize("url", ["sqlite"], indirect=True)
def test_start_imports_the_module_a_dotted_name_starts_with(url: str, tmp_path: Path) -> None:
    """In a fresh process, `start pkg.module.workflow` imports pkg.module by itself."""
    result = subprocess.run(
        [
            *(sys.executable, "-m", "durable", "start", f"{APP}.completes", "--args", "[4]"),
            *("--id", "fresh", "-o", "json", "--db", url),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "USER": "carol"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["id"] == "fresh"
    with durable.Engine(url) as engine:
        assert actors(engine, "fresh") == [("start", "cli:carol")]
