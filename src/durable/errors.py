"""Errors raised by durable.

Every public error derives from `DurableError`, carries structured fields where they
apply (`run_id`, `position`) and stays picklable, because errors cross process
boundaries. Where a stdlib class says the same thing, the error inherits it too, so
`except TypeError` or `except LookupError` keep working::

    DurableError
    ├── ConfigurationError              a bad option, URL or decoration
    │   └── DuplicateNameError (ValueError)   two functions registered under one name
    ├── NotDurableError (TypeError)     a plain function passed where @workflow/@task is needed
    ├── SerializationError (TypeError)  a value that cannot be stored; nothing was written
    │   └── PayloadTooLarge             a value larger than max_payload
    ├── PayloadError                    a stored payload that cannot be read back (corrupt row)
    │   └── PickleRefused               a stored pickle not loaded: disabled, unsigned or forged
    ├── RecordedError                   a recorded exception whose class no longer imports
    ├── NondeterminismError             the code no longer matches a run's recorded history
    ├── IdempotencyConflict             a run id reused for a different call
    ├── ScheduleConflict                a schedule id taken by another workflow's schedule
    ├── RunNotFound (LookupError)       no run has that id
    ├── RunFinished                     an event sent to a run that has finished
    ├── RunDead                         a run given up after its owner died too often
    ├── WaitTimeout (TimeoutError)      a run did not finish within the time waited
    ├── TaskTimeout (TimeoutError)      a task attempt ran past its timeout or heartbeat
    ├── WorkflowTimeout (TimeoutError)  a run reached its deadline (status timed_out)
    ├── LeaseLost                       another owner took the run over (fencing)
    ├── StorageError                    the database failed or cannot be reached
    ├── InvalidValue (ValueError)       a value that cannot be stored (a NUL in a name)
    ├── FlowFileError (ValueError)      a flow file that cannot be used (file, line, key)
    ├── FlowRefused (ValueError)        a verb on a flow's task that does not apply now
    │   ├── UnknownTask (LookupError)   the flow has no task of that name
    │   └── BadAnswer                   a human task's answer that does not match its form
    └── NonRetryable                    raise (or subclass) it in a task to skip retries

    Cancelled (BaseException)           raised into a cancelled workflow (or one at its
                                        deadline: ``timed_out``); not an error

`Cancelled` derives from `BaseException`, like `asyncio.CancelledError`, so that
`except Exception` in workflow code cannot swallow it by accident. Internal control
signals also derive from `BaseException` and live elsewhere.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BadAnswer",
    "Cancelled",
    "ConfigurationError",
    "DuplicateNameError",
    "DurableError",
    "FlowFileError",
    "FlowRefused",
    "IdempotencyConflict",
    "InvalidValue",
    "LeaseLost",
    "NonRetryable",
    "NondeterminismError",
    "NotDurableError",
    "PayloadError",
    "PayloadTooLarge",
    "PickleRefused",
    "RecordedError",
    "RunDead",
    "RunFinished",
    "RunNotFound",
    "ScheduleConflict",
    "SerializationError",
    "StorageError",
    "TaskTimeout",
    "UnknownTask",
    "WaitTimeout",
    "WorkflowTimeout",
]


class DurableError(Exception):
    """Base class of every error durable raises on purpose."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        for key, value in fields.items():
            setattr(self, key, value)
        self._fields = fields

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword fields are not in self.args; rebuild through a helper so that
        # pickling (across processes, into history rows) keeps them.
        return (_rebuild, (type(self), self.message, self._fields))


def _rebuild(cls: type[DurableError], message: str, fields: dict[str, Any]) -> DurableError:
    error = cls.__new__(cls)
    DurableError.__init__(error, message, **fields)
    return error


class ConfigurationError(DurableError):
    """An option, URL or decoration is wrong; the message says which and how to fix it."""


class DuplicateNameError(ConfigurationError, ValueError):
    """Two different functions were registered under the same workflow or task name."""


class NotDurableError(DurableError, TypeError):
    """A function that is not decorated with @workflow or @task was passed to durable."""


class SerializationError(DurableError, TypeError):
    """A value cannot be stored as a payload. Nothing was written.

    Attributes:
        where: which value failed, for example ``"argument 'lock'"`` or ``"output"``.
        type_name: the qualified type name of the offending value.
    """

    where: str
    type_name: str


class PayloadTooLarge(SerializationError):
    """A value is larger than the engine's `max_payload`. Nothing was written.

    It is deterministic, so a task whose result is too large fails without retries.

    Attributes:
        size: the encoded size in bytes.
        limit: the engine's `max_payload`.
    """

    size: int
    limit: int


class PayloadError(DurableError):
    """A stored payload cannot be decoded: the row is corrupt, truncated, or refused.

    The run it belongs to fails with this error; other runs are not affected.

    Attributes:
        run_id: the run whose row is bad, when known.
        position: the history position, or None for the run's own input/output.
    """

    run_id: str | None
    position: int | None


class PickleRefused(PayloadError):
    """A stored payload holds a pickle that was refused, and never unpickled.

    Loading a pickle runs code, so it is only loaded when pickling is allowed and, with a
    secret key configured, when its HMAC signature verifies.

    Attributes:
        reason: ``"pickling disabled"``, ``"no key"`` (signed, but this engine has no
            key), ``"unsigned"`` (a key is configured), ``"unknown key"`` or
            ``"bad signature"`` (forged, tampered with, or signed with another key), or
            ``"smuggled"`` (a pickle inside a row that claims to be plain JSON).
    """

    reason: str


class RecordedError(DurableError):
    """Stands in for a recorded exception whose class cannot be imported any more.

    Attributes:
        type_name: the original exception's qualified class name.
        recorded_traceback: the traceback text recorded when it was first raised.
    """

    type_name: str
    recorded_traceback: str


class NondeterminismError(DurableError):
    """The workflow made a different durable call than its history recorded.

    History is never overwritten: the run stays resumable once the code matches again.

    Attributes:
        run_id: the run that diverged.
        position: the first position whose call differs.
        recorded: the recorded call, as ``"kind name (hash)"``.
        current: the call the code makes now, in the same form.
    """

    run_id: str
    position: int
    recorded: str
    current: str


class IdempotencyConflict(DurableError):
    """A run id was reused for a different workflow or different arguments.

    Attributes:
        run_id: the id in conflict.
    """

    run_id: str


class ScheduleConflict(DurableError):
    """A schedule id is taken by a schedule of another workflow; nothing changed.

    Attributes:
        schedule_id: the id in conflict.
    """

    schedule_id: str


class RunNotFound(DurableError, LookupError):
    """No run has the given id.

    Attributes:
        run_id: the id that was looked up.
    """

    run_id: str


class RunFinished(DurableError):
    """The run has finished, so it can no longer receive what was sent to it.

    Attributes:
        run_id: the run.
        status: its final status.
    """

    run_id: str
    status: str


class RunDead(DurableError):
    """The run was given up: its owner died `max_recoveries` times while running it.

    A task that crashes its process every time (out of memory, a segfault, os._exit)
    would otherwise crash-loop every worker it lands on. `durable retry` revives it.

    Attributes:
        run_id: the run.
        recoveries: how many times its owner died.
    """

    run_id: str
    recoveries: int


class WaitTimeout(DurableError, TimeoutError):
    """The wait's timeout passed first: the run waited for did not finish (it goes on;
    wait again later), or no event of the name waited for arrived.

    Attributes:
        run_id: the run waited for; for an event, the run that waited.
        event: the event name, for an event wait (absent otherwise).
    """

    run_id: str


class TaskTimeout(DurableError, TimeoutError):
    """A task attempt ran past its limit: its ``timeout`` (one attempt), its ``deadline``
    (all attempts together) or its ``heartbeat`` (no `durable.heartbeat()` for that
    long). Retried by the task's policy like any error; once attempts run out (or the
    deadline passed) the workflow sees it, catchable, and replays it as the same type.

    Attributes:
        task: the task's name.
        position: its position in the run.
        attempt: the attempt that ran too long.
        limit: ``"timeout"``, ``"deadline"`` or ``"heartbeat"``.
        seconds: that limit.
    """

    task: str
    position: int
    attempt: int
    limit: str
    seconds: float


class WorkflowTimeout(DurableError, TimeoutError):
    """The run reached its deadline (``@workflow(timeout=...)``, or ``timeout=`` given to
    `dispatch` / `execute`) and ended with status ``timed_out``. Raised by
    ``Handle.result()``, by `execute`, and by waiting for such a run in a workflow.
    Inside the run itself the deadline arrives as `Cancelled` with ``timed_out`` set.

    Attributes:
        run_id: the run.
        timeout: its time limit in seconds, from its creation.
    """

    run_id: str
    timeout: float


class Cancelled(BaseException):
    """Raised into a workflow at its next durable call after `cancel()`, or once its
    deadline has passed (then ``timed_out`` is True, and the run ends ``timed_out``).

    Let it propagate: `finally` blocks (which may call tasks) run, and the run ends
    CANCELLED (or TIMED_OUT). A workflow receives it at most once. It is also what
    waiting for a cancelled run raises.
    """

    #: True when the run's deadline, not `cancel()`, stopped it.
    timed_out: bool = False

    def __init__(self, run_id: str = "", *, timed_out: bool = False) -> None:
        super().__init__(run_id)
        self.run_id = run_id
        if timed_out:
            self.timed_out = True

    def __str__(self) -> str:
        if self.timed_out:
            return f"run {self.run_id!r} reached its deadline"
        return f"run {self.run_id!r} was cancelled" if self.run_id else "cancelled"


class LeaseLost(DurableError):
    """The run's lease moved to another owner, so this process may not write to it.

    Backends raise it when a fenced write finds a newer epoch. The engine turns it into
    a wait for the new owner's result; users rarely see it.

    Attributes:
        run_id: the run.
        epoch: the epoch this process held.
    """

    run_id: str
    epoch: int


class StorageError(DurableError):
    """The database failed or could not be reached. The URL in the message has no password."""


class InvalidValue(DurableError, ValueError):
    """A value durable cannot store: refused where it was given (an event name, key,
    sender, run id or queue name with a NUL character or a lone surrogate), or by the
    database itself (a driver data error: text it cannot hold, a number out of range).

    It is bad input, not an outage: retrying cannot help, so the call raises it (a
    workflow can catch it) and a run that does not ends failed, at once. Nothing was
    written by the call that raised it.
    """


class FlowFileError(DurableError, ValueError):
    """A flow file that cannot be used: malformed TOML, a key that is unknown or of the
    wrong type, a dependency cycle, a nested flow file that is missing.

    Nothing was started. The message names the file, the line (when known) and the key,
    as ``release.toml:12: task.unit.depends_on: unknown task 'biuld' ...``, and says
    what would be right.

    Attributes:
        source: the file (the path as given to ``load``), or ``"<string>"``.
        line: the line the key is written on, or None when it cannot be told.
        key: the dotted key at fault (``"task.unit.depends_on"``), or None for the
            file as a whole (malformed TOML, a file that cannot be read).
    """

    source: str
    line: int | None
    key: str | None


class NonRetryable(DurableError):
    """Raise this (or a subclass) from a task to fail it at once, skipping its retries."""


class FlowRefused(DurableError, ValueError):
    """A verb on a process flow's task that does not apply to it as it stands (answering
    a human task that is not waiting, restarting a running one, killing one that is not
    running, any verb on a flow that has ended); nothing changed. Its `flow_id` and
    `task` name them; the message says what the task is doing and what to do instead."""

    def __init__(self, message: str, *, flow_id: str = "", task: str = "") -> None:
        super().__init__(message, flow_id=flow_id, task=task)


class UnknownTask(FlowRefused, LookupError):
    """The flow has no task of that name (the message lists its tasks)."""


class BadAnswer(FlowRefused):
    """A human task's answer that does not match its form (every problem is named)."""
