"""The tallies role of the storage seam: statistics counted as outcomes happen.

`durable.core.tallies` says what is counted and how. A SQL backend keeps the counts in
a table that triggers update in the transaction of each change (so any write path is
counted, with no round trip of its own); the memory backend counts from its runs and
histories when asked. Either way `tallies` answers what the counts would be if they
were taken from the rows now, except that a purged run's counts stay.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from durable.core.tallies import Tally


class TallyStore(Protocol):
    """Reading the tallies, and the runs in each status now."""

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
        """The tallies of *grain* (`core.tallies.GRAINS`) in buckets from the one holding
        *since* on, added up over shards; unless *by_bucket*, over buckets too (their
        ``at`` is then that first bucket's); unless *by_bin*, over duration bins too
        (their ``bin`` is then -1). *kind* (``"run"`` or ``"task"``), *name* and
        *workflow* (a task's run's workflow) filter. Tallies that add up to no count
        are left out."""
        ...

    def status_counts(self, statuses: Sequence[str]) -> dict[str, int]:
        """How many runs are in each of *statuses* now (0 for none)."""
        ...
