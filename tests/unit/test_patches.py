"""`durable.patched` / `deprecate_patch`: a change shipped under live runs, each run
keeping the branch its history took; ``on_divergence="fail"``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import durable
from durable import RunStatus, StepKind, execute, task, workflow
from durable.errors import NondeterminismError
from durable.ops import Operations
from tests.unit.helpers import Crash, history, run

pytestmark = pytest.mark.usefixtures("memory_engine")


class Deploy:
    """A checkout workflow whose code is 'deployed' by flipping ``code``: "v1" (no
    fraud check), "v2" (the check behind ``patched``), "v3" (``deprecate_patch``)."""

    def __init__(self, body: Callable[[Deploy], Any] | None = None) -> None:
        self.code = "v1"
        self.crash_at: str | None = None
        self.bodies: list[str] = []
        deploy = self

        @task
        def act(name: str) -> str:
            if name == deploy.crash_at:
                deploy.crash_at = None
                raise Crash
            deploy.bodies.append(name)
            return name

        self.act = act

        def checkout(d: Deploy) -> list[str]:
            done = [d.act("charge")]
            if d.code == "v2":
                if durable.patched("fraud-check"):
                    done.append(d.act("fraud"))
            elif d.code == "v3":
                durable.deprecate_patch("fraud-check")
                done.append(d.act("fraud"))
            done.append(d.act("ship"))
            return done

        chosen = body or checkout

        @workflow
        def flow() -> Any:
            return chosen(deploy)

        self.flow = flow

    def start(self, run_id: str, crash_at: str) -> None:
        """Run until the process 'dies' in task *crash_at*."""
        self.crash_at = crash_at
        with pytest.raises(Crash):
            execute(self.flow, id=run_id)


def _kinds(run_id: str) -> list[tuple[str, str]]:
    return [(step.kind.value, step.name.rsplit(".", 1)[-1]) for step in history(run_id)]


def test_a_run_past_the_patch_point_keeps_the_old_branch_and_new_runs_take_the_new() -> None:
    d = Deploy()
    d.start("old", crash_at="ship")  # v1 went past the point: charge done, ship started
    d.code = "v2"
    assert execute(d.flow, id="old") == ["charge", "ship"], "the old branch, no divergence"
    assert [kind for kind, _ in _kinds("old")] == ["task", "task"], "no marker, no position"
    d.bodies.clear()
    assert execute(d.flow, id="new") == ["charge", "fraud", "ship"]
    assert d.bodies == ["charge", "fraud", "ship"]
    assert _kinds("new") == [("task", "act"), ("patch", "fraud-check"), ("task", "act"),
                             ("task", "act")]  # fmt: skip


def test_a_run_that_recorded_the_marker_takes_the_new_branch_on_every_replay() -> None:
    d = Deploy()
    d.code = "v2"
    d.start("r", crash_at="ship")  # the marker and fraud are recorded, ship started
    d.bodies.clear()
    assert execute(d.flow, id="r") == ["charge", "fraud", "ship"]
    assert d.bodies == ["ship"], "recorded calls are replayed, not run again"


def test_a_run_that_had_not_reached_the_point_takes_the_new_branch() -> None:
    d = Deploy()
    d.start("early", crash_at="charge")  # v1 died before the point
    d.code = "v2"
    assert execute(d.flow, id="early") == ["charge", "fraud", "ship"]
    assert ("patch", "fraud-check") in _kinds("early")


def test_the_marker_rides_with_the_next_write_and_a_crash_before_it_decides_again() -> None:
    d = Deploy()
    d.code = "v2"
    d.start("r", crash_at="fraud")  # charge's result, the marker and fraud's start: one write
    assert _kinds("r") == [("task", "act"), ("patch", "fraud-check"), ("task", "act")]
    assert history("r")[2].status.value == "running"
    assert execute(d.flow, id="r") == ["charge", "fraud", "ship"]


def test_deprecate_patch_replays_marked_runs_and_records_nothing_for_new_ones() -> None:
    d = Deploy()
    d.code = "v2"
    d.start("marked", crash_at="ship")
    d.code = "v3"
    assert execute(d.flow, id="marked") == ["charge", "fraud", "ship"]
    assert execute(d.flow, id="fresh") == ["charge", "fraud", "ship"]
    assert ("patch", "fraud-check") not in _kinds("fresh")


def test_deprecate_patch_with_a_run_still_on_the_old_side_diverges() -> None:
    d = Deploy()
    d.start("old", crash_at="ship")
    d.code = "v3"
    with pytest.raises(NondeterminismError) as caught:
        execute(d.flow, id="old")
    assert caught.value.position == 1
    assert run("old").status is RunStatus.BLOCKED


def test_durable_check_counts_the_runs_on_each_side() -> None:
    d = Deploy()
    for run_id in ("old-1", "old-2"):
        d.start(run_id, crash_at="ship")
    d.code = "v2"
    d.start("new-1", crash_at="ship")
    d.code = "v1"
    d.start("before", crash_at="charge")  # has not reached the point
    d.code = "v2"
    results = {r["run_id"]: r for r in Operations(durable.get_engine()).check()}
    assert {k: r["patches"] for k, r in results.items()} == {
        "old-1": {"fraud-check": "old"},
        "old-2": {"fraud-check": "old"},
        "new-1": {"fraud-check": "new"},
        "before": {},
    }
    assert all(r["ok"] for r in results.values())


def test_a_patch_in_a_loop_answers_the_same_and_two_places_are_refused() -> None:
    def looping(d: Deploy) -> list[bool]:
        return [durable.patched("p") for _ in range(3)]

    d = Deploy(looping)
    assert execute(d.flow) == [True, True, True]

    def twice(d: Deploy) -> bool:
        first = durable.patched("p")
        return first and durable.patched("p")

    with pytest.raises(ValueError, match=r"'p' is used at two places .*test_patches.py:\d+"):
        execute(Deploy(twice).flow)


@pytest.mark.parametrize(
    ("patch_id", "error", "match"),
    [(3, TypeError, "as a string"), ("", ValueError, "non-empty"),
     ("a\x00b", durable.errors.InvalidValue, "NUL")],
)  # fmt: skip
def test_bad_patch_ids_are_refused(patch_id: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        durable.patched(patch_id)


def test_patched_in_a_task_is_refused_and_outside_a_workflow_is_true() -> None:
    @task
    def inner() -> bool:
        return durable.patched("x")

    @workflow
    def outer() -> bool:
        return inner()

    with pytest.raises(TypeError, match="task body is not replayed"):
        execute(outer)
    assert durable.patched("x") is True


def test_on_divergence_fail_ends_the_run_failed_with_the_error() -> None:
    state = {"code": "old"}

    @task
    def act(name: str) -> str:
        if name == "crash":
            raise Crash
        return name

    @workflow(on_divergence="fail")
    def strict() -> list[str]:
        return [act("a" if state["code"] == "old" else "b"), act("crash")]

    with pytest.raises(Crash):
        execute(strict, id="s")
    state["code"] = "new"
    with pytest.raises(NondeterminismError):
        execute(strict, id="s")
    assert run("s").status is RunStatus.FAILED
    with pytest.raises(NondeterminismError, match="diverged from its history at position 0"):
        durable.get("s").result(timeout=1)


def test_on_divergence_takes_block_or_fail_only() -> None:
    with pytest.raises(ValueError, match="choose 'block'"):
        workflow(on_divergence="retry")
    assert StepKind.PATCH.value == "patch"


def test_the_check_report_groups_by_version_and_counts_each_patch() -> None:
    from durable.cli.check import by_version, summary

    def result(run_id: str, version: str | None, ok: bool, patches: dict[str, str]) -> Any:
        return {"run_id": run_id, "version": version, "ok": ok, "patches": patches}

    results = by_version([
        result("a", None, True, {}),
        result("b", "v2", True, {"fraud-check": "new"}),
        result("c", "v1", False, {}),
        result("d", "v1", True, {"fraud-check": "old"}),
    ])  # fmt: skip
    assert [r["run_id"] for r in results] == ["c", "d", "b", "a"]
    assert summary(results) == [
        "4 checked: 1 would diverge.",
        "  version v1: 2 checked, 1 would diverge.",
        "  version v2: 1 checked, 0 would diverge.",
        "  no version: 1 checked, 0 would diverge.",
        "patch 'fraud-check': 1 run(s) on the old branch, 1 on the new: keep its old branch "
        "until they finish.",
    ]
    results[1]["patches"] = {"fraud-check": "new"}  # d moves to the new side
    assert summary(results[1:3])[-1].endswith("its old branch can go (deprecate_patch).")
