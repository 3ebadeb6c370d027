"""A durable call at the frontier of its run: its position, identity and attempts.

The replay cursor found nothing finished at the position, so the call is to be made
(again): `RunContext.pending` builds one, `tasks.py` and `children.py` run it.
"""

from __future__ import annotations

from typing import Any

from durable.core.functions import Call
from durable.core.records import Step, StepKind, StepStatus
from durable.core.replay import describe

#: `Pending.input` before it is made.
UNSET: Any = object()


class Pending:
    """A call at the frontier: its position, identity, and the attempts made so far."""

    __slots__ = (
        "attempt", "call", "details", "digest", "due", "hangs_at", "input", "kind", "position",
        "started",
    )  # fmt: skip

    def __init__(
        self,
        position: int,
        call: Call[Any],
        digest: str,
        recorded: Step | None,
        *,
        kind: StepKind | None = None,
    ) -> None:
        self.position = position
        self.call = call
        self.digest = digest
        #: the recorded kind when it is not the target's own (a dispatch).
        self.kind = kind
        #: attempts made so far, including those recorded before a crash. An attempt
        #: found RUNNING never ended (its process died): it is made again, under its
        #: number; the retry budget counts attempts that ended.
        self.attempt = 0 if recorded is None else recorded.attempts
        if recorded is not None and recorded.status is StepStatus.RUNNING:
            self.attempt -= 1
        self.started = recorded.started_at if recorded else None
        #: when the next attempt may start (recorded with the last failed one).
        self.due = None
        #: for an attempt found running, when it counts as hung (a task with heartbeat=).
        self.hangs_at = None
        if recorded is not None:
            if recorded.status is StepStatus.RUNNING:
                self.hangs_at = recorded.wake_at
            else:
                self.due = recorded.wake_at
        #: the last heartbeat details of the attempts so far (`durable.last_heartbeat()`).
        self.details = recorded.details if recorded else None
        #: the arguments' preview for the history, made once for all of its rows.
        self.input: Any = UNSET

    def next_attempt(self) -> int:
        """Count one more attempt; return its number (from 1)."""
        self.attempt += 1
        return self.attempt

    def start(self, now: float) -> None:
        """Note when the first attempt began (kept across retries and crashes)."""
        if self.started is None:
            self.started = now

    def describe_result(self) -> str:
        """Name this call's result in a SerializationError."""
        what = describe(self.kind or self.call.target.kind, self.call.target.name, self.digest)
        return f"the result of {what} at position {self.position}"
