"""The engine: one database, the runs this process executes on it, and their leases.

`execute_call` creates a run (or joins the existing run with the same id), executes it
in the calling thread under a lease, and returns its outcome; if the run has to wait,
the caller keeps waiting for it (see `_joining.py`). `dispatch_call` queues a run for
a worker. A heartbeat thread keeps the leases of running runs alive, and `recover`
resumes runs whose owner is gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from durable.api.decorators import Call, Durable
from durable.backends import Backend, MemoryBackend
from durable.core import error_payloads as _error_payload
from durable.core import serde as _serde
from durable.core import signing as _signing
from durable.core.clock import SYSTEM_CLOCK, Clock, DatabaseClock
from durable.core.hashing import call_hash
from durable.core.ids import new_run_id
from durable.core.records import NewRun, Run, RunStatus, Step
from durable.errors import (
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

from . import owners as _owner
from . import registry as _registry
from .execution import drive, drive_async
from .fanout import Fanout
from .joining import join
from .purging import Age, purge_before, purge_cutoff
from .runner import RunContext
from .scope import RELEASED, current

log = logging.getLogger("durable")

#: Where runs live when nothing else is configured: a file in the working directory.
DEFAULT_URL = "sqlite:///durable.db"


def open_backend(url: str, *, clock: Clock = SYSTEM_CLOCK) -> Backend:
    """Return the backend for *url*: ``memory://``, ``sqlite:///...`` or ``postgresql://...``."""
    if url.startswith("memory:"):
        return MemoryBackend(clock=clock)
    from durable.backends.sql import SQLBackend

    try:
        return SQLBackend(url)
    except (ConfigurationError, StorageError):
        raise
    except Exception as error:
        # Not the parser's message: it can quote the password (a URL without a host
        # reads the password as the port).
        scheme = url.split("://", 1)[0] if "://" in url else "?"
        scheme = scheme if scheme.replace("+", "").isalnum() else "?"
        raise ConfigurationError(
            f"Cannot parse the database URL ({scheme}://..., {type(error).__name__}). Use "
            "sqlite:///path/to/file.db, postgresql://user:password@host:port/database or "
            "memory://, with special characters in the password percent-encoded."
        ) from None


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
        max_inline_wait: waits and retry delays up to this many seconds sleep in the
            executing thread; longer ones suspend the run, which then holds no thread
            until it is due. 0 suspends every wait.
        secret_key: signs every payload that holds a pickle (HMAC-SHA256), and then only
            pickles whose signature verifies are loaded. Default: ``$DURABLE_SECRET_KEY``.
            Without a key, whoever can write the database can run code in workers
            (unless ``allow_pickle=False``). See docs/guarantees.md (Security).
        old_secret_keys: retired keys, still accepted for reading signed payloads.
            Default: ``$DURABLE_OLD_SECRET_KEYS`` (comma-separated).
        max_payload: the most bytes one stored value may take (64 MiB by default). A
            larger value fails the call that produced it with `PayloadTooLarge`.
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
        max_inline_wait: float = 1.0,
        secret_key: str | bytes | None = None,
        old_secret_keys: Sequence[str | bytes] | None = None,
        max_payload: int = _serde.DEFAULT_MAX_PAYLOAD,
    ) -> None:
        if lease <= 0:
            raise ConfigurationError(f"lease must be a positive number of seconds, got {lease}.")
        if max_recoveries < 1:
            raise ConfigurationError(f"max_recoveries must be at least 1, got {max_recoveries}.")
        if max_inline_wait < 0:
            raise ConfigurationError(
                f"max_inline_wait must not be negative, got {max_inline_wait}."
            )
        if max_payload < 1:
            raise ConfigurationError(
                f"max_payload must be a positive size in bytes, got {max_payload}."
            )
        signer = _signing.signer_from(secret_key, old_secret_keys)
        self.backend: Backend = backend or open_backend(url or DEFAULT_URL, clock=clock)
        self.lease = lease
        self.allow_pickle = allow_pickle
        #: signs and verifies payloads that hold pickles; None without a secret key.
        self.signer = signer
        self.max_payload = max_payload
        if clock is SYSTEM_CLOCK and getattr(self.backend, "dialect_name", None) == "postgresql":
            # Leases and wake-ups are compared with the server's clock: deadlines come
            # from it too, so a worker host's clock jump cannot move them.
            clock = DatabaseClock(self.backend.now)
        self.clock = clock
        self.max_recoveries = max_recoveries
        self.max_inline_wait = max_inline_wait
        #: set by `durable.testing.DurableEnv`: runs the environment until run *id*
        #: finishes, instead of waiting for real time to pass.
        self.pump: Callable[[str], None] | None = None
        self.branches = Fanout(max_threads)
        #: runs to hand back at their next durable call (a worker shutting down).
        self.draining: set[str] = set()
        #: runs taken over from a dead owner that have not recorded a new step since: any
        #: of them may be what killed that owner.
        self.unproven: set[str] = set()
        self._owner = _owner.new_owner()
        self._active: dict[str, int] = {}  # run id -> epoch, for runs executing here
        self._unreleased: dict[str, int] = {}  # run id -> epoch, to hand back (see release_quietly)
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
        """Encode a value for storage (raises SerializationError, PayloadTooLarge)."""
        return _serde.dumps(
            value,
            allow_pickle=self.allow_pickle,
            where=where,
            signer=self.signer,
            max_size=self.max_payload,
        )

    def load(self, data: bytes, run_id: str, position: int | None) -> Any:
        """Decode a stored value (raises PayloadError, PickleRefused)."""
        return _serde.loads(
            data,
            allow_pickle=self.allow_pickle,
            run_id=run_id,
            position=position,
            signer=self.signer,
        )

    def dump_error(self, error: BaseException) -> bytes:
        """Encode an exception for storage; never fails (cut down to fit max_payload)."""
        return _error_payload.dump_error(
            error, allow_pickle=self.allow_pickle, signer=self.signer, max_size=self.max_payload
        )

    def load_error(self, data: bytes, run_id: str, position: int | None) -> BaseException:
        """Rebuild a stored exception (raises PayloadError, PickleRefused)."""
        return _error_payload.load_error(
            data,
            allow_pickle=self.allow_pickle,
            run_id=run_id,
            position=position,
            signer=self.signer,
        )

    def resign(self, data: bytes) -> bytes:
        """A stored payload signed with this engine's current key, for writing back.

        For rows written before signing was turned on, or signed with a retired key.
        Nothing is unpickled, and an unsigned pickle is signed as it is: re-sign only
        rows you trust.

        Raises:
            ConfigurationError: this engine has no secret key.
            PickleRefused: a signed payload that does not verify under any of its keys.
        """
        if self.signer is None:
            raise ConfigurationError(
                "resign needs a secret key (secret_key or $DURABLE_SECRET_KEY)."
            )
        return _serde.resign(data, self.signer)

    def error_of(self, run: Run) -> bytes:
        """The stored error of a finished run that did not complete (synthesized for a
        run cancelled before it ever started, which has none)."""
        if run.error is not None:
            return run.error
        return self.dump_error(Cancelled(run.id))

    def preview(self, arguments: Mapping[str, Any]) -> bytes | None:
        """A task's arguments for display, when they are plain data; never pickled."""
        try:
            return _serde.dumps(
                dict(arguments), allow_pickle=False, where="", max_size=self.max_payload
            )
        except SerializationError:
            return None

    # -- creating and joining runs ---------------------------------------------------

    def execute_call(
        self,
        call: Call[Any],
        *,
        run_id: str | None = None,
        parent_id: str | None = None,
        queue: str = "default",
        nested: bool = False,
    ) -> Any:
        """Run *call* durably as its own run, in this thread, and return its outcome.

        With a *run_id* that exists already, the stored run is joined: its recorded
        outcome is returned, or it is resumed (or awaited, if a live owner has it).

        Args:
            nested: a workflow executes this call as its child. Return `RELEASED`
                instead of waiting when the child has to wait or is elsewhere: the
                parent then suspends until the child finishes.
        """
        run, created = self._create(call, run_id, parent_id, owner=self.owner, queue=queue)
        if created:
            value = self._drive(run, call, replay=False)
        elif nested:
            value = self.step_in(run, call.target)
        else:
            return join(self, run, call.target)
        if value is RELEASED and not nested:
            return join(self, self.reread(run.id), call.target)
        return value

    async def execute_call_async(
        self,
        call: Call[Any],
        *,
        run_id: str | None = None,
        parent_id: str | None = None,
        queue: str = "default",
        nested: bool = False,
    ) -> Any:
        """`execute_call` for async callers: async workflows run on the current loop."""
        if not call.target.is_async:
            return await asyncio.to_thread(
                self.execute_call,
                call,
                run_id=run_id,
                parent_id=parent_id,
                queue=queue,
                nested=nested,
            )
        run, created = self._create(call, run_id, parent_id, owner=self.owner, queue=queue)
        if created:
            value = await drive_async(self, run, call)
        elif nested:
            value = await asyncio.to_thread(self.step_in, run, call.target)
        else:
            return await asyncio.to_thread(join, self, run, call.target)
        if value is RELEASED and not nested:
            return await asyncio.to_thread(join, self, self.reread(run.id), call.target)
        return value

    def step_in(self, run: Run, target: Durable[..., Any]) -> Any:
        """An existing child run, once: its outcome if it has finished, else execute it
        here if nobody else is; `RELEASED` if it must be waited for."""
        if run.status.finished:
            return self.outcome(run)
        claimed = self.claim(run) if run.id not in self._active else None
        if claimed is None or claimed.status is not RunStatus.RUNNING:
            return RELEASED if claimed is None else self.step_in(claimed, target)
        return self.resume(claimed, target)

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
        run, _ = self.enqueue(
            call, run_id=run_id, queue=queue, priority=priority, parent_id=parent_id
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
    ) -> tuple[Run, bool]:
        """`dispatch_call`, also saying whether this call created the run (False: a run
        with this id and call existed, and is returned)."""
        return self._create(call, run_id, parent_id, owner=None, queue=queue, priority=priority)

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
            id=run_id or new_run_id(),
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

    def resume(self, run: Run, target: Durable[..., Any]) -> Any:
        """Continue a run this engine has just claimed, replaying its history, until it
        ends or stops without an outcome (`RELEASED`)."""
        try:
            stored = self.load(run.input, run.id, None)
            call = Call(target, tuple(stored["args"]), stored["kwargs"], {})
            call.arguments = target.bind_arguments(call.args, call.kwargs)
        except Exception as error:  # whatever the stored input is, it fails only this run
            bad = error if isinstance(error, PayloadError) else PayloadError(
                f"The stored input of run {run.id!r} does not fit {target.name}: {error}.",
                run_id=run.id, position=None,
            )  # fmt: skip
            self.backend.finish_run(run.id, run.epoch, RunStatus.FAILED, error=self.dump_error(bad))
            raise bad from None
        # A run at its first epoch has never executed: it has no history to load.
        return self._drive(run, call, replay=run.epoch > 1)

    def _drive(self, run: Run, call: Call[Any], *, replay: bool) -> Any:
        """`drive` *run* here, replaying its history first if it has one.

        If the database fails before the run has an outcome, the run is handed back:
        left RUNNING under this owner, it would have its lease renewed with the others
        this engine holds, and stay stranded (see `release_quietly`).
        """
        try:
            history = self.backend.load_history(run.id) if replay else ()
            return drive(self, run, call, history)
        except StorageError:
            self.release_quietly(run)  # fenced: a no-op once it has an outcome or a new owner
            raise

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

    def wait_for_run(self, run_id: str, *, timeout: float | None = None) -> Run:
        """Block until run *run_id* has finished; return it. Others execute it.

        Waits on notifications (LISTEN/NOTIFY on PostgreSQL, in-process otherwise),
        re-reading the run at least every second.

        Raises:
            WaitTimeout: *timeout* seconds passed first.
        """
        if self.pump is not None:
            self.pump(run_id)
        watch = self.backend.watch([f"run:{run_id}"])
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            run = self.reread(run_id)
            if run.status.finished:
                return run
            left = 1.0 if deadline is None else deadline - time.monotonic()
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

    # -- executing here --------------------------------------------------------------

    def enter(self, run: Run, history: Sequence[Step]) -> tuple[RunContext, Any]:
        """Start executing *run* here: heartbeat it and make it the current context."""
        context = RunContext(self, run, history)
        with self._lock:
            self._active[run.id] = run.epoch
        self._ensure_heartbeat()
        return context, current.set(context)

    def executing(self, run_id: str) -> bool:
        """Whether run *run_id* is executing in this process now."""
        return run_id in self._active

    def leave(self, context: RunContext, token: Any) -> None:
        """Stop executing a run here."""
        current.reset(token)
        with self._lock:
            self._active.pop(context.run_id, None)
        self.draining.discard(context.run_id)
        self.unproven.discard(context.run_id)

    def release_quietly(self, run: Run) -> None:
        """Hand a run back (QUEUED) so that another owner continues it at once.

        If the database cannot be reached, the heartbeat tries again until it can: the
        lease would not expire on its own, as the heartbeat renews every lease this
        owner holds while it executes other runs.
        """
        with self._lock:
            if self._unreleased.get(run.id) == run.epoch:
                return  # already waiting for the database to come back
        try:
            self.backend.release_run(run.id, run.epoch)
        except Exception:
            log.warning("run %s: could not release its lease; the heartbeat retries", run.id)
            with self._lock:
                self._unreleased[run.id] = run.epoch
            self._ensure_heartbeat()

    def _release_unreleased(self) -> None:
        """Hand back the runs `release_quietly` could not (fenced by their epoch, so a
        run that has moved on since is left alone)."""
        with self._lock:
            pending = dict(self._unreleased)
        for run_id, epoch in pending.items():
            try:
                self.backend.release_run(run_id, epoch)
            except Exception:
                return  # still unreachable: the next beat tries again
            with self._lock:
                if self._unreleased.get(run_id) == epoch:
                    del self._unreleased[run_id]

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
            if self._unreleased:
                self._release_unreleased()
            if not self._active:
                continue
            try:
                self.backend.renew_leases(self.owner, self.lease)
            except Exception as error:
                log.warning("could not renew leases: %s", error)

    # -- recovery --------------------------------------------------------------------

    def recover(self, *, wait: bool = True) -> list[str]:
        """Resume every run whose owner is gone, every blocked run, and every run whose
        wait is over.

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
        while self.backend.wake_due(limit=500) == 500:
            pass  # sleeping runs that are due: queued, then resumed below
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

    def resume_quietly(self, run: Run, target: Durable[..., Any]) -> None:
        """`resume`, logging the outcome instead of raising it (it is recorded anyway)."""
        try:
            self.resume(run, target)
        except PayloadError as error:  # a corrupt or refused row: worth an operator's look
            log.error("run %s failed: %s", run.id, error)
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
