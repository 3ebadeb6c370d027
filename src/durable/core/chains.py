"""The ids of a continue-as-new chain: a pure function of the run that hands over.

A run that calls `durable.continue_as_new()` ends CONTINUED, and its successor goes on
with the new arguments. The successor of run ``B`` (the chain's base, any id) is
``B~1``, then ``B~2``...: the successor of ``X~n`` is ``X~(n+1)``. Because the id is
computed, not drawn, a hand-over made again after a crash names the same successor,
and creating it is idempotent: a chain never forks. Users cannot choose ids of this
form (`durable.core.run_options.check_run_id`), so no other run can take one.
"""

from __future__ import annotations

import re

from durable.errors import IdempotencyConflict

_LINK = re.compile(r"(.*)~([0-9]+)", re.DOTALL)


def is_chain_form(run_id: str) -> bool:
    """Whether *run_id* has the form of a chain's successor: ``<anything>~<digits>``."""
    return _LINK.fullmatch(run_id) is not None


def split(run_id: str) -> tuple[str, int]:
    """The chain's base id and this run's place in it (0 for the base itself)."""
    match = _LINK.fullmatch(run_id)
    if match is None:
        return run_id, 0
    return match.group(1), int(match.group(2))


def successor_id(run_id: str) -> str:
    """The id of the run that continues *run_id*: ``B`` -> ``B~1``, ``B~n`` -> ``B~(n+1)``."""
    base, link = split(run_id)
    return f"{base}~{link + 1}"


def predecessor_id(run_id: str) -> str | None:
    """The id of the run that *run_id* continues, or None for a chain's base."""
    base, link = split(run_id)
    if link == 0:
        return None
    return base if link == 1 else f"{base}~{link - 1}"


def successor_taken(successor: str, run_id: str) -> IdempotencyConflict:
    """The error of a hand-over whose successor's id belongs to another run (one made
    with that id before such ids were reserved): the backends raise it."""
    return IdempotencyConflict(
        f"Run {run_id!r} cannot continue as new: its successor's id {successor!r} "
        "belongs to another run, created with that id before ids ending in '~' and "
        "digits were reserved for continue-as-new chains. Cancel and purge that run, "
        "then retry this one.",
        run_id=successor,
    )
