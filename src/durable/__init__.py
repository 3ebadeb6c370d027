"""durable: plain Python functions that survive crashes, restarts and deploys.

Layout: `_decorators` (@workflow, @task) route calls; `_runner` records and replays
them through the sans-IO cursor in `_replay`; `_engine` owns runs, leases and recovery;
`backends` store everything; `_serde` and `_hashing` turn values into payloads and
call identities; `errors` holds every public exception.
"""

from . import errors
from ._config import configure, get_engine
from ._decorators import Call, Task, Workflow, task, workflow
from ._engine import Engine
from ._handles import Handle, cancel, dispatch, get
from ._primitives import execute, execute_async, now, random, recover, task_key, uuid4
from ._purge import purge
from ._records import Run, RunStatus, Step, StepKind, StepStatus
from ._retry import RetryPolicy
from ._waiting import send, wait
from ._worker import Worker
from .errors import (
    Cancelled,
    DurableError,
    IdempotencyConflict,
    NondeterminismError,
    NonRetryable,
    SerializationError,
)

__all__ = [
    "Call",
    "Cancelled",
    "DurableError",
    "Engine",
    "Handle",
    "IdempotencyConflict",
    "NonRetryable",
    "NondeterminismError",
    "RetryPolicy",
    "Run",
    "RunStatus",
    "SerializationError",
    "Step",
    "StepKind",
    "StepStatus",
    "Task",
    "Worker",
    "Workflow",
    "cancel",
    "configure",
    "dispatch",
    "errors",
    "execute",
    "execute_async",
    "get",
    "get_engine",
    "now",
    "purge",
    "random",
    "recover",
    "send",
    "task",
    "task_key",
    "uuid4",
    "wait",
    "workflow",
]
