"""Classes by name: how a stored payload names a class, and how it gets it back.

A payload names classes as ``module:qualname``. Loading imports the module and walks
the qualified name, then checks the result is the kind of class the payload claims (a
dataclass, an Enum, an exception...) before anything is constructed from it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def class_ref(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


_CLASS_CACHE: dict[str, type] = {}


def resolve_class(ref: str, must_be: Callable[[type], bool], what: str) -> type:
    """Import ``module:qualname`` and check it is the kind of class the tag says."""
    cls = _CLASS_CACHE.get(ref)
    if cls is None:
        module_name, _, qualname = ref.partition(":")
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        if not isinstance(obj, type):
            raise ValueError(f"{ref} is not {what}")
        cls = obj
        _CLASS_CACHE[ref] = cls
    # Checked on every use, cache or not: a class cached for one tag (a dataclass)
    # must not be accepted by another (an "enum" tag would call it).
    if not must_be(cls):
        raise ValueError(f"{ref} is not {what}")
    return cls


def importable_ref(cls: type) -> str | None:
    """The tag name of *cls*, or None when importing that name does not give *cls* back
    (a class defined in a function): dumps must not write what loads cannot read."""
    ref = class_ref(cls)
    try:
        resolve_class(ref, lambda found: found is cls, "that class")
    except Exception:
        return None
    return ref
