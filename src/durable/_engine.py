"""The engine: one database, the runs this process executes on it, and their leases.

`execute` creates a run (or joins the existing run with the same id), executes it in
the calling thread under a lease, and returns its outcome. A heartbeat thread keeps
the leases of running runs alive. `recover` resumes runs whose owner is gone.
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
from ._decorators import Call, Durable, Task
from ._fanout import Fanout
from ._hashing import call_hash
from ._records import NewRun, Run, RunStatus
from ._runner import Abandoned, RunContext, run_coroutine
from .backends import Backend, MemoryBackend
from .errors import (
    ConfigurationError,
    IdempotencyConflict,
    LeaseLost,
    NondeterminismError,
    PayloadError,
    RunNotFound,
    SerializationError,
    StorageError,
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
    except ConfigurationError:
        raise
    except Exception as error:
        if isinstance(error, StorageError):
            raise
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
    ) -> None:
        if lease <= 0:
            raise ConfigurationError(f"lease must be a positive number of seconds, got {lease}.")
        self.backend: Backend = backend or open_backend(url or DEFAULT_URL, clock=clock)
        self.lease = lease
        self.allow_pickle = allow_pickle
        self.clock = clock
        self.branches = Fanout(max_threads)
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

    def preview(self, arguments: Mapping[str, Any]) -> bytes | None:
        """A task's arguments for display, when they are plain data; never pickled."""
        try:
            return _serde.dumps(dict(arguments), allow_pickle=False, where="")
        except SerializationError:
            return None

    # -- executing -------------------------------------------------------------------

    def execute_call(
        self, call: Call[Any], *, run_id: str | None = None, parent_id: str | None = None
    ) -> Any:
        """Run *call* durably as its own run and return its outcome.

        With a *run_id* that exists already, the stored run is joined: its recorded
        outcome is returned, or it is resumed (or awaited, if a live owner has it).
        """
        run, created = self._create(call, run_id, parent_id)
        if created:
            return self._drive(run, call, ())
        return self._join(run, call.target)

    async def execute_call_async(
        self, call: Call[Any], *, run_id: str | None = None, parent_id: str | None = None
    ) -> Any:
        """`execute_call` for async callers: async workflows run on the current loop."""
        if not call.target.is_async:
            return await asyncio.to_thread(
                self.execute_call, call, run_id=run_id, parent_id=parent_id
            )
        run, created = self._create(call, run_id, parent_id)
        if not created:
            return await asyncio.to_thread(self._join, run, call.target)
        context, token = self._begin(run, ())
        try:
            value = await self._body(context, call)
        except BaseException as error:
            self._end(context, token)
            return self._ended_with_error(context, run, call.target, error)
        self._end(context, token)
        return self._ended_with_value(context, run, call.target, value)

    def _create(
        self, call: Call[Any], run_id: str | None, parent_id: str | None
    ) -> tuple[Run, bool]:
        target = call.target
        kind = target.kind.value
        try:
            payload = self.dump(
                {"args": list(call.args), "kwargs": call.kwargs},
                f"the arguments of {kind} {target.name!r}",
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
            owner=self.owner,
            lease=self.lease,
            parent_id=parent_id,
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

    def _join(self, run: Run, target: Durable[..., Any]) -> Any:
        """Return the outcome of an existing run: recorded, resumed here, or awaited."""
        delay = 0.005
        while True:
            if run.status.finished:
                return self._outcome(run)
            if run.id not in self._active:
                dead = run.lease_owner if _owner.is_dead(run.lease_owner) else None
                claimed = self.backend.claim_run(
                    run.id, owner=self.owner, lease=self.lease, epoch=run.epoch, dead_owner=dead
                )
                if claimed is not None:
                    return self._resume(claimed, target)
            # A live owner has it: wait for its outcome, or for its lease to run out.
            self.clock.sleep(delay)
            delay = min(delay * 2, 0.5)
            latest = self.backend.get_run(run.id)
            if latest is None:
                raise RunNotFound(f"Run {run.id!r} disappeared while waited for.", run_id=run.id)
            run = latest

    def _outcome(self, run: Run) -> Any:
        if run.status is RunStatus.COMPLETED:
            return self.load(run.output or b"", run.id, None)
        raise self.load_error(run.error or b"", run.id, None)

    def _resume(self, run: Run, target: Durable[..., Any]) -> Any:
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
        return self._drive(run, call, self.backend.load_history(run.id))

    def _begin(self, run: Run, history: Sequence[Any]) -> tuple[RunContext, Any]:
        context = RunContext(self, run, history)
        with self._lock:
            self._active[run.id] = run.epoch
        self._ensure_heartbeat()
        return context, current.set(context)

    def _end(self, context: RunContext, token: Any) -> None:
        current.reset(token)
        with self._lock:
            self._active.pop(context.run_id, None)

    def _body(self, context: RunContext, call: Call[Any]) -> Any:
        """Call the workflow function (a task run is one durable call at position 0)."""
        target = call.target
        if isinstance(target, Task):
            position = context.replay.allocate()
            if target.is_async:
                return context.step_async(position, call)
            return context.step(position, call)
        return target.fn(*call.args, **call.kwargs)

    def _drive(self, run: Run, call: Call[Any], history: Sequence[Any]) -> Any:
        context, token = self._begin(run, history)
        try:
            value = self._body(context, call)
            if asyncio.iscoroutine(value):
                value = run_coroutine(value)
        except BaseException as error:
            # Leave the run first: settling may mean waiting for, or re-claiming, it.
            self._end(context, token)
            return self._ended_with_error(context, run, call.target, error)
        self._end(context, token)
        return self._ended_with_value(context, run, call.target, value)

    def _ended_with_value(
        self, context: RunContext, run: Run, target: Durable[..., Any], value: Any
    ) -> Any:
        try:
            context.check()
            context.replay.check_complete()
        except BaseException as error:
            return self._ended_with_error(context, run, target, error)
        try:
            output = self.dump(value, f"the result of run {run.id!r} ({target.name})")
        except SerializationError as error:
            return self._ended_with_error(context, run, target, error)
        if self.backend.finish_run(run.id, run.epoch, RunStatus.COMPLETED, output=output):
            return value
        return self._join(self._reread(run.id), target)

    def _ended_with_error(
        self, context: RunContext, run: Run, target: Durable[..., Any], error: BaseException
    ) -> Any:
        fatal = context.fatal
        if fatal is None and isinstance(error, Exception):
            try:
                context.replay.check_complete()
            except NondeterminismError as diverged:
                fatal = diverged
        abandoned = fatal if isinstance(fatal, Abandoned) else error
        if isinstance(abandoned, Abandoned):
            cause = abandoned.cause
            if isinstance(cause, LeaseLost):
                log.info("run %s: lease lost to another owner; waiting for its outcome", run.id)
                return self._join(self._reread(run.id), target)
            self._release_quietly(run)
            raise cause from None
        if isinstance(fatal, NondeterminismError):
            self.backend.finish_run(
                run.id, run.epoch, RunStatus.BLOCKED, error=self.dump_error(fatal)
            )
            raise fatal from None
        if fatal is not None:
            error = fatal
        elif not isinstance(error, Exception):
            # KeyboardInterrupt, SystemExit...: not the workflow's outcome. Let go of the
            # run so that another process (or a later call) resumes it at once.
            self._release_quietly(run)
            raise error
        if self.backend.finish_run(
            run.id, run.epoch, RunStatus.FAILED, error=self.dump_error(error)
        ):
            raise error
        return self._join(self._reread(run.id), target)

    def _reread(self, run_id: str) -> Run:
        run = self.backend.get_run(run_id)
        if run is None:
            raise RunNotFound(f"Run {run_id!r} does not exist.", run_id=run_id)
        return run

    def _release_quietly(self, run: Run) -> None:
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
            target = _registry.find(run.workflow)
            if target is None:
                self._warn_unknown(run)
                continue
            dead = run.lease_owner if _owner.is_dead(run.lease_owner) else None
            mine = self.backend.claim_run(
                run.id, owner=self.owner, lease=self.lease, epoch=run.epoch, dead_owner=dead
            )
            if mine is not None:
                claimed.append((mine, target))
        if claimed:
            pool = ThreadPoolExecutor(min(len(claimed), 16), thread_name_prefix="durable-recover")
            for run, target in claimed:
                pool.submit(self._resume_quietly, run, target)
            pool.shutdown(wait=wait)
        return [run.id for run, _ in claimed]

    def _warn_unknown(self, run: Run) -> None:
        if run.workflow in self._warned_unknown:
            return
        self._warned_unknown.add(run.workflow)
        log.error(
            "run %s needs %r, which is not registered in this process: import the module "
            "that defines it. The run is left untouched until then.",
            run.id,
            run.workflow,
        )

    def _resume_quietly(self, run: Run, target: Durable[..., Any]) -> None:
        try:
            self._resume(run, target)
        except Exception as error:
            log.info("run %s ended with %s: %s", run.id, type(error).__name__, error)
        except BaseException:
            log.exception("run %s: recovery interrupted", run.id)

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
