"""Classes by name: how a stored payload names a class, and how it gets it back.

A payload names classes as ``module:qualname`` (durable's own classes by their stable
names, see `names`). Loading imports the module and walks the qualified name, then
checks the result is the kind of class the payload claims (a dataclass, an Enum, an
exception...) before anything is constructed from it.
"""

from __future__ import annotations

import importlib
import io
import pickle
from collections.abc import Callable
from typing import Any

from .names import current_modules, stored_module


def class_ref(cls: type) -> str:
    """How stored data names *cls*: ``module:qualname``."""
    return f"{stored_module(cls.__module__)}:{cls.__qualname__}"


_CLASS_CACHE: dict[str, type] = {}


def resolve_class(ref: str, must_be: Callable[[type], bool], what: str) -> type:
    """Import ``module:qualname`` and check it is the kind of class the tag says."""
    cls = _CLASS_CACHE.get(ref)
    if cls is None:
        module_name, _, qualname = ref.partition(":")
        cls = _find(module_name, qualname)
        if cls is None:
            raise ValueError(f"{ref} is not {what}")
        _CLASS_CACHE[ref] = cls
    # Checked on every use, cache or not: a class cached for one tag (a dataclass)
    # must not be accepted by another (an "enum" tag would call it).
    if not must_be(cls):
        raise ValueError(f"{ref} is not {what}")
    return cls


def _find(module_name: str, qualname: str) -> type | None:
    """The class *qualname* of the module stored as *module_name*: the first of the
    modules that may hold it now that has it."""
    *earlier, last = current_modules(module_name)
    for name in earlier:
        try:
            return _walk(name, qualname)
        except (ImportError, AttributeError):
            continue
    return _walk(last, qualname)


def _walk(module_name: str, qualname: str) -> type | None:
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj if isinstance(obj, type) else None


def importable_ref(cls: type) -> str | None:
    """The tag name of *cls*, or None when importing that name does not give *cls* back
    (a class defined in a function): dumps must not write what loads cannot read."""
    ref = class_ref(cls)
    try:
        resolve_class(ref, lambda found: found is cls, "that class")
    except Exception:
        return None
    return ref


class _Unpickler(pickle.Unpickler):
    """Loads pickles that name durable's classes by their first modules too."""

    def find_class(self, module: str, name: str) -> Any:
        *earlier, last = current_modules(module)
        for candidate in earlier:
            try:
                return super().find_class(candidate, name)
            except (ImportError, AttributeError):
                continue
        return super().find_class(last, name)


def unpickle(data: bytes) -> Any:
    """`pickle.loads` (which cloudpickle's pickles need), finding moved classes."""
    return _Unpickler(io.BytesIO(data)).load()
