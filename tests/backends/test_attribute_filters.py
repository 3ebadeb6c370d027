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


@pytest.mark.postgres
def test_a_probed_pair_stays_a_probe_in_a_generic_plan(pg_schemas: Any) -> None:
    """PostgreSQL, under the generic plan a prepared listing gets: with one customer
    driving and the region probed, the plan reads the customer's rows and probes each
    run's region by the primary key; it never reads the region's index range (the
    merge of both ranges that ``EXISTS`` allowed)."""
    backend = SQLBackend(pg_schemas.new_url())
    try:

        def fill(session: Any, _: bool) -> None:
            # Without the tallies' triggers: a PL/pgSQL call per row took 8 s, and no
            # plan here reads the tallies.
            session.execute("ALTER TABLE durable_runs DISABLE TRIGGER USER", ())
            session.execute(
                "INSERT INTO durable_runs (id, workflow, status, input, call_hash, epoch, "
                "recoveries, created_at, updated_at) SELECT 'r' || g, 'w', 'completed', "
                "'\\x00', 'h', 1, 0, g, g FROM generate_series(1, 20000) g",
                (),
            )
            session.execute("ALTER TABLE durable_runs ENABLE TRIGGER USER", ())
            for key, value in (("customer", "'c-' || (g % 2000)"), ("region", "'eu'")):
                session.execute(
                    "INSERT INTO durable_run_attributes (run_id, key, value, type) "
                    f"SELECT 'r' || g, '{key}', {value}, 's' FROM generate_series(1, 20000) g",
                    (),
                )
            session.execute("ANALYZE", ())

        backend._db.run("Filling", fill)
        values = query_values(RunQuery(attributes=(("customer", "c-7"), ("region", "eu"))))
        backend._choose_driver(values, count=False)
        assert "attr_drive_0" in values and "attr_drive_1" not in values
        values["limit"] = 51
        statement = backend._sql.inspect.listing(values, count=False)

        def plan(session: Any, _: bool) -> str:
            session.execute("SET plan_cache_mode = force_generic_plan", ())
            try:
                rows = session.execute("EXPLAIN " + statement.sql, statement.params(values))
                return "\n".join(str(row[0]) for row in rows)
            finally:
                session.execute("RESET plan_cache_mode", ())

        shown = backend._db.run("Explaining", plan)
        assert "SubPlan" in shown and "durable_run_attributes_pkey" in shown, shown
        assert "Merge Join" not in shown and "Hash" not in shown, shown
        assert [run.id for run in backend.list_runs(RunQuery(attributes=(
            ("customer", "c-7"), ("region", "eu")
        )), limit=51)][:2] == ["r18007", "r16007"]  # fmt: skip
    finally:
        backend.close()
