"""Record the golden histories in this directory: ``python -m tests.histories.record``.

Run it only when a change is *meant* to alter what new runs record (and say so in the
CHANGELOG): the histories already here stand for runs that are live in someone's
database, and tests/test_golden_histories.py checks that today's code still replays
every one of them. Add a new file rather than overwrite an old one.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from examples import approval, crash_and_resume, hello

from durable.testing import DurableEnv, export_history

HERE = Path(__file__).resolve().parent


def _hello(env: DurableEnv) -> str:
    return env.dispatch(hello.pipeline, 3, id="hello-3").id


def _crash_and_resume(env: DurableEnv) -> str:
    with contextlib.chdir(os.environ.get("TMPDIR", "/tmp")):  # the example's ledger file
        return env.dispatch(crash_and_resume.three_steps, id="crash-demo").id


def _approval_timed_out(env: DurableEnv) -> str:
    handle = env.dispatch(approval.approval, "d1", id="approval-d1")
    env.advance(timedelta(seconds=5))
    return handle.id


def _approval_answered(env: DurableEnv) -> str:
    handle = env.dispatch(approval.approval, "d2", id="approval-d2")
    env.advance(timedelta(seconds=1))
    env.send(handle.id, "reviewed", {"verdict": "approved"})
    return handle.id


RECORDINGS: dict[str, Callable[[DurableEnv], str]] = {
    "hello-pipeline": _hello,
    "crash-and-resume-three-steps": _crash_and_resume,
    "approval-timed-out": _approval_timed_out,
    "approval-answered": _approval_answered,
}


def record(name: str) -> str:
    """Run one recording in a fresh DurableEnv; return its exported history."""
    with DurableEnv() as env, contextlib.redirect_stdout(io.StringIO()):
        run_id = RECORDINGS[name](env)
        env.run_until_idle()
        return export_history(run_id, engine=env.engine)


def main() -> None:
    for name in RECORDINGS:
        path = HERE / f"{name}.json"
        path.write_text(record(name) + "\n")
        print(f"wrote {path.relative_to(HERE.parents[1])}")


if __name__ == "__main__":
    main()
