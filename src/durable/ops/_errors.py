"""The errors of the operations layer: each knows its HTTP status and CLI exit code,
so the REST API and the command line report the same failure the same way."""

from __future__ import annotations

from durable.errors import DurableError


class OpsError(DurableError):
    """An operation could not be done; the message says why and what to do."""

    status = 500
    exit_code = 1


class BadRequest(OpsError):
    """The request itself is wrong: bad arguments, a payload that cannot be stored."""

    status = 400
    exit_code = 2


class NotFound(OpsError):
    """No such run, or no such workflow registered in this process."""

    status = 404
    exit_code = 3


class Conflict(OpsError):
    """The run is not in a state that allows the operation (retrying a completed run,
    cancelling or pausing a finished one, resuming one that is not paused, sending to
    a finished one)."""

    status = 409
    exit_code = 4


def no_run(run_id: str) -> str:
    """The message of the `NotFound` for an unknown run id."""
    return f"No run has the id {run_id!r}; `durable ls` lists the runs there are."
