"""Async durable calls hand their outcomes back in position order, live and in replay.

An async workflow's branches (``asyncio.gather``, tasks it creates) interleave at their
awaits, and each durable call takes the next position when it is made. If outcomes
reached the branches in the order they happened to finish, the positions of the calls
that follow would depend on timing, and a replay (where recorded outcomes are at hand
at once) would hand them out in another order: the history would no longer match.

So a durable call that has its outcome (run live, or read from the history) waits for
its turn before handing it back: until no call at a lower position is in flight, and
the event loop has nothing else ready to run (every other branch has reached its next
await). Outcomes are then handed back one at a time, in position order, each at a
moment when every branch has gone as far as it can, so every execution, first or
replay, allocates the same positions after them. The cost is that a fast call waits
for slower ones started before it (they still run concurrently); a race of durable
calls is decided by position, not by speed.

"Nothing else ready" reads the loop's ready queue (asyncio's own loops); on a loop
without one, or one kept busy by unrelated work, the call yields `SPINS` times instead,
which is enough for branches nested that deep in ``gather`` to reach their awaits.

A worker's lane keeps thousands of runs on one loop, which is therefore never idle:
every call would yield `SPINS` times. There the loop counts the asyncio tasks each run
creates (`Turns.branched`, from the lane's task factory), and a run that has none
(it awaits one call at a time, by far the common case) has no other branch that could
still allocate a position: its call hands back at once.
"""

from __future__ import annotations

import asyncio
import contextvars

#: yields after which a call hands back even if the loop still has work ready.
SPINS = 32

#: Set where the loop counts the tasks of the runs it executes (a worker's lane).
COUNTED: contextvars.ContextVar[bool] = contextvars.ContextVar("durable_counted", default=False)


class Turns:
    """The positions of one run whose async calls are in flight, and who waits on them."""

    __slots__ = ("_branches", "_in_flight", "_waiters")

    def __init__(self) -> None:
        self._in_flight: set[int] = set()
        self._waiters: list[asyncio.Future[None]] = []
        #: the run's own asyncio tasks alive now, if its loop counts them, else None.
        self._branches: int | None = None

    def counted(self) -> None:
        """The loop counts this run's tasks (`branched`) from now on: it has none yet."""
        self._branches = 0

    def alone(self) -> bool:
        """Whether the run's code is one chain of awaits now: its loop counts its tasks
        and it has none (a worker's lane)."""
        return self._branches == 0

    def branched(self, task: asyncio.Task[object]) -> None:
        """The run created *task* (a branch of its code), on a loop that counts them."""
        if self._branches is not None:
            self._branches += 1
            task.add_done_callback(self._joined)

    def _joined(self, _task: asyncio.Task[object]) -> None:
        if self._branches:
            self._branches -= 1

    def enter(self, position: int) -> None:
        """A call at *position* started."""
        self._in_flight.add(position)

    def leave(self, position: int) -> None:
        """The call at *position* handed its outcome back (or was abandoned)."""
        self._in_flight.discard(position)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, position: int) -> None:
        """Return when the call at *position* may hand its outcome back."""
        if self._branches == 0:
            return  # no other branch: nothing can allocate a position before it
        loop = asyncio.get_running_loop()
        ready = getattr(loop, "_ready", None)  # asyncio's loops: the runnable callbacks
        spins = 0
        while True:
            if any(other < position for other in self._in_flight):
                waiter = loop.create_future()
                self._waiters.append(waiter)
                await waiter
                spins = 0
                continue
            await asyncio.sleep(0)
            spins += 1
            if any(other < position for other in self._in_flight):
                continue
            if spins >= SPINS or (ready is not None and not ready):
                return
