"""The attributes role of the storage seam: what runs are searched by.

A run's attributes (`durable.core.attributes`) are written with the run
(`RunStore.create_run` writes `NewRun.attributes` in the run's own transaction), by its
workflow (`record_attributes`), and copied to a continue-as-new successor
(`RunStore.continue_run`) and to a fork (`ControlStore.fork_run`); purging a run
deletes them. `InspectionStore.list_runs` and ``count_runs`` filter on them
(`RunQuery.attributes`: each pair's key must hold that canonical text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from durable.core.attributes import Attributes, AttributeValue
from durable.core.records import Step


class AttributeStore(Protocol):
    """Writing a run's attributes from its workflow, and reading them back."""

    def record_attributes(self, step: Step, epoch: int, attributes: Attributes) -> tuple[Step, int]:
        """Record *step* (a finished ATTRIBUTES step) as `HistoryStore.record` does,
        and, in the same transaction, set *attributes* on its run (a key already set
        takes the new value; other keys stay). If the step is not written (the
        position is finished already: an earlier attempt of this write whose
        acknowledgement was lost, or another owner's), neither are the attributes.

        Returns:
            The step as stored (the finished one found, if any) and the run's
            cancellation and pause request bits.

        Raises:
            LeaseLost: the run is no longer at *epoch*; nothing was written.
        """
        ...

    def run_attributes(self, run_ids: Sequence[str]) -> Mapping[str, Mapping[str, AttributeValue]]:
        """The attributes of each run of *run_ids* that has any, with their types,
        sorted by key. Runs without attributes (or unknown) are left out."""
        ...
