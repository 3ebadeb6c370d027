"""Replaying a history against today's code without executing or storing anything.

The check a live run makes when it resumes after a deploy, made ahead of time: golden
history tests (`durable.testing.replay`) and ``durable check`` (which replays every
unfinished run in a database) both use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from durable.core.functions import Durable
from durable.core.records import Run, Step
from durable.core.replay import Replay
from durable.errors import NondeterminismError

from .context import RunContext, current
from .host import Host
from .loops import run_coroutine


class _Frontier(BaseException):
    """The replay reached a call the history has no outcome for."""

    def __init__(self, position: int, call: str) -> None:
        super().__init__(position)
        self.position = position
        self.call = call


class _Grouping(Replay):
    """A cursor that notes the parallel groups the code allocates: (first, count)."""

    __slots__ = ("groups",)

    def __init__(self, run_id: str, history: Iterable[Step], groups: list[tuple[int, int]]):
        super().__init__(run_id, history)
        self.groups = groups

    def allocate(self, count: int = 1) -> int:
        first = super().allocate(count)
        if count > 1:
            self.groups.append((first, count))
        return first


def dry_replay(
    host: Host,
    workflow: Durable[..., Any],
    run: Run,
    steps: Sequence[Step],
    *,
    groups: list[tuple[int, int]] | None = None,
) -> dict[str, bool]:
    """Run *workflow*'s function against *run*'s recorded *steps*; stop where they end.

    Recorded outcomes are replayed and nothing is executed or written (*host* is
    used to decode payloads only). For a run that had finished, the code must also end
    where it ended. *groups*, if given, receives each parallel group the code
    allocates on the way, as (first position, count): the history does not say which
    positions were taken together (a fork refuses to start inside one).

    Returns:
        The `durable.patched` ids the replay met, each with the branch the run takes
        (True: the new one; a run that stopped at the patch takes it on resuming).

    Raises:
        NondeterminismError: the code makes a different durable call than the one
            recorded, at the position the error names, or ends before the history does.
    """
    arguments = host.load(run.input, run.id, None)
    context = RunContext(host, run, list(steps))
    if groups is not None:
        context.replay = _Grouping(run.id, steps, groups)

    def stop(position: int, call: str) -> None:
        raise _Frontier(position, call)

    context.frontier = stop
    token = current.set(context)
    try:
        result = workflow.fn(*arguments["args"], **arguments["kwargs"])
        if hasattr(result, "__await__"):
            run_coroutine(result)
    except _Frontier as frontier:
        if run.status.finished:
            raise NondeterminismError(
                f"Run {run.id!r} diverged from its history at position {frontier.position}: "
                f"the code now calls {frontier.call} there, but the run had finished "
                f"({run.status.value}) after position {len(steps) - 1}. Runs like it that "
                "are still live would block on resuming.",
                run_id=run.id,
                position=frontier.position,
                recorded="nothing: the run had finished",
                current=frontier.call,
            ) from None
        return _taken(context)  # an unfinished run: the code agrees with its history
    except NondeterminismError:
        raise
    except BaseException:
        if isinstance(context.fatal, NondeterminismError):
            raise context.fatal from None
        context.replay.check_complete()  # it raised what it raised before, or ended early
        return _taken(context)
    finally:
        current.reset(token)
    if isinstance(context.fatal, NondeterminismError):
        raise context.fatal
    context.replay.check_complete()
    return _taken(context)


def _taken(context: RunContext) -> dict[str, bool]:
    return {patch: taken for patch, (_, taken) in context.patches.items()}
