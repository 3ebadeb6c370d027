"""How `durable history` marks where a run's properties changed.

A step that stored a snapshot of the run's properties (its ``state``) gets a STATE
cell saying what changed since the snapshot before it: ``key=value`` (the value as
JSON) for a property set or changed, ``-key`` for one that is gone. The column only
shows for a run that published properties, so other histories read as before."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .output import Column, Row, field

#: The key `changes` gives each row it marks (not a field of the Step shape).
CHANGES = "state_changes"

STATE_COLUMN = Column("STATE", 50, field(CHANGES))


def columns_with_state(columns: Sequence[Column]) -> tuple[Column, ...]:
    """*columns* with STATE before the last one (the wide result column)."""
    return (*columns[:-1], STATE_COLUMN, *columns[-1:])


def changes(steps: Sequence[Row]) -> list[Row]:
    """*steps*, each that carries a snapshot with ``state_changes`` added: what changed
    from the snapshot before it (the first from none), ``(unchanged)`` if nothing did."""
    shown: list[Row] = []
    before: Mapping[str, Any] = {}
    for step in steps:
        state = step.get("state")
        if not isinstance(state, Mapping):
            shown.append(step)
            continue
        changed = [
            f"{key}={_json(value)}" for key, value in state.items() if _differs(before, key, value)
        ]
        changed += [f"-{key}" for key in before if key not in state]
        shown.append({**step, CHANGES: ", ".join(changed) or "(unchanged)"})
        before = state
    return shown


def _differs(before: Mapping[str, Any], key: str, value: Any) -> bool:
    return key not in before or before[key] != value


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
