"""A scheduled workflow for the schedule kill storm (``durable worker
tests.e2e.schedule_app``): it records nothing but its tick, which its run id holds."""

from __future__ import annotations

import datetime as dt

from durable import workflow


@workflow
def ticked(at: dt.datetime) -> str:
    return at.isoformat()
