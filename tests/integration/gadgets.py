"""Gadget modules: importing one creates a marker file, so a test can tell whether
anything imported it (a type tag in a stored payload must never do that)."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

GADGET_SOURCE = """\
import dataclasses
import enum
import pathlib

pathlib.Path({marker!r}).write_text("imported")


@dataclasses.dataclass
class Gadget:
    name: str = "gadget"


class Colour(enum.Enum):
    RED = "red"


class Boom(Exception):
    pass
"""


@dataclass
class GadgetModule:
    """A module named *name* in *folder* that creates *marker* when it is imported."""

    name: str
    folder: Path
    marker: Path

    def tag(self, kind: str, qualname: str, **node: Any) -> dict[str, Any]:
        """A durable type tag of *kind* naming the gadget's class *qualname*."""
        return {"$durable": kind, "cls": f"{self.name}:{qualname}", **node}

    def env(self) -> dict[str, str]:
        """The environment of a subprocess that could import the gadget."""
        path = os.pathsep.join([str(ROOT), str(self.folder)])
        return {**os.environ, "PYTHONPATH": path}


def write_gadget(tmp_path: Path) -> GadgetModule:
    """A fresh gadget module under *tmp_path* (not on the path yet: the caller adds it)."""
    name = f"durable_gadget_{uuid.uuid4().hex[:10]}"
    folder = tmp_path / "gadgets"
    folder.mkdir()
    marker = tmp_path / "gadget-was-imported"
    (folder / f"{name}.py").write_text(GADGET_SOURCE.format(marker=str(marker)))
    return GadgetModule(name, folder, marker)


def payload(tree: Any) -> bytes:
    """A stored JSON payload holding *tree* as it is (tags and all)."""
    return b"j" + json.dumps(tree).encode()
