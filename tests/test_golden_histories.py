"""Golden histories: runs recorded by earlier versions must keep replaying.

Each file in tests/histories/ is the exported history of an example's run (recorded by
``python -m tests.histories.record``). A change that makes today's code call something
else at a recorded position would strand such runs in users' databases after a deploy;
this test catches it before the change lands.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from durable import NondeterminismError
from durable.runtime.registry import find
from durable.testing import replay
from tests.histories.record import RECORDINGS

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def workflow_of(document: dict[str, object]) -> object:
    name = str(document["run"]["workflow"])  # type: ignore[index]
    importlib.import_module(name.rsplit(".", 1)[0])  # registers the module's workflows
    found = find(name)
    assert found is not None, f"{name} is not registered by its module"
    return found


def test_every_recording_has_its_history_checked_in() -> None:
    assert sorted(path.stem for path in HISTORIES) == sorted(RECORDINGS)


@pytest.mark.parametrize("path", HISTORIES, ids=[path.stem for path in HISTORIES])
def test_history_replays_against_todays_code(path: Path) -> None:
    document = json.loads(path.read_text())
    assert document["run"]["status"] == "completed"
    replay(workflow_of(document), document)  # type: ignore[arg-type]


def test_a_history_that_today_s_code_contradicts_is_caught() -> None:
    """The control: the same check fails when the recorded call differs."""
    document = json.loads((Path(__file__).parent / "histories" / "hello-pipeline.json").read_text())
    document["steps"][1]["name"] = "examples.hello.flaky"  # position 1 was fetch
    with pytest.raises(NondeterminismError, match="position 1"):
        replay(workflow_of(document), document)  # type: ignore[arg-type]
