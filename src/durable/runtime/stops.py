"""How an execution stops without an outcome.

A workflow is unwound by one of four `BaseException`s, which `except Exception` in
workflow code cannot catch: `Suspend` (the run must wait), `Park` (it was asked to
pause), `Abandoned` (this process must let go of the run) and `ContinueAsNew` (the run
hands its chain over to a successor, which has the outcome). Executing a run then
returns `RELEASED` instead of an outcome: the run goes on later, or elsewhere.
"""

from __future__ import annotations

from typing import Any

from durable.errors import LeaseLost, StorageError


class Suspend(BaseException):
    """Unwinds a workflow whose run must wait: until *wake_at* (engine clock), or until
    what *waiting_on* names (``event:<name>``, ``run:<id>``), whichever comes first.

    Parallel branches that wait at once share one Suspend: the earliest deadline, and
    the first thing waited on (the run is replayed when that comes, and waits again
    for whatever is still missing).
    """

    def __init__(self, wake_at: float | None, waiting_on: str | None) -> None:
        super().__init__("suspended")
        self.wake_at = wake_at
        self.waiting_on = waiting_on

    def merge(self, wake_at: float | None, waiting_on: str | None) -> None:
        """Fold in another branch's wait."""
        if wake_at is not None and (self.wake_at is None or wake_at < self.wake_at):
            self.wake_at = wake_at
        if self.waiting_on is None:
            self.waiting_on = waiting_on


class Park(BaseException):
    """Unwinds a workflow whose run was asked to pause, at its next durable call: the
    run is stored PAUSED (`ControlStore.park_run`) and holds no thread until resumed."""

    def __init__(self) -> None:
        super().__init__("paused")


class ContinueAsNew(BaseException):
    """Unwinds a workflow that called `durable.continue_as_new()`: the execution ends
    the run CONTINUED and queues its successor with these arguments, in one commit
    (`RunStore.continue_run`).

    *input* is the successor's stored arguments, *call_hash* its call's hash: checked
    and encoded at the call, so a refusal raises there, into the workflow.
    """

    def __init__(self, input: bytes, call_hash: str) -> None:
        super().__init__("continued as new")
        self.input = input
        self.call_hash = call_hash


class Abandoned(BaseException):
    """Unwinds a workflow whose execution must stop here.

    *cause* is the lost lease or storage failure, or None when the worker is draining
    for shutdown and hands the run back.
    """

    def __init__(self, cause: LeaseLost | StorageError | None) -> None:
        super().__init__(str(cause) if cause else "released for shutdown")
        self.cause = cause


class _Released:
    def __repr__(self) -> str:
        return "<released>"


#: What executing a run returns when it stopped without an outcome: it waits (it was
#: suspended), another owner took it over, or its worker is draining. The run goes on.
RELEASED: Any = _Released()
