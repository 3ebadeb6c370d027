"""How long a task's attempts may take: `timeout`, `heartbeat` and `deadline`; and how
long a workflow's run may take (its `timeout`, from its creation).

Given on ``@task(timeout=..., heartbeat=..., deadline=...)`` as timedeltas or seconds,
checked where they are given, so a mistake is a clear error at import time and never
a run that misbehaves later.

- ``timeout``: one attempt, from its start to its end.
- ``heartbeat``: the longest gap between two `durable.heartbeat()` calls of an attempt
  (its start counts as the first); a task that declares it must call heartbeat.
- ``deadline``: all attempts together, from the first one's start.
"""

from __future__ import annotations

from dataclasses import dataclass

from durable.errors import ConfigurationError

from .durations import seconds


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """A task's time limits in seconds; None where there is none."""

    timeout: float | None = None
    heartbeat: float | None = None
    deadline: float | None = None

    @classmethod
    def of(
        cls, timeout: object, heartbeat: object, deadline: object, *, decorator: str = "task"
    ) -> TaskLimits:
        """Check the decorator's arguments (timedeltas or seconds, or None); a workflow
        (*decorator* ``"workflow"``) has a timeout only.

        Raises:
            ConfigurationError: one is not a positive duration, or ``heartbeat`` is
                longer than ``timeout``; the message says which and what to pass.
        """
        values = {}
        for name, value in (("timeout", timeout), ("heartbeat", heartbeat), ("deadline", deadline)):
            try:
                total = seconds(value, f"@{decorator}({name}=...)")
            except (TypeError, ValueError) as error:
                raise ConfigurationError(str(error)) from None
            if total is not None and total <= 0:
                raise ConfigurationError(
                    f"@{decorator}({name}=...) must be a positive duration, got {value!r}. "
                    f"Pass a timedelta or a number of seconds above 0, or None for no {name}."
                )
            values[name] = total
        limits = cls(**values)
        heartbeat, timeout = limits.heartbeat, limits.timeout
        if heartbeat is not None and timeout is not None and heartbeat > timeout:
            raise ConfigurationError(
                f"@task(heartbeat={heartbeat:g}s) is longer than its timeout ({timeout:g}s): "
                "an attempt would time out before a missed heartbeat could be noticed. "
                "Make heartbeat at most the timeout."
            )
        return limits


NO_LIMITS = TaskLimits()
