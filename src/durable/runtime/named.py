"""Starting a run by the registered name of its workflow, without its code.

`start` is the one way in for everything that names a workflow instead of holding it:
`durable.Client.dispatch` and the REST API's ``POST /api/v1/runs`` (through
`Operations.start`). It stores the same row `dispatch` does, so a worker that knows the
name runs it like any queued run: the worker looks the name up in its registry and
calls the function with the stored ``args`` and ``kwargs``; nothing it does reads the
call hash.

Identity. Without the signature, arguments cannot be matched to parameters, so a run
started by name is the call *as given*: its hash is ``call_hash("workflow", name,
{"args": [...], "kwargs": {...}})`` (the form schedules use), whether or not the name is
registered where it is started. Starting it again by name with the same id and
arguments returns it; a `dispatch(fn, ...)` from code with that id binds the arguments
to parameters, so it is another call (`IdempotencyConflict`).

Where the name is registered in the starting process, the arguments are checked
against the function's signature first, its ``@workflow(timeout=...)`` sets the
deadline as it would for `dispatch`, and its ``events=`` schemas are stored with the run
(`Run.event_schemas`); elsewhere the deadline is *timeout* or none, and the run stores
no event schemas (a send before its wait is checked only where the code is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from durable.core.functions import Call, Durable
from durable.core.limits import NO_LIMITS, TaskLimits
from durable.core.records import Run, StepKind
from durable.core.text import check_text
from durable.errors import ConfigurationError

from . import registry, runs
from .host import Host


class Named(Durable[..., Any]):
    """A workflow known only by its name: what a start by name stores. Its function
    is never called here (a worker that imports the workflow's module runs the run)."""

    kind = StepKind.WORKFLOW

    def __init__(
        self, name: str, limits: TaskLimits = NO_LIMITS, events: Mapping[str, type] | None = None
    ) -> None:
        super().__init__(_elsewhere, name=name, limits=limits)
        if events:
            self.events = events


def _elsewhere(*args: Any, **kwargs: Any) -> Any:
    raise ConfigurationError(
        "A run started by name runs on a worker that imports its workflow's module."
    )


def start(
    host: Host,
    name: object,
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    run_id: str | None = None,
    attributes: Mapping[str, Any] | None = None,
    **options: Any,
) -> tuple[Run, bool]:
    """Queue a run of workflow *name* with *args* and *kwargs*; return it, and whether
    this call created it (False: a run with *run_id* and this call existed).

    *options* are `runs.create`'s: queue, priority, timeout, key, key_concurrency,
    debounce, connection, and *attributes* (what the run is searched by).

    Raises:
        TypeError: *name*, *args* or *kwargs* has the wrong type, or the arguments do
            not fit the signature of the function registered as *name* here.
        (and what `runs.create` raises; nothing was written.)
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"A workflow name must be a non-empty string, not {name!r}.")
    check_text(name, "a workflow name")
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a list of positional arguments, not {args!r}.")
    kwargs = dict(kwargs or {})
    if not all(isinstance(key, str) for key in kwargs):
        raise TypeError(f"kwargs must be keyed by parameter names (strings), not {kwargs!r}.")
    registered = registry.find(name)
    limits, events = NO_LIMITS, None
    if registered is not None:
        registered.bind(*args, **kwargs)  # TypeError: they do not fit
        if registered.kind is StepKind.WORKFLOW:
            limits, events = registered.limits, registered.events
    if attributes is not None:
        options["attributes"] = attributes
    arguments = {"args": list(args), "kwargs": kwargs}
    call: Call[Any] = Call(Named(name, limits, events), tuple(args), kwargs, arguments)
    return runs.create(host, call, run_id, None, owner=None, **options)
