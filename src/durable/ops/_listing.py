"""A listing's filters as a `RunQuery`, and the cursor of its next page."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from typing import Any

from durable.core.attributes import filters
from durable.core.records import Run, RunQuery, RunStatus

from ._errors import BadRequest


def run_query(
    *,
    workflow: str | None,
    status: Iterable[str],
    queue: str | None,
    since: float | None,
    until: float | None,
    parent: str | None,
    search: str | None,
    version: str | None,
    attributes: Mapping[str, Any] | None = None,
) -> RunQuery:
    """The `RunQuery` of a listing's filters, checked: *attributes* maps keys to the
    values to match (typed, or as text: ``{"n": "5"}`` matches the int 5).

    Raises:
        BadRequest: an unknown status, or an attribute key that cannot be one.
    """
    statuses = []
    for name in status:
        try:
            statuses.append(RunStatus(name))
        except ValueError:
            known = ", ".join(s.value for s in RunStatus)
            raise BadRequest(f"Unknown status {name!r}: use one of {known}.") from None
    return RunQuery(
        workflow=workflow or None,
        statuses=tuple(statuses),
        queue=queue or None,
        since=since,
        until=until,
        parent_id=parent or None,
        id_contains=search or None,
        version=version or None,
        attributes=_filters(attributes or {}),
    )


def _filters(attributes: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    try:
        return filters(attributes)
    except (TypeError, ValueError) as error:
        raise BadRequest(str(error)) from None


def encode_cursor(run: Run) -> str:
    text = json.dumps([run.created_at, run.id])
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, run_id = json.loads(base64.urlsafe_b64decode(padded))
        return float(created), str(run_id)
    except (ValueError, TypeError, RecursionError, binascii.Error):
        raise BadRequest(
            f"The cursor {cursor!r} is not one this API gave out; start again without it."
        ) from None
