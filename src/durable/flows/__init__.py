"""Process flows from a file (seed 001, MyProcessFlow): a DAG of command-line and human
tasks, run by durable's engine.

A flow is a workflow (``durable.flow``): it starts each task once the tasks it depends
on have finished, at most ``max_running`` at once. Each launch of a command task is a
child workflow (``durable.flow.node``) whose command runs in a process of its own that
outlives the engine: an engine that dies leaves it running, and the next one adopts
it. A human task waits for its answer (`done`); a failed task can be restarted with
everything downstream of it (`restart`). See docs/concepts/flows.md and
docs/reference/flow-file.md.

A worker runs flows once this package is imported: ``durable worker`` and ``durable
flow run`` import it; a `durable.Worker` in your own process needs ``import
durable.flows``.
"""

from .board import STATUSES
from .control import done, kill, logs, restart, start
from .engine import flow
from .nodes import command, node
from .spec import FlowSpec, TaskSpec, load, loads
from .views import flows, task_history, view

__all__ = [
    "STATUSES",
    "FlowSpec",
    "TaskSpec",
    "command",
    "done",
    "flow",
    "flows",
    "kill",
    "load",
    "loads",
    "logs",
    "node",
    "restart",
    "start",
    "task_history",
    "view",
]
