"""The command line on extreme but well-formed input (finding 13 of issue 23): huge
ages, huge priorities, child-form ids, JSON nested thousands deep. Each exits 2 with
a message naming the option, and never a traceback (it used to exit 1 with one)."""

from __future__ import annotations

import base64

import pytest

import durable
from durable.ops import Operations
from tests.integration import cli_app
from tests.integration.cli_world import BOTH, Cli

APP = "tests.integration.cli_app"
HUGE_AGE = "99999999999999999999999w"
DEEP = "[" * 3000 + "]" * 3000
DEEP_OBJECT = '{"a":' * 3000 + "1" + "}" * 3000


@pytest.fixture
def cli(engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    durable.execute(cli_app.completes, 1, id="done-1")
    return Cli(capsys, url)


def refused(cli: Cli, *args: str, naming: str) -> str:
    result = cli(*args)
    assert result.code == 2, (args, result)
    assert "Traceback" not in result.err and naming in result.err, result.err
    assert result.err.startswith(("durable: ", "usage: ")), result.err
    return result.err


@BOTH
@pytest.mark.parametrize(
    "args",
    [
        ["ls", "--since", HUGE_AGE],
        ["ls", "--until", HUGE_AGE],
        ["ls", "--since", "9" * 400 + "d"],
        ["stats", "--since", HUGE_AGE],
        ["purge", "--older-than", HUGE_AGE, "--yes"],
    ],
)
def test_ages_too_large_to_be_times(cli: Cli, args: list[str]) -> None:
    assert "too long an age" in refused(cli, *args, naming=args[1])


@BOTH
def test_ages_that_fit_are_still_fine(cli: Cli) -> None:
    """The largest age a timedelta holds reaches back before year 1: every run."""
    result = cli("ls", "--since", "142857w", "--output", "json")
    assert result.code == 0, result.err
    assert "done-1" in result.out


@BOTH
@pytest.mark.parametrize(
    ("option", "value", "naming"),
    [
        ("--priority", str(10**22), "priority"),
        ("--priority", str(2**31), "2147483647"),
        ("--id", "nightly/3", "child"),
        ("--id", "", "empty"),
        ("--queue", "", "queue"),
    ],
)
def test_start_refuses_options_no_run_can_have(
    cli: Cli, engine: durable.Engine, option: str, value: str, naming: str
) -> None:
    err = refused(
        cli, "start", cli_app.completes.name, "--import", APP, "--args", "[1]", option, value,
        naming=naming,
    )  # fmt: skip
    assert err.startswith("durable: ")
    assert [run["id"] for run in Operations(engine).list_runs()["items"]] == ["done-1"]


@BOTH
@pytest.mark.parametrize(
    "args",
    [
        ["send", "done-1", "ev", "--data", DEEP],
        ["send", "done-1", "ev", "--data", DEEP_OBJECT],
        ["start", "x.y", "--args", DEEP],
        ["start", "x.y", "--kwargs", DEEP_OBJECT],
    ],
)
def test_json_nested_thousands_deep(cli: Cli, args: list[str]) -> None:
    err = refused(cli, *args, naming=args[-2])
    assert "deep" in err


@BOTH
def test_a_cursor_that_decodes_to_deep_json(cli: Cli) -> None:
    """A cursor is base64 of JSON: one that decodes 100,000 levels deep is not one
    `durable ls` gave out, and says so (the REST API checks its shape first)."""
    cursor = base64.urlsafe_b64encode(b"[" * 100_000 + b"]" * 100_000).decode()
    err = refused(cli, "ls", "--cursor", cursor, naming="cursor")
    assert "not one this API gave out" in err
