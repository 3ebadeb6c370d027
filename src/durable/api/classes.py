"""Workflow classes: ``@workflow`` on a class whose instance lives for the run.

The class's ``__init__`` takes the run's input and its ``handle()`` is the workflow's
body (sync or async). The instance's attributes are the run's properties: a snapshot
is stored where a stretch of its code ends (`runtime/properties.py`) and callers read
it with `Handle.state()`. Replay builds a new instance and runs the same code again,
so the properties come back by themselves; snapshots are only for readers.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from durable.core.properties import public
from durable.runtime.context import RunContext, current
from durable.runtime.handlers import EventHandler
from durable.runtime.hooks import Hooks

#: The handlers a workflow class may define, and the parameters each takes after self.
HANDLERS: dict[str, tuple[str, ...]] = {
    "on_event": ("name", "payload"),
    "on_start": ("task",),
    "on_success": ("task", "output"),
    "on_failure": ("task", "error"),
    "on_timeout": ("task",),
}

#: Handlers this version calls; the others are refused rather than silently ignored.
SUPPORTED = frozenset(HANDLERS)


def runner(cls: type) -> Callable[..., Any]:
    """The function a workflow class runs as: make the instance, publish its
    properties to the run, call ``handle()``. It has the signature of the class."""
    check_class(cls)

    def start(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        instance = cls(*args, **kwargs)
        context = current.get()
        if isinstance(context, RunContext):
            context.publish(lambda: public(vars(instance)))
            hooks = Hooks(instance)
            context.hooks = hooks if hooks.any else None
            on_event = getattr(instance, "on_event", None)
            if on_event is not None:
                context.events = EventHandler(context, on_event)
        return instance

    if inspect.iscoroutinefunction(cls.handle):  # type: ignore[attr-defined]

        async def run_async(*args: Any, **kwargs: Any) -> Any:
            return await start(args, kwargs).handle()

        run: Callable[..., Any] = run_async
    else:

        def run_sync(*args: Any, **kwargs: Any) -> Any:
            return start(args, kwargs).handle()

        run = run_sync
    functools.update_wrapper(
        run, cls, assigned=("__module__", "__name__", "__qualname__", "__doc__"), updated=()
    )
    run.__signature__ = inspect.signature(cls)  # type: ignore[attr-defined]
    return run


def check_class(cls: type) -> None:
    """Refuse, at decoration time, a class that cannot be a workflow.

    Raises:
        TypeError: no ``handle(self)``, or a handler with the wrong parameters, or one
            this version does not call yet.
    """
    where = cls.__qualname__
    handle = getattr(cls, "handle", None)
    if not inspect.isfunction(handle):
        raise TypeError(
            f"@workflow on class {where} needs a method `def handle(self)`: it is the "
            "workflow's body, called once the instance is made from the run's input."
        )
    _check_parameters(where, "handle", handle, ())
    if "__slots__" in vars(cls) and not any("__dict__" in vars(k) for k in cls.__mro__[:-1]):
        raise TypeError(
            f"Workflow class {where} keeps no attributes in a __dict__ (it uses __slots__): "
            "a workflow's properties are its instance's attributes; drop __slots__."
        )
    for name, expected in HANDLERS.items():
        method = getattr(cls, name, None)
        if method is None:
            continue
        if not inspect.isfunction(method):
            raise TypeError(f"{where}.{name} must be a plain method, not {method!r}.")
        _check_parameters(where, name, method, expected)
        if inspect.iscoroutinefunction(method):
            raise TypeError(
                f"{where}.{name} must be a plain `def`, not `async def`: handlers run in "
                "the workflow's own flow, between its durable calls, one at a time."
            )
        if name not in SUPPORTED:
            raise TypeError(
                f"{where}.{name}: this version of durable does not call {name} handlers "
                f"yet (it calls: {', '.join(sorted(SUPPORTED)) or 'none'}). Remove it, so "
                "that nothing it would handle is silently dropped."
            )


def _check_parameters(
    where: str, name: str, method: Callable[..., Any], expected: tuple[str, ...]
) -> None:
    parameters = list(inspect.signature(method).parameters.values())
    plain = all(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        for p in parameters
    )
    if not plain or len(parameters) != len(expected) + 1:
        wanted = ", ".join(("self", *expected))
        raise TypeError(
            f"{where}.{name} must be `def {name}({wanted})`; it is `def {name}"
            f"{inspect.signature(method)}`."
        )
