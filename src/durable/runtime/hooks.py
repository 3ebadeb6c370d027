"""A workflow class's task hooks: ``on_start``, ``on_success``, ``on_failure`` and
``on_timeout``, called in the workflow's thread around each of its task calls.

Hooks are workflow code: they run again on every replay, at the same points, from
what the history holds, which is how the properties they change come back. So they
are called per task *call*, not per attempt (a replay does not hold the errors of the
attempts that were retried): ``on_start`` before the call runs (or is replayed), then
``on_success`` with its result, or ``on_timeout`` (if it failed with `TaskTimeout`)
and ``on_failure`` with its error. The calls of a parallel group start in position
order and end in position order once the group is done, never by timing. A hook that
raises ends the task call with its error, as if the task had raised it.
"""

from __future__ import annotations

from typing import Any, Protocol

from durable.core.functions import Call
from durable.core.info import TaskInfo
from durable.core.records import Step
from durable.errors import TaskTimeout


class Branches(Protocol):
    """A workflow class's ``on_event`` as its run's context calls it (`handlers.py`):
    at the main branch's durable-call boundaries, and in its waits."""

    def at_boundary(self) -> None:
        """Before the main branch's next durable call."""

    def in_wait(self, *, live: bool, exclude: str | None = None) -> None:
        """In a wait of the main branch, after its own step."""

    def waiting_on(self, waiting_on: str | None) -> str | None:
        """What a wait of the main branch stores as ``waiting_on``."""


class Hooks:
    """The hooks one workflow class instance defines (the others are skipped)."""

    __slots__ = ("_failure", "_start", "_success", "_timeout")

    def __init__(self, instance: object) -> None:
        self._start = getattr(instance, "on_start", None)
        self._success = getattr(instance, "on_success", None)
        self._failure = getattr(instance, "on_failure", None)
        self._timeout = getattr(instance, "on_timeout", None)

    @property
    def any(self) -> bool:
        """Whether the class defines a hook at all."""
        return any((self._start, self._success, self._failure, self._timeout))

    def started(self, position: int, call: Call[Any]) -> None:
        """The task call at *position* is about to run (or be replayed)."""
        if self._start is not None:
            self._start(
                TaskInfo(name=call.target.name, position=position, arguments=call.arguments)
            )

    def ended(
        self, step: Step | None, position: int, call: Call[Any], outcome: Any, *, failed: bool
    ) -> None:
        """The task call at *position* ended with *outcome* (its error if *failed*);
        *step* is what the history holds there now (its attempts)."""
        info = TaskInfo(
            name=call.target.name,
            position=position,
            arguments=call.arguments,
            attempts=0 if step is None else step.attempts,
        )
        if not failed:
            if self._success is not None:
                self._success(info, outcome)
            return
        if isinstance(outcome, TaskTimeout) and self._timeout is not None:
            self._timeout(info)
        if self._failure is not None:
            self._failure(info, outcome)
