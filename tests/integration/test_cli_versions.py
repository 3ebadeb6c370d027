"""Versions at the surfaces: `durable worker --version/--only-version` refusing bad
input, `durable ls --version`, `durable show`, and the REST API's filter and field."""

from __future__ import annotations

import csv
import io

import pytest

import durable
from durable.cli.main import main
from durable.web import make_app
from tests.web.openapi_check import CheckedClient

from . import cli_app
from .cli_world import BOTH, Cli

TOKEN = "versions-token"


def _runs(url: str) -> None:
    """Runs queued by processes of versions v1 and v2, and by one without a version."""
    for version, run_id in (("v1", "a-1"), ("v2", "b-2"), ("v1", "c-1"), (None, "d-0")):
        with durable.Engine(url, version=version) as engine:
            engine.dispatch_call(cli_app.completes.bind(1), run_id=run_id)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--only-version"], "--only-version claims only the runs of this worker's code version: "
         "add --version V (or set $DURABLE_VERSION)"),
        (["--version", "", "--only-version"], "must not be empty"),
        (["--version", "v" * 600], "at most 512 bytes"),
    ],
)  # fmt: skip
def test_worker_refuses_a_version_it_cannot_use(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad usage exits 2 before anything is imported or opened, saying what to give."""
    monkeypatch.delenv("DURABLE_VERSION", raising=False)
    code = main(["worker", "tests.integration.no_such_module", "--db", "memory://", *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert says in err
    assert "cannot import" not in err, "refused before importing the modules"
    assert "usage: durable worker" in err


@BOTH
def test_ls_filters_and_shows_versions(
    engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """ls --version lists that version's runs, with the version in every format; show
    prints it."""
    _runs(url)
    cli = Cli(capsys, url)
    page = cli("ls", "--version", "v1", "-o", "json")
    assert sorted(item["id"] for item in page.json()["items"]) == ["a-1", "c-1"]
    assert {item["version"] for item in page.json()["items"]} == {"v1"}
    everything = cli("ls", "-o", "csv")
    rows = {row["id"]: row["version"] for row in csv.DictReader(io.StringIO(everything.out))}
    assert rows == {"a-1": "v1", "b-2": "v2", "c-1": "v1", "d-0": ""}
    table = cli("ls", "--version", "v2")
    assert table.code == 0 and "VERSION" in table.out.splitlines()[0]
    assert "b-2" in table.out and "a-1" not in table.out and " v2 " in table.out
    shown = cli("show", "b-2")
    assert shown.code == 0
    assert any(line.split() == ["version", "v2"] for line in shown.out.splitlines())
    assert any(line.split() == ["version", "-"] for line in cli("show", "d-0").out.splitlines())
    assert cli("ls", "--version", "v9").out.strip() == "No runs match."


@BOTH
def test_the_api_filters_and_shows_versions(engine: durable.Engine, url: str) -> None:
    """GET /api/v1/runs?version= filters; run views carry ``version`` (as documented)."""
    _runs(url)
    api = CheckedClient(make_app(engine, token=TOKEN), token=TOKEN)
    listed = api.get("/api/v1/runs", "version=v1").json()["items"]
    assert sorted(item["id"] for item in listed) == ["a-1", "c-1"]
    assert api.get("/api/v1/runs/b-2").json()["version"] == "v2"
    assert api.get("/api/v1/runs/d-0").json()["version"] is None
    assert api.get("/api/v1/runs", "version=v9").json()["items"] == []
