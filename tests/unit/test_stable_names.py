"""Stored data names durable's classes as it did before the code moved into layers.

Call hashes, payload tags and pickles name classes by module. The expected values here
were produced by durable's flat layout (commit 7b8c3d1), so a run recorded then, or a
worker still running that code during a deploy, agrees with this one.
"""

from __future__ import annotations

import base64
import importlib

import pytest

import durable
import durable.testing
from durable import RetryPolicy, RunStatus, StepKind, StepStatus
from durable.core.classes import class_ref
from durable.core.error_payloads import load_error
from durable.core.hashing import call_hash
from durable.core.names import FIRST_NAMES
from durable.core.serde import dumps, loads

#: class_ref of every class `durable` and `durable.testing` export, at 7b8c3d1.
REFS_AT_7B8C3D1 = {
    "Call": "durable._decorators:Call",
    "Cancelled": "durable.errors:Cancelled",
    "DurableError": "durable.errors:DurableError",
    "Engine": "durable._engine:Engine",
    "Handle": "durable._handles:Handle",
    "IdempotencyConflict": "durable.errors:IdempotencyConflict",
    "NonRetryable": "durable.errors:NonRetryable",
    "NondeterminismError": "durable.errors:NondeterminismError",
    "RetryPolicy": "durable._retry:RetryPolicy",
    "Run": "durable._records:Run",
    "RunStatus": "durable._records:RunStatus",
    "SerializationError": "durable.errors:SerializationError",
    "Step": "durable._records:Step",
    "StepKind": "durable._records:StepKind",
    "StepStatus": "durable._records:StepStatus",
    "Task": "durable._decorators:Task",
    "Worker": "durable._worker:Worker",
    "Workflow": "durable._decorators:Workflow",
    "testing.DurableEnv": "durable.testing._env:DurableEnv",
    "testing.History": "durable.testing._env:History",
    "testing.InjectedFault": "durable._faults:InjectedFault",
    "testing.MemoryBackend": "durable.backends.memory:MemoryBackend",
    "testing.VirtualClock": "durable.testing._env:VirtualClock",
}
#: classes exported since, named by their module's first name like their neighbours.
REFS_ADDED = {
    "Client": "durable.api.client:Client",
    "EventInvalid": "durable.errors:EventInvalid",
    "RunInfo": "durable._records:RunInfo",
    "Stream": "durable.api.streams:Stream",
    "TaskInfo": "durable._records:TaskInfo",
    "TaskTimeout": "durable.errors:TaskTimeout",
    "WaitTimeout": "durable.errors:WaitTimeout",
    "WorkflowTimeout": "durable.errors:WorkflowTimeout",
}


def exported_classes() -> dict[str, type]:
    found = {}
    for module, prefix in ((durable, ""), (durable.testing, "testing.")):
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type):
                found[prefix + name] = value
    return found


def test_every_exported_class_keeps_its_stored_name() -> None:
    """A class that moves must be added to `FIRST_NAMES`, or rows naming it break."""
    refs = {name: class_ref(cls) for name, cls in exported_classes().items()}
    assert refs == REFS_AT_7B8C3D1 | REFS_ADDED


@pytest.mark.parametrize("name", sorted(REFS_AT_7B8C3D1))
def test_every_stored_name_loads_the_class(name: str) -> None:
    """The name that was stored finds today's class (what loading a tag does)."""
    from durable.core.classes import resolve_class

    cls = exported_classes()[name]
    assert resolve_class(REFS_AT_7B8C3D1[name], lambda found: found is cls, "it") is cls


def test_call_hashes_of_durable_records_are_unchanged() -> None:
    """A task that takes a RunStatus, a StepKind and a RetryPolicy hashes as at 7b8c3d1:
    live runs that made such calls replay without a NondeterminismError."""
    arguments = {"s": RunStatus.QUEUED, "k": StepKind.TASK, "p": RetryPolicy(attempts=3)}
    assert call_hash("task", "t", arguments) == "v1:038ff15ccef894d00ef57108b67eda95"


def test_payloads_written_before_the_move_load() -> None:
    """Tags and pickles that name the flat modules load as today's classes."""
    tagged = (
        b'j{"s":{"$durable":"enum","cls":"durable._records:RunStatus","v":"queued"},'
        b'"k":{"$durable":"enum","cls":"durable._records:StepStatus","v":"failed"}}'
    )
    value = loads(tagged, allow_pickle=False, run_id="r", position=0, signer=None)
    assert value == {"s": RunStatus.QUEUED, "k": StepStatus.FAILED}
    assert type(value["s"]) is RunStatus
    pickled = (  # cloudpickle.dumps([RunStatus.QUEUED, StepKind.SLEEP]) at 7b8c3d1
        "gAWVTgAAAAAAAABdlCiMEGR1cmFibGUuX3JlY29yZHOUjAlSdW5TdGF0dXOUk5SMBnF1ZXVlZJSFlFKUa"
        "AGMCFN0ZXBLaW5klJOUjAVzbGVlcJSFlFKUZS4="
    )
    assert b"durable._records" in base64.b64decode(pickled)
    holder = f'P{{"$durable":"pickle","v":"{pickled}"}}'.encode()
    assert loads(holder, allow_pickle=True, run_id="r", position=0, signer=None) == [
        RunStatus.QUEUED,
        StepKind.SLEEP,
    ]
    error = load_error(
        b'j{"type":"durable._faults:InjectedFault","message":"boom","traceback":"",'
        b'"args":["boom"]}',
        allow_pickle=False,
        run_id="r",
        position=0,
        signer=None,
    )
    assert type(error) is durable.testing.InjectedFault and str(error) == "boom"


def test_new_payloads_name_classes_as_before() -> None:
    """What this code writes, a worker on the flat layout can read: the same names."""
    data = dumps({"s": RunStatus.QUEUED, "k": StepStatus.FAILED}, allow_pickle=False, where="x")
    assert data == (
        b'j{"s":{"$durable":"enum","cls":"durable._records:RunStatus","v":"queued"},'
        b'"k":{"$durable":"enum","cls":"durable._records:StepStatus","v":"failed"}}'
    )


@pytest.mark.parametrize("module", sorted(FIRST_NAMES))
def test_every_renamed_module_exists(module: str) -> None:
    """The table names modules that exist: a stale entry would hide a lost class."""
    importlib.import_module(module)
