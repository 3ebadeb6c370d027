"""The flow board's rules, with no engine: readiness, max_running, failures that block
what depends on them, human answers, restarts, and the snapshot a flow publishes and
the next run of its chain starts from (a restored board must be the same board)."""

from __future__ import annotations

import random

import pytest

from durable.errors import BadAnswer, FlowRefused, UnknownTask
from durable.flows.board import Board
from durable.flows.spec import FlowSpec, loads
from tests.e2e.flow_ledger import random_dag

STATUS_LETTERS = dict(
    not_ready="n", ready="y", waiting="w", running="r", finished="f", failed="x", killed="k"
)


def spec_of(dag: dict[str, tuple[str, ...]], max_running: int | None = 8, human=()) -> FlowSpec:
    lines = ['[flow]\nname = "x"'] + ([f"max_running = {max_running}"] if max_running else [])
    for name, deps in dag.items():
        if name in human:
            lines.append(f'[task.{name}]\nkind = "human"\nform = {{ ok = "bool" }}')
        else:
            lines.append(f'[task.{name}]\ncommand = ["true"]')
        if deps:
            lines.append("depends_on = [" + ", ".join(f'"{d}"' for d in deps) + "]")
    return loads("\n".join(lines))


def check(board: Board, limit: int | None) -> None:
    """The board's incremental bookkeeping agrees with its statuses."""
    running = [n for n in board.names if board.status[n] == "running"]
    assert all(n in board.runs for n in running)
    assert board.counts() == {
        s: c for s in set(board.status.values()) if (c := list(board.status.values()).count(s))
    }
    assert board.snapshot()["codes"] == "".join(
        STATUS_LETTERS[board.status[n]] for n in board.names
    )
    if limit is not None:
        assert len(running) <= limit
    for name in board.names:
        deps = board.spec.tasks[name].depends_on
        if board.status[name] in ("ready", "waiting", "running"):
            assert all(board.status[d] == "finished" for d in deps), name


def same(a: Board, b: Board) -> None:
    """The same board, but that a restored one makes its ready tasks ready again at its
    first `advance` (they were not started yet)."""

    def settled(board: Board) -> dict[str, str]:
        return {n: "not_ready" if s == "ready" else s for n, s in board.status.items()}

    assert settled(a) == settled(b) and a.runs == b.runs
    assert a.launches == b.launches and a.attempts == b.attempts


@pytest.mark.parametrize("seed", range(6))
def test_a_random_flow_runs_to_its_end_across_restores_failures_and_restarts(seed: int) -> None:
    """Random endings (some failing), restarts of failed tasks, and a snapshot and
    restore every few events (as a chain hands over): every step keeps the rules, and
    the flow completes with every task finished."""
    rng = random.Random(seed)
    dag = random_dag(150, seed)
    board = Board(spec_of(dag), "f")
    position = link = 0
    for _ in range(5000):
        launches, asked = board.advance()
        assert not asked
        for launch in launches:
            position += 1
            board.started(launch.task, f"f{'~' + str(link) if link else ''}/{position}")
        check(board, 8)
        if board.complete:
            break
        running = [n for n in board.names if board.status[n] == "running"]
        if running:
            name = rng.choice(running)
            status = "failed" if rng.random() < 0.1 else "finished"
            assert board.ended(name, board.runs[name], {"status": status, "attempts": 1})
            assert not board.ended(name, board.runs[name], {"status": "finished"})  # stale
        else:
            assert board.stuck
            failed = [n for n in board.names if board.status[n] == "failed"]
            again = board.restart(rng.choice(failed))
            assert all(board.status[n] == "not_ready" for n in again)
        if rng.random() < 0.1:
            link += 1
            restored = Board.restore(board.spec, board.snapshot(), "f")
            same(board, restored)
            board = restored
    assert board.complete and not board.stuck


def test_max_running_and_file_order() -> None:
    """Independent tasks start in file order, at most max_running at once; each end
    frees one slot."""
    board = Board(spec_of({f"t{i}": () for i in range(5)}, max_running=2), "f")
    launches, _ = board.advance()
    assert [x.task for x in launches] == ["t0", "t1"]
    for i, x in enumerate(launches):
        board.started(x.task, f"f/{i}")
    assert board.advance() == ([], []) and board.status["t2"] == "ready"
    board.ended("t1", "f/1", {"status": "finished"})
    assert [x.task for x in board.advance()[0]] == ["t2"]


def test_a_failure_blocks_only_what_depends_on_it() -> None:
    board = Board(spec_of({"a": (), "b": ("a",), "c": ()}), "f")
    for i, x in enumerate(board.advance()[0]):
        board.started(x.task, f"f/{i}")
    board.ended("a", "f/0", {"status": "failed"})
    assert not board.stuck  # c still runs
    board.ended("c", "f/1", {"status": "finished"})
    assert board.advance() == ([], []) and board.stuck and not board.complete
    assert board.status == {"a": "failed", "b": "not_ready", "c": "finished"}


def test_human_tasks_wait_for_a_checked_answer() -> None:
    board = Board(spec_of({"a": (), "ok": ("a",), "b": ("ok",)}, human={"ok"}), "f")
    with pytest.raises(FlowRefused, match=r"not waiting.*waits for a"):
        board.check_done("ok", "finished", {"ok": True})
    board.started(board.advance()[0][0].task, "f/0")
    board.ended("a", "f/0", {"status": "finished"})
    assert board.advance() == ([], ["ok"]) and board.status["ok"] == "waiting"
    with pytest.raises(BadAnswer, match="ok"):
        board.done("ok", "finished", {"ok": "yes"}, "qa", 1.0)
    with pytest.raises(UnknownTask, match="its tasks: a, ok, b"):
        board.done("nope", "finished", {}, "qa", 1.0)
    with pytest.raises(FlowRefused, match="command task"):
        board.check_done("a", "finished", {})
    board.done("ok", "finished", {"ok": True}, "qa", 1.0)
    assert board.inputs("b") == {"ok": {"ok": True}}
    assert [x.task for x in board.advance()[0]] == ["b"]


def test_restart_refuses_a_running_task_and_running_descendants() -> None:
    board = Board(spec_of({"a": (), "b": ("a",)}), "f")
    board.started("a", "f/0")
    with pytest.raises(FlowRefused, match="Kill it first"):
        board.check_restart("a")
    board.ended("a", "f/0", {"status": "finished"})
    board.advance()
    board.started("b", "f/1")
    with pytest.raises(FlowRefused, match="would run b again, which is running now"):
        board.check_restart("a")


def test_a_snapshot_stays_small_and_packs_run_ids_with_spaces() -> None:
    """A 1,000-task board publishes a few KiB; run ids (which may hold spaces) are
    packed as link/position and come back whole."""
    board = Board(spec_of({f"t{i}": () for i in range(1000)}, max_running=None), "my flow")
    for i, x in enumerate(board.advance()[0]):
        board.started(x.task, f"my flow~3/{i}")
    snapshot = board.snapshot()
    assert len(str(snapshot)) < 20_000
    restored = Board.restore(board.spec, snapshot, "my flow")
    assert restored.runs["t999"] == "my flow~3/999"
    same(board, restored)
