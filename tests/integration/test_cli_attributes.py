"""Attributes at the surfaces, on SQLite and PostgreSQL: `durable ls --attr` (and its
bad input), `durable show`, and the REST API's ``?attr.<key>=`` filter and fields,
every answer checked against the OpenAPI document."""

from __future__ import annotations

import pytest

import durable
from durable.core.records import RunQuery
from durable.web import make_app
from tests.web.openapi_check import CheckedClient

from . import cli_app
from .cli_world import BOTH, Cli

TOKEN = "attributes-token"


def _runs(engine: durable.Engine) -> None:
    """Three runs of two customers; one with no attributes."""
    for run_id, attributes in (
        ("a-1", {"customer": "c-42", "region": "eu", "n": 5}),
        ("b-2", {"customer": "c-42", "region": "us", "vip": True}),
        ("c-3", {"customer": "c-7", "region": "eu", "n": 5.0}),
        ("d-4", None),
    ):
        engine.dispatch_call(cli_app.completes.bind(1), run_id=run_id, attributes=attributes)


@BOTH
def test_ls_filters_by_attributes_and_show_prints_them(
    engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--attr keeps the runs holding every pair (matched on text); the table and JSON
    show each run's attributes, typed in JSON; show prints them."""
    _runs(engine)
    cli = Cli(capsys, url)
    page = cli("ls", "--attr", "customer=c-42", "-o", "json").json()
    assert sorted(item["id"] for item in page["items"]) == ["a-1", "b-2"]
    by_id = {item["id"]: item["attributes"] for item in page["items"]}
    assert by_id["b-2"] == {"customer": "c-42", "region": "us", "vip": True}
    both = cli("ls", "--attr", "customer=c-42", "--attr", "region=eu", "-o", "json").json()
    assert [item["id"] for item in both["items"]] == ["a-1"]
    numbers = cli("ls", "--attr", "n=5", "-o", "json").json()
    assert sorted(item["id"] for item in numbers["items"]) == ["a-1", "c-3"]
    table = cli("ls", "--attr", "vip=true")
    assert table.code == 0 and "ATTRIBUTES" in table.out.splitlines()[0]
    assert "b-2" in table.out and "customer=c-42, region=us, vip=true" in table.out
    assert cli("ls", "--attr", "customer=nobody").out.strip() == "No runs match."
    shown = cli("show", "a-1").out.splitlines()
    assert "attributes  customer=c-42, n=5, region=eu" in shown


@BOTH
def test_ls_refuses_a_filter_without_equals(
    engine: durable.Engine, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--attr without '=' (or one key with two values) exits 2, saying how to write it;
    a bulk action with such a filter changes nothing."""
    _runs(engine)
    cli = Cli(capsys, url)
    bad = cli("ls", "--attr", "customer")
    assert bad.code == 2 and "key=value, like customer=c-42; 'customer' has no =" in bad.err
    twice = cli("ls", "--attr", "a=1", "--attr", "a=2")
    assert twice.code == 2 and "--attr a= is given twice" in twice.err
    refused = cli("cancel", "--all", "--attr", "region", "--yes")
    assert refused.code == 2
    assert engine.backend.count_runs(RunQuery(statuses=(durable.RunStatus.CANCELLED,))) == 0


@BOTH
def test_the_api_filters_by_attributes(engine: durable.Engine, url: str) -> None:
    """GET /api/v1/runs?attr.k=v filters (several ANDed); list items and the run view
    carry ``attributes`` (as documented); a filter key that cannot be one is a 400."""
    _runs(engine)
    api = CheckedClient(make_app(engine, token=TOKEN), token=TOKEN)
    listed = api.get("/api/v1/runs", "attr.customer=c-42").json()["items"]
    assert sorted(item["id"] for item in listed) == ["a-1", "b-2"]
    both = api.get("/api/v1/runs", "attr.customer=c-42&attr.region=eu").json()["items"]
    assert [item["id"] for item in both] == ["a-1"]
    assert api.get("/api/v1/runs", "attr.n=5").json()["items"][-1]["id"] == "a-1"
    assert api.get("/api/v1/runs/c-3").json()["attributes"] == {
        "customer": "c-7",
        "n": 5.0,
        "region": "eu",
    }
    assert api.get("/api/v1/runs/d-4").json()["attributes"] == {}
    bad = api.get("/api/v1/runs", "attr.=x")
    assert bad.status == 400 and "attribute key" in bad.json()["detail"]
    twice = api.get("/api/v1/runs", "attr.a=1&attr.a=2")
    assert twice.status == 400 and "attr.a is given 2 times" in twice.json()["detail"]
