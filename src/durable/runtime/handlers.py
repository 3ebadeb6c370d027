"""A workflow class's ``on_event``: the events that no wait took, handled one at a time.

Seed 000's branches: the main branch (``handle()``) and the handlers never run at
once. A handler runs

* at a **boundary**: before the main branch's next durable call, when the inbox holds
  an event (``at-call``); or
* **in a wait**: while the main branch waits (for a time, an event or a run), when an
  event arrives that the wait does not take (``in-wait``): the run is woken, handles
  it, and waits again.

Each run of a handler is recorded where it began, as a ``handler`` step holding the
event it consumed (its name, its id as input, its payload as output), in the same
transaction that marks the event consumed; its own durable calls take the positions
after it, like any others. Replay runs it again at the same point from that step,
whatever the inbox holds by then. A wait takes the events it waits for first (the
wait is decided before the handlers run); ``on_event`` gets every other event, oldest
first. A handler's own durable calls do not start other handlers: the next event is
handled once it returns. Events still in the inbox when ``handle()`` returns stay
there, unconsumed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from durable.core.hashing import call_hash
from durable.core.records import ANY_EVENT, Step, StepKind, StepStatus
from durable.errors import StorageError

from .context import RunContext
from .waits import consume

#: The handler step's name until the event it consumes names it.
HANDLER = "durable.on_event"
#: Where the handler ran (its step's ``call_hash``): before a call, or in a wait.
AT_CALL = call_hash(StepKind.HANDLER, HANDLER, {"at": "call"})
IN_WAIT = call_hash(StepKind.HANDLER, HANDLER, {"at": "wait"})


class EventHandler:
    """One run's ``on_event``, and whether it is running now."""

    __slots__ = ("_context", "_handle", "running")

    def __init__(self, context: RunContext, handle: Callable[[str, Any], None]) -> None:
        self._context = context
        self._handle = handle
        #: a handler is running: its own durable calls start no other.
        self.running = False

    def at_boundary(self) -> None:
        """Before the main branch's next durable call: run the handlers recorded here,
        or, at the frontier, one per event waiting in the inbox."""
        if not self.running:
            self._take(AT_CALL, live=True, exclude=None)

    def in_wait(self, *, live: bool, exclude: str | None = None) -> None:
        """In a wait of the main branch, after its own step: run the handlers recorded
        while it waited; if it is not over (*live*), also those for the events waiting
        now (but *exclude*, the event it waits for)."""
        if not self.running:
            self._take(IN_WAIT, live=live, exclude=exclude)

    def waiting_on(self, waiting_on: str | None) -> str | None:
        """What the main branch's wait stores as ``waiting_on``: any event wakes it."""
        return waiting_on if self.running else ANY_EVENT + (waiting_on or "")

    def _take(self, where: str, *, live: bool, exclude: str | None) -> None:
        context = self._context
        replay = context.replay
        while True:
            position = replay.next_position
            recorded = replay.handler(where)
            if recorded is None:
                if replay.recorded(position) is not None or not live:
                    return  # the history goes on with the main branch
                if context.frontier is not None or context.interrupts.due():
                    return  # a dry replay takes no event; a cancellation goes first
                recorded = self._consume(position, where, exclude)
                if recorded is None:
                    return
            replay.allocate()
            payload = context.replayed(recorded)
            self.running = True
            try:
                self._handle(recorded.name, payload)
            finally:
                self.running = False

    def _consume(self, position: int, where: str, exclude: str | None) -> Step | None:
        """Take the oldest event in the inbox (not *exclude*) for a handler at
        *position*; the step recorded with it, or None if there is none."""
        context = self._context
        try:
            if not context.host.backend.has_events(context.run_id, exclude=exclude):
                return None
        except StorageError as error:  # as Abandoned
            raise context.poison(error) from None
        context.flush()  # a task's result still deferred goes first
        now = context.host.clock.now()
        step = Step(
            run_id=context.run_id, position=position, kind=StepKind.HANDLER, name=HANDLER,
            call_hash=where, status=StepStatus.WAITING, started_at=now, finished_at=now,
            epoch=context.epoch,
        )  # fmt: skip
        return consume(context, step, None, exclude=exclude)
