"""Durable events: inboxes, waits with timeouts, sends (once, however often replayed),
and a cancel delivered at a wait."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

import durable
from durable import RunStatus, StepStatus, send, task, wait, workflow
from durable.errors import RunFinished, RunNotFound, WaitTimeout
from durable.testing import DurableEnv
from tests.unit._waits_helpers import (
    DAY,
    HOUR,
    _clean,  # noqa: F401 (autouse fixture)
    env_fixture,  # noqa: F401 (the env fixture)
    nap,
    note,
    seen,
)
from tests.unit.helpers import Crash

# -- events --------------------------------------------------------------------------


@workflow
def approval(doc: str) -> str:
    note(f"review {doc}")
    try:
        answer = wait("reviewed", timeout=3 * DAY)
    except WaitTimeout:
        note(f"escalate {doc}")
        wait(12 * HOUR)
        return "escalated"
    wait(until=durable.now() + dt.timedelta(minutes=5))
    return str(answer["verdict"])


def test_the_issue_example_escalates_after_three_days(env: DurableEnv) -> None:
    """No answer for three days: the wait times out, and the timeout is recorded."""
    handle = env.dispatch(approval, "d1")
    env.advance(3 * DAY)
    assert handle.result() == "escalated"
    assert env.history(handle.id).kinds() == ["task", "event", "task", "sleep"]
    timed_out = env.history(handle.id)[1]
    assert timed_out.input == b'j{"timed_out":true}' and timed_out.output == b"jnull"


def test_an_event_without_a_payload_is_not_a_timeout(env: DurableEnv) -> None:
    """send(run, "complete") carries None: the wait returns None, it does not time out;
    a timeout raises WaitTimeout, naming the run and the event."""

    @workflow
    def signalled() -> str:
        try:
            payload = wait("complete", timeout=DAY)
        except WaitTimeout as late:
            return f"timed out: {late.event} for {late.run_id}"
        return f"completed with {payload!r}"

    handle = env.dispatch(signalled, id="sig-1")
    env.advance(HOUR)
    env.send(handle.id, "complete")
    assert handle.result() == "completed with None"
    quiet = env.dispatch(signalled, id="sig-2")
    env.advance(DAY)
    assert quiet.result() == "timed out: complete for sig-2"


def test_an_event_wakes_the_waiting_run_with_its_payload(env: DurableEnv) -> None:
    """send() queues the waiting run; the wait returns the payload and records the event."""
    handle = env.dispatch(approval, "d1")
    env.advance(HOUR)
    env.send(handle, "reviewed", {"verdict": "ok"})
    env.advance(dt.timedelta(minutes=5))
    assert handle.result() == "ok"
    event = env.backend.events(handle.id)[0]
    step = env.history(handle.id)[1]
    assert step.input == b'j{"event":%d}' % event.id
    assert event.consumed_position == 1
    assert step.finished_at == env.clock.now() - 300, "consumed when it was sent"


def test_an_event_sent_before_the_wait_waits_in_the_inbox(env: DurableEnv) -> None:
    """Events are durable once sent, even if the run has not reached its wait yet."""

    @workflow
    def late_listener() -> object:
        wait(HOUR)
        return wait("ping", timeout=60)

    handle = env.dispatch(late_listener)
    env.send(handle, "ping", [1, 2])
    assert env.run(handle.id).status is RunStatus.WAITING, "still asleep: it keeps"
    env.advance(HOUR)
    assert handle.result() == [1, 2]


def test_two_events_of_one_name_are_consumed_in_order(env: DurableEnv) -> None:
    """FIFO per (run, name): each event is consumed by exactly one wait."""

    @workflow
    def two() -> list[object]:
        first = wait("item", timeout=DAY)
        second = wait("item", timeout=DAY)
        third = wait("item", timeout=DAY)
        return [first, second, third]

    handle = env.dispatch(two)
    env.send(handle, "item", "a")
    env.send(handle, "item", "b")
    env.send(handle, "other", "x")
    assert env.run(handle.id).status is RunStatus.WAITING
    env.send(handle, "item", "c")
    assert handle.result() == ["a", "b", "c"]
    consumed = [(e.name, e.consumed_position) for e in env.backend.events(handle.id)]
    assert consumed == [("item", 0), ("item", 1), ("other", None), ("item", 2)]


def test_a_recorded_timeout_replays_as_a_timeout_even_if_the_event_came(
    env: DurableEnv,
) -> None:
    """The process dies after the timeout was recorded, and the event arrives before the
    run resumes: replay takes the timeout branch again, and the event stays unread."""
    crashes: list[int] = []

    @task
    def die_once(run_id: str) -> None:
        if not crashes:
            crashes.append(1)
            send(run_id, "answer", "too late")  # arrives after the recorded timeout
            raise Crash  # the process dies here: nothing more is recorded

    @workflow
    def impatient(run_id: str) -> str:
        try:
            answer = wait("answer", timeout=HOUR)
        except WaitTimeout:
            die_once(run_id)
            return "timed out"
        return f"got {answer}"

    handle = env.dispatch(impatient, "impatient-1", id="impatient-1")
    env.advance(HOUR)
    assert handle.result() == "timed out"
    assert crashes == [1], "the process really died once after the timeout"
    (event,) = env.backend.events(handle.id)
    assert event.payload == b'j"too late"' and event.consumed_position is None


def test_send_to_unknown_or_finished_runs_raises(env: DurableEnv) -> None:
    """A send that could never be consumed is refused with a clear error."""
    with pytest.raises(RunNotFound):
        send("no-such-run", "x")
    handle = env.dispatch(nap, 0)
    assert handle.result() == 0
    with pytest.raises(RunFinished, match="has finished"):
        send(handle, "x", 1)


def test_a_keyed_send_is_delivered_once(env: DurableEnv) -> None:
    """A retried webhook with the same key adds nothing."""
    handle = env.dispatch(approval, "d1")
    env.send(handle, "reviewed", {"verdict": "ok"}, key="delivery-1")
    env.send(handle, "reviewed", {"verdict": "no"}, key="delivery-1")
    assert len(env.backend.events(handle.id)) == 1


def test_an_unserializable_payload_sends_nothing(env: DurableEnv) -> None:
    """SerializationError names the event; the inbox stays empty."""
    handle = env.dispatch(approval, "d1")
    with pytest.raises(durable.SerializationError, match="event 'reviewed'"):
        send(handle, "reviewed", threading.Lock())
    assert env.backend.events(handle.id) == []


def test_a_workflow_sends_to_another_once_however_often_replayed(env: DurableEnv) -> None:
    """The send is keyed by its position: replays (and crashes) never deliver twice."""
    crashes: list[int] = []

    @task
    def crash_once() -> None:
        if not crashes:
            crashes.append(1)
            raise Crash

    @workflow
    def sender(target: str) -> None:
        send(target, "hello", {"from": "sender"})
        crash_once()

    receiver = env.dispatch(approval, "d1")
    sending = env.dispatch(sender, receiver.id)
    assert sending.result() is None and crashes == [1]
    (event,) = env.backend.events(receiver.id)
    assert event.sender == sending.id and event.key == f"{sending.id}:0"
    kinds = env.history(sending.id).kinds()
    assert kinds == ["send", "task"]


def test_a_send_inside_a_workflow_to_a_finished_run_is_recorded(env: DurableEnv) -> None:
    """RunFinished is the step's recorded outcome: replay raises it again."""

    @workflow
    def to_finished(target: str) -> str:
        try:
            send(target, "late")
        except RunFinished:
            return "refused"
        return "sent"

    done = env.dispatch(nap, 0)
    handle = env.dispatch(to_finished, done.id)
    assert handle.result() == "refused"
    assert env.history(handle.id)[0].status is StepStatus.FAILED


# -- cancellation --------------------------------------------------------------------


def test_cancelling_a_waiting_run_delivers_cancelled_at_its_wait(env: DurableEnv) -> None:
    """The run is queued again to receive Cancelled; its finally blocks run."""

    @workflow
    def careful() -> None:
        try:
            wait("never", timeout=30 * DAY)
        finally:
            note("cleanup")

    handle = env.dispatch(careful)
    assert handle.cancel()
    env.drain()
    assert env.run(handle.id).status is RunStatus.CANCELLED
    assert seen == ["cleanup"]
    assert env.history(handle.id).kinds() == ["cancel", "task"]
    with pytest.raises(durable.Cancelled):
        handle.result()


@task
def tell(run_id: str) -> None:
    durable.send(run_id, "told", "from a task", key=f"{run_id}:told")


@workflow
def teller(run_id: str) -> None:
    tell(run_id)


@workflow
def listener() -> str:
    return durable.wait("told", timeout=dt.timedelta(seconds=30))  # type: ignore[no-any-return]


def test_send_in_a_task_body_goes_to_the_engine_running_it() -> None:
    """A worker's engine serves another database than the default: a task it runs
    sends to its own database (the default has no such run)."""
    from durable.runtime.defaults import swap

    served, default = durable.Engine("memory://"), durable.Engine("memory://")
    previous = swap(default)
    try:
        with durable.Worker(served, poll=0.02):
            waiting = served.dispatch_call(listener.bind(), run_id="listener-1")
            served.dispatch_call(teller.bind(waiting.id), run_id="teller-1")
            assert durable.Handle(served, "listener-1").result(timeout=30) == "from a task"
        assert default.backend.get_run("listener-1") is None
    finally:
        swap(previous)
        served.close()
        default.close()
