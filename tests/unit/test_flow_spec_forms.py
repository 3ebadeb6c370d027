"""Flow files (issue 18): the data a human task's form takes (`check_form`)."""

from __future__ import annotations

import pytest

from durable.flows.spec import TaskSpec, check_form


def test_check_form() -> None:
    """Form data: real booleans, ints that are not booleans, floats from any finite
    number; optional fields may be left out; unknown and missing fields all listed."""
    task = TaskSpec(
        name="ui",
        kind="human",
        form={"approved": "bool", "notes": "str?", "count": "int", "score": "float?"},
    )
    assert check_form(task, {"approved": True, "count": 3, "score": 2}) == {
        "approved": True,
        "count": 3,
        "score": 2.0,
    }
    assert isinstance(check_form(task, {"approved": False, "count": 0, "score": 1})["score"], float)
    with pytest.raises(ValueError, match=r"not list") as caught:
        check_form(task, [1])
    with pytest.raises(ValueError, match="does not match its form") as caught:
        check_form(task, {"approved": 1, "count": True, "score": float("nan"), "note": "x"})
    message = str(caught.value)
    for problem in (
        "approved: expected a bool, got int 1",
        "count: expected a int, got bool True",
        "score: expected a float, got float nan",
        "note: unknown field (did you mean 'notes'?)",
        "Its fields: approved: bool, notes: str (optional), count: int, score: float (optional)",
    ):
        assert problem in message
    with pytest.raises(
        ValueError, match=r"approved: missing \(a bool is required\); count: missing"
    ):
        check_form(task, None)


def test_check_form_of_a_task_without_a_form() -> None:
    """A task without a form takes {} or None, and nothing else."""
    task = TaskSpec(name="ok", kind="human")
    assert check_form(task, None) == {} and check_form(task, {}) == {}
    with pytest.raises(ValueError, match=r"x: unknown field.*has no form"):
        check_form(task, {"x": 1})
