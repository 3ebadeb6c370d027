"""`EventInvalid`: an event's payload that does not match the schema its run expects."""

from __future__ import annotations

from typing import Any

from ._base import DurableError


class EventInvalid(DurableError, ValueError):
    """An event's payload does not match the schema of the typed event its run expects
    (``wait(name, schema=...)`` or ``@workflow(events={name: ...})``).

    Raised by `durable.send` (and answered 400 by the REST API, a non-zero exit by
    ``durable send``): nothing was stored, the run did not see it. Inside a workflow,
    raised at the wait when a payload stored without validation (by a sender that
    could not know the schema) does not build the schema's instance: the event is
    consumed, and the workflow may catch the error.

    Attributes:
        run_id: the run the event was for.
        event: the event's name.
        errors: one ``{"loc": [...], "msg": ..., "type": ...}`` per field at fault
            (``loc`` the path to the field: keys and list indexes; empty for the whole
            payload), as a form shows them next to its fields.
    """

    __module__ = "durable.errors"

    run_id: str
    event: str
    errors: list[dict[str, Any]]

    def __init__(
        self, message: str, *, run_id: str = "", event: str = "", errors: Any = ()
    ) -> None:
        super().__init__(message, run_id=run_id, event=event, errors=list(errors))
