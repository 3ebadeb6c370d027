"""A workflow changed under a live run is stopped visibly and stays resumable."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durable import RunStatus, StepStatus, execute, task, workflow
from durable.errors import NondeterminismError
from tests.unit.helpers import Crash, history, run

pytestmark = pytest.mark.usefixtures("memory_engine")


class PaymentDeclinedError(Exception):
    """A module-level error (replay imports recorded error classes by name)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Scenario:
    """A workflow whose code can be 'changed' by flipping a variant, like a deploy."""

    def __init__(self, body: Callable[[Scenario], Any]) -> None:
        self.variant = "old"
        self.crash_at: str | None = "crash"
        self.bodies: list[str] = []
        scenario = self

        @task
        def act(name: str, n: int = 0) -> str:
            if name == scenario.crash_at:
                scenario.crash_at = None
                raise Crash
            scenario.bodies.append(name)
            return f"{name}:{n}"

        self.act = act

        @workflow
        def flow() -> Any:
            return body(scenario)

        self.flow = flow

    def start(self, run_id: str) -> None:
        """Run until the simulated crash, leaving an unfinished run behind."""
        with pytest.raises(Crash):
            execute(self.flow, id=run_id)


def test_a_different_task_at_a_recorded_position_blocks_the_run() -> None:
    """Replacing a recorded call raises NondeterminismError and runs nothing new."""

    def body(s: Scenario) -> list[str]:
        first = s.act("charge" if s.variant == "old" else "refund")
        return [first, s.act("crash"), s.act("ship")]

    s = Scenario(body)
    s.start("order-1")
    s.variant = "new"
    with pytest.raises(NondeterminismError) as caught:
        execute(s.flow, id="order-1")
    assert caught.value.run_id == "order-1" and caught.value.position == 0
    assert s.act.name in caught.value.recorded
    assert s.bodies == ["charge"], "no task body may run once the history diverges"
    _the_advice_points_at_a_real_section(str(caught.value))
    stored = run("order-1")
    assert stored.status is RunStatus.BLOCKED
    assert [(st.status, st.output) for st in history("order-1")] == [
        (StepStatus.COMPLETED, b'j"charge:0"'),
        (StepStatus.RUNNING, None),  # "crash" started and never ended
    ], "history is never overwritten"


def test_a_blocked_run_resumes_once_the_code_matches_again() -> None:
    """Reverting the change lets the blocked run finish from where it was."""

    def body(s: Scenario) -> list[str]:
        first = s.act("charge" if s.variant == "old" else "refund")
        return [first, s.act("crash"), s.act("ship")]

    s = Scenario(body)
    s.start("order-2")
    s.variant = "new"
    with pytest.raises(NondeterminismError):
        execute(s.flow, id="order-2")
    s.variant = "old"
    assert execute(s.flow, id="order-2") == ["charge:0", "crash:0", "ship:0"]
    assert s.bodies == ["charge", "crash", "ship"]
    assert run("order-2").status is RunStatus.COMPLETED


def test_changed_arguments_block_the_run() -> None:
    """The same task with other arguments at a recorded position is a divergence too."""

    def body(s: Scenario) -> list[str]:
        first = s.act("charge", 100 if s.variant == "old" else 200)
        return [first, s.act("crash")]

    s = Scenario(body)
    s.start("order-3")
    s.variant = "new"
    with pytest.raises(NondeterminismError, match="with different arguments"):
        execute(s.flow, id="order-3")


def test_reordered_calls_block_the_run() -> None:
    """Swapping two recorded calls diverges at the first of them."""

    def body(s: Scenario) -> list[str]:
        names = ["a", "b"] if s.variant == "old" else ["b", "a"]
        return [s.act(names[0]), s.act(names[1]), s.act("crash")]

    s = Scenario(body)
    s.start("order-4")
    s.variant = "new"
    with pytest.raises(NondeterminismError) as caught:
        execute(s.flow, id="order-4")
    assert caught.value.position == 0


def test_a_removed_call_blocks_the_run() -> None:
    """Code that ends before reaching recorded calls diverges instead of finishing."""

    def body(s: Scenario) -> list[str]:
        done = [s.act("a")]
        if s.variant == "old":
            done.append(s.act("b"))
            done.append(s.act("crash"))
        return done

    s = Scenario(body)
    s.start("order-5")
    s.variant = "new"
    with pytest.raises(NondeterminismError) as caught:
        execute(s.flow, id="order-5")
    assert caught.value.position == 1
    assert run("order-5").status is RunStatus.BLOCKED


def test_appending_calls_after_the_recorded_ones_is_safe() -> None:
    """A call added after everything recorded runs normally when the run resumes."""

    def body(s: Scenario) -> list[str]:
        done = [s.act("a"), s.act("crash")]
        if s.variant == "new":
            done.append(s.act("added"))
        return done

    s = Scenario(body)
    s.start("order-6")
    s.variant = "new"
    assert execute(s.flow, id="order-6") == ["a:0", "crash:0", "added:0"]


def test_swallowing_the_error_does_not_hide_the_divergence() -> None:
    """Workflow code that catches NondeterminismError still ends with the run blocked."""

    def body(s: Scenario) -> str:
        try:
            s.act("charge" if s.variant == "old" else "refund")
        except Exception:
            return "swallowed"
        s.act("crash")
        return "done"

    s = Scenario(body)
    s.start("order-7")
    s.variant = "new"
    with pytest.raises(NondeterminismError):
        execute(s.flow, id="order-7")
    assert run("order-7").status is RunStatus.BLOCKED


def test_recorded_errors_replay_as_the_same_type() -> None:
    """A recorded task failure is re-raised on replay as its own type, so except matches."""
    calls: list[str] = []
    crash = {"armed": True}

    @task
    def pay() -> None:
        calls.append("pay")
        raise PaymentDeclinedError(402, "card declined")

    @task
    def apologise(code: int) -> str:
        if crash["armed"]:
            crash["armed"] = False
            raise Crash
        calls.append("apologise")
        return f"sorry ({code})"

    @workflow
    def checkout() -> str:
        try:
            pay()
        except PaymentDeclinedError as error:
            return apologise(error.code)
        return "paid"

    with pytest.raises(Crash):
        execute(checkout, id="checkout")
    assert execute(checkout, id="checkout") == "sorry (402)"
    assert calls == ["pay", "apologise"]


def test_a_different_task_where_one_was_in_flight_blocks_the_run() -> None:
    """The process dies inside task b; the code now calls other at b's position. The
    start of b was recorded before its body ran, so resuming is a divergence naming
    both calls; other never runs. Reverting resumes the run: b runs again, once."""
    ran: list[str] = []
    variant = {"at_1": "b"}

    @task
    def a() -> str:
        ran.append("a")
        return "a"

    @task
    def b() -> str:
        ran.append("b")
        if ran.count("b") == 1:
            raise Crash  # the process dies inside the body
        return "b"

    @task
    def other() -> str:
        ran.append("other")
        return "other"

    @workflow
    def flow() -> list[str]:
        first = a()
        second = b() if variant["at_1"] == "b" else other()
        return [first, second]

    with pytest.raises(Crash):
        execute(flow, id="in-flight")
    variant["at_1"] = "other"
    with pytest.raises(NondeterminismError) as caught:
        execute(flow, id="in-flight")
    assert caught.value.position == 1
    assert b.name in caught.value.recorded and other.name in caught.value.current
    assert run("in-flight").status is RunStatus.BLOCKED
    variant["at_1"] = "b"
    assert execute(flow, id="in-flight") == ["a", "b"]
    assert ran == ["a", "b", "b"], "a ran once, b twice (once killed), other never"


def _the_advice_points_at_a_real_section(message: str) -> None:
    """The error sends the reader to a docs section: that page has that heading."""
    found = re.search(r"see (docs/[\w/.-]+\.md), '([^']+)'", message)
    assert found, f"no docs reference in: {message}"
    page = Path(__file__).resolve().parents[2] / found.group(1)
    headings = [line.lstrip("#").strip() for line in page.read_text().splitlines()
                if line.startswith("#")]  # fmt: skip
    assert found.group(2) in headings, f"{found.group(1)} has no section {found.group(2)!r}"
