"""The engine: one database, and the runs this process executes on it.

`execute_call` creates a run (or joins the existing run with the same id), executes it
in the calling thread under a lease, and returns its outcome; if the run has to wait,
the caller keeps waiting for it (see `joining.py`). `dispatch_call` queues a run for
a worker, and `recover` resumes runs whose owner is gone. The state an engine holds
(database, payload settings, clock, leases) is its `Host`; the work is done by the
modules below it (`runs.py`, `execution.py`, `joining.py`).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from durable.core.functions import Call, Durable
from durable.core.records import Run, RunStatus

from . import joining, owners, runs
from .execution import drive_async
from .host import Host
from .purging import Age, purge_before, purge_cutoff
from .stops import RELEASED


class Engine(Host):
    """Executes durable runs against one database.

    Most applications use the process-wide default engine through `durable.execute`
    and `durable.configure`; create an Engine to talk to more than one database.

    Args:
        url: the database: ``sqlite:///path.db`` (the default is ``durable.db`` in the
            working directory), ``postgresql://user:pw@host/db``, or ``memory://``.
        backend: a ready backend instead of a URL.
        lease: seconds a run stays owned without a heartbeat; after that another
            process may take it over. Heartbeats renew it every lease/3 seconds.
        allow_pickle: store values JSON cannot express with cloudpickle, and load them.
            Off by default (``$DURABLE_ALLOW_PICKLE=1`` turns it on): loading a pickle
            runs code. Turned on without a secret key, it logs a warning at start.
        clock: where time comes from (tests pass a virtual clock).
        max_threads: the most threads parallel calls may use at once.
        max_recoveries: how many times a run's owner may die while running it before
            the run is given up as DEAD (a crash-looping run must not take workers down
            one after another).
        max_inline_wait: waits and retry delays up to this many seconds sleep in the
            executing thread; longer ones suspend the run, which then holds no thread
            until it is due. 0 suspends every wait.
        secret_key: signs every payload that holds a pickle (HMAC-SHA256), and then only
            pickles whose signature verifies are loaded. Default: ``$DURABLE_SECRET_KEY``.
            Without a key, with ``allow_pickle`` on, whoever can write the database can
            run code in workers. See docs/guarantees.md (Security).
        old_secret_keys: retired keys, still accepted for reading signed payloads.
            Default: ``$DURABLE_OLD_SECRET_KEYS`` (comma-separated).
        max_payload: the most bytes one stored value may take (64 MiB by default). A
            larger value fails the call that produced it with `PayloadTooLarge`.
        version: the version of the code this process runs (``"2024-11-24.1"``): the
            runs it creates are stamped with it, and so are the runs it starts for the
            first time (a run's version is that of the code that first executed it).
            Default: ``$DURABLE_VERSION``, else none.
        only_version: claim only runs of *version* and runs of no version (created by
            a process without one and not started yet), so that a deploy leaves the
            runs other versions created or started to the processes that run their
            code (see docs/howto/workers.md, "Blue/green deploys"). Needs *version*.
        max_attributes: the most attributes one run may hold (32 by default): more, at
            dispatch or from `durable.set_attributes`, is refused with ValueError.
        tracing: make OpenTelemetry spans of executions and task attempts, and store
            the caller's trace context with each run created (docs/howto/observability.md).
            Default: ``$DURABLE_TRACING`` (0 turns it off), else on when
            ``opentelemetry-api`` is installed (``durable[otel]``); True without it is
            a `ConfigurationError`.
    """

    # -- running calls ---------------------------------------------------------------

    def execute_call(
        self,
        call: Call[Any],
        *,
        run_id: str | None = None,
        parent_id: str | None = None,
        queue: str = "default",
        timeout: object = None,
    ) -> Any:
        """Run *call* durably as its own run, in this thread, and return its outcome.

        With a *run_id* that exists already, the stored run is joined: its recorded
        outcome is returned, or it is resumed (or awaited, if a live owner has it).
        *timeout*: the run's deadline from now (see `runs.create`).
        """
        run, created = runs.create(
            self, call, run_id, parent_id, owner=self.owner, queue=queue, timeout=timeout
        )
        if not created:
            return joining.join(self, run, call.target)
        value = runs.execute(self, run, call, replay=False)
        if value is RELEASED:
            return joining.join(self, self.reread(run.id), call.target)
        return value

    async def execute_call_async(
        self,
        call: Call[Any],
        *,
        run_id: str | None = None,
        parent_id: str | None = None,
        queue: str = "default",
        timeout: object = None,
    ) -> Any:
        """`execute_call` for async callers: async workflows run on the current loop."""
        if not call.target.is_async:
            return await asyncio.to_thread(
                self.execute_call,
                call,
                run_id=run_id,
                parent_id=parent_id,
                queue=queue,
                timeout=timeout,
            )
        run, created = runs.create(
            self, call, run_id, parent_id, owner=self.owner, queue=queue, timeout=timeout
        )
        if not created:
            return await asyncio.to_thread(joining.join, self, run, call.target)
        value = await drive_async(self, run, call)
        if value is RELEASED:
            return await asyncio.to_thread(joining.join, self, self.reread(run.id), call.target)
        return value

    def dispatch_call(
        self,
        call: Call[Any],
        *,
        run_id: str | None = None,
        queue: str = "default",
        priority: int = 0,
        parent_id: str | None = None,
        timeout: object = None,
        key: str | None = None,
        key_concurrency: int | None = None,
        debounce: object = None,
        connection: object = None,
        attributes: object = None,
    ) -> Run:
        """Queue *call* as a run for a worker; return it (the existing one for a known
        id, or the pending debounced one of its key). With a *connection* (a SQLAlchemy
        Connection or Session on this database, its transaction open), the run is
        inserted in that transaction: it exists once, and only if, the caller commits.
        *attributes* are written with a run this creates (an existing run keeps its own)."""
        run, _ = runs.create(
            self,
            call,
            run_id,
            parent_id,
            owner=None,
            queue=queue,
            priority=priority,
            timeout=timeout,
            key=key,
            key_concurrency=key_concurrency,
            debounce=debounce,
            connection=connection,
            attributes=attributes,
        )
        return run

    def enqueue(
        self,
        call: Call[Any],
        *,
        run_id: str | None = None,
        queue: str = "default",
        priority: int = 0,
        parent_id: str | None = None,
        timeout: object = None,
        key: str | None = None,
        key_concurrency: int | None = None,
    ) -> tuple[Run, bool]:
        """`dispatch_call`, also saying whether this call created the run (False: a run
        with this id and call existed, and is returned)."""
        return runs.create(
            self,
            call,
            run_id,
            parent_id,
            owner=None,
            queue=queue,
            priority=priority,
            timeout=timeout,
            key=key,
            key_concurrency=key_concurrency,
        )

    # -- runs that exist ---------------------------------------------------------------

    def claim(self, run: Run) -> Run | None:
        """Take *run* over if its owner is gone (see `runs.claim`); None if someone else
        has it."""
        return runs.claim(self, run)

    def resume_quietly(self, run: Run, target: Durable[..., Any]) -> None:
        """Continue a run just claimed, logging its outcome (see `runs.resume_quietly`)."""
        runs.resume_quietly(self, run, target)

    def wait_for_run(self, run_id: str, *, timeout: float | None = None) -> Run:
        """Block until run *run_id* has finished; return it (see `joining.wait_for_run`).

        Raises:
            WaitTimeout: *timeout* seconds passed first.
        """
        return joining.wait_for_run(self, run_id, timeout=timeout)

    def purge(self, older_than: Age, *, batch: int = 1000) -> int:
        """Delete runs that finished more than *older_than* ago (a timedelta, or
        seconds), with their history and events, *batch* runs per transaction.

        A run goes only when the runs above it (parent, grandparent...) and below it
        finished before the cutoff too, so nothing still running can need it (see
        `Backend.purge`). Queued, running, waiting and blocked runs are never deleted.
        A deleted run's id is free again.

        Returns:
            How many runs were deleted.
        """
        return purge_before(self.backend, purge_cutoff(self.backend, older_than), batch=batch)

    # -- recovery --------------------------------------------------------------------

    def recover(self, *, wait: bool = True) -> list[str]:
        """Resume every run whose owner is gone, every blocked run, and every run whose
        wait is over.

        A run whose owner was a process in this place (host, boot and PID namespace) that
        no longer exists is taken over at once; other runs once their lease has expired.
        Runs whose workflow is not registered here are left untouched (and logged once).
        Finished tasks are not run again: each run replays its history.

        Args:
            wait: block until the resumed runs end (their outcomes are recorded, not
                raised); with False they continue on background threads.

        Returns:
            The ids of the runs this call resumed.
        """
        while self.backend.wake_due(limit=500) == 500:
            pass  # sleeping runs that are due: queued, then resumed below
        candidates = self.backend.recoverable(host=owners.place())
        ids = {run.id for run in candidates}
        claimed: list[tuple[Run, Durable[..., Any]]] = []
        for run in candidates:
            if run.parent_id in ids or self.executing(run.id):
                continue  # a parent resumes its own children
            target = self.known(run)
            mine = runs.claim(self, run) if target is not None else None
            if target is not None and mine is not None and mine.status is RunStatus.RUNNING:
                claimed.append((mine, target))
        if claimed:
            pool = ThreadPoolExecutor(min(len(claimed), 16), thread_name_prefix="durable-recover")
            for run, target in claimed:
                pool.submit(runs.resume_quietly, self, run, target)
            pool.shutdown(wait=wait)
        return [run.id for run, _ in claimed]

    # -- life cycle ------------------------------------------------------------------

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
