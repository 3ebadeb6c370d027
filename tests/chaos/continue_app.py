"""A workflow that continues as new at every step, for the hand-over crash tests.

Worker subprocesses import it (``durable worker tests.chaos.continue_app``). Its task
body writes the effect ledger (tests/e2e/workers_app.py `ledger`), so a test can count
how often each link's body ran.
"""

from __future__ import annotations

import durable
from durable import task, workflow
from tests.e2e.workers_app import ledger


@task
def link(i: int) -> int:
    ledger()
    return i + 1


@workflow
def chain(i: int, n: int) -> int:
    """One task per run, then the next run: counts from *i* to *n*."""
    j = link(i)
    if j < n:
        durable.continue_as_new(j, n)
    return j
