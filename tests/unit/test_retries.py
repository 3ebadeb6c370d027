"""Retry policies: attempts, back-off, which errors retry, and attempts across crashes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import durable
from durable import NonRetryable, RetryPolicy, StepStatus, execute, task, workflow
from durable.errors import ConfigurationError
from tests.unit.helpers import Crash, FakeClock, history


@pytest.fixture
def clock() -> Iterator[FakeClock]:
    """A default engine on memory whose clock records the back-off sleeps."""
    fake = FakeClock()
    engine = durable.configure("memory://", clock=fake)
    try:
        yield fake
    finally:
        engine.close()


def failing(times: int, error: type[Exception] = ConnectionError) -> tuple[list[int], object]:
    """A body that fails *times* times, then returns the attempt count."""
    attempts: list[int] = []

    def body() -> int:
        attempts.append(1)
        if len(attempts) <= times:
            raise error(f"attempt {len(attempts)}")
        return len(attempts)

    return attempts, body


def test_delays_per_backoff_shape() -> None:
    """Constant, linear and exponential back-off give the documented delays, capped."""
    constant = RetryPolicy(attempts=5, backoff="constant", initial=2)
    linear = RetryPolicy(attempts=5, backoff="linear", initial=2, max_delay=5)
    exponential = RetryPolicy(attempts=9, backoff="exponential", initial=0.5, max_delay=10)
    assert [constant.delay(a) for a in (1, 2, 3)] == [2, 2, 2]
    assert [linear.delay(a) for a in (1, 2, 3, 4)] == [2, 4, 5, 5]
    assert [exponential.delay(a) for a in (1, 2, 3, 4, 5, 6)] == [0.5, 1, 2, 4, 8, 10]
    assert exponential.delay(10_000) == 10, "huge attempt numbers must not overflow"


def test_jitter_spreads_delays_within_half_to_full() -> None:
    """With jitter each delay lies in [delay/2, delay] and they are not all equal."""
    policy = RetryPolicy(attempts=3, backoff="constant", initial=4, jitter=True)
    delays = [policy.delay(1) for _ in range(200)]
    assert all(2 <= d <= 4 for d in delays)
    assert len(set(delays)) > 100


def test_bad_policies_are_refused_with_the_reason() -> None:
    """Impossible options fail at decoration time with a clear message."""
    with pytest.raises(ConfigurationError, match="at least 1"):
        RetryPolicy(attempts=0)
    with pytest.raises(ConfigurationError, match="backoff"):
        RetryPolicy.coerce({"backoff": "fibonacci"})
    with pytest.raises(ConfigurationError, match="Valid keys"):
        RetryPolicy.coerce({"tries": 3})
    with pytest.raises(ConfigurationError, match=r"max_delay \(10s\) is below the initial"):
        RetryPolicy.coerce({"initial": 3600, "max_delay": 10})


def test_an_initial_delay_above_the_default_cap_is_refused() -> None:
    """initial=3600 alone used to wait 60 s (the default max_delay cut it, silently);
    now it is refused, naming the default and the fix; with max_delay it waits."""
    with pytest.raises(ConfigurationError, match=r"\(60s \(the default\)\).*max_delay=3600"):
        RetryPolicy.coerce({"attempts": 3, "initial": 3600})
    hourly = RetryPolicy.coerce({"attempts": 3, "initial": 3600, "max_delay": 7200})
    assert [hourly.delay(a) for a in (1, 2)] == [3600, 7200]
    assert [RetryPolicy(attempts=9, initial=8).delay(a) for a in (1, 3, 5)] == [8, 32, 60]


def test_retries_until_success_and_records_each_attempt(clock: FakeClock) -> None:
    """A task failing twice under attempts=3 succeeds on the third; attempts are recorded."""
    _, body = failing(2)

    @task(retry=dict(attempts=3, backoff="exponential", initial=1, max_delay=60))
    def flaky() -> int:
        return body()  # type: ignore[operator,no-any-return]

    @workflow
    def flow() -> int:
        return flaky()

    assert execute(flow, id="r1") == 3
    assert clock.sleeps == [1, 2]
    (step,) = history("r1")
    assert step.status is StepStatus.COMPLETED and step.attempts == 3


def test_exhausted_attempts_raise_and_record_the_last_error(clock: FakeClock) -> None:
    """When attempts run out the last error is recorded and raised into the workflow."""
    attempts, body = failing(10)

    @task(retry=3)
    def flaky() -> int:
        return body()  # type: ignore[operator,no-any-return]

    @workflow
    def flow() -> str:
        try:
            flaky()
        except ConnectionError as error:
            return f"gave up: {error}"
        return "ok"

    assert execute(flow, id="r2") == "gave up: attempt 3"
    assert len(attempts) == 3
    (step,) = history("r2")
    assert step.status is StepStatus.FAILED and step.attempts == 3
    assert b"attempt 3" in (step.error or b"")


def test_non_retryable_fails_at_once(clock: FakeClock) -> None:
    """Raising NonRetryable (or a subclass) skips the remaining attempts."""

    class DeclinedError(NonRetryable):
        pass

    attempts: list[int] = []

    @task(retry=5)
    def charge() -> None:
        attempts.append(1)
        raise DeclinedError("card declined")

    @workflow
    def flow() -> None:
        charge()

    with pytest.raises(DeclinedError):
        execute(flow, id="r3")
    assert attempts == [1] and clock.sleeps == []


def test_retry_on_and_dont_retry_on_select_errors(clock: FakeClock) -> None:
    """Only retry_on errors retry; dont_retry_on errors fail at once."""
    seen: list[str] = []

    @task(
        retry=dict(
            attempts=4, initial=0, retry_on=(ConnectionError, KeyError), dont_retry_on=KeyError
        )
    )
    def picky(kind: str) -> None:
        seen.append(kind)
        raise {"conn": ConnectionError, "key": KeyError, "value": ValueError}[kind](kind)

    @workflow
    def flow(kind: str) -> None:
        picky(kind)

    with pytest.raises(ConnectionError):
        execute(flow, "conn")
    with pytest.raises(KeyError):
        execute(flow, "key")
    with pytest.raises(ValueError, match="value"):
        execute(flow, "value")
    assert seen == ["conn"] * 4 + ["key", "value"]


def test_attempts_continue_across_a_crash(clock: FakeClock) -> None:
    """A run that dies mid-retry resumes with the attempts already spent, not a fresh budget."""
    attempts: list[int] = []

    @task(retry=dict(attempts=3, backoff="constant", initial=1))
    def flaky() -> int:
        attempts.append(1)
        if len(attempts) == 3:
            raise Crash  # the process dies during the third attempt
        raise ConnectionError(f"attempt {len(attempts)}")

    @workflow
    def flow() -> str:
        try:
            flaky()
        except ConnectionError as error:
            return str(error)
        return "ok"

    with pytest.raises(Crash):
        execute(flow, id="r4")
    (step,) = history("r4")  # the third attempt was recorded as started, never ended
    assert step.status is StepStatus.RUNNING and step.attempts == 3
    assert execute(flow, id="r4") == "attempt 4"
    assert len(attempts) == 4, "only the interrupted third attempt may run again"
    (step,) = history("r4")
    assert step.status is StepStatus.FAILED and step.attempts == 3


def test_no_retry_by_default(clock: FakeClock) -> None:
    """A task without a retry policy runs once."""
    attempts, body = failing(1)

    @task
    def once() -> int:
        return body()  # type: ignore[operator,no-any-return]

    @workflow
    def flow() -> int:
        return once()

    with pytest.raises(ConnectionError):
        execute(flow)
    assert len(attempts) == 1
