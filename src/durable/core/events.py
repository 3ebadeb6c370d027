"""The event record: what `send` leaves in a run's inbox, as it crosses the storage seam."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """An event sent to a run: kept in its inbox until a wait consumes it."""

    id: int
    run_id: str
    name: str
    payload: bytes
    sent_at: float
    sender: str | None = None
    key: str | None = None
    consumed_position: int | None = None
