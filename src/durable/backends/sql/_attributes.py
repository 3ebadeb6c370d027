"""The SQL backend's run attributes: a side table, one row per key (see
`_statements/attributes.py` for the statements and how a filter reads it).

A mixin of `SQLBackend`. `_write_attributes` and `_copy_attributes` run inside the
transaction of whatever creates the run (`create_run`, `continue_run`, `fork_run`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from durable.backends._connections import Session
from durable.backends._group import Rows, Then
from durable.backends._statements.attributes import DRIVE_BELOW
from durable.core.attributes import Attributes, AttributeValue, decode, encode
from durable.core.records import NewRun, Step

from ._base import SQLBase


class SQLAttributes(SQLBase):
    """`AttributeStore` for `SQLBackend` (see there for the contracts)."""

    _record_in: Callable[[Session, Step, int], tuple[Step, int] | None]
    record: Callable[[Step, int], tuple[Step, int]]

    def record_attributes(self, step: Step, epoch: int, attributes: Attributes) -> tuple[Step, int]:
        """See `AttributeStore.record_attributes`: the step's fenced write, then the
        attributes, in one transaction."""

        def body(session: Session, _retried: bool) -> tuple[Step, int] | None:
            with self._db.transaction(session):
                written = self._record_in(session, step, epoch)
                if written is not None:
                    self._write_attributes(session, step.run_id, attributes)
            return written

        written = self._db.run(f"Setting the attributes of run {step.run_id!r}", body)
        if written is not None:
            return written
        # Nothing written: `record` tells a lost lease (raised) from a finished position
        # (returned: an earlier attempt of ours whose acknowledgement was lost, whose
        # attributes went with it).
        return self.record(step, epoch)

    def run_attributes(self, run_ids: Sequence[str]) -> Mapping[str, Mapping[str, AttributeValue]]:
        """See `AttributeStore.run_attributes`."""
        if not run_ids:
            return {}
        values = {"ids": self._names(list(run_ids))}
        rows = self._db.run(
            "Reading run attributes",
            lambda conn, _: self._execute(conn, self._sql.read_attributes, values).fetchall(),
        )
        found: dict[str, dict[str, AttributeValue]] = {}
        for run_id, key, text, kind in rows:
            found.setdefault(run_id, {})[key] = decode(text, kind)
        return found

    def _with_attributes(self, new: NewRun) -> Then:
        """The follow-up that writes *new*'s attributes in its insert's transaction,
        if the insert created the run."""

        def then(session: Session, rows: Rows) -> Rows:
            if rows:
                self._write_attributes(session, new.id, new.attributes)
            return rows

        return then

    def _choose_driver(self, values: dict[str, Any], *, count: bool) -> None:
        """Mark the pair of a listing's attribute filters (in *values*, from
        `query_values`) that drives it: the rarest, if fewer than `DRIVE_BELOW` runs
        hold it, or when counting (a count reads every match anyway); the others are
        probed (see `_statements/attributes.py`). Runs are counted up to `DRIVE_BELOW`,
        so of pairs held by that many or more the first one counts as the rarest."""
        pairs = []
        index = 0
        while f"attr_key_{index}" in values:
            pairs.append(
                {"key": values[f"attr_key_{index}"], "value": values[f"attr_value_{index}"]}
            )
            index += 1
        if not pairs:
            return
        if count and len(pairs) == 1:  # nothing to choose: a count reads every match
            values["attr_drive_0"] = True
            return

        def held(conn: Any, _retried: bool) -> list[int]:
            statement = self._sql.attribute_probe
            return [
                int(self._execute(conn, statement, {**pair, "cap": DRIVE_BELOW}).fetchone()[0])
                for pair in pairs
            ]

        found = self._db.run("Choosing how to filter by attributes", held)
        rarest = min(range(len(pairs)), key=found.__getitem__)
        if count or found[rarest] < DRIVE_BELOW:
            values[f"attr_drive_{rarest}"] = True

    def _write_attributes(self, session: Any, run_id: str, attributes: Attributes) -> None:
        """Set *attributes* on *run_id*, inside the caller's transaction."""
        if attributes:
            values = self._attribute_values(run_id, attributes)
            self._execute(session, self._sql.set_attributes, values)

    def _attribute_values(self, run_id: str, attributes: Attributes) -> dict[str, Any]:
        """The parameters of ``set_attributes`` for *attributes* of *run_id*."""
        stored = [(key, *encode(value)) for key, value in attributes]
        values: dict[str, Any] = {"run_id": run_id}
        if self._sql.postgres:
            keys, texts, types = zip(*stored, strict=True)
            values.update(keys=list(keys), values=list(texts), types=list(types))
        else:
            values["rows"] = json.dumps(stored)
        return values

    def _copy_attributes(self, session: Any, source: str, target: str) -> None:
        """Give *target* the attributes of *source*, inside the caller's transaction."""
        self._execute(session, self._sql.copy_attributes, {"source": source, "target": target})
