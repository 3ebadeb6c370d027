"""The replay cursor on hand-built histories: no database, no threads, no clock."""

from __future__ import annotations

import pytest

from durable.core.records import Step, StepKind, StepStatus
from durable.core.replay import Replay
from durable.errors import NondeterminismError


def step(
    position: int, name: str = "app.fetch", call_hash: str = "v1:aa", **fields: object
) -> Step:
    values: dict[str, object] = {
        "run_id": "run-7",
        "position": position,
        "kind": StepKind.TASK,
        "name": name,
        "call_hash": call_hash,
        "status": StepStatus.COMPLETED,
        "output": b"j1",
    }
    values.update(fields)
    return Step(**values)  # type: ignore[arg-type]


def test_positions_are_allocated_in_order() -> None:
    """Single calls take consecutive positions; a parallel group takes a block."""
    replay = Replay("run-7")
    assert replay.allocate() == 0
    assert replay.allocate(3) == 1
    assert replay.allocate() == 4
    assert replay.next_position == 5


def test_unrecorded_position_is_the_frontier() -> None:
    """With nothing recorded at a position, the decision is to run the call."""
    replay = Replay("run-7", [step(0)])
    assert replay.decide(1, StepKind.TASK, "app.fetch", "v1:aa") is None


def test_matching_step_is_replayed() -> None:
    """A recorded step with the same kind, name and hash is returned for replay."""
    recorded = step(0, output=b"j42")
    replay = Replay("run-7", [recorded])
    assert replay.decide(0, StepKind.TASK, "app.fetch", "v1:aa") is recorded


def test_retrying_step_is_returned_to_continue_its_attempts() -> None:
    """An unfinished (retrying) step comes back so the caller continues its attempt count."""
    recorded = step(0, status=StepStatus.RETRYING, attempts=3, output=None, error=b"j{}")
    decided = Replay("run-7", [recorded]).decide(0, StepKind.TASK, "app.fetch", "v1:aa")
    assert decided is recorded and not decided.status.finished and decided.attempts == 3


def test_different_function_is_a_divergence() -> None:
    """Another function at a recorded position raises NondeterminismError naming both calls."""
    replay = Replay("run-7", [step(0), step(1, name="app.charge", call_hash="v1:bb")])
    with pytest.raises(NondeterminismError) as caught:
        replay.decide(1, StepKind.TASK, "app.send_email", "v1:cc")
    error = caught.value
    assert (error.run_id, error.position) == ("run-7", 1)
    assert error.recorded == "task app.charge (v1:bb)"
    assert error.current == "task app.send_email (v1:cc)"
    message = str(error)
    assert "'run-7'" in message and "position 1" in message
    assert "app.charge" in message and "app.send_email" in message
    assert "docs/concepts/replay.md" in message, "the error must say how to fix it"
    assert "different arguments" not in message


def test_different_arguments_are_a_divergence() -> None:
    """The same function with another hash is reported as a change of arguments."""
    replay = Replay("run-7", [step(0, call_hash="v1:aa")])
    with pytest.raises(NondeterminismError, match="with different arguments"):
        replay.decide(0, StepKind.TASK, "app.fetch", "v1:ab")


def test_different_kind_is_a_divergence() -> None:
    """A child workflow where a task was recorded diverges even under the same name."""
    replay = Replay("run-7", [step(0)])
    with pytest.raises(NondeterminismError) as caught:
        replay.decide(0, StepKind.WORKFLOW, "app.fetch", "v1:aa")
    assert caught.value.current.startswith("workflow app.fetch")


def test_remembered_steps_are_seen_by_later_decisions() -> None:
    """A step recorded during this execution is replayed if its position is decided again."""
    replay = Replay("run-7")
    recorded = step(0)
    replay.remember(recorded)
    assert replay.decide(0, StepKind.TASK, "app.fetch", "v1:aa") is recorded


def test_complete_history_passes() -> None:
    """Ending after the last recorded position is consistent."""
    replay = Replay("run-7", [step(0), step(1)])
    replay.allocate(2)
    replay.check_complete()


def test_appending_calls_after_the_recorded_prefix_is_allowed() -> None:
    """Code that makes more calls than history recorded is fine: the new ones just run."""
    replay = Replay("run-7", [step(0)])
    replay.allocate(3)
    replay.check_complete()


def test_ending_before_the_recorded_calls_is_a_divergence() -> None:
    """A workflow that ends while history holds later calls (a call was removed) diverges."""
    replay = Replay("run-7", [step(0), step(1), step(2, name="app.ship")])
    replay.allocate(2)
    with pytest.raises(NondeterminismError) as caught:
        replay.check_complete()
    assert caught.value.position == 2
    assert "app.ship" in caught.value.recorded
    assert "workflow ended" in caught.value.current


def test_history_order_does_not_matter() -> None:
    """Steps may arrive in any order; decisions look them up by position."""
    replay = Replay("run-7", [step(2, name="c"), step(0, name="a"), step(1, name="b")])
    assert [
        replay.decide(p, StepKind.TASK, n, "v1:aa") is not None for p, n in enumerate("abc")
    ] == [
        True,
        True,
        True,
    ]


def test_a_started_position_is_continued_by_the_same_call() -> None:
    """A task recorded as started but never finished (its process died inside the body)
    is handed back unfinished: the same call makes another attempt there."""
    started = step(1, status=StepStatus.RUNNING, output=None, attempts=1)
    replay = Replay("run-7", [step(0), started])
    assert replay.decide(1, StepKind.TASK, "app.fetch", "v1:aa") is started
    assert not started.status.finished


def test_a_different_call_at_a_started_position_is_a_divergence() -> None:
    """The code changed at a task that was in flight: another call there is refused,
    like a different call at a finished position, naming both calls."""
    replay = Replay("run-7", [step(0), step(1, status=StepStatus.RUNNING, output=None)])
    with pytest.raises(NondeterminismError) as caught:
        replay.decide(1, StepKind.TASK, "app.other", "v1:bb")
    assert caught.value.position == 1
    assert "app.fetch" in caught.value.recorded and "app.other" in caught.value.current


# -- a workflow class's on_event handlers (issue 15) ------------------------------------

AT_CALL, IN_WAIT = "handler:call", "handler:wait"


def handler(position: int, event: str, where: str = AT_CALL) -> Step:
    return step(position, name=event, call_hash=where, kind=StepKind.HANDLER, input=b'j{"event":1}')


def test_a_handler_recorded_at_the_next_position_is_found_where_it_ran() -> None:
    """A handler that ran before a call is found there, not in a wait, and the other
    way round; the main branch's own steps are no handler."""
    replay = Replay(
        "run-7", [step(0), handler(1, "address_changed"), step(2), handler(3, "x", IN_WAIT)]
    )
    assert replay.handler(AT_CALL) is None  # position 0 is the main branch's task
    assert replay.decide(replay.allocate(), StepKind.TASK, "app.fetch", "v1:aa") is not None
    found = replay.handler(AT_CALL)
    assert found is not None and found.name == "address_changed"
    assert replay.handler(IN_WAIT) is None  # it ran before a call, not in a wait
    replay.allocate()
    replay.allocate()
    assert replay.handler(AT_CALL) is None
    assert replay.handler(IN_WAIT) is not None


def test_code_that_skips_a_recorded_handler_diverges_naming_it() -> None:
    """If the code no longer handles the event where it did (say on_event was removed),
    its next call meets the handler step: a divergence naming the event."""
    replay = Replay("run-7", [step(0), handler(1, "address_changed"), step(2)])
    replay.decide(replay.allocate(), StepKind.TASK, "app.fetch", "v1:aa")
    with pytest.raises(NondeterminismError, match="handler address_changed") as caught:
        replay.decide(replay.allocate(), StepKind.TASK, "app.fetch", "v1:aa")
    assert caught.value.position == 1


def test_a_handler_never_reached_again_is_a_divergence_at_the_end() -> None:
    """A run whose code now ends before the handler it recorded does not complete."""
    replay = Replay("run-7", [step(0), handler(1, "late")])
    replay.decide(replay.allocate(), StepKind.TASK, "app.fetch", "v1:aa")
    with pytest.raises(NondeterminismError, match="at position 1"):
        replay.check_complete()


def test_the_snapshot_a_handler_step_carries_counts_as_the_latest() -> None:
    """A handler changes properties like any branch: its step carries the snapshot."""
    first = step(0, state=b'{"a":1}')
    second = step(1, name="e", call_hash=AT_CALL, kind=StepKind.HANDLER, state=b'{"a":2}')
    assert Replay("run-7", [first, second]).last_state() == b'{"a":2}'
