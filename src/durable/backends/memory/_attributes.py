"""The memory backend's run attributes: a dict per run, typed values kept as given.

A mixin of `MemoryBackend` (see `MemoryBase`); the reference for what
`sql/_attributes.py` does with a side table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from durable.core.attributes import Attributes, AttributeValue
from durable.core.records import Step

from ._base import MemoryBase


class MemoryAttributes(MemoryBase):
    """`AttributeStore` for `MemoryBackend` (see there for the contracts)."""

    _record: Callable[[Step, int], tuple[Step, int]]

    def record_attributes(self, step: Step, epoch: int, attributes: Attributes) -> tuple[Step, int]:
        """See `AttributeStore.record_attributes`."""
        with self._lock:
            self._check_open()
            existing = self._history.get(step.run_id, {}).get(step.position)
            stored, flags = self._record(step, epoch)
            if existing is None or not existing.status.finished:
                self._set_attributes(step.run_id, attributes)
            return stored, flags

    def run_attributes(self, run_ids: Sequence[str]) -> Mapping[str, Mapping[str, AttributeValue]]:
        """See `AttributeStore.run_attributes`."""
        with self._lock:
            self._check_open()
            return {
                run_id: dict(sorted(self._attributes[run_id].items()))
                for run_id in run_ids
                if self._attributes.get(run_id)
            }
