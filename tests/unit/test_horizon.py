"""Deadlines beyond the horizon (a hundred years) are refused at the call, and a stored
time of any size is shown, never raised on (finding 8 of issue 23)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import durable
from durable import dispatch, execute, wait, workflow
from durable.core.durations import HORIZON, seconds
from durable.ops._values import iso
from tests.unit.helpers import history


@pytest.fixture
def engine(memory_engine: durable.Engine) -> durable.Engine:
    """The default engine on a fresh memory backend (the shared fixture)."""
    return memory_engine


@workflow
def waits_for(kind: str) -> str:
    try:
        if kind == "event":
            wait("go", timeout=dt.timedelta.max)
        elif kind == "sleep":
            wait(dt.timedelta.max)
        elif kind == "seconds":
            wait(1e300)
        elif kind == "until":
            wait(until=dt.datetime.max.replace(tzinfo=dt.UTC))
        elif kind == "handle":
            dispatch(waits_for, "never").result(timeout=dt.timedelta.max)
    except ValueError as error:
        return str(error)
    return "waited"


@pytest.mark.usefixtures("engine")
@pytest.mark.parametrize("kind", ["event", "sleep", "seconds", "until", "handle"])
def test_a_deadline_past_the_horizon_is_refused_at_the_call(kind: str) -> None:
    """timedelta.max ("no deadline") used to be recorded as a wake time in year 2.7
    million, which every view then failed to format. Nothing is recorded now."""
    message = execute(waits_for, kind, id=kind)
    assert "100 years" in message, message
    assert "None" in message or kind in ("sleep", "seconds", "until")  # says what to do
    assert [step.kind.value for step in history(kind)] == (["dispatch"] if kind == "handle" else [])


def test_seconds_checks_the_horizon() -> None:
    assert dt.timedelta(days=36525) == HORIZON
    assert seconds(HORIZON, "timeout") == HORIZON.total_seconds()
    assert seconds(-5, "timeout") == -5.0  # a deadline already past is fine
    for far in (HORIZON + dt.timedelta(seconds=1), dt.timedelta.max, dt.timedelta.min, 4e9):
        with pytest.raises(ValueError, match="100 years"):
            seconds(far, "timeout")


@pytest.mark.usefixtures("engine")
def test_waiting_for_a_handle_outside_a_workflow_checks_too() -> None:
    handle = dispatch(waits_for, "x", id="queued")
    with pytest.raises(ValueError, match="100 years"):
        handle.result(timeout=dt.timedelta.max)
    with pytest.raises(ValueError, match="100 years"):
        wait(handle, timeout=dt.timedelta.max)


@pytest.mark.parametrize(
    ("moment", "shown"),
    [
        (0.0, "1970-01-01T00:00:00.000000Z"),
        (253402300800.0, "9999-12-31T23:59:59.999999Z"),  # year 10000
        (8.5e13, "9999-12-31T23:59:59.999999Z"),
        (1e300, "9999-12-31T23:59:59.999999Z"),
        (float("inf"), "9999-12-31T23:59:59.999999Z"),
        (-1e300, "0001-01-01T00:00:00.000000Z"),
        (float("-inf"), "0001-01-01T00:00:00.000000Z"),
        (float("nan"), None),
        (None, None),
    ],
)
def test_iso_shows_any_stored_time(moment: Any, shown: str | None) -> None:
    """Beyond what ISO 8601 can write, the view shows the last (or first) moment it
    can, still a valid date-time for API clients; never an exception."""
    assert iso(moment) == shown


@pytest.mark.parametrize("options", [{"max_delay": 1e300}, {"initial": 4e9, "max_delay": 4e9}])
def test_retry_delays_beyond_the_horizon_are_refused(options: dict[str, float]) -> None:
    """A retry delay is a deadline too: refused when the policy is made, not when its
    wake time reaches a view."""
    from durable.core.retry import RetryPolicy
    from durable.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="100 years"):
        RetryPolicy(attempts=3, **options)
    with pytest.raises(ConfigurationError, match="finite"):
        RetryPolicy(attempts=3, max_delay=float("inf"))
    assert RetryPolicy(attempts=3, max_delay=HORIZON.total_seconds()).max_delay > 0
