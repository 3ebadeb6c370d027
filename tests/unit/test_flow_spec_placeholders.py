"""Flow files (issue 18): expanding placeholders such as {flow.id} (`expand`), in a
task's working directory too."""

from __future__ import annotations

import pytest

from durable.flows.spec import PLACEHOLDERS, expand, loads
from tests.unit._flow_spec_helpers import HEAD, A


def test_cwd_is_a_template_whose_base_braces_are_literal() -> None:
    """A directory with braces in its name stays itself once the cwd is expanded."""
    cwd = loads(HEAD + A + 'cwd = "{flow.id}"\n', base_dir="/srv/{odd}").tasks["a"].cwd
    assert cwd is not None
    assert expand(cwd, {"flow.id": "rel-42"}) == "/srv/{odd}/rel-42"


def test_expand() -> None:
    """Placeholders are replaced; doubled braces are literal; an unknown one is named
    with the known ones; a lone brace is refused."""
    values = {"flow.id": "rel-42", "task.attempt": "2"}
    assert expand("{flow.id}/{task.attempt}", values) == "rel-42/2"
    assert expand("{{flow.id}} {{}} plain", values) == "{flow.id} {} plain"
    assert expand("{{{flow.id}}}", values) == "{rel-42}"
    with pytest.raises(
        ValueError,
        match=r"unknown placeholder \{task\.name\}.*known: \{flow\.id\}, \{task\.attempt\}",
    ):
        expand("x-{task.name}", values)
    with pytest.raises(ValueError, match="unmatched '}'"):
        expand("a}b", values)
    assert set(PLACEHOLDERS) == {"flow.id", "flow.name", "task.name", "task.attempt"}
