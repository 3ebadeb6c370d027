"""Call identity (`durable.core.hashing`) is stable: the hash is the same in every
process whatever PYTHONHASHSEED says, and a v1 hash never changes."""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

import durable
from durable.core.hashing import call_hash

# -- stable across processes -------------------------------------------------------------

PROBE = textwrap.dedent(
    '''
    """Computes one call hash over seed-sensitive arguments, and a pickle digest."""
    import dataclasses
    import hashlib
    import pickle

    from durable.core.hashing import call_hash

    WORDS = [f"word-{i}" for i in range(40)]


    @dataclasses.dataclass(frozen=True)
    class Shipment:
        sku: str
        tags: frozenset
        meta: dict


    def arguments():
        return {
            "tags": set(WORDS),
            "frozen": frozenset(WORDS[::3]),
            "nested": {
                "b": {"y": set(WORDS[:9]), "x": [1, ("t", 2.5)]},
                "a": {"z": frozenset({"q", "r", "s"}), "w": {w: len(w) for w in WORDS[:6]}},
            },
            "shipment": Shipment("sku-1", frozenset(WORDS[:7]), {"k": set(WORDS[5:12])}),
        }


    def report():
        print(call_hash("task", "shop.ship", arguments()))
        print(hashlib.sha256(pickle.dumps(set(WORDS))).hexdigest())
    '''
)


@pytest.fixture
def probe(tmp_path: Path) -> Any:
    """The probe module, written to tmp_path and imported in this process too."""
    (tmp_path / "durable_hash_probe.py").write_text(PROBE)
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        yield importlib.import_module("durable_hash_probe")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("durable_hash_probe", None)


def test_call_hash_is_identical_under_every_hash_seed(probe: Any, tmp_path: Path) -> None:
    """Subprocesses under PYTHONHASHSEED 0-3 and random agree with this process's hash."""
    src = Path(durable.__file__).resolve().parent.parent
    seeds = ["0", "1", "2", "3", "random"]
    processes = []
    for seed in seeds:
        env = {
            **os.environ,
            "PYTHONHASHSEED": seed,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(src)]),
        }
        processes.append(
            subprocess.Popen(
                [sys.executable, "-c", "import durable_hash_probe as p; p.report()"],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = []
    for process in processes:
        out, err = process.communicate(timeout=60)
        assert process.returncode == 0, err
        results.append(out.split())
    call_hashes = {seed: lines[0] for seed, lines in zip(seeds, results, strict=True)}
    pickle_digests = {seed: lines[1] for seed, lines in zip(seeds, results, strict=True)}

    in_process = call_hash("task", "shop.ship", probe.arguments())
    assert set(call_hashes.values()) == {in_process}, call_hashes
    # Control: hashing pickle bytes would NOT be stable, so this test can see the problem.
    assert len(set(pickle_digests.values())) > 1, pickle_digests


GOLDEN = [
    (("task", "app.fetch", {"n": 3}), "v1:ae786eaa96288c6a38f32e9830d6f6fb"),
    (
        ("task", "app.fetch", {"n": 3, "scale": 1.5, "label": "x", "flag": True, "none": None}),
        "v1:f3ad8177d0f143efbed8170ccedfd9a5",
    ),
    (
        (
            "workflow",
            "app.pipeline",
            {"items": [1, "a", (2, 3)], "tags": {"b", "a"}, "meta": {"k": {"z": 1, "y": [None]}}},
        ),
        "v1:ac22246a2ac326cfcb368fea4d113e6d",
    ),
    (
        (
            "task",
            "app.when",
            {
                "at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
                "amount": decimal.Decimal("1.10"),
                "id": uuid.UUID(int=7),
                "raw": b"\x00\xff",
            },
        ),
        "v1:5f18b7b1e54d2abfdfa5e107a0e2627c",
    ),
    (("now", "durable.now", {}), "v1:fde22e9bf4da3fb21baa92becda826fa"),
]


@pytest.mark.parametrize(("call", "expected"), GOLDEN)
def test_v1_hashes_never_change(call: tuple[str, str, dict[str, Any]], expected: str) -> None:
    """Stored histories hold v1 hashes: the same call must hash to the same value forever."""
    assert call_hash(*call) == expected
