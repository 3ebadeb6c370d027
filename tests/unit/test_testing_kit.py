"""durable.testing: DurableEnv, its virtual clock, the pytest fixture, golden histories."""

from __future__ import annotations

import datetime as dt
import json
from importlib import metadata

import pytest

import durable
from durable import NondeterminismError, RunStatus, dispatch, task, wait, workflow
from durable.errors import DurableError
from durable.testing import DurableEnv, VirtualClock, export_history, replay

HOUR = dt.timedelta(hours=1)
fired: list[tuple[str, dt.datetime]] = []


@task
def stamp(name: str) -> str:
    fired.append((name, durable.now()))
    return name


@workflow
def alarm(name: str, hours: float) -> str:
    wait(dt.timedelta(hours=hours))
    return stamp(name)


def test_advance_fires_timers_in_order_each_at_its_moment() -> None:
    """Timers due within the advance fire in deadline order, at their exact times."""
    fired.clear()
    with DurableEnv() as env:
        start = env.now()
        for name, hours in (("c", 3), ("a", 1), ("d", 9), ("b", 2)):
            env.dispatch(alarm, name, hours)
        env.advance(5 * HOUR)
        assert fired == [(n, start + h * HOUR) for n, h in (("a", 1), ("b", 2), ("c", 3))]
        assert env.now() == start + 5 * HOUR
        env.run_until_idle()
        assert fired[-1] == ("d", start + 9 * HOUR)


def test_time_stands_still_until_told() -> None:
    """Dispatching and draining do not move the clock; advance refuses to go back."""
    with DurableEnv(start=dt.datetime(2030, 6, 1, tzinfo=dt.UTC)) as env:
        handle = env.dispatch(alarm, "x", 1)
        env.drain()
        assert env.now() == dt.datetime(2030, 6, 1, tzinfo=dt.UTC)
        assert handle.status() is RunStatus.WAITING
        with pytest.raises(ValueError, match="forward"):
            env.advance(-1)


def test_result_jumps_to_the_timers_it_needs() -> None:
    """handle.result() runs the world until that run is done."""
    with DurableEnv() as env:
        start = env.now()
        assert env.execute(alarm, "late", 48) == "late"
        assert env.now() == start + 48 * HOUR


def test_a_run_that_can_never_finish_says_why() -> None:
    """Waiting on an event nobody sends is reported, not hung on."""

    @workflow
    def forever() -> object:
        return wait("never")

    with DurableEnv() as env:
        handle = env.dispatch(forever)
        with pytest.raises(DurableError, match="waits for event:never"):
            handle.result()
        env.send(handle, "never", 7)
        assert handle.result() == 7


def test_endless_sleepers_are_bounded() -> None:
    """run_until_idle gives up on a workflow that sleeps in a loop forever."""

    @workflow
    def ticker() -> None:
        while True:
            wait(HOUR)

    with DurableEnv(max_jumps=50) as env:
        env.dispatch(ticker)
        with pytest.raises(DurableError, match="endless loop"):
            env.run_until_idle()


def test_the_env_is_the_default_engine_inside_and_restored_after() -> None:
    """Code under test that calls durable.dispatch/execute uses the env."""
    before = durable.get_engine()
    with DurableEnv() as env:
        assert durable.get_engine() is env.engine
        handle = dispatch(alarm, "plain", 1)
        env.run_until_idle()
        assert handle.result() == "plain"
    assert durable.get_engine() is before


def test_async_workflows_wait_durably_too() -> None:
    """An async workflow suspends at its waits like a sync one."""

    @workflow
    async def later() -> object:
        wait(HOUR)
        return wait("go", timeout=HOUR)

    with DurableEnv() as env:
        handle = env.dispatch(later)
        assert handle.status() is RunStatus.WAITING
        env.advance(HOUR)
        env.send(handle, "go", "ok")
        assert handle.result() == "ok"


def test_virtual_clock() -> None:
    """It moves only when told, or slept on, and never backward."""
    clock = VirtualClock(100.0)
    assert clock.now() == 100.0
    clock.sleep(5)
    clock.advance(-3)
    clock.set(50)
    assert clock.now() == 105.0


def test_the_fixture_comes_from_the_installed_plugin(durable_env: DurableEnv) -> None:
    """``durable_env`` is registered through the pytest11 entry point."""
    points = metadata.entry_points(group="pytest11")
    assert any(p.name == "durable" and p.value == "durable.testing.pytest_plugin" for p in points)
    assert durable.get_engine() is durable_env.engine
    assert durable_env.execute(alarm, "fixture", 2) == "fixture"


# -- golden histories ----------------------------------------------------------------


@task
def fetch(doc: str) -> str:
    return doc.upper()


@task
def publish(text: str) -> str:
    return f"published {text}"


@workflow
def pipeline(doc: str) -> str:
    text = fetch(doc)
    answer = wait("approved", timeout=HOUR)
    return publish(text) if answer else "rejected"


def _golden(*, finish: bool) -> str:
    with DurableEnv() as env:
        handle = env.dispatch(pipeline, "doc")
        if finish:
            env.send(handle, "approved", True)
            assert handle.result() == "published DOC"
        return export_history(handle.id)


def test_export_history_is_plain_json() -> None:
    """Payloads are kept as stored text; kinds and statuses by name."""
    document = json.loads(_golden(finish=True))
    assert document["format"] == "durable-history" and document["version"] == 1
    assert document["run"]["workflow"] == pipeline.name
    assert [s["kind"] for s in document["steps"]] == ["task", "event", "task"]
    assert document["steps"][0]["output"] == 'j"DOC"'


def test_replay_passes_today_s_compatible_code() -> None:
    """Same durable calls in the same order: replay passes, running no task."""
    replay(pipeline, _golden(finish=True))
    replay(pipeline, _golden(finish=False))  # a run still waiting: checked up to there


def test_replay_raises_when_the_code_changed_incompatibly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reordered calls, changed arguments, or extra calls at the end are divergences."""
    golden = _golden(finish=True)

    def reordered(doc: str) -> str:
        answer = wait("approved", timeout=HOUR)
        return publish(fetch(doc)) if answer else "rejected"

    monkeypatch.setattr(pipeline, "fn", reordered)
    with pytest.raises(NondeterminismError) as diverged:
        replay(pipeline, golden)
    assert diverged.value.position == 0

    def extra_step(doc: str) -> str:
        text = fetch(doc)
        answer = wait("approved", timeout=HOUR)
        result = publish(text) if answer else "rejected"
        fetch("audit")
        return result

    monkeypatch.setattr(pipeline, "fn", extra_step)
    with pytest.raises(NondeterminismError, match="had finished"):
        replay(pipeline, golden)

    def stops_early(doc: str) -> str:
        return fetch(doc)

    monkeypatch.setattr(pipeline, "fn", stops_early)
    with pytest.raises(NondeterminismError, match="ended first"):
        replay(pipeline, golden)

    def compatible(doc: str) -> str:  # a refactor: the same calls, in the same order
        text = fetch(doc.strip())
        if not wait("approved", timeout=3600):
            return "rejected"
        return publish(text)

    monkeypatch.setattr(pipeline, "fn", compatible)
    replay(pipeline, golden)


def test_replay_refuses_what_is_not_a_history_of_this_workflow() -> None:
    """A foreign document or another workflow's history is a ValueError."""
    with pytest.raises(ValueError, match="Not a durable history"):
        replay(pipeline, "{}")
    with pytest.raises(ValueError, match="not"):
        replay(alarm, _golden(finish=True))
