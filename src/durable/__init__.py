"""durable: plain Python functions that survive crashes, restarts and deploys.

Layout, by layer (each imports only from those before it): `errors`; `core` (records,
call hashes, payloads, the replay cursor); `backends` (storage); `runtime` (executing
runs: the run context, the engine, the worker); `api` (the verbs re-exported here);
then `ops`, `cli`, `web` and `testing`. See docs/architecture.md.
"""

from durable.api.decorators import Call, Task, Workflow, task, workflow
from durable.api.handles import Handle, cancel, dispatch, get
from durable.api.primitives import execute, execute_async, now, random, recover, task_key, uuid4
from durable.api.waiting import send, wait
from durable.core.records import Run, RunStatus, Step, StepKind, StepStatus
from durable.core.retry import RetryPolicy
from durable.runtime.defaults import configure, get_engine
from durable.runtime.engine import Engine
from durable.runtime.purging import purge
from durable.runtime.worker import Worker

from . import errors
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
