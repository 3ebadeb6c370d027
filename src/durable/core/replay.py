"""The replay cursor: positions, and what to do at each one. Pure logic, no I/O.

A run's history maps positions to recorded steps. Executing the workflow function
again walks the same positions in program order, and at each durable call the cursor
decides:

* nothing recorded there: this is the frontier; run the call and record it;
* a step recorded with the same kind, name and hash: replay it (or, for a step that
  was between retries, continue from its attempt count);
* a step recorded for a different call: the code changed under a live run. Raise
  `NondeterminismError`; history is never overwritten.

The module imports no database, thread or clock; tests drive it with hand-built
histories (tests/unit/test_replay.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from durable.errors import NondeterminismError

from .records import Step, StepKind

_HOW_TO_FIX = (
    "Workflow code must make the same durable calls, with the same arguments, in the same "
    "order every time it replays. A run that meets this is blocked, with nothing "
    "overwritten, and resumes once the code matches its history again. Revert the change, "
    "or keep the old branch for runs started before it with durable.patched() (see "
    "docs/concepts/replay.md, 'Shipping a change')."
)


def describe(kind: StepKind | str, name: str, call_hash: str) -> str:
    """Render a call the way errors show it: ``task app.fetch (v1:ab12…)``."""
    return f"{StepKind(kind).value} {name} ({call_hash})"


class Replay:
    """The cursor over one run's history."""

    __slots__ = ("_next", "_steps", "run_id")

    def __init__(self, run_id: str, history: Iterable[Step] = ()) -> None:
        self.run_id = run_id
        self._steps: dict[int, Step] = {step.position: step for step in history}
        self._next = 0

    @property
    def next_position(self) -> int:
        """The position the next durable call will take."""
        return self._next

    def allocate(self, count: int = 1) -> int:
        """Reserve *count* consecutive positions (a parallel group) and return the first."""
        first = self._next
        self._next += count
        return first

    def recorded(self, position: int) -> Step | None:
        """The step recorded at *position*, if any."""
        return self._steps.get(position)

    def handler(self, where: str) -> Step | None:
        """The ``on_event`` handler recorded at the next position, if one ran there,
        at *where* (before a call, or in a wait: its ``call_hash``)."""
        step = self._steps.get(self._next)
        if step is None or step.kind is not StepKind.HANDLER or step.call_hash != where:
            return None
        return step

    def last_state(self) -> bytes | None:
        """The latest properties snapshot in the history (the step furthest on that
        carries one), or None."""
        held = [step for step in self._steps.values() if step.state is not None]
        return max(held, key=lambda step: step.position).state if held else None

    def decide(self, position: int, kind: StepKind, name: str, call_hash: str) -> Step | None:
        """Return the step to replay at *position*, or None if the call must run.

        A returned step may be unfinished (RETRYING): the caller continues its attempts.

        Raises:
            NondeterminismError: a different call is recorded at *position*.
        """
        step = self._steps.get(position)
        if step is None:
            return None
        if step.kind is not kind or step.name != name or step.call_hash != call_hash:
            raise self.divergence(position, step, describe(kind, name, call_hash))
        return step

    def remember(self, step: Step) -> None:
        """Note a step just recorded, so a later decision at its position sees it."""
        self._steps[step.position] = step

    def check_complete(self) -> None:
        """Call when the workflow function has ended: it must have reached every step.

        Raises:
            NondeterminismError: history holds calls beyond the last one the code made.
        """
        beyond = [p for p in self._steps if p >= self._next]
        if beyond:
            first = min(beyond)
            raise self.divergence(first, self._steps[first], "nothing: the workflow ended first")

    def divergence(self, position: int, step: Step, current: str) -> NondeterminismError:
        """Build the error for a mismatch at *position*."""
        recorded = describe(step.kind, step.name, step.call_hash)
        same_function = current.startswith(f"{step.kind.value} {step.name} (")
        what = "with different arguments " if same_function else ""
        return NondeterminismError(
            f"Run {self.run_id!r} diverged from its history at position {position}: the code "
            f"now calls {current} {what}where the history recorded {recorded}. {_HOW_TO_FIX}",
            run_id=self.run_id,
            position=position,
            recorded=recorded,
            current=current,
        )
