"""durable: plain Python functions that survive crashes, restarts and deploys.

Layout, by layer (each imports only from those before it): `errors`; `core` (records,
call hashes, payloads, the replay cursor); `backends` (storage); `runtime` (executing
runs: the run context, the engine, the worker); `api` (the verbs re-exported here);
then `ops`, `cli`, `web` and `testing`. See docs/architecture.md.
"""

from . import errors
from .api.attributes import set_attributes
from .api.client import Client
from .api.continuing import continue_as_new
from .api.decorators import Task, Workflow, task, workflow
from .api.execute import execute, execute_async, gather, gather_async
from .api.handles import Handle, cancel, dispatch, fork, get, pause, resume
from .api.heartbeats import heartbeat, last_heartbeat
from .api.patches import deprecate_patch, patched
from .api.queues import queue
from .api.recorded import info, now, random, set_state, task_key, uuid4
from .api.schedules import schedule
from .api.streams import Stream, stream
from .api.upkeep import purge, recover
from .api.waiting import send, wait
from .core.functions import Call
from .core.info import RunInfo, TaskInfo
from .core.records import Run, RunStatus, Step, StepKind, StepStatus
from .core.retry import RetryPolicy
from .errors import (
    Cancelled,
    DurableError,
    EventInvalid,
    IdempotencyConflict,
    NondeterminismError,
    NonRetryable,
    SerializationError,
    TaskTimeout,
    WaitTimeout,
    WorkflowTimeout,
)
from .runtime.defaults import configure, get_engine
from .runtime.engine import Engine
from .runtime.logs import logger
from .runtime.worker import Worker

__all__ = [
    "Call",
    "Cancelled",
    "Client",
    "DurableError",
    "Engine",
    "EventInvalid",
    "Handle",
    "IdempotencyConflict",
    "NonRetryable",
    "NondeterminismError",
    "RetryPolicy",
    "Run",
    "RunInfo",
    "RunStatus",
    "SerializationError",
    "Step",
    "StepKind",
    "StepStatus",
    "Stream",
    "Task",
    "TaskInfo",
    "TaskTimeout",
    "WaitTimeout",
    "Worker",
    "Workflow",
    "WorkflowTimeout",
    "cancel",
    "configure",
    "continue_as_new",
    "deprecate_patch",
    "dispatch",
    "errors",
    "execute",
    "execute_async",
    "fork",
    "gather",
    "gather_async",
    "get",
    "get_engine",
    "heartbeat",
    "info",
    "last_heartbeat",
    "logger",
    "now",
    "patched",
    "pause",
    "purge",
    "queue",
    "random",
    "recover",
    "resume",
    "schedule",
    "send",
    "set_attributes",
    "set_state",
    "stream",
    "task",
    "task_key",
    "uuid4",
    "wait",
    "workflow",
]
