"""The SQL backend's tallies: sums over the table its triggers keep (see
`_statements/tallies.py` and `durable.backends._tallies_schema`).

A mixin of `SQLBackend`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from durable.core.tallies import Tally, bucket

from ._base import SQLBase


class SQLTallies(SQLBase):
    """`TallyStore` for `SQLBackend` (see there for the contracts)."""

    def tallies(
        self,
        grain: int,
        since: float,
        *,
        kind: str | None = None,
        name: str | None = None,
        workflow: str | None = None,
        by_bucket: bool = True,
        by_bin: bool = True,
    ) -> Sequence[Tally]:
        """See `TallyStore.tallies`."""
        values: dict[str, Any] = {
            "grain": grain,
            "since": bucket(since, grain),
            "kind": kind,
            "name": name,
            "workflow": workflow,
        }
        statement = self._sql.tallies[by_bucket, by_bin]
        rows = self._db.run(
            "Reading tallies", lambda conn, _: self._execute(conn, statement, values).fetchall()
        )
        return [
            Tally(
                kind=row[0],
                name=row[1],
                workflow=row[2],
                at=float(row[3]),
                status=row[4],
                bin=int(row[5]),
                count=int(row[6]),
                seconds=float(row[7]),
                last=None if row[8] is None else float(row[8]),
            )
            for row in rows
        ]

    def status_counts(self, statuses: Sequence[str]) -> dict[str, int]:
        """See `TallyStore.status_counts`."""
        values = {"statuses": self._names(list(statuses))}
        rows = self._db.run(
            "Counting runs by status",
            lambda conn, _: self._execute(conn, self._sql.status_counts, values).fetchall(),
        )
        found = dict.fromkeys(statuses, 0)
        found.update({row[0]: int(row[1]) for row in rows})
        return found
