"""The Backend contract of run attributes (`AttributeStore`, `RunQuery.attributes`), as
executable checks (see `_conformance.py`): written with the run and by its steps,
typed on the way back, filtered on their canonical text, carried through
continue-as-new and forks, purged with the run."""

from __future__ import annotations

import dataclasses

from durable.core.records import NewRun, RunQuery, RunStatus, StepKind, StepStatus
from durable.errors import LeaseLost

from ._conformance import MakeBackend, _get, _new, _opened, _queued, _step
from ._conformance_continuing import _successor
from ._conformance_forks import _fork


def _tagged(run_id: str, **attributes: str | int | float | bool) -> NewRun:
    return dataclasses.replace(_queued(run_id), attributes=tuple(attributes.items()))


def _ids(backend: object, *pairs: tuple[str, str]) -> list[str]:
    query = RunQuery(attributes=tuple(pairs))
    found = [run.id for run in backend.list_runs(query, limit=100)]  # type: ignore[attr-defined]
    assert backend.count_runs(query) == len(found), f"count_runs agrees for {pairs}"  # type: ignore[attr-defined]
    return sorted(found)


def check_attributes_filter_runs(make: MakeBackend) -> None:
    """create_run writes NewRun.attributes; run_attributes reads them back with their
    types (bool not int, float not int); list_runs and count_runs keep the runs holding
    every (key, canonical text) pair: ``n=5`` matches int 5, float 5.0 and str "5",
    ``vip=true`` True; other filters still apply; a run created again with the same id
    keeps its first attributes."""
    with _opened(make) as backend:
        backend.create_run(_tagged("a", customer="c-42", region="eu", n=5, vip=True))
        backend.create_run(_tagged("b", customer="c-42", region="us", n=5.0, vip=False))
        backend.create_run(_tagged("c", customer="c-7", region="eu", n="5", ratio=0.25))
        backend.create_run(_queued("d"))
        found = backend.run_attributes(["a", "b", "c", "d", "nobody"])
        assert set(found) == {"a", "b", "c"}, f"runs without attributes are left out: {found}"
        assert dict(found["a"]) == {"customer": "c-42", "n": 5, "region": "eu", "vip": True}
        assert list(found["a"]) == ["customer", "n", "region", "vip"], "sorted by key"
        assert type(found["a"]["vip"]) is bool and type(found["a"]["n"]) is int
        assert type(found["b"]["n"]) is float and found["b"]["n"] == 5.0
        assert found["c"]["n"] == "5" and found["c"]["ratio"] == 0.25
        assert _ids(backend, ("customer", "c-42")) == ["a", "b"]
        assert _ids(backend, ("customer", "c-42"), ("region", "eu")) == ["a"], "ANDed"
        assert _ids(backend, ("n", "5")) == ["a", "b", "c"], "on the canonical text"
        assert _ids(backend, ("vip", "true")) == ["a"]
        assert _ids(backend, ("vip", "1")) == [], "a bool's text is true/false"
        assert _ids(backend, ("ratio", "0.25")) == ["c"]
        assert _ids(backend, ("customer", "C-42")) == [], "case matters"
        assert _ids(backend, ("nothing", "x")) == []
        query = RunQuery(attributes=(("region", "eu"),), statuses=(RunStatus.QUEUED,))
        assert len(backend.list_runs(query, limit=1)) == 1, "with a limit"
        assert backend.count_runs(dataclasses.replace(query, id_contains="c")) == 1
        again, created = backend.create_run(_tagged("a", customer="other"))
        assert not created and again.id == "a"
        assert backend.run_attributes(["a"])["a"]["customer"] == "c-42", "not rewritten"


def check_record_attributes_with_its_step(make: MakeBackend) -> None:
    """record_attributes writes the step and sets the attributes in one go (a key set
    again takes the new value, others stay); at a finished position it writes neither;
    a stale epoch raises LeaseLost and writes neither."""
    with _opened(make) as backend:
        backend.create_run(dataclasses.replace(_new("r"), attributes=(("stage", "new"),)))
        step = _step("r", 0, kind=StepKind.ATTRIBUTES, name="durable.set_attributes")
        stored, _ = backend.record_attributes(step, 1, (("stage", "paid"), ("amount", 12)))
        assert stored.position == 0 and stored.status is StepStatus.COMPLETED
        assert list(backend.load_history("r")) == [stored]
        assert dict(backend.run_attributes(["r"])["r"]) == {"amount": 12, "stage": "paid"}
        assert _ids(backend, ("stage", "paid")) == ["r"] and _ids(backend, ("stage", "new")) == []
        other = dataclasses.replace(step, output=b"j2")
        found, _ = backend.record_attributes(other, 1, (("stage", "late"),))
        assert found.output == step.output, "the finished step is returned"
        assert backend.run_attributes(["r"])["r"]["stage"] == "paid", "nothing written"
        try:
            backend.record_attributes(_step("r", 1, kind=StepKind.ATTRIBUTES), 9, (("x", 1),))
        except LeaseLost:
            pass
        else:
            raise AssertionError("a stale epoch must raise LeaseLost")
        assert "x" not in backend.run_attributes(["r"])["r"]
        assert len(backend.load_history("r")) == 1


def check_attributes_follow_continue_fork_and_purge(make: MakeBackend) -> None:
    """continue_run copies the run's attributes to its successor and fork_run the
    original's to the fork (both then filter alike); purge deletes a run's attributes."""
    with _opened(make) as backend:
        backend.create_run(dataclasses.replace(_new("base"), attributes=(("customer", "c-1"),)))
        step = _step("base", 0, kind=StepKind.ATTRIBUTES, name="durable.set_attributes")
        backend.record_attributes(step, 1, (("stage", 2),))
        assert backend.continue_run("base", 1, _successor("base~1"))
        expected = {"customer": "c-1", "stage": 2}
        assert dict(backend.run_attributes(["base~1"])["base~1"]) == expected
        assert _ids(backend, ("customer", "c-1")) == ["base", "base~1"]
        assert backend.fork_run("base", _fork("f1", "base"), before=1) is not None
        assert dict(backend.run_attributes(["f1"])["f1"]) == expected
        assert _ids(backend, ("stage", "2")) == ["base", "base~1", "f1"]
        assert _get(backend, "base").status is RunStatus.CONTINUED
        assert backend.purge(finished_before=backend.now() + 1, limit=10) == 1
        assert "base" not in backend.run_attributes(["base", "base~1"]), "purged with it"
        assert _ids(backend, ("customer", "c-1")) == ["base~1", "f1"]
