"""Retry policies for tasks: how many attempts, how long between them, which errors."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from durable.errors import ConfigurationError, NonRetryable

from .durations import HORIZON

Backoff = Literal["constant", "linear", "exponential"]

#: the default cap on a retry delay, in seconds.
DEFAULT_CAP = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How a task is retried when it raises.

    Args:
        attempts: total attempts, the first included. 1 means no retry.
        backoff: how the delay grows: ``constant`` (always *initial*), ``linear``
            (*initial* * attempt) or ``exponential`` (*initial* * 2^(attempt-1)).
        initial: the first delay in seconds.
        max_delay: the cap on any delay, in seconds; it must not be below *initial*.
        jitter: spread each delay uniformly over [delay/2, delay] so that many runs
            failing together do not retry together.
        retry_on: only these exception types are retried (default: any Exception).
        dont_retry_on: these exception types fail at once. `NonRetryable` always does.
    """

    attempts: int = 1
    backoff: Backoff = "exponential"
    initial: float = 1.0
    max_delay: float = 60.0  # a field's default is part of call hashes: keep it
    jitter: bool = False
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    dont_retry_on: tuple[type[BaseException], ...] = ()

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ConfigurationError(f"retry attempts must be at least 1, got {self.attempts}.")
        if self.backoff not in ("constant", "linear", "exponential"):
            raise ConfigurationError(
                "retry backoff must be 'constant', 'linear' or 'exponential', "
                f"got {self.backoff!r}."
            )
        if self.initial < 0 or self.max_delay < 0:
            raise ConfigurationError("retry delays must not be negative.")
        if not (math.isfinite(self.initial) and math.isfinite(self.max_delay)):
            raise ConfigurationError("retry delays must be finite numbers of seconds.")
        if self.max_delay > HORIZON.total_seconds():
            raise ConfigurationError(
                f"retry max_delay ({self.max_delay:g}s) is more than 100 years, durable's "
                "horizon for deadlines: a retry that far away would never happen. Lower it."
            )
        if self.max_delay < self.initial:
            default = " (the default)" if self.max_delay == DEFAULT_CAP else ""
            raise ConfigurationError(
                f"retry max_delay ({self.max_delay:g}s{default}) is below the initial delay "
                f"({self.initial:g}s), so every delay would be cut to {self.max_delay:g}s. "
                f"Pass max_delay={self.initial:g} or more, or lower initial."
            )

    @classmethod
    def coerce(cls, value: RetryPolicy | Mapping[str, Any] | int | None) -> RetryPolicy:
        """Accept a policy, a dict of its fields, a number of attempts, or None."""
        if value is None:
            return NO_RETRY
        if isinstance(value, RetryPolicy):
            return value
        if isinstance(value, int):
            return cls(attempts=value)
        try:
            fields = dict(value)
            for key in ("retry_on", "dont_retry_on"):
                if isinstance(fields.get(key), type):
                    fields[key] = (fields[key],)
            return cls(**fields)
        except TypeError as error:
            raise ConfigurationError(
                f"bad retry option: {error}. Valid keys: attempts, backoff, initial, max_delay, "
                "jitter, retry_on, dont_retry_on."
            ) from None

    def should_retry(self, error: BaseException, attempt: int) -> bool:
        """Whether *error*, raised by attempt number *attempt* (from 1), earns another try."""
        if attempt >= self.attempts or isinstance(error, NonRetryable):
            return False
        if isinstance(error, self.dont_retry_on):
            return False
        return isinstance(error, self.retry_on)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after attempt number *attempt* (from 1) failed."""
        if self.backoff == "constant":
            base = self.initial
        elif self.backoff == "linear":
            base = self.initial * attempt
        else:
            base = self.initial * 2.0 ** min(attempt - 1, 60)
        base = min(base, self.max_delay)
        if self.jitter:
            base = random.uniform(base / 2, base)
        return base


NO_RETRY = RetryPolicy()
