"""PostgreSQL's one-statement claim of a limited queue (`claim_unlocked`): its snapshot
is taken before it can lock the queue's row, so a claimer that commits in between must
make it claim nothing (then the locked way, with a fresh snapshot, decides)."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import psycopg
import pytest

from durable.backends.sql import SQLBackend
from durable.core.queues import Queue
from durable.core.records import RunStatus
from durable.testing._conformance import _queued

pytestmark = pytest.mark.postgres


def test_a_claim_committed_after_the_snapshot_is_seen(pg_url: str) -> None:
    backend = SQLBackend(pg_url)
    try:
        backend.put_queue(Queue(name="q", key_concurrency=1))
        backend.create_run(dataclasses.replace(_queued("r1", queue="q"), key="k"))
        with psycopg.connect(pg_url) as other:
            # Another claimer, between its claim and its commit: it wrote the queue's
            # row (as every claimer does) and started r1 of key k.
            other.execute("UPDATE durable_queues SET name = name WHERE name = 'q'")
            other.execute(
                "UPDATE durable_runs SET status = 'running', lease_owner = 'other', "
                "epoch = epoch + 1, lease_until = extract(epoch from now()) + 60 "
                "WHERE id = 'r1'"
            )
            # A run of the same key ahead of r1, which that claimer never saw.
            ahead = dataclasses.replace(_queued("r0", queue="q"), key="k", priority=10)
            backend.create_run(ahead)
            got: list[Any] = []
            claim = threading.Thread(
                target=lambda: got.extend(
                    backend.claim_next(
                        owner="me", queue="q", workflows=["app.workflow"], limit=5, lease=30
                    )
                )
            )
            claim.start()
            time.sleep(0.5)  # the claim has its snapshot, and waits for the row
            other.commit()
            claim.join(10)
        assert got == [], "key k has its one run running (r1): r0 must wait"
        assert backend.get_run("r0").status is RunStatus.QUEUED  # type: ignore[union-attr]
    finally:
        backend.close()
