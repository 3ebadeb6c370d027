"""A stream's writer killed with SIGKILL mid-stream: after another worker recovers the
run, a reader started before the writer has every value exactly once, in order."""

from __future__ import annotations

import subprocess
import threading
from typing import Any

import pytest

import durable
from durable.core.records import RunStatus
from tests.e2e.checker import check
from tests.e2e.harness import Children
from tests.e2e.streams_app import streamer

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
pytestmark = [pytest.mark.e2e, pytest.mark.untimed]

COUNT = 10
KILL_AT = 5


def worker(children: Children, url: str, **env: str) -> subprocess.Popen[str]:
    """``durable worker tests.e2e.streams_app`` on the test's database."""
    command = ["-m", "durable", "worker", "tests.e2e.streams_app", "--db", url]
    return children.spawn([*command, "--lease", "2", "--concurrency", "1"], **env)


class Reader(threading.Thread):
    """Reads the run's stream in this process, from before the run starts."""

    def __init__(self, engine: durable.Engine, run_id: str) -> None:
        super().__init__(daemon=True)
        self.stream = durable.Handle(engine, run_id).stream("values")
        self.values: list[Any] = []
        self.changed = threading.Condition()
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            for value in self.stream:
                with self.changed:
                    self.values.append(value)
                    self.changed.notify_all()
        except BaseException as error:
            self.error = error

    def until(self, count: int, timeout: float = 30) -> list[Any]:
        with self.changed:
            self.changed.wait_for(lambda: len(self.values) >= count, timeout)
            return list(self.values)


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_sigkill_mid_stream_loses_and_duplicates_nothing(children: Children, url: str) -> None:
    with durable.Engine(url) as engine:
        engine.dispatch_call(streamer.bind(COUNT), run_id="streamed")
        reader = Reader(engine, "streamed")
        victim = worker(
            children, url, DURABLE_TEST_PAUSE="in-stream-step", DURABLE_TEST_KILL_AT=str(KILL_AT)
        )
        children.wait_for_pause("in-stream-step")
        # Value KILL_AT is written before its task: the reader has it while the task runs.
        assert reader.until(KILL_AT + 1) == list(range(KILL_AT + 1)), "read live"
        children.kill(victim)
        run = engine.backend.get_run("streamed")
        assert run is not None and run.status is RunStatus.RUNNING, "left to be recovered"
        survivor = worker(children, url)
        reader.join(60)
        assert not reader.is_alive(), f"the reader did not end: {reader.values}"
        assert reader.error is None, reader.error
        assert reader.values == list(range(COUNT)), "each value once, in order"
        info = [(s.name, s.length, s.closed) for s in engine.backend.streams("streamed")]
        assert info == [("values", COUNT, True)]
        again = list(durable.Handle(engine, "streamed").stream("values"))
        assert again == list(range(COUNT)), "a reader after the end reads the same"
    survivor.terminate()
    assert survivor.wait(60) == 0, children.log(survivor)
    report = check(url, children.ledger, {"streamed": list(range(COUNT))}, killed=[victim.pid])
    assert report.repeated == 1, "only the task the victim was killed in ran again"
