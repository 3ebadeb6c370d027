"""The SQL of run attributes (`AttributeStore`): setting them from a list, copying a
run's to another, reading them, purging them; and the filter listings add for each
(key, text) pair (`attribute_filter`).

A run's attributes are rows of ``durable_run_attributes``, one per key. A filter is
``id IN (SELECT run_id ... WHERE key = ? AND value = ?)`` on the index (key, value,
run_id): the planner reads a rare value's few runs through it, and for a common value
may walk the runs newest first instead, probing the index for each.
"""

from __future__ import annotations

import sqlalchemy as sa

from durable.backends._schema import run_attributes, runs

from .base import Compiler

_RUN_ID = sa.bindparam("run_id", type_=sa.Text)


def attribute_filter(index: int) -> sa.ColumnElement[bool]:
    """The runs holding the *index*-th pair of a `RunQuery.attributes`
    (``:attr_key_<index>``, ``:attr_value_<index>``)."""
    a = run_attributes.c
    holding = sa.select(a.run_id).where(
        a.key == sa.bindparam(f"attr_key_{index}", type_=sa.Text),
        a.value == sa.bindparam(f"attr_value_{index}", type_=sa.Text),
    )
    return runs.c.id.in_(holding)


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
        #: set a run's attributes: a key already set takes the new value.
        self.set_attributes = self.compile(
            insert.on_conflict_do_update(
                index_elements=[a.run_id, a.key],
                set_={"value": insert.excluded.value, "type": insert.excluded.type},
            )
        )
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
        self.purge_attributes = self.compile(
            sa.delete(run_attributes).where(self._in_names(a.run_id, "ids"))
        )
