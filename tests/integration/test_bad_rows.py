"""Bad rows on every backend: malicious pickles never run, corrupt payloads fail only
their run, large payloads work, and no password reaches a worker's output."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

import durable
from durable import RunStatus, Worker
from durable.core.serde import dumps
from durable.core.signing import Signer
from durable.errors import PayloadError, PickleRefused
from tests.conftest import BACKENDS
from tests.integration import bad_rows_app as app
from tests.unit._security_helpers import KEY, OTHER_KEY, evil_payload

SQL = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-pw"


@pytest.fixture(autouse=True)
def _no_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_SECRET_KEY", raising=False)
    monkeypatch.delenv("DURABLE_OLD_SECRET_KEYS", raising=False)


def execute_sql(url: str, statement: str, *params: Any) -> None:
    """Run raw SQL against the test database, as someone with write access would."""
    if url.startswith("sqlite"):
        # closing(): sqlite3's own context manager commits but leaves the file open.
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn, conn:
            conn.execute(statement, params)
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(statement.replace("?", "%s"), params)


def overwrite(
    engine: durable.Engine, url: str, run_id: str, column: str, data: bytes, *, position: int = -1
) -> None:
    """Replace one stored payload behind the engine's back (position -1: the run row)."""
    if url.startswith("memory"):
        backend: Any = engine.backend
        with backend._lock:
            if position < 0:
                backend._runs[run_id] = dataclasses.replace(backend._runs[run_id], **{column: data})
            else:
                steps = backend._history[run_id]
                steps[position] = dataclasses.replace(steps[position], **{column: data})
        return
    if position < 0:
        execute_sql(url, f"UPDATE durable_runs SET {column} = ? WHERE id = ?", data, run_id)
    else:
        execute_sql(
            url,
            f"UPDATE durable_history SET {column} = ? WHERE run_id = ? AND position = ?",
            data,
            run_id,
            position,
        )


def until(predicate: Any, what: str, timeout: float = 20.0) -> None:
    """Wait for *predicate()* to hold."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def status(engine: durable.Engine, run_id: str) -> RunStatus:
    run = engine.backend.get_run(run_id)
    assert run is not None
    return run.status


def suspended_after_one_step(engine: durable.Engine, *ids: str) -> None:
    """Run `two_phase` for each id on a worker until it waits for ``go`` (step 0 recorded)."""
    for run_id in ids:
        durable.dispatch(app.two_phase, run_id, id=run_id)
    with Worker(engine, poll=0.05):
        for run_id in ids:
            until(lambda r=run_id: status(engine, r) is RunStatus.WAITING, f"{run_id} waiting")


def recorded_error(engine: durable.Engine, run_id: str) -> BaseException:
    """The stored error of a finished run, rebuilt."""
    run = engine.wait_for_run(run_id, timeout=20)
    assert run.status is RunStatus.FAILED, f"{run_id} is {run.status}"
    return engine.load_error(engine.error_of(run), run_id, None)


@pytest.fixture
def configured(url: str) -> Iterator[Any]:
    """configure(url, **options) for the test, closed afterwards."""
    made: list[durable.Engine] = []

    def make(**options: Any) -> durable.Engine:
        engine = durable.configure(url, lease=5.0, **options)
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.close()


# -- malicious pickles --------------------------------------------------------------------


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
@pytest.mark.parametrize(
    "options",
    [{"secret_key": KEY, "allow_pickle": True}, {"allow_pickle": False}],
    ids=["signed", "no-pickle"],
)
def test_malicious_pickles_in_rows_never_run(
    url: str, options: dict[str, Any], configured: Any, tmp_path: Path
) -> None:
    """Pickles written into a run input or a step output by someone with database access,
    unsigned or signed with another key, are refused: the runs fail naming themselves and
    the code in the pickle never runs. Other runs complete."""
    engine = configured(**options)
    marker = tmp_path / "pwned"
    suspended_after_one_step(engine, "evil-step")
    for run_id in ("unsigned-input", "foreign-input", "fine"):
        durable.dispatch(app.greet, run_id, id=run_id)
    unsigned = evil_payload(marker, as_input=True)
    overwrite(engine, url, "unsigned-input", "input", unsigned)
    overwrite(engine, url, "foreign-input", "input", Signer(OTHER_KEY.encode()).sign(unsigned))
    overwrite(engine, url, "evil-step", "output", evil_payload(marker), position=0)
    durable.send("evil-step", "go")
    with Worker(engine, poll=0.05):
        assert engine.wait_for_run("fine", timeout=20).status is RunStatus.COMPLETED
        errors = {r: recorded_error(engine, r) for r in ("unsigned-input", "foreign-input")}
        errors["evil-step"] = recorded_error(engine, "evil-step")
    expected = None if options["allow_pickle"] else "pickling disabled"
    reasons = {
        "unsigned-input": "unsigned",
        "foreign-input": "unknown key",
        "evil-step": "unsigned",
    }
    for run_id, error in errors.items():
        assert isinstance(error, PickleRefused), f"{run_id}: {error!r}"
        assert error.run_id == run_id and f"run {run_id!r}" in str(error)
        assert error.reason == (expected or reasons[run_id])
    assert errors["evil-step"].position == 0  # type: ignore[attr-defined]
    with pytest.raises(PickleRefused):
        durable.get("unsigned-input").result(timeout=5)
    assert not marker.exists(), "the pickle's code ran"


# -- corrupt rows -------------------------------------------------------------------------

VALID_INPUT = dumps({"args": ["x"], "kwargs": {}}, allow_pickle=False, where="input")
BAD_INPUTS = {
    "in-garbage": b"\x00\xffgarbage",
    "in-truncated": VALID_INPUT[: len(VALID_INPUT) // 2],
    "in-header": b"X" + VALID_INPUT[1:],
    "in-empty": b"",
    "in-list": b"j[1,2,3]",
    "in-args": b'j{"args":5,"kwargs":{}}',
    "in-kwargs": b'j{"args":[],"kwargs":{"nope":1}}',
    "in-scalar": b"jnull",
}
BAD_OUTPUTS = {
    "out-garbage": b"\x00\xffgarbage",
    "out-truncated": b'j"fetched out-trunc',
    "out-header": b'Z"fetched"',
    "out-tag": b'j{"$durable":"tuple","v":5}',
    "out-unknown-tag": b'j{"$durable":"nosuch","v":1}',
    "out-class": b'j{"$durable":"dataclass","cls":"os:system","v":{}}',
}


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_corrupt_rows_fail_only_their_run_and_the_worker_goes_on(
    url: str, configured: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage, truncated, wrong-header and wrong-shape inputs and step outputs each fail
    their own run once (FAILED, naming run and position); the others complete and the
    worker keeps serving."""
    engine = configured()
    suspended_after_one_step(engine, *BAD_OUTPUTS, "out-fine")
    for run_id in (*BAD_INPUTS, "in-fine-1", "in-fine-2"):
        durable.dispatch(app.greet, run_id, id=run_id)
    for run_id, data in BAD_INPUTS.items():
        overwrite(engine, url, run_id, "input", data)
    for run_id, data in BAD_OUTPUTS.items():
        overwrite(engine, url, run_id, "output", data, position=0)
    for run_id in (*BAD_OUTPUTS, "out-fine"):
        durable.send(run_id, "go")
    with caplog.at_level(logging.ERROR, logger="durable"), Worker(engine, poll=0.05) as worker:
        for run_id in ("in-fine-1", "in-fine-2", "out-fine"):
            assert engine.wait_for_run(run_id, timeout=20).status is RunStatus.COMPLETED
        for run_id in BAD_INPUTS:
            error = recorded_error(engine, run_id)
            assert isinstance(error, PayloadError) and error.run_id == run_id, repr(error)
            assert repr(run_id) in str(error)
        for run_id in BAD_OUTPUTS:
            error = recorded_error(engine, run_id)
            assert isinstance(error, PayloadError) and error.run_id == run_id, repr(error)
            assert f"position 0 of run {run_id!r}" in str(error)
        assert worker._thread is not None and worker._thread.is_alive()
        handle = durable.dispatch(app.greet, "later", id="later")
        assert handle.result(timeout=20) == "hello later", "the worker keeps serving"
        time.sleep(0.3)  # a retried run would log again meanwhile
    for run_id in (*BAD_INPUTS, *BAD_OUTPUTS):
        logged = [r for r in caplog.records if f"run {run_id} failed" in r.getMessage()]
        assert len(logged) == 1, f"{run_id} failed {len(logged)} times; it must fail once"
        assert status(engine, run_id) is RunStatus.FAILED


@pytest.mark.parametrize("url", SQL, indirect=True)
def test_a_worker_process_survives_a_corrupt_input(url: str, tmp_path: Path) -> None:
    """`durable worker` fails the run with a corrupt input and keeps serving others."""
    engine = durable.configure(url, lease=5.0)
    log_path = tmp_path / "worker.log"
    try:
        for run_id in ("good-1", "bad", "good-2"):
            durable.dispatch(app.greet, run_id, id=run_id)
        overwrite(engine, url, "bad", "input", b"\x00garbage")
        with log_path.open("w") as log:
            worker = start_worker(url, log)
        try:
            for run_id in ("good-1", "good-2"):
                assert durable.get(run_id).result(timeout=30) == f"hello {run_id}"
            assert engine.wait_for_run("bad", timeout=30).status is RunStatus.FAILED
            assert worker.poll() is None, "the worker process must keep running"
            assert durable.dispatch(app.greet, "after", id="after").result(timeout=30)
        finally:
            stop(worker)
        assert worker.returncode == 0, log_path.read_text()
        output = log_path.read_text()
        assert "run bad failed" in output and "not a durable payload" in output
        assert "Traceback" not in output
    finally:
        engine.close()


# -- large payloads -----------------------------------------------------------------------


@pytest.mark.parametrize("url", BACKENDS, indirect=True)
def test_a_10_mb_payload_round_trips(url: str, configured: Any) -> None:
    """A 10 MB input, task output and result are stored and read back on every backend."""
    configured()
    value = "x" * 10_000_000
    assert durable.execute(app.echo_big, value, id="big") == value
    assert durable.execute(app.echo_big, value, id="big") == value, "joined: read back"


# -- passwords ----------------------------------------------------------------------------


def start_worker(url: str, log: Any, *extra: str) -> subprocess.Popen[str]:
    """`durable worker` for the bad-rows app at DEBUG, its stderr into *log*."""
    command = [sys.executable, "-m", "durable", "worker", "tests.integration.bad_rows_app"]
    return subprocess.Popen(
        [*command, "--db", url, "--log-level", "DEBUG", "--concurrency", "2", *extra],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=log,
        text=True,
    )


def stop(worker: subprocess.Popen[str]) -> None:
    """SIGTERM the worker this test started and reap it."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(10)


def test_cli_does_not_print_the_password_of_an_unreachable_database(tmp_path: Path) -> None:
    """`durable worker --db` with a password, on a port nobody listens on: a clear error
    that names the masked URL, and no password."""
    url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:1/test"
    log_path = tmp_path / "worker.log"
    with log_path.open("w") as log:
        worker = start_worker(url, log)
        worker.wait(60)
    output = log_path.read_text()
    assert worker.returncode == 1, output
    assert "postgres:***@127.0.0.1:1" in output and "Cannot connect" in output
    assert PASSWORD not in output


@pytest.mark.postgres
def test_cli_does_not_print_a_password_the_server_ignores(
    pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """With a password in the URL (trust auth ignores it), neither the worker's DEBUG log,
    nor this process's logs and reprs, hold the password."""
    parts = urlsplit(pg_url)
    host = parts.netloc.rsplit("@", 1)[-1]
    user = (parts.username or "postgres") if "@" in parts.netloc else "postgres"
    url = urlunsplit(parts._replace(netloc=f"{user}:{PASSWORD}@{host}"))
    with caplog.at_level(logging.DEBUG):
        engine = durable.configure(url, lease=5.0)
        try:
            log_path = tmp_path / "worker.log"
            with log_path.open("w") as log:
                worker = start_worker(url, log)
            try:
                handle = durable.dispatch(app.greet, "pw", id="pw")
                assert handle.result(timeout=30) == "hello pw"
            finally:
                stop(worker)
            texts = [repr(engine), repr(engine.backend), str(getattr(engine.backend, "url", ""))]
        finally:
            engine.close()
    output = log_path.read_text()
    assert worker.returncode == 0, output
    assert "stopped" in output, "the worker logs: the check must see them"
    assert PASSWORD not in output
    assert all(PASSWORD not in text for text in texts)
    assert all(PASSWORD not in r.getMessage() for r in caplog.records)
