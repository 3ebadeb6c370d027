"""@workflow and @task: plain functions that become durable inside a workflow.

The wrappers keep the function's signature for type checkers (ParamSpec), register
it under a stable name so a stored run can find its code again, and route calls: a
call made inside a running workflow goes to the run (recorded or replayed); any other
call is a plain Python call, which is what makes tasks unit-testable as they are.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Generic, TypeVar, overload

from typing_extensions import ParamSpec

from durable.core.records import StepKind
from durable.core.retry import RetryPolicy
from durable.runtime import registry as _registry
from durable.runtime.scope import TaskScope, current

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Call(Generic[R_co]):
    """A workflow or task bound to its arguments, ready for `execute`.

    Made by ``fn.bind(*args, **kwargs)``, which checks the arguments against the
    signature at once.
    """

    __slots__ = ("args", "arguments", "kwargs", "target")

    def __init__(
        self,
        target: Durable[..., R_co],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        arguments: Mapping[str, Any],
    ) -> None:
        self.target = target
        self.args = args
        self.kwargs = kwargs
        #: the arguments by parameter name, as `inspect.Signature.bind` matched them.
        self.arguments = arguments

    def __repr__(self) -> str:
        return f"<Call {self.target.name}>"


class Durable(Generic[P, R_co]):
    """What @workflow and @task return: the function, its name and its options."""

    kind: ClassVar[StepKind]

    def __init__(self, fn: Callable[P, R_co], *, name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"@{self.kind.value} decorates a function, not {fn!r}.")
        self.fn = fn
        self.name: str = name or f"{fn.__module__}.{fn.__qualname__}"
        self.is_async = inspect.iscoroutinefunction(fn)
        self.signature = inspect.signature(fn)
        self._positional, self._required = _plain_positional(self.signature)
        functools.update_wrapper(self, fn)
        _registry.register(self)

    @property
    def durable_name(self) -> str:
        """The registered name (also what hashes of calls that pass this function use)."""
        return self.name

    def bind(self, *args: P.args, **kwargs: P.kwargs) -> Call[R_co]:
        """Bind arguments without running anything, for `execute` (one or several calls).

        Raises:
            TypeError: the arguments do not fit the function's signature.
        """
        return Call(self, args, kwargs, self.bind_arguments(args, kwargs))

    def bind_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Match arguments to parameters, or raise TypeError naming this function."""
        positional = self._positional
        if not kwargs and positional is not None and self._required <= len(args) <= len(positional):
            # The common case, without inspect's general (and slow) matching.
            return dict(zip(positional, args, strict=False))
        try:
            return self.signature.bind(*args, **kwargs).arguments
        except TypeError as error:
            raise TypeError(f"{self.name}(): {error}") from None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co:
        context = current.get()
        if context is None or isinstance(context, TaskScope):
            return self.fn(*args, **kwargs)
        result: R_co = context.call(self, args, kwargs)
        return result

    def __repr__(self) -> str:
        return f"<{self.kind.value} {self.name}>"


def _plain_positional(signature: inspect.Signature) -> tuple[tuple[str, ...] | None, int]:
    """Parameter names if every parameter is an ordinary positional one, and how many
    of them have no default; (None, 0) when the signature needs the general matcher."""
    names: list[str] = []
    required = 0
    for parameter in signature.parameters.values():
        if parameter.kind not in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            return None, 0
        names.append(parameter.name)
        if parameter.default is parameter.empty:
            required = len(names)
    return tuple(names), required


class Workflow(Durable[P, R_co]):
    """A function whose durable calls are recorded, so it can resume after a crash."""

    kind = StepKind.WORKFLOW


class Task(Durable[P, R_co]):
    """A unit of work recorded once per call inside a workflow; retried per its policy."""

    kind = StepKind.TASK

    def __init__(
        self, fn: Callable[P, R_co], *, name: str | None = None, retry: RetryPolicy | None = None
    ) -> None:
        self.retry = retry or RetryPolicy()
        super().__init__(fn, name=name)


@overload
def workflow(fn: Callable[P, R], /) -> Workflow[P, R]: ...
@overload
def workflow(*, name: str | None = None) -> Callable[[Callable[P, R]], Workflow[P, R]]: ...
def workflow(
    fn: Callable[P, R] | None = None, /, *, name: str | None = None
) -> Workflow[P, R] | Callable[[Callable[P, R]], Workflow[P, R]]:
    """Make *fn* a durable workflow.

    Inside it, calls to tasks, child workflows and `durable.now()`-style helpers are
    recorded by position; run it with `durable.execute`. Called directly, it is a plain
    function call and nothing is recorded.

    Args:
        fn: the function (when used bare, as ``@workflow``).
        name: the stored name; defaults to ``module.qualname``. Stored runs find their
            code by this name, so keep it stable across deploys.
    """
    if fn is not None:
        return Workflow(fn, name=name)
    return lambda f: Workflow(f, name=name)


@overload
def task(fn: Callable[P, R], /) -> Task[P, R]: ...
@overload
def task(
    *, name: str | None = None, retry: RetryPolicy | Mapping[str, Any] | int | None = None
) -> Callable[[Callable[P, R]], Task[P, R]]: ...
def task(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    retry: RetryPolicy | Mapping[str, Any] | int | None = None,
) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
    """Make *fn* a durable task.

    Called inside a workflow, its outcome is recorded once and replayed afterwards;
    called anywhere else, it is a plain function call.

    Args:
        fn: the function (when used bare, as ``@task``).
        name: the stored name; defaults to ``module.qualname``.
        retry: a `RetryPolicy`, a dict of its fields, or a number of attempts.
    """
    policy = RetryPolicy.coerce(retry)
    if fn is not None:
        return Task(fn, name=name, retry=policy)
    return lambda f: Task(f, name=name, retry=policy)
