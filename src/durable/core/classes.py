"""Classes by name: how a stored payload names a class, and how it gets it back.

A payload names classes as ``module:qualname`` (durable's own classes by their stable
names, see `names`). Loading looks the module up among those this process has already
imported, and never imports one: a stored row must not be able to run a module's
top-level code (any module on ``sys.path`` would do, ``durable.__main__`` included). It
walks the qualified name through the module's and the classes' own dictionaries (no
``__getattr__`` hook runs), then checks the result is the kind of class the payload
claims (a dataclass, an Enum, an exception...) before anything is constructed from it.
Pickles, which only signed or trusted rows may hold, are another matter (`unpickle`).
"""

from __future__ import annotations

import io
import pickle
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

from .names import current_modules, stored_module


def class_ref(cls: type) -> str:
    """How stored data names *cls*: ``module:qualname``."""
    return f"{stored_module(cls.__module__)}:{cls.__qualname__}"


_CLASS_CACHE: dict[str, type] = {}


class NotImported(Exception):
    """A tag names a class of a module this process has not imported (and durable never
    imports one for it); `serde.loads` makes it a PayloadError naming run and position."""


def resolve_class(ref: str, must_be: Callable[[type], bool], what: str) -> type:
    """The class ``module:qualname`` of an imported module, checked to be the kind of
    class the tag says.

    Raises:
        NotImported: the module is not imported in this process.
        ValueError: there is no such class, or it is not *what*.
    """
    cls = _CLASS_CACHE.get(ref)
    if cls is None:
        if type(ref) is not str:
            raise ValueError(f"a class name must be a string, not {type(ref).__name__}")
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
    imported modules that may hold it now that has it."""
    modules = [sys.modules.get(name) for name in current_modules(module_name)]
    imported = [module for module in modules if isinstance(module, types.ModuleType)]
    if not imported:
        raise NotImported(
            f"names the class {qualname!r} of module {module_name!r}, which this process has "
            "not imported; durable never imports a module that a stored value names. Import "
            f"{module_name!r} in the worker (durable worker MODULE..., or an import in the "
            "module that defines your workflows) before the run is resumed or read back"
        )
    for module in imported:
        found = _walk(module, qualname)
        if found is not None:
            return found
    return None


def _walk(module: types.ModuleType, qualname: str) -> type | None:
    """*qualname* in *module*, looked up in the module's and the classes' own
    dictionaries: no ``__getattr__`` hook (a lazy import) or descriptor runs."""
    namespace: Mapping[str, Any] = _MODULE_DICT.__get__(module)
    found: type | None = None
    for part in qualname.split("."):
        obj = namespace.get(part)
        if not issubclass(type(obj), type):  # type(), not isinstance: no __class__ hook
            return None
        found = obj
        namespace = _CLASS_DICT.__get__(obj)
    return found


_MODULE_DICT: Any = vars(types.ModuleType)["__dict__"]
_CLASS_DICT: Any = vars(type)["__dict__"]


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
