"""The form of a human task: its fields' types, checked in the file, and the data that
completes the task, checked against them.

A form maps field names to ``"str"``, ``"bool"``, ``"int"`` or ``"float"``; a trailing
``"?"`` makes a field optional (``"str?"``). Data completing the task is a JSON object
holding every required field, any optional ones, and nothing else.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any, Protocol

from . import _values
from ._places import Path, Places

#: The types a form field may have (each may end with "?": optional).
FIELD_TYPES = ("str", "bool", "int", "float")


class HasForm(Protocol):
    """What `check_form` needs of a task (a `TaskSpec` has both)."""

    @property
    def name(self) -> str: ...

    @property
    def form(self) -> Mapping[str, str]: ...


def read_form(places: Places, path: Path, value: object) -> dict[str, str]:
    """A form table from a flow file, its field names and types checked."""
    fields = _values.table(places, path, value)
    for field, kind in fields.items():
        _values.name(places, (*path, field), field, "form field")
        if not isinstance(kind, str) or kind.removesuffix("?") not in FIELD_TYPES:
            raise places.error(
                (*path, field),
                f"{_values.kind_of(kind)} is not a field type: use one of {_type_list()}, "
                'with a trailing "?" for an optional field (e.g. "str?").',
            )
    return dict(fields)


def check_form(task: HasForm, data: Any) -> dict[str, Any]:
    """*data* completing *task*, checked against its form.

    Booleans must be real booleans; an int field takes whole numbers but not booleans;
    a float field takes any finite number (returned as a float). A task without a form
    takes ``{}`` or None.

    Returns:
        The checked fields (optional fields that were left out are absent).

    Raises:
        ValueError: *data* is not a dict, or breaks the form; the message lists every
            problem, each with the field's name and expected type.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError(
            f"task {task.name!r}: form data must be a JSON object (a dict of fields), "
            f"not {type(data).__name__}. {_expected(task.form)}"
        )
    problems: list[str] = []
    checked: dict[str, Any] = {}
    for field, declared in task.form.items():
        kind = declared.removesuffix("?")
        if field not in data:
            if not declared.endswith("?"):
                problems.append(f"{field}: missing (a {kind} is required)")
            continue
        value = _value(kind, data[field])
        if value is None:
            problems.append(f"{field}: expected a {kind}, got {_shown(data[field])}")
        else:
            checked[field] = value[0]
    for field in data:
        if field not in task.form:
            problems.append(f"{field}: unknown field{_suggest(field, task.form)}")
    if problems:
        raise ValueError(
            f"task {task.name!r}: form data does not match its form: "
            f"{'; '.join(problems)}. {_expected(task.form)}"
        )
    return checked


def _value(kind: str, value: object) -> tuple[Any] | None:
    """*value* as a field of type *kind* (in a 1-tuple), or None when it is not one."""
    if kind == "bool":
        return (value,) if isinstance(value, bool) else None
    if isinstance(value, bool):
        return None
    if kind == "str":
        return (value,) if isinstance(value, str) else None
    if kind == "int":
        return (value,) if isinstance(value, int) else None
    if isinstance(value, int | float) and math.isfinite(value):
        return (float(value),)
    return None


def _shown(value: object) -> str:
    """A value as a message shows it: its type, and its text when short."""
    text = repr(value)
    kind = type(value).__name__
    return f"{kind} {text}" if len(text) <= 40 else kind


def _suggest(field: object, form: Mapping[str, str]) -> str:
    """ " (did you mean 'x'?)" when *field* looks like a typo of a form field."""
    if not isinstance(field, str):
        return ""
    close = difflib.get_close_matches(field, list(form), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _expected(form: Mapping[str, str]) -> str:
    """The form's fields and types, for messages."""
    if not form:
        return "This task has no form: complete it with {} (or no data)."
    fields = ", ".join(
        f"{field}: {kind.removesuffix('?')}{' (optional)' if kind.endswith('?') else ''}"
        for field, kind in form.items()
    )
    return f"Its fields: {fields}."


def _type_list() -> str:
    return ", ".join(f'"{kind}"' for kind in FIELD_TYPES)
