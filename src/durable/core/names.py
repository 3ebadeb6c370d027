"""Stable names for durable's own classes, wherever their code lives.

Stored data names classes by module: payload tags (``durable._records:RunStatus``),
pickles, and the canonical form that call hashes are computed from
(``durable._records.RunStatus``). Those names were fixed when they were written, in the
flat layout durable had until version 0.1, so the modules that moved since keep their
first name here:

* call hashes and payload tags are written with the first name, so a call that passes
  a `RunStatus` hashes the same as before, and a worker still on the flat layout reads
  what a newer one wrote (a rolling deploy);
* loading maps a first name to the module that holds the class now.

Only durable's modules are listed; an application's classes are named as they are.
"""

from __future__ import annotations

#: Where each moved module's classes live now -> the name stored data uses for them.
#: Only the modules of classes that can reach stored data are listed: those durable
#: exports (a test checks every one of them keeps its stored name).
FIRST_NAMES: dict[str, str] = {
    "durable.api.decorators": "durable._decorators",
    "durable.api.handles": "durable._handles",
    "durable.core.faults": "durable._faults",
    "durable.core.functions": "durable._decorators",
    "durable.core.info": "durable._records",
    "durable.core.records": "durable._records",
    "durable.core.retry": "durable._retry",
    "durable.runtime.engine": "durable._engine",
    "durable.runtime.worker": "durable._worker",
}

#: A stored module name -> the modules that may hold its classes now, in order.
_NOW: dict[str, tuple[str, ...]] = {}
for _now, _first in FIRST_NAMES.items():
    _NOW[_first] = (*_NOW.get(_first, ()), _now)


def stored_module(module: str) -> str:
    """The module name stored data uses for a class defined in *module*."""
    return FIRST_NAMES.get(module, module)


def current_modules(module: str) -> tuple[str, ...]:
    """The modules to look in for a class stored under *module*."""
    return _NOW.get(module, (module,))
