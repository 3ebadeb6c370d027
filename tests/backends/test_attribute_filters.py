"""Both forms of an attribute filter on SQLite and PostgreSQL: a listing driven by the
rarest pair (``id IN``), and by the runs newest first with each pair probed
(``EXISTS``), which only values held by many runs (`DRIVE_BELOW`) take. The attribute
conformance checks pass with every pair probed, and with the threshold between two
pairs' counts the rarer one drives (its form read from the chosen values)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from durable.backends import Backend
from durable.backends._statements.inspection import query_values
from durable.backends.sql import SQLBackend
from durable.backends.sql import _attributes as sql_attributes
from durable.core.records import RunQuery
from durable.testing import _conformance_attributes as attributes
from durable.testing._conformance import _queued

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
CHECKS = [
    attributes.check_attributes_filter_runs,
    attributes.check_record_attributes_with_its_step,
    attributes.check_attributes_follow_continue_fork_and_purge,
]


@pytest.mark.parametrize("make_backend", SQL, indirect=True)
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__.removeprefix("check_"))
def test_probed_filters_keep_the_contract(
    check: Callable[[Any], None],
    make_backend: Callable[[], Backend],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every pair held by 'many' runs (the threshold at 0), listings walk the runs
    and probe each pair, and still find exactly what the contract says."""
    monkeypatch.setattr(sql_attributes, "DRIVE_BELOW", 0)
    check(make_backend)


@pytest.mark.parametrize("make_backend", SQL, indirect=True)
def test_the_rarest_pair_below_the_threshold_drives(
    make_backend: Callable[[], Backend], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Of two pairs, the one fewer runs hold drives a listing when below the threshold;
    at or above it, none does; a count always drives with the rarest (the first of
    pairs both counted up to the threshold)."""
    backend = make_backend()
    assert isinstance(backend, SQLBackend)
    try:
        for i in range(6):
            pairs = (("region", "eu"), ("customer", f"c-{i % 3}"))
            backend.create_run(dataclasses.replace(_queued(f"r-{i}"), attributes=pairs))
        query = RunQuery(attributes=(("region", "eu"), ("customer", "c-1")))
        monkeypatch.setattr(sql_attributes, "DRIVE_BELOW", 3)

        def chosen(*, count: bool) -> set[str]:
            values = query_values(query)
            backend._choose_driver(values, count=count)
            return {name for name in values if name.startswith("attr_drive_")}

        assert chosen(count=False) == {"attr_drive_1"}, "customer c-1: 2 runs, region: 6"
        assert [run.id for run in backend.list_runs(query, limit=10)] == ["r-4", "r-1"]
        monkeypatch.setattr(sql_attributes, "DRIVE_BELOW", 2)
        assert chosen(count=False) == set(), "both held by too many: walk the runs"
        assert [run.id for run in backend.list_runs(query, limit=10)] == ["r-4", "r-1"]
        assert chosen(count=True) == {"attr_drive_0"}, "counted up to the cap: a tie"
        assert backend.count_runs(query) == 2
        monkeypatch.setattr(sql_attributes, "DRIVE_BELOW", 3)
        assert chosen(count=True) == {"attr_drive_1"}
        assert backend.count_runs(query) == 2
    finally:
        backend.close()
