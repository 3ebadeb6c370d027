"""Where am I? The context variable that tells a call whether it runs inside a workflow.

It holds the live run (inside a workflow body), a task scope (inside a task body, where
calls are plain again), or nothing (application code).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runner import RunContext


@dataclass(frozen=True, slots=True)
class TaskScope:
    """Set while a task body runs: calls are plain, `task_key()` names the position."""

    run_id: str
    position: int
    attempt: int


current: ContextVar[RunContext | TaskScope | None] = ContextVar("durable_current", default=None)


class _Released:
    def __repr__(self) -> str:
        return "<released>"


#: What executing a run returns when it stopped without an outcome: it waits (it was
#: suspended), another owner took it over, or its worker is draining. The run goes on.
RELEASED: Any = _Released()
