"""What a run publishes for readers: its properties, snapshotted where code ends.

A class workflow publishes its instance's attributes; a function workflow the values
it gave `durable.set_state`. `RunContext.record` stamps the step it writes with a
snapshot when the properties changed since the last one stored (the same commit, no
write of its own); the run's end carries the last one (`RunStore.finish_run(state=)`).
The first snapshot compared with is the latest in the history, so a replay that
reaches the same properties writes none again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from durable.core.properties import encode_state
from durable.core.records import Step, evolve


class Properties:
    """One run's published properties, and the snapshot last stored."""

    __slots__ = ("_owner", "_stored", "source", "values")

    def __init__(
        self, run_id: str, stored: bytes | None, read: Callable[[], Mapping[str, Any]] | None
    ) -> None:
        self._owner = f"Run {run_id!r}"
        #: what `durable.set_state` set, for a function workflow.
        self.values: dict[str, Any] = {}
        #: where the properties come from: a workflow class's instance, or `values`.
        self.source: Callable[[], Mapping[str, Any]] | dict[str, Any] = read or self.values
        self._stored = stored

    def changed(self) -> bytes | None:
        """The snapshot to store now, or None if the properties did not change.

        Raises:
            SerializationError: a property cannot be stored (naming it).
        """
        source = self.source
        values = source if isinstance(source, dict) else source()
        encoded = encode_state(values, owner=self._owner)
        return None if encoded == self._stored else encoded

    def stamp(self, step: Step) -> Step:
        """*step*, carrying the snapshot if the properties changed."""
        encoded = self.changed()
        return step if encoded is None else evolve(step, state=encoded)

    def stored(self, step: Step) -> None:
        """*step* was written: its snapshot, if any, is now the last stored."""
        if step.state is not None:
            self._stored = step.state
