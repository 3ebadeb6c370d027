"""Workflows the schedule tests (CLI, REST API, dashboard) put on schedules.

Importable by name (``tests.integration.schedule_workflows``), so a `durable schedule
trigger` in a fresh process registers them by itself (or with ``--import``).
"""

from __future__ import annotations

import datetime as dt

from durable import workflow


@workflow
def sync_customer(customer: str) -> str:
    """What an interval schedule runs: its argument back."""
    return f"synced {customer}"


@workflow
def nightly_report(at: dt.datetime) -> str:
    """What a cron schedule runs: the tick's time (``at=``, in the schedule's zone)."""
    return at.isoformat()
