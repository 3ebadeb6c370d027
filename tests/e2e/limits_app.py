"""Workflows for the flow-control kill storm (``durable worker tests.e2e.limits_app``).

`held` runs one task that holds its slot for a while; the task body writes a line
when it starts and one when it ends (``start|end <run> <pid> <time>``) to the file
DURABLE_LIMITS_LOG names, so the test can rebuild which bodies ran at once. A body
killed with its worker has no end: the test ends it at the kill. `quick` does nothing:
the rate test counts starts from the database.
"""

from __future__ import annotations

import os
import time

import durable
from durable import task, workflow


def _note(what: str, run_id: str) -> None:
    line = f"{what} {run_id} {os.getpid()} {time.time():.6f}\n"
    with open(os.environ["DURABLE_LIMITS_LOG"], "a") as log:
        log.write(line)


@task
def hold(seconds: float) -> None:
    info = durable.info()
    assert info is not None
    _note("start", info.run_id)
    time.sleep(seconds)
    _note("end", info.run_id)


@workflow
def held(seconds: float) -> None:
    hold(seconds)


@workflow
def quick() -> None:
    return None
