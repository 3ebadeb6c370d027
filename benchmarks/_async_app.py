"""The workflows benchmarks/async_runs.py drains: each awaits one async task that
awaits *seconds* of I/O (an ``asyncio.sleep``)."""

import asyncio

from durable import task, workflow


@task
async def fetch(i: int, seconds: float) -> int:
    """Stand-in for an HTTP call or a query: awaits, holds no thread."""
    await asyncio.sleep(seconds)
    return i


@workflow
async def io_bound(i: int, seconds: float) -> int:
    """One durable async call, its result plus one."""
    return await fetch(i, seconds) + 1
