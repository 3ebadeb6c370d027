"""The workflow module of the client tests: only the worker subprocess imports it."""

from __future__ import annotations

from typing import Any

import durable


@durable.task
def price(item: str, quantity: int) -> int:
    """The price of an order line: one per letter of the item, per piece."""
    return len(item) * quantity


@durable.workflow
def order(item: str, quantity: int = 1, *, rush: bool = False) -> dict[str, Any]:
    """An order, priced by a task, then waiting for its confirmation event."""
    total = price(item, quantity)
    confirmed = durable.wait("confirm", timeout=60)
    return {"item": item, "total": total, "rush": rush, "confirmed": confirmed}
