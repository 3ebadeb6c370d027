"""The engine: one database, the runs this process executes on it, and their leases.

`execute_call` creates a run (or joins the existing run with the same id), executes it
in the calling thread under a lease, and returns its outcome. `dispatch_call` queues a
run for a worker. A heartbeat thread keeps the leases of running runs alive, and
`recover` resumes runs whose owner is gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import _error_payload, _owner, _registry, _serde
from ._clock import SYSTEM_CLOCK, Clock
from ._context import current
from ._decorators import Call, Durable
from ._execution import drive, drive_async
from ._fanout import Fanout
from ._hashing import call_hash
from ._records import NewRun, Run, RunStatus, Step
from ._runner import Abandoned, RunContext
from .backends import Backend, MemoryBackend
from .errors import (
    Cancelled,
    ConfigurationError,
    IdempotencyConflict,
    PayloadError,
    RunDead,
    RunNotFound,
    SerializationError,
    StorageError,
    WaitTimeout,
)

log = logging.getLogger("durable")

#: Where runs live when nothing else is configured: a file in the working directory.
DEFAULT_URL = "sqlite:///durable.db"


def open_backend(url: str, *, clock: Clock = SYSTEM_CLOCK) -> Backend:
    """Return the backend for *url*: ``memory://``, ``sqlite:///...`` or ``postgresql://...``."""
    if url.startswith("memory:"):
        return MemoryBackend(clock=clock)
    from .backends.sql import SQLBackend

    try:
        return SQLBackend(url)
    except (ConfigurationError, StorageError):
        raise
    except Exception as error:
        raise ConfigurationError(f"Cannot use database URL: {error}") from None


class Engine:
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
        clock: where time comes from (tests pass a virtual clock).
        max_threads: the most threads parallel calls may use at once.
        max_recoveries: how many times a run's owner may die while running it before
            the run is given up as DEAD (a crash-looping run must not take workers down
            one after another).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        backend: Backend | None = None,
        lease: float = 30.0,
        allow_pickle: bool = True,
        clock: Clock = SYSTEM_CLOCK,
        max_threads: int = 32,
        max_recoveries: int = 10,
    ) -> None:
        if lease <= 0:
            raise ConfigurationError(f"lease must be a positive number of seconds, got {lease}.")
        if max_recoveries < 1:
            raise ConfigurationError(f"max_recoveries must be at least 1, got {max_recoveries}.")
        self.backend: Backend = backend or open_backend(url or DEFAULT_URL, clock=clock)
        self.lease = lease
        self.allow_pickle = allow_pickle
        self.clock = clock
        self.max_recoveries = max_recoveries
        self.branches = Fanout(max_threads)
        #: runs to hand back at their next durable call (a worker shutting down).
        self.draining: set[str] = set()
        #: runs taken over from a dead owner that have not recorded a new step since: any
        #: of them may be what killed that owner.
        self.unproven: set[str] = set()
        self._owner = _owner.new_owner()
        self._active: dict[str, int] = {}  # run id -> epoch, for runs executing here
        self._lock = threading.Lock()
        self._heartbeat: threading.Thread | None = None
        self._stopping = threading.Event()
        self._warned_unknown: set[str] = set()

    @property
    def owner(self) -> str:
        """The lease-owner string of this engine (it changes in a forked child)."""
        if self._owner.split(":")[1] != str(os.getpid()):
            self._owner = _owner.new_owner()
        return self._owner

    # -- payloads --------------------------------------------------------------------

    def dump(self, value: Any, where: str | Callable[[], str]) -> bytes:
        """Encode a value for storage (raises SerializationError)."""
        return _serde.dumps(value, allow_pickle=self.allow_pickle, where=where)

    def load(self, data: bytes, run_id: str, position: int | None) -> Any:
        """Decode a stored value (raises PayloadError)."""
        return _serde.loads(data, allow_pickle=self.allow_pickle, run_id=run_id, position=position)

    def dump_error(self, error: BaseException) -> bytes:
        """Encode an exception for storage; never fails."""
        return _error_payload.dump_error(error, allow_pickle=self.allow_pickle)

    def load_error(self, data: bytes, run_id: str, position: int | None) -> BaseException:
        """Rebuild a stored exception (raises PayloadError)."""
        return _error_payload.load_error(
            data, allow_pickle=self.allow_pickle, run_id=run_id, position=position
        )

    def error_of(self, run: Run) -> bytes:
        """The stored error of a finished run that did not complete (synthesized for a
        run cancelled before it ever started, which has none)."""
        if run.error is not None:
            return run.error
        return self.dump_error(Cancelled(run.id))

    def preview(self, arguments: Mapping[str, Any]) -> bytes | None:
        """A task's arguments for display, when they are plain data; never pickled."""
        try:
            return _serde.dumps(dict(arguments), allow_pickle=False, where="")
        except SerializationError:
            return None

    # -- creating and joining runs ---------------------------------------------------

    def execute_call(
        self, call: Call[Any], *, run_id: str | None = None, parent_id: str | None = None
    ) -> Any:
        """Run *call* durably as its own run, in this thread, and return its outcome.

        With a *run_id* that exists already, the stored run is joined: its recorded
        outcome is returned, or it is resumed (or awaited, if a live owner has it).
        """
        run, created = self._create(call, run_id, parent_id, owner=self.owner)
        if created:
            return drive(self, run, call, (), await_others=True)
        return self.join(run, call.target)

    async def execute_call_async(
        self, call: Call[Any], *, run_id: str | None = None, parent_id: str | None = None
    ) -> Any:
        """`execute_call` for async callers: async workflows run on the current loop."""
        if not call.target.is_async:
            return await asyncio.to_thread(
                self.execute_call, call, run_id=run_id, parent_id=parent_id
            )
        run, created = self._create(call, run_id, parent_id, owner=self.owner)
        if not created:
            return await asyncio.to_thread(self.join, run, call.target)
        return await drive_async(self, run, call)

    def dispatch_call(
        self,
        call: Call[Any],
        *,
        run_id: str | None = None,
        queue: str = "default",
        priority: int = 0,
        parent_id: str | None = None,
    ) -> Run:
        """Queue *call* as a run for a worker; return it (the existing one for a known id)."""
        run, _ = self._create(call, run_id, parent_id, owner=None, queue=queue, priority=priority)
        return run

    def _create(
        self,
        call: Call[Any],
        run_id: str | None,
        parent_id: str | None,
        *,
        owner: str | None,
        queue: str = "default",
        priority: int = 0,
    ) -> tuple[Run, bool]:
        target = call.target
        try:
            payload = self.dump(
                {"args": list(call.args), "kwargs": call.kwargs},
                f"the arguments of {target.kind.value} {target.name!r}",
            )
        except SerializationError:
            self._name_bad_argument(call)
            raise
        digest = call_hash(target.kind, target.name, call.arguments)
        new = NewRun(
            id=run_id or uuid.uuid4().hex,
            workflow=target.name,
            input=payload,
            call_hash=digest,
            owner=owner,
            lease=self.lease,
            parent_id=parent_id,
            queue=queue,
            priority=priority,
        )
        run, created = self.backend.create_run(new)
        if not created and (run.workflow != target.name or run.call_hash != digest):
            raise IdempotencyConflict(
                f"Run {run.id!r} already exists for {run.workflow} with other arguments "
                f"({run.call_hash}), so it cannot be used for {target.name} ({digest}). "
                "Use a different id, or the same call to join the existing run.",
                run_id=run.id,
            )
        return run, created

    def _name_bad_argument(self, call: Call[Any]) -> None:
        """Raise a SerializationError that names the first argument that cannot be stored."""
        for name, value in call.arguments.items():
            self.dump(value, f"argument {name!r} of {call.target.kind.value} {call.target.name!r}")

    def join(self, run: Run, target: Durable[..., Any]) -> Any:
        """Return the outcome of an existing run: recorded, resumed here, or awaited."""
        watch = self.backend.watch([f"run:{run.id}"])
        while True:
            if run.status.finished:
                return self.outcome(run)
            if run.id not in self._active:
                claimed = self.claim(run)
                if claimed is not None and claimed.status is RunStatus.RUNNING:
                    return self.resume(claimed, target, await_others=True)
            # A live owner has it: wait for its outcome, or for its lease to run out.
            watch.wait(1.0)
            run = self.reread(run.id)

    def claim(self, run: Run) -> Run | None:
        """Take *run* over if its owner is gone (or it waits for one); None if someone
        else has it. A run whose owners keep dying is given up instead (status DEAD)."""
        dead = run.lease_owner if _owner.is_dead(run.lease_owner) else None
        claimed = self.backend.claim_run(
            run.id, owner=self.owner, lease=self.lease, epoch=run.epoch, dead_owner=dead
        )
        if claimed is None or claimed.recoveries < self.max_recoveries:
            return claimed
        error = RunDead(
            f"Run {run.id!r} was given up: its owner died {claimed.recoveries} times while "
            "running it (max_recoveries). A task probably crashes its process (out of memory, "
            "a native crash, os._exit). Fix the cause, then retry the run.",
            run_id=run.id,
            recoveries=claimed.recoveries,
        )
        self.backend.finish_run(
            claimed.id, claimed.epoch, RunStatus.DEAD, error=self.dump_error(error)
        )
        log.error("%s", error)
        return self.reread(run.id)

    def resume(self, run: Run, target: Durable[..., Any], *, await_others: bool) -> Any:
        """Continue a run this engine has just claimed, replaying its history."""
        try:
            stored = self.load(run.input, run.id, None)
            call = Call(target, tuple(stored["args"]), stored["kwargs"], {})
            call.arguments = target.bind_arguments(call.args, call.kwargs)
        except (PayloadError, TypeError, KeyError) as error:
            bad = error if isinstance(error, PayloadError) else PayloadError(
                f"The stored input of run {run.id!r} does not fit {target.name}: {error}.",
                run_id=run.id, position=None,
            )  # fmt: skip
            self.backend.finish_run(run.id, run.epoch, RunStatus.FAILED, error=self.dump_error(bad))
            raise bad from None
        # A run at its first epoch has never executed: it has no history to load.
        history = self.backend.load_history(run.id) if run.epoch > 1 else ()
        return drive(self, run, call, history, await_others=await_others)

    def outcome(self, run: Run) -> Any:
        """Return a finished run's result, or raise its error (of the original type)."""
        if run.status is RunStatus.COMPLETED:
            return self.load(run.output or b"", run.id, None)
        raise self.load_error(self.error_of(run), run.id, None)

    def reread(self, run_id: str) -> Run:
        """The stored run, or RunNotFound."""
        run = self.backend.get_run(run_id)
        if run is None:
            raise RunNotFound(f"No run has the id {run_id!r}.", run_id=run_id)
        return run

    def wait_for_run(
        self, run_id: str, *, timeout: float | None = None, context: RunContext | None = None
    ) -> Run:
        """Block until run *run_id* has finished; return it.

        Waits on notifications (LISTEN/NOTIFY on PostgreSQL, in-process otherwise),
        re-reading the run at least every second.

        Raises:
            WaitTimeout: *timeout* seconds passed first.
        """
        watch = self.backend.watch([f"run:{run_id}"])
        deadline = None if timeout is None else self.clock.now() + timeout
        while True:
            run = self.reread(run_id)
            if run.status.finished:
                return run
            if context is not None and context.run_id in self.draining:
                raise context.poison(Abandoned(None))
            left = 1.0 if deadline is None else deadline - self.clock.now()
            if left <= 0:
                raise WaitTimeout(
                    f"Run {run_id!r} did not finish within {timeout} s (it is {run.status}).",
                    run_id=run_id,
                )
            watch.wait(min(left, 1.0))

    def cancel(self, run_id: str) -> bool:
        """Cancel a run and its children. False if it had already finished (a no-op)."""
        run = self.backend.cancel_run(run_id)
        if run is None:
            raise RunNotFound(f"No run has the id {run_id!r}.", run_id=run_id)
        return run.status is RunStatus.CANCELLED or run.cancel_requested

    # -- executing here --------------------------------------------------------------

    def enter(self, run: Run, history: Sequence[Step]) -> tuple[RunContext, Any]:
        """Start executing *run* here: heartbeat it and make it the current context."""
        context = RunContext(self, run, history)
        with self._lock:
            self._active[run.id] = run.epoch
        self._ensure_heartbeat()
        return context, current.set(context)

    def leave(self, context: RunContext, token: Any) -> None:
        """Stop executing a run here."""
        current.reset(token)
        with self._lock:
            self._active.pop(context.run_id, None)
        self.draining.discard(context.run_id)
        self.unproven.discard(context.run_id)

    def release_quietly(self, run: Run) -> None:
        """Hand a run back (QUEUED) so that another owner continues it at once."""
        try:
            self.backend.release_run(run.id, run.epoch)
        except Exception:
            log.warning("run %s: could not release its lease; it expires on its own", run.id)

    # -- leases ----------------------------------------------------------------------

    def _ensure_heartbeat(self) -> None:
        thread = self._heartbeat
        if thread is not None and thread.is_alive():
            return
        with self._lock:
            if self._heartbeat is not None and self._heartbeat.is_alive():
                return
            self._heartbeat = threading.Thread(
                target=self._beat, name="durable-heartbeat", daemon=True
            )
            self._heartbeat.start()

    def _beat(self) -> None:
        while not self._stopping.wait(self.lease / 3):
            if not self._active:
                continue
            try:
                self.backend.renew_leases(self.owner, self.lease)
            except Exception as error:
                log.warning("could not renew leases: %s", error)

    # -- recovery --------------------------------------------------------------------

    def recover(self, *, wait: bool = True) -> list[str]:
        """Resume every run whose owner is gone, and every blocked run.

        A run whose owner was a process on this host that no longer exists is taken over
        at once; other runs once their lease has expired. Runs whose workflow is not
        registered here are left untouched (and logged once). Finished tasks are not run
        again: each run replays its history.

        Args:
            wait: block until the resumed runs end (their outcomes are recorded, not
                raised); with False they continue on background threads.

        Returns:
            The ids of the runs this call resumed.
        """
        candidates = self.backend.recoverable(host=_owner.host())
        ids = {run.id for run in candidates}
        claimed: list[tuple[Run, Durable[..., Any]]] = []
        for run in candidates:
            if run.parent_id in ids or run.id in self._active:
                continue  # a parent resumes its own children
            target = self.known(run)
            mine = self.claim(run) if target is not None else None
            if target is not None and mine is not None and mine.status is RunStatus.RUNNING:
                claimed.append((mine, target))
        if claimed:
            pool = ThreadPoolExecutor(min(len(claimed), 16), thread_name_prefix="durable-recover")
            for run, target in claimed:
                pool.submit(self.resume_quietly, run, target)
            pool.shutdown(wait=wait)
        return [run.id for run, _ in claimed]

    def known(self, run: Run) -> Durable[..., Any] | None:
        """The function a run needs, or None (logged once per name) if not registered."""
        target = _registry.find(run.workflow)
        if target is None:
            self.warn_unknown(run.workflow, f"run {run.id}")
        return target

    def warn_unknown(self, name: str, who: str) -> None:
        """Log, once per name, that *who* needs a function this process does not have."""
        if name in self._warned_unknown:
            return
        self._warned_unknown.add(name)
        log.error(
            "%s needs %r, which is not registered in this process: import the module that "
            "defines it. Such runs are left for a process that knows them.",
            who,
            name,
        )

    def resume_quietly(
        self, run: Run, target: Durable[..., Any], *, await_others: bool = True
    ) -> None:
        """`resume`, logging the outcome instead of raising it (it is recorded anyway)."""
        try:
            self.resume(run, target, await_others=await_others)
        except (Exception, Cancelled) as error:
            log.info("run %s ended with %s: %s", run.id, type(error).__name__, error)
        except BaseException:
            log.exception("run %s: execution interrupted", run.id)

    # -- life cycle ------------------------------------------------------------------

    def close(self) -> None:
        """Stop the heartbeat and the branch threads and close the database."""
        self._stopping.set()
        thread = self._heartbeat
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self.branches.shutdown()
        self.backend.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
