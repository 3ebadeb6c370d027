"""A worker's lane for async runs: one event loop, thousands of runs awaiting at once.

A worker executes ``async def`` workflows (and tasks dispatched as runs) here rather
than one per thread: each run is an asyncio task on the lane's loop, so a run that
awaits I/O holds a slot of the lane (`Worker(async_concurrency=...)`), not a thread.
Their storage calls (loading the history, recording a step, the outcome) go to a small
pool of threads (`loops.off_loop`), where the writes of many runs wait together and are
committed in groups, while the loop goes on with the others.

The lane also:

* asks the database, every *poll* seconds while it runs something, which of its runs
  were cancelled, and cancels the async task bodies they await: the body sees
  `asyncio.CancelledError` and the attempt ends `Cancelled` (`Activity.interrupt`), as
  a heartbeat would have told it, but without waiting for one;
* watches the loop: when one step of a run holds it for more than *warn_blocking*
  seconds (a ``time.sleep``, a sync client, heavy computing in ``async def`` code), it
  logs a warning naming the run, its workflow and position, once per stall;
* on `stop`, cancels the runs still executing (the worker has handed them back): unlike
  a thread, a coroutine can be stopped, so none is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from durable.core import faults
from durable.core.functions import Durable
from durable.core.records import Run

from . import runs
from .activity import BODIES, TaskScope
from .context import RunContext, current
from .host import Host
from .loops import IoPool, io_pool
from .turns import COUNTED

log = logging.getLogger("durable.worker")

#: Threads for the storage calls of a lane's runs: enough for group commits to fill.
IO_THREADS = 24


class Lane:
    """Executes async runs as asyncio tasks on one loop, in a thread of its own.

    Args:
        host: the engine whose runs these are.
        done: called (on the loop's thread) with a run's id once it stopped executing.
        poll: seconds between looks for cancelled runs.
        warn_blocking: seconds a step may hold the loop before a warning is logged.
    """

    def __init__(
        self, host: Host, done: Callable[[str], None], *, poll: float, warn_blocking: float
    ) -> None:
        self._host = host
        self._done = done
        self._poll = poll
        self._warn_blocking = warn_blocking
        self.loop = asyncio.new_event_loop()
        self._pool = IoPool(self.loop, IO_THREADS)
        self._tasks: dict[str, asyncio.Task[None]] = {}  # run id -> its task (loop only)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="durable-async", daemon=True)
        self._watchdog = threading.Thread(
            target=self._watch, name="durable-async-watch", daemon=True
        )

    def start(self) -> None:
        """Start the loop and its watchdog."""
        self._thread.start()
        self._watchdog.start()

    def submit(self, run: Run, target: Durable[..., Any]) -> None:
        """Execute *run* (claimed for this worker) on the loop; `done` is called after."""
        self.loop.call_soon_threadsafe(self._begin, run, target)

    def stop(self, wait: float = 5.0) -> None:
        """Cancel the runs still executing (handed back already), then stop the loop."""
        self._stopping.set()
        if not self._thread.is_alive():
            self._pool.shutdown()
            return
        stopped = asyncio.run_coroutine_threadsafe(self._cancel_all(wait), self.loop)
        with contextlib.suppress(Exception):  # the loop stops below anyway
            stopped.result(wait + 1.0)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(wait)
        self._pool.shutdown()

    # -- on the loop -----------------------------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.set_task_factory(_counting_factory)
        chore = self.loop.create_task(self._cancels())
        try:
            self.loop.run_forever()
        finally:
            chore.cancel()
            self.loop.run_until_complete(asyncio.gather(chore, return_exceptions=True))
            self.loop.close()

    def _begin(self, run: Run, target: Durable[..., Any]) -> None:
        # A fresh context: nothing of the loop's own leaks into the run, and the run's
        # storage pool is set for it (and the child runs it starts inline) alone.
        task = self.loop.create_task(self._execute(run, target), context=contextvars.Context())
        self._tasks[run.id] = task

    async def _execute(self, run: Run, target: Durable[..., Any]) -> None:
        io_pool.set(self._pool)
        COUNTED.set(True)
        try:
            faults.hit("after_claim", run.id)
            await runs.resume_async(self._host, run, target)
        except asyncio.CancelledError:
            log.info("run %s: stopped on the worker's shutdown (handed back)", run.id)
        except BaseException as error:
            runs.report(run, error)
        finally:
            self._tasks.pop(run.id, None)
            self._done(run.id)

    async def _cancels(self) -> None:
        """Interrupt the async bodies of this lane's runs that were asked to cancel."""
        while True:
            await asyncio.sleep(self._poll)
            if not self._tasks:
                continue
            try:
                ids = await self._pool.run(self._host.backend.cancelling, (self._host.owner,))
            except Exception as error:  # the database: the next look tries again
                log.debug("could not read cancel requests: %s", error)
                continue
            for run_id in ids:
                for activity in list(BODIES.get(run_id, ())):
                    if activity.awaited_on(self.loop):
                        activity.interrupt()

    async def _cancel_all(self, wait: float) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel("durable: the worker is stopping")
        if tasks:
            await asyncio.wait(tasks, timeout=wait)

    # -- the watchdog ----------------------------------------------------------------

    def _watch(self) -> None:
        """Warn, once per stall, when one step of a task holds the loop too long: the
        same task found running at every look, five a period, for longer than it."""
        limit = self._warn_blocking
        seen: asyncio.Task[Any] | None = None
        since = time.monotonic()
        warned = False
        while not self._stopping.wait(limit / 5):
            task = asyncio.current_task(self.loop)  # a dict read: safe from this thread
            now = time.monotonic()
            if task is None or task is not seen:
                seen, since, warned = task, now, False
            elif not warned and now - since > limit:
                warned = True
                log.warning("%s", self._stalled(task, now - since))

    def _stalled(self, task: asyncio.Task[Any], held: float) -> str:
        where = "a task of no run"
        context = _context_of(task)
        found = None if context is None else context.get(current)
        if isinstance(found, RunContext):
            where = (
                f"run {found.run_id!r} ({found.workflow}) after position "
                f"{found.replay.next_position - 1}"
            )
        elif isinstance(found, TaskScope):
            where = (
                f"run {found.run_id!r} ({found.workflow}) in task {found.task!r} at "
                f"position {found.position}"
            )
        return (
            f"An async step held the event loop for {held:.1f}s: {where}. Every other "
            "async run on this worker waited meanwhile. Something there blocks: "
            "time.sleep, a sync database or HTTP client, heavy computing. Await instead "
            "(asyncio.sleep, an async client, asyncio.to_thread), or make that work a sync "
            "@task, which runs in a thread."
        )


def _counting_factory(
    loop: asyncio.AbstractEventLoop,
    coro: Any,
    context: contextvars.Context | None = None,
) -> asyncio.Task[Any]:
    """Make a task, and count it as a branch of the run whose workflow code creates it
    (see `turns.py`): a run without branches hands its calls' outcomes back at once."""
    if context is None:
        context = contextvars.copy_context()  # what the task would take anyway
    task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, context=context)
    _CONTEXTS[task] = context
    owner = context.get(current)
    if isinstance(owner, RunContext):
        owner.turns.branched(task)
    return task


#: The context each task on a lane's loop runs in, for the watchdog to name its run
#: (`Task.get_context` comes with Python 3.12).
_CONTEXTS: weakref.WeakKeyDictionary[asyncio.Task[Any], contextvars.Context] = (
    weakref.WeakKeyDictionary()
)


def _context_of(task: asyncio.Task[Any]) -> contextvars.Context | None:
    """The contextvars context *task* runs in."""
    return _CONTEXTS.get(task)
