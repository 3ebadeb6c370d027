"""What executing runs share: the database, payloads, the clock, the settings.

A `Host` is the state of one engine. The pieces of the runtime that execute runs (the
run context, tasks, waits, children, one execution) take a Host and call down into
it; `Engine` is a Host with the public operations on top, so nothing below the engine
imports it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from durable.backends import DEFAULT_URL, Backend, open_backend
from durable.core import error_payloads, serde, signing
from durable.core.attributes import DEFAULT_MAX_ATTRIBUTES
from durable.core.chains import successor_id
from durable.core.clock import SYSTEM_CLOCK, Clock, DatabaseClock
from durable.core.functions import Durable
from durable.core.records import Run, RunStatus
from durable.core.run_options import check_version
from durable.errors import Cancelled, ConfigurationError, RunNotFound, SerializationError

from . import registry
from .fanout import Fanout
from .leases import Leases
from .observers import Observers
from .tracing import Spans, tracing_wanted

log = logging.getLogger("durable")


#: ``DURABLE_ALLOW_PICKLE=1`` turns pickles on where the code does not say (workers).
PICKLE_ENV = "DURABLE_ALLOW_PICKLE"


def pickles_allowed(option: bool | None, environ: Mapping[str, str] = os.environ) -> bool:
    """The option if given, else ``$DURABLE_ALLOW_PICKLE`` (1/true/yes), else False."""
    if option is not None:
        return option
    value = environ.get(PICKLE_ENV, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise ConfigurationError(f"{PICKLE_ENV} must be 1 or 0 (true/false), got {value!r}.")


#: ``DURABLE_VERSION`` is the code version where the code does not say (workers).
VERSION_ENV = "DURABLE_VERSION"


def code_version(option: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The option if given, else ``$DURABLE_VERSION`` if set and not empty, else None;
    checked (`check_version`: a non-empty string of at most 512 bytes).

    Raises:
        ConfigurationError: the version is not one a run can be stamped with.
    """
    version = option if option is not None else environ.get(VERSION_ENV) or None
    if version is None:
        return None
    try:
        return check_version(version)
    except (TypeError, ValueError) as error:  # InvalidValue is a ValueError too
        where = "version=" if option is not None else f"${VERSION_ENV}"
        raise ConfigurationError(f"{where}: {error}") from None


class Host:
    """One database and the settings runs execute under (see `Engine` for the arguments)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        backend: Backend | None = None,
        lease: float = 30.0,
        allow_pickle: bool | None = None,
        clock: Clock = SYSTEM_CLOCK,
        max_threads: int = 32,
        max_recoveries: int = 10,
        max_inline_wait: float = 1.0,
        secret_key: str | bytes | None = None,
        old_secret_keys: Sequence[str | bytes] | None = None,
        max_payload: int = serde.DEFAULT_MAX_PAYLOAD,
        version: str | None = None,
        only_version: bool = False,
        max_attributes: int = DEFAULT_MAX_ATTRIBUTES,
        tracing: bool | None = None,
    ) -> None:
        if lease <= 0:
            raise ConfigurationError(f"lease must be a positive number of seconds, got {lease}.")
        if max_recoveries < 1:
            raise ConfigurationError(f"max_recoveries must be at least 1, got {max_recoveries}.")
        if max_inline_wait < 0:
            raise ConfigurationError(
                f"max_inline_wait must not be negative, got {max_inline_wait}."
            )
        if type(max_attributes) is not int or max_attributes < 1:
            raise ConfigurationError(
                f"max_attributes must be a positive number of attributes, got {max_attributes!r}."
            )
        #: the most attributes one run may hold (`durable.core.attributes`).
        self.max_attributes = max_attributes
        if max_payload < 1:
            raise ConfigurationError(
                f"max_payload must be a positive size in bytes, got {max_payload}."
            )
        #: the code version this process stamps the runs it creates and first starts
        #: with; with *only_version*, it claims only runs of it and new ones.
        self.version = code_version(version)
        if only_version and self.version is None:
            raise ConfigurationError(
                "only_version=True claims only the runs of this process's code version, "
                f"so it needs one: give version= (or set ${VERSION_ENV})."
            )
        self.only_version = bool(only_version)
        traced = tracing_wanted(tracing)
        signer = signing.signer_from(secret_key, old_secret_keys)
        self.backend: Backend = backend or open_backend(url or DEFAULT_URL, clock=clock)
        self.lease = lease
        self.allow_pickle = pickles_allowed(allow_pickle)
        if self.allow_pickle and signer is None:
            log.warning(
                "allow_pickle is on without a secret key: whoever can write the database "
                "can run code in this process. Set DURABLE_SECRET_KEY (or secret_key=) so "
                "that only pickles this application signed are loaded."
            )
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
        #: the runs executing here, their leases and heartbeat.
        self.leases = Leases(self.backend, lease)
        #: what watches the runs executing here: traces, metrics, logs (`observers.py`).
        self.observers = Observers()
        if traced:
            self.observers.add(Spans())
        self._warned_unknown: set[str] = set()

    @property
    def owner(self) -> str:
        """The lease-owner string of this engine (it changes in a forked child)."""
        return self.leases.owner

    # -- payloads --------------------------------------------------------------------

    def dump(self, value: Any, where: str | Callable[[], str]) -> bytes:
        """Encode a value for storage (raises SerializationError, PayloadTooLarge)."""
        return serde.dumps(
            value,
            allow_pickle=self.allow_pickle,
            where=where,
            signer=self.signer,
            max_size=self.max_payload,
        )

    def load(self, data: bytes, run_id: str, position: int | None) -> Any:
        """Decode a stored value (raises PayloadError, PickleRefused)."""
        return serde.loads(
            data,
            allow_pickle=self.allow_pickle,
            run_id=run_id,
            position=position,
            signer=self.signer,
        )

    def dump_error(self, error: BaseException) -> bytes:
        """Encode an exception for storage; never fails (cut down to fit max_payload)."""
        return error_payloads.dump_error(
            error, allow_pickle=self.allow_pickle, signer=self.signer, max_size=self.max_payload
        )

    def load_error(self, data: bytes, run_id: str, position: int | None) -> BaseException:
        """Rebuild a stored exception (raises PayloadError, PickleRefused)."""
        return error_payloads.load_error(
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
        return serde.resign(data, self.signer)

    def error_of(self, run: Run) -> bytes:
        """The stored error of a finished run that did not complete (synthesized for a
        run cancelled before it ever started, which has none)."""
        if run.error is not None:
            return run.error
        return self.dump_error(Cancelled(run.id))

    def preview(self, arguments: Mapping[str, Any]) -> bytes | None:
        """A task's arguments for display, when they are plain data; never pickled."""
        try:
            return serde.dumps(
                dict(arguments), allow_pickle=False, where="", max_size=self.max_payload
            )
        except SerializationError:
            return None

    # -- stored runs -----------------------------------------------------------------

    def reread(self, run_id: str) -> Run:
        """The stored run, or RunNotFound."""
        run = self.backend.get_run(run_id)
        if run is None:
            raise RunNotFound(f"No run has the id {run_id!r}.", run_id=run_id)
        return run

    def follow(self, run: Run) -> Run:
        """*run*, or if it continued as new, the current run of its chain (successor
        after successor, as stored now)."""
        while run.status is RunStatus.CONTINUED:
            run = self.reread(successor_id(run.id))
        return run

    def outcome(self, run: Run) -> Any:
        """Return a finished run's result, or raise its error (of the original type)."""
        if run.status is RunStatus.COMPLETED:
            return self.load(run.output or b"", run.id, None)
        raise self.load_error(self.error_of(run), run.id, None)

    def cancel(self, run_id: str) -> bool:
        """Cancel a run and its children (a run that continued as new: the current run
        of its chain). False if it had already finished (a no-op)."""
        run = self.backend.cancel_run(run_id)
        while run is not None and run.status is RunStatus.CONTINUED:
            run = self.backend.cancel_run(successor_id(run.id))
        if run is None:
            raise RunNotFound(f"No run has the id {run_id!r}.", run_id=run_id)
        return run.status is RunStatus.CANCELLED or run.cancel_requested

    def known(self, run: Run) -> Durable[..., Any] | None:
        """The function a run needs, or None (logged once per name) if not registered."""
        target = registry.find(run.workflow)
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

    # -- runs executing here -----------------------------------------------------------

    def executing(self, run_id: str) -> bool:
        """Whether run *run_id* is executing in this process now."""
        return self.leases.executing(run_id)

    def release_quietly(self, run: Run) -> None:
        """Hand a run back (QUEUED) so that another owner continues it at once (see
        `Leases.release_quietly`)."""
        self.leases.release_quietly(run)

    def close(self) -> None:
        """Stop the heartbeat and the branch threads and close the database."""
        self.leases.stop()
        self.branches.shutdown()
        self.backend.close()
