"""Durable functions as values: a workflow or task definition, and a call bound to it.

`Durable` is what the runtime needs to know of a function: its stored name, its kind,
whether it is async, its retry policy, and how to match arguments to its parameters.
The decorators (`durable.api.decorators`) make the callable subclasses that users
hold, which route a call made inside a workflow to the run; this module routes
nothing and registers nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Generic, TypeVar

from typing_extensions import ParamSpec

from .limits import NO_LIMITS, TaskLimits
from .records import StepKind
from .retry import NO_RETRY, RetryPolicy
from .text import check_text

#: The choices of ``@workflow(on_divergence=)``.
ON_DIVERGENCE = ("block", "fail")

P = ParamSpec("P")
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
    """A workflow or task: the function, its stored name and its options.

    Args:
        fn: the function.
        name: the stored name; defaults to ``module.qualname``.
        retry: how a failed attempt is retried (tasks; a workflow is not retried).
    """

    kind: ClassVar[StepKind]
    #: what a run does when its code no longer matches its history: ``"block"`` (stop
    #: BLOCKED, resume once the code matches again) or ``"fail"`` (end FAILED with the
    #: `NondeterminismError`). Workflows only: `ON_DIVERGENCE`.
    on_divergence: str = "block"
    #: the typed events a workflow declares (``@workflow(events={name: schema})``): a
    #: ``send`` of one is validated against its schema, its ``wait`` returns an instance.
    events: Mapping[str, type] = MappingProxyType({})

    def __init__(
        self,
        fn: Callable[P, R_co],
        *,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        limits: TaskLimits | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"@{self.kind.value} decorates a function, not {fn!r}.")
        _refuse_methods(fn, self.kind.value)
        self.fn = fn
        self.name: str = check_text(
            name or f"{fn.__module__}.{fn.__qualname__}", f"a {self.kind.value} name"
        )
        self.is_async = inspect.iscoroutinefunction(fn)
        self.signature = inspect.signature(fn)
        self.retry = retry or NO_RETRY
        #: how long a task's attempts may take (see `TaskLimits`).
        self.limits = limits or NO_LIMITS
        self._positional, self._required = _plain_positional(self.signature)

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


def _refuse_methods(fn: Callable[..., Any], kind: str) -> None:
    """A function defined in a class body would be called without its instance."""
    qualname = getattr(fn, "__qualname__", "")
    parts = qualname.split(".")
    if isinstance(fn, staticmethod | classmethod) or (len(parts) > 1 and parts[-2] != "<locals>"):
        where = qualname or repr(fn)
        raise TypeError(
            f"@{kind} decorates module-level functions, not methods: {where} is defined in "
            "a class body, and its instance (self) would be neither passed nor stored. Move "
            f"the body to a module-level @{kind} function that takes what it needs as "
            "arguments, and call that from the method."
        )
