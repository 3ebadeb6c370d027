"""The SQL of run attributes (`AttributeStore`): setting them from a list, copying a
run's to another, reading them, purging them; and the filters listings add for each
(key, text) pair (`attribute_filter`), with the probe that chooses their form.

A run's attributes are rows of ``durable_run_attributes``, one per key, indexed by
(key, value, run_id). A listing (newest first, up to a page) is fast one of two ways,
and neither planner picks the right one alone (SQLite has no statistics; PostgreSQL
misjudged two filters ANDed, 110 ms among 1,000,000 runs):

* a value few runs hold *drives* it: ``id IN (SELECT run_id ... WHERE key = ? AND
  value = ?)`` reads those runs through the index, then sorts them (0.1 ms for 10);
* a value many runs hold is *probed*: ``(SELECT value ... WHERE run_id = id AND key
  = ?) = ?`` lets the listing walk the runs newest first, reading each one's value by
  the primary key, and stop at the page (0.2 ms for a quarter of the runs, where the
  ``IN`` form took 1.5 s on SQLite). A scalar subquery, not ``EXISTS``: PostgreSQL
  turns an ``EXISTS`` into a join, and its generic plan (a prepared statement's, once
  psycopg prepares it) merged two filters' index ranges: 65 ms instead of 0.7.

The backend counts each pair's runs up to `DRIVE_BELOW` first (``attribute_probe``, an
index range read) and drives with the rarest pair when it is below; the others probe.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from durable.backends._schema import run_attributes, runs

from .base import Compiler

_RUN_ID = sa.bindparam("run_id", type_=sa.Text)

#: A pair held by fewer runs than this drives a listing (see the module docstring):
#: reading and sorting this many runs costs about what walking the newest runs to find
#: a page of them does, at a million runs (20 ms at 1,000 on SQLite either way round).
DRIVE_BELOW = 2000


def attribute_filter(index: int, *, drive: bool) -> sa.ColumnElement[bool]:
    """The runs holding the *index*-th pair of a `RunQuery.attributes`
    (``:attr_key_<index>``, ``:attr_value_<index>``): read through the index if
    *drive*, else checked run by run."""
    a = run_attributes.c
    key = a.key == sa.bindparam(f"attr_key_{index}", type_=sa.Text)
    value = a.value == sa.bindparam(f"attr_value_{index}", type_=sa.Text)
    if drive:
        return runs.c.id.in_(sa.select(a.run_id).where(key, value))
    held = sa.select(a.value).where(a.run_id == runs.c.id, key).scalar_subquery()
    return held == sa.bindparam(f"attr_value_{index}", type_=sa.Text)


def holders_count() -> Any:
    """How many runs hold the pair ``:attr_key_0``, ``:attr_value_0``: its rows in the
    index alone (a run's attributes live and die with it, one row per key)."""
    a = run_attributes.c
    return (
        sa.select(sa.func.count())
        .select_from(run_attributes)
        .where(
            a.key == sa.bindparam("attr_key_0", type_=sa.Text),
            a.value == sa.bindparam("attr_value_0", type_=sa.Text),
        )
    )


class AttributeStatements(Compiler):
    """The statements of `AttributeStore`, compiled for one dialect."""

    def _define_attributes(self) -> None:
        a = run_attributes.c
        names = ["key", "value", "type"]
        if self.postgres:  # :keys, :values, :types: one array each
            given = self._unnest([a.key, a.value, a.type], names)
            rows = sa.select(_RUN_ID, given.c.key, given.c.value, given.c.type)
        else:  # :rows, a JSON array of [key, value, type]
            each = sa.func.json_each(sa.bindparam("rows", type_=sa.Text)).table_valued("value")
            picks = [sa.func.json_extract(each.c.value, f"$[{i}]") for i in range(3)]
            # SQLite parses ``SELECT ... FROM t ON CONFLICT`` as a join without a WHERE.
            rows = sa.select(_RUN_ID, *picks).where(sa.literal_column("1") == 1)
        insert = self._insert(run_attributes).from_select(["run_id", *names], rows)
        #: set a run's attributes: a key already set takes the new value (uncompiled
        #: too: a caller's connection runs it in its transaction, the outbox).
        self.set_attributes_clause = insert.on_conflict_do_update(
            index_elements=[a.run_id, a.key],
            set_={"value": insert.excluded.value, "type": insert.excluded.type},
        )
        self.set_attributes = self.compile(self.set_attributes_clause)
        source = sa.bindparam("source", type_=sa.Text)
        copied = sa.select(sa.bindparam("target", type_=sa.Text), a.key, a.value, a.type).where(
            a.run_id == source
        )
        #: give run ``:target`` the attributes of run ``:source``.
        self.copy_attributes = self.compile(
            self._insert(run_attributes)
            .from_select(["run_id", *names], copied)
            .on_conflict_do_nothing()
        )
        #: the attributes of the runs ``:ids``, by run and key.
        self.read_attributes = self.compile(
            sa.select(a.run_id, a.key, a.value, a.type)
            .where(self._in_names(a.run_id, "ids"))
            .order_by(a.run_id, a.key)
        )
        probed = (
            sa.select(sa.literal_column("1"))
            .where(a.key == sa.bindparam("key", type_=sa.Text))
            .where(a.value == sa.bindparam("value", type_=sa.Text))
            .limit(sa.bindparam("cap", type_=sa.Integer))
            .subquery()
        )
        #: how many runs hold ``:key`` = ``:value``, counted up to ``:cap``.
        self.attribute_probe = self.compile(sa.select(sa.func.count()).select_from(probed))
        self.purge_attributes = self.compile(
            sa.delete(run_attributes).where(self._in_names(a.run_id, "ids"))
        )
