"""What a process can watch of the runs it executes: the seam that traces, metrics and
structured logs hang on.

An `Observer` is told when a run is created here (`created`), and wraps each execution
of a run (`execution`) and each attempt of a task's body (`attempt`) in a context
manager it returns. The managers are entered in the thread (or on the loop) that runs
the code, so a span an observer makes current there is the parent of the spans user
code makes. When a managed stretch ends, the `Execution` or `Attempt` it was given
holds its outcome (`OUTCOMES`), and the error if one ended it.

Replayed positions are not attempts: only bodies that run are observed. An execution
that stops without an outcome (it waits, is paused, loses its lease, drains) ends as
``released``: the run goes on in a later execution, which is observed on its own.

An observer that propagates a trace may also have ``carrier()``: the trace context of
the calling code, as text, stored with each run created here (`Run.trace_context`) so
that its executions, wherever they run, join that trace (`tracing.py`).

With no observer installed (the default) each hook is one attribute test.
Observers run inside the engine: they must be cheap, and must not raise.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Protocol

from durable.core.records import Run
from durable.errors import Cancelled, NondeterminismError, TaskTimeout, WorkflowTimeout

#: The outcomes of an execution or an attempt, as observers see them.
OUTCOMES = (
    "completed",  # the run or the attempt returned
    "failed",  # it raised (an attempt that failed may be retried)
    "cancelled",  # `Cancelled` reached it
    "timed_out",  # its deadline (run) or its limit (attempt) passed
    "blocked",  # the run's code diverged from its history
    "released",  # the execution stopped without an outcome; the run goes on later
    "continued",  # the run continued as new: its successor goes on
    "interrupted",  # the process is going down (KeyboardInterrupt, SystemExit...)
)

#: What an observer returns around a stretch it has nothing to do in: then, if every
#: observer does, the stretch costs no more than with none.
NOTHING = nullcontext()


class Execution:
    """One execution of a run in this process, as an observer sees it."""

    __slots__ = ("error", "outcome", "resumed", "run")

    def __init__(self, run: Run, *, resumed: bool) -> None:
        self.run = run
        #: whether the execution replays a history first (a resumed run).
        self.resumed = resumed
        self.outcome: str | None = None
        self.error: BaseException | None = None


class Attempt:
    """One attempt of a task's body at a position of a run."""

    __slots__ = ("attempt", "error", "outcome", "position", "run_id", "task", "workflow")

    def __init__(self, run_id: str, workflow: str, position: int, task: str, attempt: int) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.position = position
        self.task = task
        #: its number, from 1.
        self.attempt = attempt
        self.outcome: str | None = None
        self.error: BaseException | None = None


class Observer(Protocol):
    """What traces, metrics or logs implement to watch a process's runs."""

    def created(self, run: Run) -> None:
        """*run* was stored by this process (dispatched, executed, or a child)."""

    def execution(self, seen: Execution) -> AbstractContextManager[Any]:
        """A context manager around one execution; *seen* has its outcome at exit."""

    def attempt(self, seen: Attempt) -> AbstractContextManager[Any]:
        """A context manager around one attempt; *seen* has its outcome at exit."""


def outcome_of(error: BaseException | None) -> str:
    """The outcome an execution or an attempt that raised *error* (None: returned) has."""
    if error is None:
        return "completed"
    if isinstance(error, WorkflowTimeout | TaskTimeout):
        return "timed_out"
    if isinstance(error, Cancelled):
        return "timed_out" if error.timed_out else "cancelled"
    if isinstance(error, NondeterminismError):
        return "blocked"
    if isinstance(error, Exception):
        return "failed"
    return "interrupted"


class Observers:
    """The observers of one engine, called together."""

    __slots__ = ("_all", "_carriers")

    def __init__(self) -> None:
        self._all: tuple[Observer, ...] = ()
        self._carriers: tuple[Callable[[], str | None], ...] = ()

    def __bool__(self) -> bool:
        return bool(self._all)

    def add(self, observer: Observer) -> None:
        """Call *observer* from now on (for runs and attempts that start from now)."""
        self._all = (*self._all, observer)
        self._carriers = _carriers(self._all)

    def remove(self, observer: Observer) -> None:
        """Stop calling *observer*."""
        self._all = tuple(o for o in self._all if o is not observer)
        self._carriers = _carriers(self._all)

    def carrier(self) -> str | None:
        """The trace context of the calling code to store with a run created now, from
        the first observer that has one (None: no observer propagates, or no trace)."""
        for carrier in self._carriers:
            found = carrier()
            if found is not None:
                return found
        return None

    def created(self, run: Run) -> None:
        for observer in self._all:
            observer.created(run)

    def execution(self, run: Run, *, resumed: bool) -> AbstractContextManager[Execution | None]:
        """Around one execution of *run*: set its ``outcome`` (`ended`) before it exits."""
        if not self._all:
            return NOTHING
        return self._around(Execution(run, resumed=resumed), "execution")

    def attempt(
        self, run_id: str, workflow: str, position: int, task: str, attempt: int
    ) -> AbstractContextManager[Attempt | None]:
        """Around one attempt of a task's body; the outcome is taken from how it exits."""
        if not self._all:
            return NOTHING
        return self._around(Attempt(run_id, workflow, position, task, attempt), "attempt")

    def _around(
        self, seen: Execution | Attempt, hook: str
    ) -> _Around | AbstractContextManager[None]:
        busy = [m for o in self._all if (m := getattr(o, hook)(seen)) is not NOTHING]
        return _Around(seen, busy) if busy else NOTHING


class _Around:
    """Every observer's manager around one stretch: entered in order, exited in reverse,
    *seen*'s outcome set before they exit. A class, not a generator and an ExitStack:
    it runs at every task attempt, and costs a third as much this way."""

    __slots__ = ("_managers", "_seen")

    def __init__(self, seen: Execution | Attempt, managers: list[AbstractContextManager[Any]]):
        self._seen = seen
        self._managers = managers

    def __enter__(self) -> Any:
        for index, manager in enumerate(self._managers):
            try:
                manager.__enter__()
            except BaseException as error:
                for entered in reversed(self._managers[:index]):
                    entered.__exit__(type(error), error, error.__traceback__)
                raise
        return self._seen

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        seen = self._seen
        if seen.outcome is None:
            if error is None:
                seen.outcome = "completed"
            else:
                seen.outcome, seen.error = outcome_of(error), error
        for manager in reversed(self._managers):
            manager.__exit__(kind, error, traceback)


def _carriers(observers: tuple[Observer, ...]) -> tuple[Callable[[], str | None], ...]:
    """The ``carrier`` methods of those *observers* that have one."""
    found = (getattr(observer, "carrier", None) for observer in observers)
    return tuple(carrier for carrier in found if callable(carrier))


def ended(
    seen: Execution | Attempt | None, outcome: str, error: BaseException | None = None
) -> None:
    """Note how an observed stretch ended when it does not end by returning or raising
    it (an execution that records an outcome and returns `RELEASED`, say)."""
    if seen is not None:
        seen.outcome, seen.error = outcome, error
