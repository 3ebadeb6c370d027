"""Shipping a change under live runs with `durable.patched` (issue 17), end to end: a
v1 worker leaves runs waiting, a v2 worker with a patched branch finishes them on the
old branch and runs new ones on the new branch, `durable check` counts each side, and
a v3 worker with `deprecate_patch` finishes the marked runs. SQLite and PostgreSQL."""

from __future__ import annotations

import subprocess
import sys

import pytest

import durable
from durable import RunStatus
from tests.e2e.deploy_app import checkout
from tests.e2e.harness import ROOT, Children
from tests.e2e.test_workers import stop_all, until

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.e2e, pytest.mark.parametrize("url", SQL, indirect=True)]
APP = "tests.e2e.deploy_app"


def worker(children: Children, code: str) -> subprocess.Popen[str]:
    """``durable worker`` on the code of deploy *code*."""
    command = ["-m", "durable", "worker", APP, "--db", children.url]
    return children.spawn([*command, "--log-level", "INFO"], DURABLE_TEST_CODE=code)


def check(children: Children, code: str) -> tuple[int, list[str]]:
    """``durable check`` with the code of deploy *code*: exit code and closing lines."""
    result = subprocess.run(
        [sys.executable, "-m", "durable", "check", APP, "--db", children.url],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
        env={**children.environment(), "DURABLE_TEST_CODE": code},
    )  # fmt: skip
    return result.returncode, result.stdout.splitlines()


def waiting(engine: durable.Engine, *run_ids: str) -> bool:
    return all(engine.reread(r).status is RunStatus.WAITING for r in run_ids)


def ran(children: Children) -> dict[str, list[tuple[str, str]]]:
    """Per order, the (step, code) of every task body that ran, in order."""
    found: dict[str, list[tuple[str, str]]] = {}
    for line in children.ledger.read_text().splitlines():
        order, step, code, _pid = line.split()
        found.setdefault(order, []).append((step, code))
    return found


def test_a_patched_deploy_under_live_runs(children: Children, engine: durable.Engine) -> None:
    old = ["o-1", "o-2", "o-3"]
    v1 = worker(children, "v1")
    for order in old:
        durable.dispatch(checkout, order, id=order)
    until(lambda: waiting(engine, *old), 60, "the v1 runs to wait")
    stop_all(children, [v1])

    code, lines = check(children, "v2")
    assert code == 0, lines
    assert "patch 'fraud-check': 3 run(s) on the old branch, 0 on the new: keep its old " \
        "branch until they finish." in lines  # fmt: skip

    v2 = worker(children, "v2")
    new = ["n-1", "n-2"]
    for order in new:
        durable.dispatch(checkout, order, id=order)
    until(lambda: waiting(engine, *new), 60, "the v2 runs to wait")
    assert check(children, "v2")[1][-1].startswith(
        "patch 'fraud-check': 3 run(s) on the old branch, 2 on the new"
    )
    for order in old:
        durable.send(order, "packed")
    for order in old:
        assert durable.get(order).result(timeout=60) == [f"charge:{order}", f"ship:{order}"]
    assert check(children, "v2")[1][-1] == (
        "patch 'fraud-check': 0 run(s) on the old branch, 2 on the new: its old branch can "
        "go (deprecate_patch)."
    )
    stop_all(children, [v2])

    v3 = worker(children, "v3")
    for order in new:
        durable.send(order, "packed")
    durable.dispatch(checkout, "n-3", id="n-3")
    until(lambda: waiting(engine, "n-3"), 60, "the v3 run to wait")
    durable.send("n-3", "packed")
    for order in [*new, "n-3"]:
        assert durable.get(order).result(timeout=60) == [
            f"charge:{order}", f"fraud:{order}", f"ship:{order}"
        ]  # fmt: skip
    stop_all(children, [v3])

    bodies = ran(children)
    for order in old:  # no fraud check, ever: their history went past the point on v1
        assert bodies[order] == [("charge", "v1"), ("ship", "v2")]
    for order in new:  # marked on v2, finished on v3 without running anything twice
        assert bodies[order] == [("charge", "v2"), ("fraud", "v2"), ("ship", "v3")]
    assert bodies["n-3"] == [("charge", "v3"), ("fraud", "v3"), ("ship", "v3")]
    kinds = [step.kind.value for step in engine.backend.load_history("n-3")]
    assert "patch" not in kinds and [s.kind.value for s in engine.backend.load_history(
        "n-1")].count("patch") == 1  # fmt: skip
