"""`DurableError`, the base of every public error, and how errors with fields pickle.

Named ``durable.errors.DurableError`` (and ``durable.errors._rebuild``) as before the
errors became a package: pickles and stored error payloads name them so.
"""

from __future__ import annotations

from typing import Any


class DurableError(Exception):
    """Base class of every error durable raises on purpose."""

    __module__ = "durable.errors"

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        for key, value in fields.items():
            setattr(self, key, value)
        self._fields = fields

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword fields are not in self.args; rebuild through a helper so that
        # pickling (across processes, into history rows) keeps them.
        return (_rebuild, (type(self), self.message, self._fields))


def _rebuild(cls: type[DurableError], message: str, fields: dict[str, Any]) -> DurableError:
    error = cls.__new__(cls)
    DurableError.__init__(error, message, **fields)
    return error


_rebuild.__module__ = "durable.errors"
